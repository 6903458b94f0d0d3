package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/internal/tracingtest"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/tracing"
)

// Producer contexts of the tracing tests.
const (
	traceA  = "4bf92f3577b34da6a3ce929d0e0e4736"
	parentA = "00f067aa0ba902b7"
	traceB  = "0af7651916cd43dd8448eb211c80319c"
	parentB = "b7ad6b7169203331"
	traceC  = "11111111111111111111111111111111"
	parentC = "2222222222222222"
)

func newTestTracer(t *testing.T) (*tracing.Tracer, *tracingtest.Recorder) {
	t.Helper()
	return tracingtest.New(t, tracing.Options{Sink: "fake", Subject: "orders.>", Consumer: testConsumer})
}

// waitSpans waits until rec holds n ended spans and returns them: a message
// span ends just after its ACK, which the server may see first.
func waitSpans(t *testing.T, rec *tracingtest.Recorder, n int) []tracingtest.Span {
	t.Helper()
	var spans []tracingtest.Span
	natstest.WaitFor(t, waitLong, func() error {
		spans = rec.Spans()
		if len(spans) < n {
			return fmt.Errorf("%d spans ended, want %d: %v", len(spans), n, tracingtest.Names(spans))
		}
		return nil
	})
	return spans
}

func messageSpan(t *testing.T, spans []tracingtest.Span, seq uint64) tracingtest.Span {
	t.Helper()
	s, ok := tracingtest.BySeq(spans, seq)
	if !ok {
		t.Fatalf("no message span for stream sequence %d among %v", seq, tracingtest.Names(spans))
	}
	return s
}

func eventNames(s tracingtest.Span) []string {
	var n []string
	for _, e := range s.Events {
		n = append(n, e.Name)
	}
	return n
}

