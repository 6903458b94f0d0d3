package s3sink

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sink/sinktest"
)

// headersOnlyPoison is a message without stream metadata, message id or
// payload: no core idempotency key exists (docs/formats.md#idempotency-keys), so the default
// key strategy must reject it. The suite's default poison still has a
// payload and would get a payload-sha256 key.
func headersOnlyPoison(stream string, _ uint64) *sink.Envelope {
	e := intake.Build(intake.Message{Subject: "sinktest." + stream}, nil, time.Now())
	e.Payload = sink.PayloadPresence{Omitted: true, OmittedReason: intake.HeadersOnlyReason, OriginalSize: 10}
	return e
}

// readBack returns the origin of every primary object in the store (not
// sidecars), read from the object itself: the envelope's stream and
// stream_sequence, or, for payload objects, the suite's body
// {"stream":…,"seq":…}.
func readBack(st *store, c Config) func(t *testing.T) []sinktest.Stored {
	return func(t *testing.T) []sinktest.Stored {
		t.Helper()
		var out []sinktest.Stored
		for _, key := range st.keys(t) {
			if c.MetadataMode == "sidecar" && strings.HasSuffix(key, c.SidecarSuffix) {
				continue
			}
			body, hdr := st.object(t, key)
			if hdr["Content-Encoding"] == "gzip" {
				zr, err := gzip.NewReader(bytes.NewReader(body))
				if err != nil {
					t.Fatalf("%s: %v", key, err)
				}
				if body, err = io.ReadAll(zr); err != nil {
					t.Fatalf("%s: %v", key, err)
				}
			}
			v, err := jsonx.Parse(body)
			if err != nil {
				t.Fatalf("%s: not JSON: %v", key, err)
			}
			m := v.(map[string]any)
			stream, seqKey := m["stream"], "seq"
			if _, ok := m["schema"]; ok {
				seqKey = "stream_sequence"
			}
			seq, err := strconv.ParseUint(string(m[seqKey].(jsonx.Integer)), 10, 64)
			if err != nil {
				t.Fatalf("%s: %s: %v", key, seqKey, err)
			}
			out = append(out, sinktest.Stored{Stream: stream.(string), Sequence: seq})
		}
		return out
	}
}

func TestConformance(t *testing.T) {
	for _, tt := range []struct {
		name   string
		modify func(*Config)
		front  func(w http.ResponseWriter, r *http.Request) bool
		poison func(string, uint64) *sink.Envelope
	}{
		{"defaults", func(*Config) {}, nil, headersOnlyPoison},
		{"stream_sequence keys", func(c *Config) { c.KeyStrategy = "stream_sequence" }, nil, nil},
		{"concurrency 8", func(c *Config) { c.Concurrency = 8 }, nil, headersOnlyPoison},
		{"payload objects, gzip, sidecar", func(c *Config) {
			c.ObjectFormat, c.Compression, c.ObjectSuffix, c.MetadataMode = "payload", "gzip", ".json.gz", "sidecar"
		}, nil, headersOnlyPoison},
		{"replace", func(c *Config) { c.DuplicatePolicy = "replace" }, nil, headersOnlyPoison},
		{"head existence check", func(c *Config) { c.ExistenceCheck = "head" }, nil, headersOnlyPoison},
		{"store without conditional put", func(*Config) {}, refuseConditionalPut, headersOnlyPoison},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := newStore(t)
			st.setFront(tt.front)
			c := st.config()
			tt.modify(&c)
			sinktest.Run(t, sinktest.Harness{
				Open: func(t *testing.T) sink.Sink {
					s, err := New(t.Context(), c, sink.Deps{Env: testEnv})
					if err != nil {
						t.Fatalf("New: %v", err)
					}
					return s
				},
				ReadBack:   readBack(st, c),
				Idempotent: true,
				Poison:     tt.poison,
			})
		})
	}
}

// refuseConditionalPut makes the store one that lacks conditional writes:
// a PUT with If-None-Match is answered 501 NotImplemented, as older
// S3-compatible stores do.
func refuseConditionalPut(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodPut && r.Header.Get("If-None-Match") != "" {
		s3Error(w, http.StatusNotImplemented, "NotImplemented")
		return true
	}
	return false
}
