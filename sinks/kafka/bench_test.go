package kafkasink

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/nats-sinks/nats-sink/sink"
)

// BenchmarkWriteBatch produces batches of envelope records (about 1.3 KB
// each, metadata included) to an in-process kfake cluster and reports
// msgs/s. kfake shares the two cores with the producer and stores records
// in memory, so the figures bound the sink's own cost (record building,
// canonical JSON, producer) rather than a real cluster's throughput.
// "inflight=4" runs four WriteBatch calls at once, as the runner does with
// delivery.max_in_flight_batches 4.
func BenchmarkWriteBatch(b *testing.B) {
	for _, bc := range []struct {
		size, inflight int
		format         string
	}{
		{100, 1, "envelope"}, {500, 1, "envelope"}, {500, 4, "envelope"}, {500, 4, "raw"},
	} {
		b.Run(fmt.Sprintf("batch=%d/inflight=%d/%s", bc.size, bc.inflight, bc.format), func(b *testing.B) {
			kc := cluster(b, nil, kfake.SeedTopics(6, "bench"))
			c := testConfig(kc, "bench")
			c.RecordFormat = bc.format
			s := open(b, c)
			batches := make([][]*sink.Envelope, bc.inflight)
			for g := range batches {
				batches[g] = batch("bench.events", fmt.Sprintf("B%d", g), 1, uint64(bc.size))
			}
			b.ResetTimer()
			start := time.Now()
			for b.Loop() {
				var wg sync.WaitGroup
				for _, bt := range batches {
					wg.Go(func() {
						for i, r := range s.WriteBatch(b.Context(), bt) {
							if !r.Outcome.Acked() {
								b.Errorf("message %d: %v (%v)", i, r.Outcome, r.Err)
								return
							}
						}
					})
				}
				wg.Wait()
			}
			b.ReportMetric(float64(b.N*bc.size*bc.inflight)/time.Since(start).Seconds(), "msgs/s")
		})
	}
}
