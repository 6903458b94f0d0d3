package tracing_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/dlq"
	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/tracing"
)

// TestJetStreamRoundTrip is the proof over a real server: a message
// published with a known traceparent (header names in mixed case) is fetched,
// its envelope built as the runner builds it, and dead-lettered; the
// exported consume span continues the producer's trace, the DLQ span is its
// child, and the dead letter stored in the DLQ stream carries the DLQ span's
// context, so whoever consumes the dead letter continues the same trace.
func TestJetStreamRoundTrip(t *testing.T) {
	ctx := t.Context()
	srv := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, srv)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "DLQ", Subjects: []string{"dlq.orders"}})
	natstest.Publish(t, js, "orders.created", []byte(`{"id":1}`), nats.Header{
		"Traceparent": {traceparent},
		"TraceState":  {"vendor=abc"},
		"BAGGAGE":     {"tenant=acme"},
		"Nats-Msg-Id": {"O-1001"},
	})

	rcv := newHTTPReceiver(t)
	cfg := tracingConfig(tracing.ExporterOTLPHTTP, rcv.URL())
	tr, err := tracing.New(ctx, cfg, tracing.Options{Version: "test", Sink: "file", Subject: "orders.>", Consumer: "orders-file"})
	if err != nil {
		t.Fatal(err)
	}

	cons, err := js.CreateOrUpdateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "orders-file", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []jetstream.Msg
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	if len(msgs) != 1 {
		t.Fatalf("fetched %d messages, want 1 (%v)", len(msgs), batch.Error())
	}
	msg := msgs[0]
	env := intake.Build(intake.Message{Subject: msg.Subject(), Reply: msg.Reply(), Data: msg.Data(), Header: msg.Headers()}, nil, time.Now())
	envs := []*sink.Envelope{env}

	b := tr.StartBatch(ctx, "feedfacefeedface", envs)
	_, w := b.StartWrite(ctx, envs, 0)
	res := []sink.Result{sink.Failed(sink.AsPermanent(errors.New("file exists")))}
	w.Results(res)
	w.End()

	dm := dlq.Build(env, dlq.Failure{ErrorType: res[0].ErrorType, Error: res[0].Err.Error()}, dlq.Options{Consumer: "orders-file"}, time.Now())
	dctx, d := b.StartDeadLetter(ctx, 0, "dlq.orders", res[0].ErrorType)
	h := nats.Header(dm.Header)
	tracing.Inject(dctx, env, h)
	if _, err := js.PublishMsg(dctx, &nats.Msg{Subject: "dlq.orders", Data: dm.Body, Header: h}); err != nil {
		d.Fail("DLQPublishError", err)
		t.Fatal(err)
	}
	d.End()

	m := b.Span(0)
	m.Fail(res[0].ErrorType, res[0].Err)
	m.SetOutcome(tracing.OutcomeDeadLettered)
	m.Ack(msg.Ack())
	m.End()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	spans := rcv.Spans()
	proc := one(t, spans, "process orders.>")
	if proc.TraceID != producerTrace || proc.ParentSpanID != producerSpan {
		t.Errorf("consume span trace/parent = %s/%s, want %s/%s", proc.TraceID, proc.ParentSpanID, producerTrace, producerSpan)
	}
	if proc.Attrs["nats_sink.stream_sequence"] != int64(1) || proc.Attrs["nats_sink.delivery_count"] != int64(1) ||
		proc.Attrs["messaging.consumer.group.name"] != "orders-file" || proc.Attrs["nats_sink.stream"] != "ORDERS" {
		t.Errorf("consume span attributes from the JetStream metadata = %v", proc.Attrs)
	}
	pub := one(t, spans, "publish dlq.orders")
	if pub.TraceID != producerTrace || pub.ParentSpanID != proc.SpanID {
		t.Errorf("dlq span trace/parent = %s/%s, want %s/%s", pub.TraceID, pub.ParentSpanID, producerTrace, proc.SpanID)
	}
	if w := one(t, spans, "write file"); len(w.Links) != 1 || w.Links[0].SpanID != proc.SpanID {
		t.Errorf("write span links = %v, want the consume span %s", w.Links, proc.SpanID)
	}

	stored, err := js.Stream(ctx, "DLQ")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := stored.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, k := range []string{"traceparent", "tracestate", "baggage"} {
		got[k] = raw.Header.Get(k)
	}
	want := map[string]string{
		"traceparent": "00-" + producerTrace + "-" + pub.SpanID + "-01",
		"tracestate":  "vendor=abc",
		"baggage":     "tenant=acme",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("dead letter trace headers (-want +got):\n%s", diff)
	}
	if n := len(raw.Header.Values("Traceparent")); n != 0 {
		t.Errorf("dead letter also carries %d differently-cased Traceparent headers", n)
	}
}