// TestTracingOneBatch runs one batch through the runner with a Tracer and
// checks every span of docs/tracing.md and what travels downstream: message
// spans continue their producer's trace and end with their outcome and ack
// event; the write span is a linked root; a sink's client span, started from
// the write context, is a child of its message's span; a dead letter carries
// the context of its publish span, itself a child of the message span; an
// unsampled producer context is propagated (flag 00) but not recorded.
func TestTracingOneBatch(t *testing.T) {
	e := newEnv(t, true)
	c := e.consumer(ConsumerSpec{})
	headers := map[int]nats.Header{
		// Mixed-case names, as NATS clients write them.
		1: {"TraceParent": {"00-" + traceA + "-" + parentA + "-01"}, "TRACESTATE": {"vendor=a"}, "Baggage": {"tenant=acme"}},
		2: {},
		3: {"traceparent": {"00-" + traceB + "-" + parentB + "-01"}, "tracestate": {"vendor=b"}},
		4: {"traceparent": {"00-" + traceA + "-" + parentA + "-01"}},
		5: {"traceparent": {"00-" + traceC + "-" + parentC + "-00"}},
	}
	for i := 1; i <= 5; i++ {
		natstest.Publish(t, e.js, "orders.created", fmt.Appendf(nil, `{"n":%d}`, i), headers[i])
	}

	// The sink fails 3 and 5 permanently, reports 4 as a duplicate, and for
	// message 1 starts a client span and records the headers it would send.
	var (
		mu   sync.Mutex
		sent map[string]string
	)
	fs := &funcSink{write: func(ctx context.Context, b []*sink.Envelope) []sink.Result {
		out := make([]sink.Result, len(b))
		for i, env := range b {
			switch env.StreamSequence {
			case 1:
				cctx, cs := tracing.StartClient(ctx, env, "POST", trace.SpanKindClient)
				mu.Lock()
				sent = tracing.Headers(cctx, env)
				mu.Unlock()
				cs.End()
				out[i] = sink.Ok
			case 3, 5:
				out[i] = sink.Result{Outcome: sink.Permanent, ErrorType: sink.ValidationError, Err: errors.New("amount must be positive")}
			case 4:
				out[i] = sink.Result{Outcome: sink.Duplicate}
			default:
				out[i] = sink.Ok
			}
		}
		return out
	}}
	tr, rec := newTestTracer(t)
	start(t, &Runner{Consumer: c, JetStream: e.js, Conn: e.nc, Sink: fs, Metrics: newMetrics(t),
		DeadLetter: dlqOptions(), BatchSize: 10, Tracer: tr})
	e.waitAcked(c, 5)
	// 4 sampled message spans, the write span, the client span, one sampled
	// DLQ span; message 5's spans are not recorded.
	spans := waitSpans(t, rec, 7)
	if len(spans) != 7 {
		t.Errorf("ended spans: %v, want 7", tracingtest.Names(spans))
	}
	for _, s := range spans {
		if s.TraceID == traceC {
			t.Errorf("span %q of an unsampled producer trace was recorded", s.Name)
		}
	}

	m1, m2, m3, m4 := messageSpan(t, spans, 1), messageSpan(t, spans, 2), messageSpan(t, spans, 3), messageSpan(t, spans, 4)
	for _, tt := range []struct {
		name           string
		s              tracingtest.Span
		trace, parent  string // "" trace: a new root
		outcome        string
		failed         bool
		wantTraceState string
	}{
		{"producer context", m1, traceA, parentA, "committed", false, "vendor=a"},
		{"no context", m2, "", "", "committed", false, ""},
		{"dead-lettered", m3, traceB, parentB, "dead_lettered", true, "vendor=b"},
		{"duplicate", m4, traceA, parentA, "duplicate", false, ""},
	} {
		s := tt.s
		if tt.trace != "" && (s.TraceID != tt.trace || s.ParentSpanID != tt.parent) {
			t.Errorf("%s: trace/parent = %s/%s, want %s/%s", tt.name, s.TraceID, s.ParentSpanID, tt.trace, tt.parent)
		}
		if tt.trace == "" && (s.ParentSpanID != "" || s.TraceID == traceA || s.TraceID == traceB) {
			t.Errorf("%s: trace/parent = %s/%q, want a new root", tt.name, s.TraceID, s.ParentSpanID)
		}
		if s.Name != "process orders.>" || s.Kind != "consumer" || s.TraceState != tt.wantTraceState {
			t.Errorf("%s: name/kind/tracestate = %q/%s/%q", tt.name, s.Name, s.Kind, s.TraceState)
		}
		if s.Attrs["nats_sink.outcome"] != tt.outcome || s.StatusError != tt.failed {
			t.Errorf("%s: outcome %v, error %v; want %s, %v", tt.name, s.Attrs["nats_sink.outcome"], s.StatusError, tt.outcome, tt.failed)
		}
		if diff := cmp.Diff([]string{"ack"}, eventNames(s)); diff != "" {
			t.Errorf("%s: events (-want +got):\n%s", tt.name, diff)
		}
	}
	wantM1 := map[string]any{
		"messaging.system":               "nats",
		"messaging.operation.type":       "process",
		"messaging.operation.name":       "process",
		"messaging.destination.name":     "orders.created",
		"messaging.destination.template": "orders.>",
		"messaging.consumer.group.name":  testConsumer,
		"messaging.message.body.size":    int64(7),
		"nats_sink.stream":               testStream,
		"nats_sink.stream_sequence":      int64(1),
		"nats_sink.delivery_count":       int64(1),
		"nats_sink.sink":                 "fake",
		"nats_sink.outcome":              "committed",
	}
	if diff := cmp.Diff(wantM1, m1.Attrs); diff != "" {
		t.Errorf("message span attributes (-want +got):\n%s", diff)
	}
	if m3.Attrs["error.type"] != sink.ValidationError || m3.StatusDesc != "amount must be positive" {
		t.Errorf("dead-lettered span error.type/status = %v/%q", m3.Attrs["error.type"], m3.StatusDesc)
	}

	// The write span: a new root linked to every message span of the call.
	w := tracingtest.One(t, spans, "write fake")
	if w.ParentSpanID != "" || w.Kind != "internal" || slices.Contains([]string{traceA, traceB, traceC}, w.TraceID) {
		t.Errorf("write span trace/parent/kind = %s/%q/%s, want a new internal root", w.TraceID, w.ParentSpanID, w.Kind)
	}
	linked := map[string]bool{}
	for _, l := range w.Links {
		linked[l.SpanID] = true
	}
	for _, m := range []tracingtest.Span{m1, m2, m3, m4} {
		if !linked[m.SpanID] {
			t.Errorf("write span does not link message span %v", m.Attrs["nats_sink.stream_sequence"])
		}
	}
	if len(w.Links) != 5 || w.Attrs["messaging.batch.message_count"] != int64(5) || w.Attrs["nats_sink.bisection_depth"] != int64(0) ||
		w.Attrs["nats_sink.failed_count"] != int64(2) || len(fmt.Sprint(w.Attrs["nats_sink.batch_id"])) != 16 || !w.StatusError {
		t.Errorf("write span: %d links, attributes %v, error %v", len(w.Links), w.Attrs, w.StatusError)
	}

	// The sink's client span is a child of message 1's span, and what the
	// sink sends names the client span.
	cl := tracingtest.One(t, spans, "POST")
	if cl.TraceID != traceA || cl.ParentSpanID != m1.SpanID || cl.Kind != "client" {
		t.Errorf("client span trace/parent/kind = %s/%s/%s, want %s/%s/client", cl.TraceID, cl.ParentSpanID, cl.Kind, traceA, m1.SpanID)
	}
	mu.Lock()
	wantSent := map[string]string{"traceparent": cl.Traceparent(), "tracestate": "vendor=a", "baggage": "tenant=acme"}
	if diff := cmp.Diff(wantSent, sent); diff != "" {
		t.Errorf("headers a sink sends (-want +got):\n%s", diff)
	}
	mu.Unlock()

	// The DLQ publish span is a child of message 3's span; the dead letter
	// names it. Message 5's dead letter carries its unsampled context on.
	d := tracingtest.One(t, spans, "publish "+dlqSubject)
	if d.TraceID != traceB || d.ParentSpanID != m3.SpanID || d.Kind != "producer" || d.Attrs["nats_sink.error_type"] != sink.ValidationError ||
		d.Attrs["messaging.destination.name"] != dlqSubject || d.StatusError {
		t.Errorf("DLQ span trace/parent/kind/attrs = %s/%s/%s/%v, want a producer child of %s", d.TraceID, d.ParentSpanID, d.Kind, d.Attrs, m3.SpanID)
	}
	dead := e.dlqMessages()
	if len(dead) != 2 {
		t.Fatalf("DLQ holds %d messages, want 2", len(dead))
	}
	for _, dm := range dead {
		seq := dm.Header.Get("Nats-Msg-Id")
		got := map[string][]string{}
		for k, v := range dm.Header {
			if k == "traceparent" || k == "tracestate" || k == "baggage" || k == "Traceparent" {
				got[k] = v
			}
		}
		want := map[string][]string{"traceparent": {d.Traceparent()}, "tracestate": {"vendor=b"}}
		if seq == "nats-sinks-dlq:"+testConsumer+":stream-sequence:ORDERS:5" {
			tp := got["traceparent"]
			if len(tp) != 1 || len(tp[0]) != 55 || tp[0][3:35] != traceC || tp[0][36:52] == parentC || tp[0][53:] != "00" {
				t.Errorf("dead letter 5 traceparent = %v, want trace %s, a new span id, flags 00", tp, traceC)
			}
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("dead letter %s trace headers (-want +got):\n%s", seq, diff)
		}
	}
}

