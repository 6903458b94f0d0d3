package httpsink

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sink/sinktest"
)

// idempotentEndpoint is a real idempotent endpoint (the contract of
// docs/http.md): it stores each request once per Idempotency-Key and answers
// 200 to a repeated key without storing it again. ReadBack recovers each
// record's origin from its stream-sequence key.
type idempotentEndpoint struct {
	srv    *httptest.Server
	mu     sync.Mutex
	stored map[string]bool
	order  []string
}

func newIdempotentEndpoint(t *testing.T) *idempotentEndpoint {
	ie := &idempotentEndpoint{stored: map[string]bool{}}
	ie.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		key := r.Header.Get("Idempotency-Key")
		if key == "" {
			http.Error(w, "missing Idempotency-Key", http.StatusBadRequest)
			return
		}
		ie.mu.Lock()
		defer ie.mu.Unlock()
		if !ie.stored[key] {
			ie.stored[key] = true
			ie.order = append(ie.order, key)
		}
	}))
	t.Cleanup(ie.srv.Close)
	return ie
}

func (ie *idempotentEndpoint) readBack(t *testing.T) []sinktest.Stored {
	t.Helper()
	ie.mu.Lock()
	defer ie.mu.Unlock()
	var out []sinktest.Stored
	for _, k := range ie.order {
		rest, ok := strings.CutPrefix(k, "stream-sequence:")
		i := strings.LastIndexByte(rest, ':')
		if !ok || i < 0 {
			t.Fatalf("stored key %q is not a stream-sequence key", k)
		}
		seq, err := strconv.ParseUint(rest[i+1:], 10, 64)
		if err != nil {
			t.Fatalf("stored key %q: %v", k, err)
		}
		out = append(out, sinktest.Stored{Stream: rest[:i], Sequence: seq})
	}
	return out
}

// headersOnlyPoison is a message without stream metadata, message id or
// payload: no core idempotency key exists (docs/formats.md#idempotency-keys), so the default
// strategy must reject it. The suite's default poison still has a payload
// and would get a payload-sha256 key.
func headersOnlyPoison(stream string, _ uint64) *sink.Envelope {
	e := intake.Build(intake.Message{Subject: "sinktest." + stream}, nil, time.Now())
	e.Payload = sink.PayloadPresence{Omitted: true, OmittedReason: intake.HeadersOnlyReason, OriginalSize: 10}
	return e
}

func TestConformance(t *testing.T) {
	for _, tt := range []struct {
		name   string
		modify func(*Config)
		poison func(string, uint64) *sink.Envelope
	}{
		{"core key", func(*Config) {}, headersOnlyPoison},
		{"core key concurrency 8", func(c *Config) { c.Concurrency = 8 }, headersOnlyPoison},
		{"stream_sequence required", func(c *Config) { c.Idempotency.Strategy = "stream_sequence" }, nil},
		{"payload body", func(c *Config) { c.BodyFormat = "payload"; c.IncludeMetadata = false }, headersOnlyPoison},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ie := newIdempotentEndpoint(t)
			c := Default()
			c.URL, c.AllowHTTPForLocalTesting = ie.srv.URL, true
			tt.modify(&c)
			sinktest.Run(t, sinktest.Harness{
				Open: func(t *testing.T) sink.Sink {
					s, err := New(t.Context(), c, sink.Deps{})
					if err != nil {
						t.Fatalf("New: %v", err)
					}
					return s
				},
				ReadBack:   ie.readBack,
				Idempotent: true,
				Poison:     tt.poison,
			})
		})
	}
}
