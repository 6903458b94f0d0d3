package postgres

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/sink"
)

// BenchmarkWriteBatch writes fresh batches of 256-byte JSON payloads into
// the server and reports msgs/s (upsert mode, the default).
func BenchmarkWriteBatch(b *testing.B) {
	dsn := natstest.Service(b, dsnEnv)
	for _, size := range []int{1, 1000} {
		for _, staging := range []bool{false, true} {
			b.Run(fmt.Sprintf("batch=%d/staging=%v", size, staging), func(b *testing.B) {
				c := baseConfig(b, dsn)
				c.Staging.Enabled = staging
				s := open(b, c)
				pad := strings.Repeat("x", 256-len(`{"n":0000000000,"pad":""}`))
				seq := uint64(0)
				batch := func() []*sink.Envelope {
					out := make([]*sink.Envelope, size)
					for i := range out {
						seq++
						out[i] = env("bench.x", "B", seq, "", fmt.Sprintf(`{"n":%010d,"pad":"%s"}`, seq, pad))
					}
					return out
				}
				b.ResetTimer()
				for b.Loop() {
					b.StopTimer()
					in := batch()
					b.StartTimer()
					for i, r := range s.WriteBatch(b.Context(), in) {
						if r.Outcome != sink.Committed {
							b.Fatalf("message %d: %v (%v)", i, r.Outcome, r.Err)
						}
					}
				}
				b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "msgs/s")
			})
		}
	}
}
