package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/tracing"
)

const benchBatch = 500

// benchEnv publishes n 256-byte messages and returns a fresh durable
// consumer sized for inFlight batches of benchBatch.
func benchEnv(b *testing.B, n, inFlight int) (*env, jetstream.Consumer) {
	b.Helper()
	s := natstest.RunJetStream(b)
	nc, js := natstest.Connect(b, s)
	natstest.CreateStream(b, js, jetstream.StreamConfig{Name: testStream, Subjects: []string{"orders.>"}})
	payload := make([]byte, 256)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	natstest.PublishN(b, js, "orders.created", n, func(int) []byte { return payload })
	c, _, err := EnsureConsumer(context.Background(), js, ConsumerSpec{
		Stream: testStream, Name: testConsumer, Subject: "orders.>",
		AckWait:       new(time.Minute),
		MaxAckPending: new(inFlight*benchBatch + benchBatch), // platform-facts: size it to in-flight capacity
	})
	if err != nil {
		b.Fatal(err)
	}
	return &env{srv: s, nc: nc, js: js}, c
}

// nullSink discards everything and reports it committed.
type nullSink struct{}

func (nullSink) Type() string { return "null" }
func (nullSink) WriteBatch(_ context.Context, batch []*sink.Envelope) []sink.Result {
	return results(len(batch), sink.Ok)
}
func (nullSink) Stop(context.Context) error { return nil }

// BenchmarkPipelineNull moves b.N messages through the whole runner
// (envelopes, isolation, ACK, flush) into a sink that discards them.
func BenchmarkPipelineNull(b *testing.B) {
	for _, inFlight := range []int{1, 4} {
		b.Run(fmt.Sprintf("inflight=%d", inFlight), func(b *testing.B) {
			_, c := benchEnv(b, b.N, inFlight)
			m := newMetricsB(b)
			r := &Runner{Consumer: c, Sink: nullSink{}, BatchSize: benchBatch, MaxInFlight: inFlight,
				Metrics: m, BatchTimeout: 100 * time.Millisecond}
			ctx, cancel := context.WithCancel(context.Background())
			b.ResetTimer()
			begin := time.Now()
			done := make(chan error, 1)
			go func() { done <- r.Run(ctx) }()
			for m.MessagesAcked.Value() < uint64(b.N) {
				time.Sleep(time.Millisecond)
			}
			elapsed := time.Since(begin)
			b.StopTimer()
			cancel()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
		})
	}
}

// BenchmarkRawConsumeAck is the ceiling: fetch batches of the same size and
// plain-ACK every message, with no runner at all.
func BenchmarkRawConsumeAck(b *testing.B) {
	e, c := benchEnv(b, b.N, 1)
	b.ResetTimer()
	begin := time.Now()
	acked := 0
	for acked < b.N {
		batch, err := c.Fetch(min(benchBatch, b.N-acked), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		for msg := range batch.Messages() {
			if err := msg.Ack(); err != nil {
				b.Fatal(err)
			}
			acked++
		}
		if err := batch.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			b.Fatal(err)
		}
	}
	if err := e.nc.Flush(); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(begin)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
}

// pipelineRate moves n messages through a fresh server and consumer into a
// discarding sink with the runner configured by setup, and returns msgs/s.
func pipelineRate(b *testing.B, n, inFlight int, setup func(*Runner)) float64 {
	b.Helper()
	e, c := benchEnv(b, n, inFlight)
	m := newMetricsB(b)
	r := &Runner{Consumer: c, Conn: e.nc, Sink: nullSink{}, BatchSize: benchBatch, MaxInFlight: inFlight,
		Metrics: m, BatchTimeout: 100 * time.Millisecond}
	setup(r)
	ctx, cancel := context.WithCancel(context.Background())
	begin := time.Now()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	for m.MessagesAcked.Value()+m.AckErrors.Value() < uint64(n) {
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(begin)
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	if errs := m.AckErrors.Value(); errs != 0 {
		b.Fatalf("%d ACKs failed", errs)
	}
	return float64(n) / elapsed.Seconds()
}

// BenchmarkPipelineAckConfirmation compares plain and confirmed ACKs in the
// same run: three alternating rounds of b.N messages each way (the box is
// shared, so one pair alone is noise), reported as the median msgs/s of each
// and the median of the per-round ratios.
func BenchmarkPipelineAckConfirmation(b *testing.B) {
	for _, inFlight := range []int{1, 4} {
		b.Run(fmt.Sprintf("inflight=%d", inFlight), func(b *testing.B) {
			var plain, confirmed, ratio []float64
			for range 3 {
				p := pipelineRate(b, b.N, inFlight, func(*Runner) {})
				c := pipelineRate(b, b.N, inFlight, func(r *Runner) { r.AckConfirmation = &AckConfirmation{} })
				plain, confirmed, ratio = append(plain, p), append(confirmed, c), append(ratio, c/p)
			}
			b.ReportMetric(median(plain), "plain-msgs/s")
			b.ReportMetric(median(confirmed), "confirmed-msgs/s")
			b.ReportMetric(median(ratio), "confirmed/plain")
		})
	}
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// BenchmarkPipelineTracing is BenchmarkPipelineNull (in flight 1) with a
// Tracer whose spans go through the batch span processor to an exporter
// that drops them: the cost of span recording without the encoding and
// network of a real exporter. sample=0 is messages without trace context at
// sample_ratio 0; compare with BenchmarkPipelineNull/inflight=1 for off.
func BenchmarkPipelineTracing(b *testing.B) {
	for _, ratio := range []float64{0, 1} {
		b.Run(fmt.Sprintf("sample=%v", ratio), func(b *testing.B) {
			tr := tracing.NewWithProcessor(sdktrace.NewBatchSpanProcessor(tracetest.NewNoopExporter()), ratio,
				tracing.Options{Sink: "null", Subject: "orders.>"})
			defer func() { _ = tr.Shutdown(context.Background()) }()
			b.ReportMetric(pipelineRate(b, b.N, 1, func(r *Runner) { r.Tracer = tr }), "msgs/s")
		})
	}
}
