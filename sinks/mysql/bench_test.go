package mysql

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/sink"
)

// BenchmarkWriteBatch measures committed messages per second into the test
// server, with 256-byte JSON payloads, in the default upsert mode and in
// insert_ignore (which also reads the statement's warnings).
func BenchmarkWriteBatch(b *testing.B) {
	srv := testServer(b)
	pad := strings.Repeat("x", 256-len(`{"n":0000000000,"pad":""}`))
	for _, mode := range []string{"upsert", "insert_ignore"} {
		for _, size := range []int{1, 100, 1000} {
			b.Run(fmt.Sprintf("%s/batch=%d", mode, size), func(b *testing.B) {
				c := srv.config(srv.table(b))
				c.Mode = mode
				s := open(b, c)
				seq := uint64(0)
				batch := make([]*sink.Envelope, size)
				b.ResetTimer()
				for b.Loop() {
					b.StopTimer()
					for i := range batch {
						seq++
						batch[i] = env("bench.x", "BENCH", seq, "", fmt.Sprintf(`{"n":%010d,"pad":"%s"}`, seq, pad))
					}
					b.StartTimer()
					for _, r := range s.WriteBatch(b.Context(), batch) {
						if r.Outcome != sink.Committed {
							b.Fatalf("WriteBatch: %+v", r)
						}
					}
				}
				b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "msgs/s")
			})
		}
	}
}
