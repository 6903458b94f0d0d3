package natssink

import (
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/sink"
)

// BenchmarkWriteBatch republishes batches of 500 envelopes (256-byte JSON
// bodies, raw format) to a file-backed stream on the same embedded server
// and reports msgs/s. Each op is one batch, every message PubAck'ed.
//
//	go test -run '^$' -bench WriteBatch ./sinks/nats
func BenchmarkWriteBatch(b *testing.B) {
	for _, format := range []string{"raw", "envelope"} {
		b.Run(format, func(b *testing.B) {
			s := natstest.RunJetStream(b)
			nc, js := natstest.Connect(b, s)
			natstest.CreateStream(b, js, jetstream.StreamConfig{Name: "COPY", Subjects: []string{"copy.>"}})
			c := prefixed("copy")
			c.BodyFormat = format
			sk, err := New(b.Context(), c, deps(nc))
			if err != nil {
				b.Fatal(err)
			}
			defer sk.Stop(b.Context())
			const size = 500
			pad := make([]byte, 220)
			for i := range pad {
				pad[i] = 'x'
			}
			var seq uint64
			next := func() []*sink.Envelope {
				batch := make([]*sink.Envelope, size)
				for i := range batch {
					seq++
					batch[i] = env("orders.new", "ORDERS", seq, nil, fmt.Sprintf(`{"seq":%d,"pad":"%s"}`, seq, pad))
				}
				return batch
			}
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				batch := next()
				b.StartTimer()
				for i, r := range sk.WriteBatch(b.Context(), batch) {
					if r.Outcome != sink.Committed {
						b.Fatalf("message %d: %v (%v)", i, r.Outcome, r.Err)
					}
				}
			}
			b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
