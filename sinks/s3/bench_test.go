package s3sink

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
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
			cpu0 := processCPU()
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
			// Sink, SDK and gofakes3 together (one process); robust to
			// load from other processes, unlike msgs/s.
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(n), "cpu-µs/msg")
		})
	}
}

// BenchmarkPut makes conditional PutObject calls (600-byte bodies) from 16
// goroutines against a handler that drains the body and answers 200 without
// gofakes3, over plain HTTP (the SDK signs the payload's SHA-256) and over
// HTTPS (the production path: TLS, UNSIGNED-PAYLOAD). cpu-µs/op and
// allocs/op are then mostly the SDK client's own cost per PUT, plus a
// minimal net/http handler on loopback: what the client options tune.
func BenchmarkPut(b *testing.B) {
	for _, scheme := range []string{"http", "https"} {
		b.Run(scheme, func(b *testing.B) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.WriteHeader(http.StatusOK)
			}))
			if scheme == "https" {
				srv.StartTLS()
				trustServer(b, srv)
			} else {
				srv.Start()
			}
			b.Cleanup(srv.Close)
			c := (&store{srv: srv}).config()
			c.Concurrency = 16 // sizes the idle connection pool
			s, _ := open(b, c)
			body := make([]byte, 600)
			for i := range body {
				body[i] = 'x'
			}
			var seq atomic.Uint64
			b.ReportAllocs()
			b.SetParallelism(8)
			cpu0 := processCPU()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					o := object{key: fmt.Sprintf("bench/%d.json", seq.Add(1)), body: body,
						metadata: map[string]string{metaSchema: ObjectSchema}}
					if err := s.put(context.Background(), o, true); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// processCPU returns the user+system CPU time the test process used so far.
// Unlike ns/op it does not grow when other processes load the machine.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru) // cannot fail for RUSAGE_SELF
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