// TestTracingFailurePaths: the outcomes and events of messages that are not
// acknowledged (docs/tracing.md): NAKed with the delay, left unacknowledged
// after the retry budget, by leave_unacked, or on the last delivery without
// a DLQ (NAKed, but never delivered again).
func TestTracingFailurePaths(t *testing.T) {
	failing := &funcSink{write: func(ctx context.Context, b []*sink.Envelope) []sink.Result {
		return results(len(b), sink.Result{Outcome: sink.Temporary, Err: errors.New("connection reset")})
	}}
	fixed := func(d time.Duration) Retry { return Retry{Mode: ModeFixed, Backoff: new(d), Jitter: JitterNone} }
	for _, tt := range []struct {
		name    string
		spec    ConsumerSpec
		setup   func(*Runner)
		outcome string
		events  []tracingtest.Event
	}{
		{"nak", ConsumerSpec{}, func(r *Runner) { r.Retry = fixed(30 * time.Second) }, "nak",
			[]tracingtest.Event{{Name: "nak", Attrs: map[string]any{"nats_sink.delay_ms": int64(30_000)}}}},
		{"retry budget exhausted", ConsumerSpec{}, func(r *Runner) { r.Retry = Retry{MaxRetries: new(0)} }, "left_unacked", nil},
		{"leave_unacked", ConsumerSpec{}, func(r *Runner) { r.TemporaryAction = ActionLeaveUnacked }, "left_unacked", nil},
		{"last delivery without DLQ", ConsumerSpec{MaxDeliver: new(1)}, func(r *Runner) { r.Retry = fixed(30 * time.Second) }, "left_unacked",
			[]tracingtest.Event{{Name: "nak", Attrs: map[string]any{"nats_sink.delay_ms": int64(30_000)}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, false)
			c := e.consumer(tt.spec)
			e.publish(1)
			tr, rec := newTestTracer(t)
			r := &Runner{Consumer: c, Conn: e.nc, Sink: failing, Metrics: newMetrics(t), Tracer: tr}
			tt.setup(r)
			start(t, r)
			spans := waitSpans(t, rec, 2)
			m := messageSpan(t, spans, 1)
			if m.Attrs["nats_sink.outcome"] != tt.outcome || !m.StatusError || m.Attrs["error.type"] != "temporary" || m.StatusDesc != "connection reset" {
				t.Errorf("message span outcome %v, error %v %v %q; want %s, temporary error", m.Attrs["nats_sink.outcome"],
					m.StatusError, m.Attrs["error.type"], m.StatusDesc, tt.outcome)
			}
			if diff := cmp.Diff(tt.events, m.Events); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if w := tracingtest.One(t, spans, "write fake"); !w.StatusError || w.Attrs["error.type"] != "temporary" {
				t.Errorf("write span error %v, error.type %v; want a temporary failure", w.StatusError, w.Attrs["error.type"])
			}
		})
	}
}

