package redissink

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-sinks/nats-sink/sink"
)

// BenchmarkWriteBatch adds batches of envelopes (256-byte JSON payloads)
// to the test Redis and reports msgs/s; "inflight=4" runs four WriteBatch
// calls at once, as the runner does with delivery.max_in_flight_batches 4.
// Every iteration writes new sequences, so each message is an add (the
// dedupe window is on).
func BenchmarkWriteBatch(b *testing.B) {
	for _, bc := range []struct {
		size, inflight int
		format         string
	}{
		{500, 1, "envelope"}, {500, 4, "envelope"}, {500, 4, "payload"}, {500, 4, "raw"},
	} {
		b.Run(fmt.Sprintf("batch=%d/inflight=%d/%s", bc.size, bc.inflight, bc.format), func(b *testing.B) {
			srv := redisServer(b)
			c := srv.config()
			c.RecordFormat = bc.format
			s := open(b, c, sink.Deps{})
			pad := fmt.Sprintf("%0200d", 0)
			next := uint64(1)
			start := time.Now()
			for b.Loop() {
				var wg sync.WaitGroup
				for g := range bc.inflight {
					var bt []*sink.Envelope
					for seq := next; seq < next+uint64(bc.size); seq++ {
						bt = append(bt, env("bench.events", fmt.Sprintf("B%d", g), seq, nil, fmt.Sprintf(`{"seq":%d,"pad":"%s"}`, seq, pad)))
					}
					wg.Go(func() {
						for i, r := range s.WriteBatch(b.Context(), bt) {
							if r.Outcome != sink.Committed {
								b.Errorf("message %d: %v (%v)", i, r.Outcome, r.Err)
								return
							}
						}
					})
				}
				wg.Wait()
				next += uint64(bc.size)
			}
			b.ReportMetric(float64(b.N*bc.size*bc.inflight)/time.Since(start).Seconds(), "msgs/s")
		})
	}
}
