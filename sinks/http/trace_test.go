package httpsink

import (
	"context"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/internal/tracingtest"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/tracing"
)

const (
	producerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	producerSpan  = "00f067aa0ba902b7"
)

// writeTraced calls WriteBatch the way the runner does with tracing on:
// message spans for the batch, and the write span's context.
func writeTraced(t *testing.T, s *Sink, tr *tracing.Tracer, batch []*sink.Envelope) []sink.Result {
	t.Helper()
	b := tr.StartBatch(t.Context(), "0123456789abcdef", batch)
	wctx, w := b.StartWrite(t.Context(), batch, 0)
	res := s.WriteBatch(wctx, batch)
	w.End()
	b.End()
	return res
}

// TestTraceContextInjected: every request attempt is a client span, a child
// of its message's span, and carries that span's traceparent (with the
// message's tracestate and baggage); a retried request gets a new span.
func TestTraceContextInjected(t *testing.T) {
	ep := newEndpoint(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		if n == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	c := ep.config()
	c.Retry.MaxRetries = 1
	s, _ := open(t, c)
	env := intake.Build(intake.Message{
		Subject: "orders.created", Reply: "$JS.ACK.ORDERS.c.1.7.7.1780048800123456000.0", Data: []byte(`{"n":7}`),
		Header: map[string][]string{
			"Traceparent": {"00-" + producerTrace + "-" + producerSpan + "-01"},
			"tracestate":  {"vendor=a"},
			"baggage":     {"tenant=acme"},
		},
	}, nil, shapestest.Received)
	tr, rec := tracingtest.New(t, tracing.Options{Sink: "http", Subject: "orders.>"})

	res := writeTraced(t, s, tr, []*sink.Envelope{env})
	if res[0].Outcome != sink.Committed {
		t.Fatalf("result = %+v, want committed after one retry", res[0])
	}
	spans := rec.Spans()
	msg, ok := tracingtest.BySeq(spans, 7)
	if !ok || msg.TraceID != producerTrace || msg.ParentSpanID != producerSpan {
		t.Fatalf("message span %+v: want a child of the producer span", msg)
	}
	clients := tracingtest.ByName(spans, "POST")
	reqs := ep.requests()
	if len(clients) != 2 || len(reqs) != 2 {
		t.Fatalf("%d client spans, %d requests; want 2, 2", len(clients), len(reqs))
	}
	for i, cl := range clients {
		if cl.Kind != "client" || cl.TraceID != producerTrace || cl.ParentSpanID != msg.SpanID {
			t.Errorf("attempt %d: client span kind/trace/parent = %s/%s/%s, want client/%s/%s", i+1, cl.Kind, cl.TraceID,
				cl.ParentSpanID, producerTrace, msg.SpanID)
		}
		got := map[string]string{}
		for _, name := range []string{"Traceparent", "Tracestate", "Baggage"} {
			got[name] = reqs[i].Header.Get(name)
		}
		want := map[string]string{"Traceparent": cl.Traceparent(), "Tracestate": "vendor=a", "Baggage": "tenant=acme"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("attempt %d: request trace headers (-want +got):\n%s", i+1, diff)
		}
		if n := len(reqs[i].Header.Values("Traceparent")); n != 1 {
			t.Errorf("attempt %d: %d traceparent headers, want 1", i+1, n)
		}
	}
	u, _ := url.Parse(ep.srv.URL)
	port, _ := strconv.Atoi(u.Port())
	base := map[string]any{"http.request.method": "POST", "server.address": "127.0.0.1", "server.port": int64(port),
		"url.full": ep.srv.URL}
	with := func(extra map[string]any) map[string]any {
		m := maps.Clone(base)
		maps.Copy(m, extra)
		return m
	}
	if diff := cmp.Diff(with(map[string]any{"http.response.status_code": int64(503), "error.type": "503"}), clients[0].Attrs); diff != "" {
		t.Errorf("first attempt attributes (-want +got):\n%s", diff)
	}
	if !clients[0].StatusError {
		t.Error("first attempt (503) span status is not Error")
	}
	if diff := cmp.Diff(with(map[string]any{"http.response.status_code": int64(200), "http.request.resend_count": int64(1)}), clients[1].Attrs); diff != "" {
		t.Errorf("retry attributes (-want +got):\n%s", diff)
	}
	if clients[1].StatusError {
		t.Error("successful retry span status is Error")
	}
}

// TestTraceHeadersWithoutTracing: with tracing off the message's own trace
// headers travel on verbatim, and a message without them sends none.
func TestTraceHeadersWithoutTracing(t *testing.T) {
	ep := newEndpoint(t, nil)
	s, _ := open(t, ep.config())
	tp := "00-" + producerTrace + "-" + producerSpan + "-01"
	with := intake.Build(intake.Message{Subject: "t.x", Reply: "$JS.ACK.S.c.1.1.1.1780048800123456000.0", Data: []byte(`{}`),
		Header: map[string][]string{"TRACEPARENT": {tp}}}, nil, shapestest.Received)
	res := s.WriteBatch(context.Background(), []*sink.Envelope{with, shapestest.Envelope("S", 2)})
	if res[0].Outcome != sink.Committed || res[1].Outcome != sink.Committed {
		t.Fatalf("results = %+v", res)
	}
	reqs := ep.requests()
	if got := reqs[0].Header.Get("Traceparent"); got != tp {
		t.Errorf("traceparent = %q, want the message's %q", got, tp)
	}
	if got := reqs[1].Header.Values("Traceparent"); got != nil {
		t.Errorf("message without context sent traceparent %q", got)
	}
}
