package kafkasink

import (
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nats-sinks/nats-sink/internal/tracingtest"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/tracing"
)

const producerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"

// writeTraced calls WriteBatch as the runner does with tracing on.
func writeTraced(t *testing.T, s *Sink, tr *tracing.Tracer, b []*sink.Envelope) []sink.Result {
	t.Helper()
	tb := tr.StartBatch(t.Context(), "0123456789abcdef", b)
	wctx, w := tb.StartWrite(t.Context(), b, 0)
	defer tb.End()
	defer w.End()
	return s.WriteBatch(wctx, b)
}

// traceHeadersOf returns the record's trace headers in order, as name=value.
func traceHeadersOf(hs []string) []string {
	var out []string
	for _, h := range hs {
		for _, name := range traceHeaders {
			if len(h) > len(name) && h[:len(name)+1] == name+"=" {
				out = append(out, h)
			}
		}
	}
	return out
}

// TestTraceContextInjected: with tracing, each record is a PRODUCER span
// "send <topic>", a child of its message's span, and the record carries that
// span's traceparent (once, last, as without tracing) with the message's
// tracestate and baggage.
func TestTraceContextInjected(t *testing.T) {
	kc := cluster(t, []string{"orders"})
	c := testConfig(kc, "orders")
	s := open(t, c)
	tr, rec := tracingtest.New(t, tracing.Options{Sink: "kafka", Subject: "orders.>"})
	plain := env("orders.created", "ORDERS", 43, nil, `{"n":43}`)
	b := []*sink.Envelope{orderMessage(), plain}
	if got := outcomes(writeTraced(t, s, tr, b)); !slices.Equal(got, repeat(sink.Committed, 2)) {
		t.Fatalf("WriteBatch = %v", got)
	}
	spans := rec.Spans()
	m42, _ := tracingtest.BySeq(spans, 42)
	m43, _ := tracingtest.BySeq(spans, 43)
	sends := map[string]tracingtest.Span{}
	for _, sp := range tracingtest.ByName(spans, "send orders") {
		sends[sp.ParentSpanID] = sp
	}
	s42, s43 := sends[m42.SpanID], sends[m43.SpanID]
	if s42.TraceID != producerTrace || s42.Kind != "producer" || s43.TraceID != m43.TraceID || s43.Kind != "producer" {
		t.Fatalf("send spans %v: want producer children of message spans %s, %s", tracingtest.Names(spans), m42.SpanID, m43.SpanID)
	}

	records := consume(t, c.Brokers, "orders")
	if len(records) != 2 {
		t.Fatalf("%d records, want 2", len(records))
	}
	for _, r := range records {
		var hs []string
		for _, h := range r.Headers {
			hs = append(hs, h.Key+"="+string(h.Value))
		}
		sp, want := s43, []string{"traceparent=" + s43.Traceparent()}
		if string(r.Key) == "stream-sequence:ORDERS:42" {
			sp, want = s42, []string{"traceparent=" + s42.Traceparent(), "tracestate=vendor=1", "baggage=user=42"}
			if hs[len(hs)-3] != want[0] {
				t.Errorf("trace headers are not last: %v", hs)
			}
		}
		if diff := cmp.Diff(want, traceHeadersOf(hs)); diff != "" {
			t.Errorf("record %s trace headers (-want +got):\n%s", r.Key, diff)
		}
		wantAttrs := map[string]any{
			"messaging.system": "kafka", "messaging.operation.type": "send", "messaging.operation.name": "send",
			"messaging.destination.name": "orders", "messaging.destination.partition.id": strconv.Itoa(int(r.Partition)),
			"messaging.kafka.offset": r.Offset,
		}
		if diff := cmp.Diff(wantAttrs, sp.Attrs); diff != "" {
			t.Errorf("send span of %s attributes (-want +got):\n%s", r.Key, diff)
		}
	}
}

// TestTraceIsolatedRecord: a record whose batch the broker refused once is
// produced again alone under a new span, and the stored record names it.
func TestTraceIsolatedRecord(t *testing.T) {
	kc := cluster(t, nil, kfake.SeedTopics(1, "events"))
	kc.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.InvalidRecord, Count: 1})
	c := testConfig(kc, "events")
	s := open(t, c)
	tr, rec := tracingtest.New(t, tracing.Options{Sink: "kafka"})
	e := env("a.b", "S", 1, nil, `{}`)
	if got := outcomes(writeTraced(t, s, tr, []*sink.Envelope{e})); got[0] != sink.Committed {
		t.Fatalf("WriteBatch = %v", got)
	}
	sends := tracingtest.ByName(rec.Spans(), "send events")
	if len(sends) != 2 || !sends[0].StatusError || sends[1].StatusError || sends[0].ParentSpanID != sends[1].ParentSpanID {
		t.Fatalf("send spans = %+v; want a failed one and a successful retry under one message span", sends)
	}
	r := consume(t, c.Brokers, "events")
	if len(r) != 1 {
		t.Fatalf("%d records, want 1", len(r))
	}
	if got := r[0].Headers[len(r[0].Headers)-1]; got.Key != "traceparent" || string(got.Value) != sends[1].Traceparent() {
		t.Errorf("stored record's traceparent = %s=%s, want the retry's %s", got.Key, got.Value, sends[1].Traceparent())
	}
}
