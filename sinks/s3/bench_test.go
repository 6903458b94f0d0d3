package s3sink

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/sink"
)

// BenchmarkWriteBatch writes batches of 100 new messages (256-byte JSON
// bodies, envelope objects with user metadata) to gofakes3 in the same
// process, at concurrency 1 and 16, and reports msgs/s. Every message is a
// new key, so each is one conditional PUT that creates an object. The
// store's CPU is on the same two cores, so this measures the sink's cost
// plus an in-memory store's, not a network round trip; the latency=5ms
// variants add a fixed per-request delay, as a remote store has, where
// throughput scales with requests in flight.
func BenchmarkWriteBatch(b *testing.B) {
	pad := make([]byte, 200)
	for i := range pad {
		pad[i] = 'x'
	}
	for _, bc := range []struct {
		name    string
		latency time.Duration
		modify  func(*Config)
	}{
		{"concurrency=1", 0, func(*Config) {}},
		{"concurrency=16", 0, func(c *Config) { c.Concurrency = 16 }},
		{"concurrency=16/gzip+sidecar", 0, func(c *Config) {
			c.Concurrency, c.Compression, c.ObjectSuffix, c.MetadataMode = 16, "gzip", ".json.gz", "sidecar"
		}},
		{"latency=5ms/concurrency=1", 5 * time.Millisecond, func(*Config) {}},
		{"latency=5ms/concurrency=16", 5 * time.Millisecond, func(c *Config) { c.Concurrency = 16 }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			st := newStore(b)
			if bc.latency > 0 {
				st.setFront(func(http.ResponseWriter, *http.Request) bool {
					time.Sleep(bc.latency) // the simulated store latency, not a test wait
					return false
				})
			}
			c := st.config()
			bc.modify(&c)
			s, _ := open(b, c)
			var seq atomic.Uint64
			next := func() []*sink.Envelope {
				batch := make([]*sink.Envelope, 100)
				for i := range batch {
					e := shapestest.Envelope("BENCH", seq.Add(1))
					e.Data = fmt.Appendf(nil, `{"n":%d,"pad":"%s"}`, e.StreamSequence, pad)
					batch[i] = e
				}
				return batch
			}
			b.ResetTimer()
			n := 0
			for b.Loop() {
				b.StopTimer()
				batch := next()
				b.StartTimer()
				for i, r := range s.WriteBatch(b.Context(), batch) {
					if r.Outcome != sink.Committed {
						b.Fatalf("message %d: %v (%v)", i, r.Outcome, r.Err)
					}
				}
				n += len(batch)
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
