package tracing_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/tracingtest"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/tracing"
)

// TestForSinks: the sink.Tracer adapter starts the span StartClient
// starts (child of the message span, kind, name, attributes with their
// types), its headers are Headers', and outside a traced write it starts
// nothing and returns the context it was given.
func TestForSinks(t *testing.T) {
	tr, rec := tracingtest.New(t, tracing.Options{Sink: "kafka"})
	env := envelope(7, producerHeaders())
	b := tr.StartBatch(t.Context(), "0123456789abcdef", []*sink.Envelope{env})
	wctx, w := b.StartWrite(t.Context(), []*sink.Envelope{env}, 0)
	st := tracing.ForSinks()

	pctx, span := st.StartClient(wctx, env, "send t", true,
		sink.Attr{Key: "s", Value: "v"}, sink.Attr{Key: "i", Value: 3}, sink.Attr{Key: "i64", Value: int64(4)},
		sink.Attr{Key: "b", Value: true}, sink.Attr{Key: "f", Value: 0.5}, sink.Attr{Key: "other", Value: []int{1}})
	if pctx == wctx {
		t.Fatal("StartClient in a traced write returned the write context: no span started")
	}
	if diff := cmp.Diff(tracing.Headers(pctx, env), st.TraceHeaders(pctx, env)); diff != "" {
		t.Errorf("TraceHeaders differs from Headers (-Headers +TraceHeaders):\n%s", diff)
	}
	span.SetAttributes(sink.Attr{Key: "late", Value: "x"})
	span.Fail("temporary", errors.New("broker went away"))
	span.End()
	w.End()
	b.End()

	msg, _ := tracingtest.BySeq(rec.Spans(), 7)
	got := tracingtest.One(t, rec.Spans(), "send t")
	if got.Kind != "producer" || got.ParentSpanID != msg.SpanID || !got.StatusError {
		t.Errorf("client span kind %s, parent %s, error %v; want producer, %s (the message span), true", got.Kind, got.ParentSpanID, got.StatusError, msg.SpanID)
	}
	want := map[string]any{"s": "v", "i": int64(3), "i64": int64(4), "b": true, "f": 0.5, "other": "[1]", "late": "x", "error.type": "temporary"}
	if diff := cmp.Diff(want, got.Attrs); diff != "" {
		t.Errorf("attributes (-want +got):\n%s", diff)
	}

	// Outside a traced write: no span, the context unchanged, the
	// producer's own trace headers passed through.
	ctx := t.Context()
	pctx, span = st.StartClient(ctx, env, "send t", false)
	span.SetAttributes(sink.Attr{Key: "x", Value: 1})
	span.Fail("temporary", nil)
	span.End()
	if pctx != ctx {
		t.Error("StartClient without tracing changed the context")
	}
	if got := st.TraceHeaders(ctx, env)["traceparent"]; got != traceparent {
		t.Errorf("traceparent without tracing = %q, want the producer's %q", got, traceparent)
	}
	if n := len(tracingtest.ByName(rec.Spans(), "send t")); n != 1 {
		t.Errorf("%d client spans, want the 1 of the traced write", n)
	}
}
