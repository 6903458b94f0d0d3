package kafkasink

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sink/sinktest"
)

// headersOnlyPoison is a message without stream metadata, message id or
// payload: no key material exists (docs/formats.md#idempotency-keys), so the default key
// strategy must reject it.
func headersOnlyPoison(stream string, _ uint64) *sink.Envelope {
	return intake.Build(intake.Message{Subject: "sinktest." + stream,
		Header: map[string][]string{"Nats-Msg-Size": {"64"}}}, nil, time.Now())
}

// oversizedPoison has full key material but a body over max_record_bytes.
func oversizedPoison(stream string, seq uint64) *sink.Envelope {
	e := sinktest.Envelope("sinktest."+stream, stream, seq)
	e.Data = []byte(`"` + strings.Repeat("x", 4096) + `"`)
	return e
}

// TestConformance runs the sink contract suite against a kfake cluster.
//
// ReadBack consumes the whole topic and reports each distinct record key
// once: Kafka's duplicate model is the key (docs/kafka.md). A redelivered
// message is produced again as a second record with the same key, which a
// de-duplicating consumer or a compacted topic collapses, so the suite's
// "stored exactly once" is checked here as "exactly one distinct key".
// TestFreshWritesHaveNoDuplicateRecords checks raw record counts where the
// sink must not duplicate: a first delivery.
func TestConformance(t *testing.T) {
	for _, tt := range []struct {
		name   string
		modify func(*Config)
		poison func(string, uint64) *sink.Envelope
	}{
		{"envelope, core key", func(*Config) {}, headersOnlyPoison},
		{"payload, stream_sequence key", func(c *Config) { c.RecordFormat = "payload"; c.KeyStrategy = "stream_sequence" }, nil},
		{"raw, record too large", func(c *Config) { c.RecordFormat = "raw"; c.MaxRecordBytes = 4096 }, oversizedPoison},
		{"zstd", func(c *Config) { c.Compression = "zstd" }, headersOnlyPoison},
	} {
		t.Run(tt.name, func(t *testing.T) {
			kc := cluster(t, []string{"conformance"})
			c := testConfig(kc, "conformance")
			tt.modify(&c)
			sinktest.Run(t, sinktest.Harness{
				Open: func(t *testing.T) sink.Sink {
					s, err := New(t.Context(), c, sink.Deps{})
					if err != nil {
						t.Fatalf("New: %v", err)
					}
					return s
				},
				ReadBack: func(t *testing.T) []sinktest.Stored {
					seen := map[string]bool{}
					var out []sinktest.Stored
					for _, r := range consume(t, c.Brokers, "conformance") {
						k := string(r.Key)
						if seen[k] {
							continue
						}
						seen[k] = true
						out = append(out, storedOf(t, k))
					}
					return out
				},
				Idempotent: true,
				Poison:     tt.poison,
			})
		})
	}
}

// storedOf recovers a record's origin from its stream-sequence key.
func storedOf(t *testing.T, key string) sinktest.Stored {
	t.Helper()
	rest, ok := strings.CutPrefix(key, "stream-sequence:")
	i := strings.LastIndexByte(rest, ':')
	if !ok || i < 0 {
		t.Fatalf("record key %q is not a stream-sequence key", key)
	}
	seq, err := strconv.ParseUint(rest[i+1:], 10, 64)
	if err != nil {
		t.Fatalf("record key %q: %v", key, err)
	}
	return sinktest.Stored{Stream: rest[:i], Sequence: seq}
}
