package natssink

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/tracingtest"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/tracing"
)

const (
	producerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	producerSpan  = "00f067aa0ba902b7"
)

// TestTraceContextInjected: with tracing, each republish is a PRODUCER span,
// a child of its message's span, and the republished message carries that
// span's traceparent (one header, lower case) and the original tracestate
// and baggage; a redelivered duplicate is marked on its span.
func TestTraceContextInjected(t *testing.T) {
	_, nc, js := serverWithStream(t, "OUT", "out.>")
	c := prefixed("out")
	c.ForwardHeaders = true
	s := open(t, nc, c)
	h := map[string][]string{
		"TraceParent": {"00-" + producerTrace + "-" + producerSpan + "-01"},
		"TRACESTATE":  {"vendor=a"},
		"Baggage":     {"tenant=acme"},
		"X-Tenant":    {"acme"},
	}
	b := []*sink.Envelope{env("orders.created", "ORDERS", 7, h, `{"n":7}`), env("orders.created", "ORDERS", 8, nil, `{"n":8}`)}
	tr, rec := tracingtest.New(t, tracing.Options{Sink: "nats", Subject: "orders.>"})

	write := func() []sink.Result {
		tb := tr.StartBatch(t.Context(), "0123456789abcdef", b)
		wctx, w := tb.StartWrite(t.Context(), b, 0)
		defer tb.End()
		defer w.End()
		return s.WriteBatch(wctx, b)
	}
	if got := outcomes(write()); !cmp.Equal(got, repeat(sink.Committed, 2)) {
		t.Fatalf("outcomes = %v, want committed", got)
	}
	spans := rec.Spans()
	pubs := tracingtest.ByName(spans, "publish out.>")
	if len(pubs) != 2 {
		t.Fatalf("publish spans: %v, want 2", tracingtest.Names(spans))
	}
	m7, _ := tracingtest.BySeq(spans, 7)
	m8, _ := tracingtest.BySeq(spans, 8)
	byParent := map[string]tracingtest.Span{}
	for _, p := range pubs {
		byParent[p.ParentSpanID] = p
	}
	p7, p8 := byParent[m7.SpanID], byParent[m8.SpanID]
	if p7.TraceID != producerTrace || p7.Kind != "producer" || p8.TraceID != m8.TraceID || p8.Kind != "producer" {
		t.Fatalf("publish spans %+v, %+v: want producer children of the message spans", p7, p8)
	}
	wantAttrs := map[string]any{
		"messaging.system":           "nats",
		"messaging.operation.type":   "send",
		"messaging.operation.name":   "publish",
		"messaging.destination.name": "out.orders.created",
	}
	if diff := cmp.Diff(wantAttrs, p7.Attrs); diff != "" {
		t.Errorf("publish span attributes (-want +got):\n%s", diff)
	}

	msgs := stored(t, js, "OUT")
	if len(msgs) != 2 {
		t.Fatalf("stored %d messages, want 2", len(msgs))
	}
	for i, want := range []map[string][]string{
		{"traceparent": {p7.Traceparent()}, "tracestate": {"vendor=a"}, "baggage": {"tenant=acme"}},
		{"traceparent": {p8.Traceparent()}},
	} {
		got := map[string][]string{}
		for k, v := range msgs[i].Header {
			if isTraceHeader(k) {
				got[k] = v
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("message %d trace headers (-want +got):\n%s", i+1, diff)
		}
	}
	if msgs[0].Header.Get("X-Tenant") != "acme" {
		t.Errorf("forwarded header lost: %v", msgs[0].Header)
	}

	// Redelivery: the target stream reports duplicates.
	if got := outcomes(write()); !cmp.Equal(got, repeat(sink.Duplicate, 2)) {
		t.Fatalf("second write outcomes = %v, want duplicate", got)
	}
	for _, p := range tracingtest.ByName(rec.Spans(), "publish out.>")[2:] {
		if p.Attrs["nats_sink.duplicate"] != true || p.StatusError {
			t.Errorf("duplicate republish span attrs %v, error %v", p.Attrs, p.StatusError)
		}
	}
}

// TestTraceHeadersWithoutTracing: without a traced write context the
// original trace headers are copied verbatim.
func TestTraceHeadersWithoutTracing(t *testing.T) {
	_, nc, js := serverWithStream(t, "OUT", "out")
	s := open(t, nc, literal("out"))
	tp := "00-" + producerTrace + "-" + producerSpan + "-01"
	b := []*sink.Envelope{env("orders.created", "ORDERS", 1, map[string][]string{"Traceparent": {tp}}, `{}`)}
	if got := outcomes(s.WriteBatch(context.Background(), b)); got[0] != sink.Committed {
		t.Fatalf("outcome = %v", got)
	}
	if got := stored(t, js, "OUT")[0].Header.Values("traceparent"); !cmp.Equal(got, []string{tp}) {
		t.Errorf("traceparent = %v, want the original %s", got, tp)
	}
}
