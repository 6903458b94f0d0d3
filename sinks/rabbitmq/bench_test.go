package rabbitmq

import (
	"fmt"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/nats-sinks/nats-sink/sink"
)

// BenchmarkWriteBatch publishes batches of 500 envelopes (256-byte JSON
// payloads), four WriteBatch calls at once as the runner does with
// delivery.max_in_flight_batches 4, into a durable quorum queue and a
// durable classic queue, and reports msgs/s.
func BenchmarkWriteBatch(b *testing.B) {
	for _, bc := range []struct {
		queue  string
		format string
	}{
		{"quorum", "envelope"}, {"classic", "envelope"}, {"quorum", "raw"},
	} {
		b.Run(fmt.Sprintf("queue=%s/%s", bc.queue, bc.format), func(b *testing.B) {
			srv := rabbitServer(b)
			ex, q := srv.exchange(b, "bench", false)
			srv.queue(b, q, amqp.Table{"x-queue-type": bc.queue})
			srv.bind(b, q, ex)
			c := srv.config(ex)
			c.RecordFormat = bc.format
			s := open(b, c, sink.Deps{})
			pad := fmt.Sprintf("%0200d", 0)
			batches := make([][]*sink.Envelope, 4)
			for g := range batches {
				for seq := uint64(1); seq <= 500; seq++ {
					batches[g] = append(batches[g], env("bench.events", fmt.Sprintf("B%d", g), seq, nil, fmt.Sprintf(`{"seq":%d,"pad":"%s"}`, seq, pad)))
				}
			}
			start := time.Now()
			for b.Loop() {
				var wg sync.WaitGroup
				for _, bt := range batches {
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
			}
			b.ReportMetric(float64(b.N*2000)/time.Since(start).Seconds(), "msgs/s")
		})
	}
}