// TestTracingBisection: every write call of isolation gets its own write
// span with its depth and links to exactly the messages it wrote.
func TestTracingBisection(t *testing.T) {
	e := newEnv(t, true)
	c := e.consumer(ConsumerSpec{})
	e.publish(4)
	var written committedLog
	tr, rec := newTestTracer(t)
	start(t, &Runner{Consumer: c, JetStream: e.js, Conn: e.nc, Sink: txSink(map[uint64]bool{4: true}, &written),
		Metrics: newMetrics(t), DeadLetter: dlqOptions(), BatchSize: 4, Tracer: tr})
	e.waitAcked(c, 4)
	// Calls: {1,2,3,4} depth 0, {1,2} and {3,4} depth 1, {3} and {4} depth 2.
	spans := waitSpans(t, rec, 4+5+1)
	byID := map[string]uint64{}
	for seq := uint64(1); seq <= 4; seq++ {
		byID[messageSpan(t, spans, seq).SpanID] = seq
	}
	type call struct {
		Depth int64
		Seqs  []uint64
		Error bool
	}
	var got []call
	for _, w := range tracingtest.ByName(spans, "write fake") {
		cl := call{Depth: w.Attrs["nats_sink.bisection_depth"].(int64), Error: w.StatusError}
		for _, l := range w.Links {
			cl.Seqs = append(cl.Seqs, byID[l.SpanID])
		}
		if w.Attrs["messaging.batch.message_count"] != int64(len(cl.Seqs)) {
			t.Errorf("write span message_count %v, %d links", w.Attrs["messaging.batch.message_count"], len(cl.Seqs))
		}
		got = append(got, cl)
	}
	want := []call{
		{1, []uint64{1, 2}, false},
		{2, []uint64{3}, false},
		{2, []uint64{4}, true},
		{1, []uint64{3, 4}, true},
		{0, []uint64{1, 2, 3, 4}, true},
	}
	// Spans are recorded as they end; sort for a stable comparison.
	slices.SortFunc(got, func(a, b call) int { return slices.Compare(a.Seqs, b.Seqs)*10 + int(a.Depth-b.Depth) })
	slices.SortFunc(want, func(a, b call) int { return slices.Compare(a.Seqs, b.Seqs)*10 + int(a.Depth-b.Depth) })
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("write calls (-want +got):\n%s", diff)
	}
	if m := messageSpan(t, spans, 4); m.Attrs["nats_sink.outcome"] != "dead_lettered" || m.Attrs["error.type"] != sink.PermanentSinkError {
		t.Errorf("poison message span outcome/error.type = %v/%v", m.Attrs["nats_sink.outcome"], m.Attrs["error.type"])
	}
}
