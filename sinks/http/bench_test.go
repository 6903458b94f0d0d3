package httpsink

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/nats-sinks/nats-sink/internal/shapestest"
)

// BenchmarkLatency5ms sends batches of 64 to a local endpoint that takes
// 5 ms per request, at concurrency 1 and 16, and reports msgs/s. With a
// fixed per-request latency, throughput scales with requests in flight.
func BenchmarkLatency5ms(b *testing.B) {
	ep := newEndpoint(b, func(w http.ResponseWriter, _ *http.Request, _ int) {
		time.Sleep(5 * time.Millisecond) // the simulated endpoint latency, not a test wait
	})
	for _, conc := range []int{1, 16} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			c := ep.config()
			c.Concurrency = conc
			s, _ := open(b, c)
			batch := shapestest.Batch("B", 64)
			b.ResetTimer()
			start := time.Now()
			for b.Loop() {
				for i, r := range s.WriteBatch(b.Context(), batch) {
					if !r.Outcome.Acked() {
						b.Fatalf("message %d: %v (%v)", i, r.Outcome, r.Err)
					}
				}
			}
			b.ReportMetric(float64(b.N*len(batch))/time.Since(start).Seconds(), "msgs/s")
		})
	}
}
