package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/internal/tracingtest"
)

// TestTracingOTLP runs the binary with tracing exported over OTLP/HTTP to an
// in-process collector (docs/tracing.md): a message published with a
// known traceparent yields a consume span with that trace id and parent, a
// linked write span, and — for a poison message — a DLQ publish span whose
// context the dead letter carries. SIGTERM flushes the spans.
func TestTracingOTLP(t *testing.T) {
	const (
		traceA  = "4bf92f3577b34da6a3ce929d0e0e4736"
		parentA = "00f067aa0ba902b7"
		traceB  = "0af7651916cd43dd8448eb211c80319c"
		parentB = "b7ad6b7169203331"
		dlq     = "trace-dlq"
	)
	ctx := context.Background()
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "TRACE", Subjects: []string{"trace.>"}})
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "TRACE_DLQ", Subjects: []string{dlq}})
	natstest.Publish(t, js, "trace.orders", body(0), nats.Header{
		"Traceparent": {"00-" + traceA + "-" + parentA + "-01"}, "Tracestate": {"vendor=a"}})
	// Not JSON: with json_only a permanent SerializationError, dead-lettered.
	natstest.Publish(t, js, "trace.poison", []byte("not json"), nats.Header{
		"traceparent": {"00-" + traceB + "-" + parentB + "-01"}, "baggage": {"tenant=acme"}})
	natstest.Publish(t, js, "trace.orders", body(2), nil)

	rcv := tracingtest.NewReceiver(t)
	out := t.TempDir()
	cfg := fileConfig(t, s.ClientURL(), "TRACE", "trace-file", "trace.>", out, fmt.Sprintf(`,
  "dead_letter": {"enabled": true, "subject": %q},
  "tracing": {"enabled": true, "exporter": "otlp-http", "endpoint": %q, "service_name": "e2e-trace"}`, dlq, rcv.URL()))
	replaceInFile(t, cfg, `"fsync": true}`, `"fsync": true, "payload_mode": "json_only"}`)

	p := start(t, cfg)
	natstest.WaitFor(t, time.Minute, func() error {
		floor, pending, err := ackState(ctx, js, "TRACE", "trace-file")
		if err != nil || floor != 3 || pending != 0 {
			return fmt.Errorf("ack floor %d, ack pending %d (%v); want 3, 0", floor, pending, err)
		}
		return nil
	})
	p.stop(t) // flushes the spans still queued

	spans := rcv.Spans()
	m1, ok1 := tracingtest.BySeq(spans, 1)
	m2, ok2 := tracingtest.BySeq(spans, 2)
	m3, ok3 := tracingtest.BySeq(spans, 3)
	if !ok1 || !ok2 || !ok3 {
		t.Fatalf("message spans of sequences 1, 2, 3 found: %v, %v, %v; exported spans: %v\nstderr:\n%s",
			ok1, ok2, ok3, tracingtest.Names(spans), p.stderr.String())
	}
	// The consume span continues the producer's trace.
	if m1.TraceID != traceA || m1.ParentSpanID != parentA || m1.TraceState != "vendor=a" {
		t.Errorf("message 1 span trace/parent/state = %s/%s/%q, want %s/%s/vendor=a", m1.TraceID, m1.ParentSpanID, m1.TraceState, traceA, parentA)
	}
	if m3.ParentSpanID != "" || m3.TraceID == traceA || m3.TraceID == traceB {
		t.Errorf("message 3 (no context) span trace/parent = %s/%q, want a new root", m3.TraceID, m3.ParentSpanID)
	}
	for _, m := range []tracingtest.Span{m1, m3} {
		if m.Name != "process trace.>" || m.Kind != "consumer" || m.Attrs["nats_sink.outcome"] != "committed" ||
			m.Attrs["nats_sink.sink"] != "file" || m.Attrs["messaging.consumer.group.name"] != "trace-file" || len(m.Event("ack")) != 1 {
			t.Errorf("message %v span = %s %s %v events %v; want a committed consume span with an ack event",
				m.Attrs["nats_sink.stream_sequence"], m.Name, m.Kind, m.Attrs, m.Events)
		}
		if m.Resource["service.name"] != "e2e-trace" {
			t.Errorf("span resource service.name = %v, want e2e-trace", m.Resource["service.name"])
		}
	}
	if m2.TraceID != traceB || m2.ParentSpanID != parentB || m2.Attrs["nats_sink.outcome"] != "dead_lettered" ||
		m2.Attrs["error.type"] != "SerializationError" || !m2.StatusError || len(m2.Event("ack")) != 1 {
		t.Errorf("poison message span trace/parent = %s/%s, attrs %v, error %v, events %v; want a dead-lettered child of %s",
			m2.TraceID, m2.ParentSpanID, m2.Attrs, m2.StatusError, m2.Events, parentB)
	}

	// Write spans are roots linked to the message spans they wrote.
	linked := map[string]bool{}
	for _, w := range tracingtest.ByName(spans, "write file") {
		if w.ParentSpanID != "" || w.Kind != "internal" {
			t.Errorf("write span parent/kind = %q/%s, want a root internal span", w.ParentSpanID, w.Kind)
		}
		for _, l := range w.Links {
			linked[l.SpanID] = true
		}
	}
	for _, m := range []tracingtest.Span{m1, m2, m3} {
		if !linked[m.SpanID] {
			t.Errorf("no write span links message span %v; spans: %v", m.Attrs["nats_sink.stream_sequence"], tracingtest.Names(spans))
		}
	}

	// The DLQ publish span is a child of the poison message's span, and the
	// dead letter names it.
	d := tracingtest.One(t, spans, "publish "+dlq)
	if d.TraceID != traceB || d.ParentSpanID != m2.SpanID || d.Kind != "producer" || d.Attrs["nats_sink.error_type"] != "SerializationError" {
		t.Errorf("DLQ span trace/parent/kind/attrs = %s/%s/%s/%v, want a producer child of %s", d.TraceID, d.ParentSpanID, d.Kind, d.Attrs, m2.SpanID)
	}
	st, err := js.Stream(ctx, "TRACE_DLQ")
	if err != nil {
		t.Fatal(err)
	}
	dm, err := st.GetLastMsgForSubject(ctx, dlq)
	if err != nil {
		t.Fatalf("DLQ message: %v", err)
	}
	if got := dm.Header.Values("traceparent"); len(got) != 1 || got[0] != d.Traceparent() {
		t.Errorf("dead letter traceparent = %v, want [%s] (the DLQ span)", got, d.Traceparent())
	}
	if got := dm.Header.Get("baggage"); got != "tenant=acme" {
		t.Errorf("dead letter baggage = %q, want tenant=acme", got)
	}
}
