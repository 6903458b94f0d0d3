package tracing_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/tracing"
)

const (
	producerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	producerSpan  = "00f067aa0ba902b7"
	traceparent   = "00-" + producerTrace + "-" + producerSpan + "-01"
)

// envelope builds an envelope as the runner does, from a delivered message
// with the ACK reply subject of stream ORDERS, consumer orders-file.
func envelope(seq uint64, header nats.Header) *sink.Envelope {
	reply := fmt.Sprintf("$JS.ACK.ORDERS.orders-file.3.%d.7.1717000000000000000.5", seq)
	return intake.Build(intake.Message{Subject: "orders.created", Reply: reply, Data: []byte(`{"id":1}`), Header: header},
		nil, time.Unix(1717000000, 0))
}

// producerHeaders are a producer's trace headers in the mixed case NATS
// clients write them in.
func producerHeaders() nats.Header {
	return nats.Header{
		"TraceParent":  {traceparent},
		"TRACESTATE":   {"vendor=abc"},
		"Baggage":      {"tenant=acme"},
		"Nats-Msg-Id":  {"O-1001"},
		"Content-Type": {"application/json"},
	}
}

func tracingConfig(exporter, endpoint string) *config.Tracing {
	c := config.Default().Tracing
	c.Enabled = true
	c.Exporter = exporter
	if endpoint != "" {
		c.Endpoint = &endpoint
	}
	return &c
}

func options(env map[string]string) tracing.Options {
	return tracing.Options{
		Version:  "1.2.3",
		Sink:     "postgres",
		Subject:  "orders.>",
		Consumer: "orders-file",
		Env: func(name string) (string, bool) {
			v, ok := env[name]
			return v, ok
		},
	}
}

// newTracer starts a tracer and returns it with a function that shuts it
// down (flushing every span) and returns the exported spans.
func newTracer(t *testing.T, cfg *config.Tracing, o tracing.Options) (*tracing.Tracer, func() []span) {
	t.Helper()
	var out bytes.Buffer
	if cfg.Exporter == tracing.ExporterStdout {
		o.Stdout = &out
	}
	tr, err := tracing.New(t.Context(), cfg, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if tr == nil {
		t.Fatal("New returned a nil tracer with tracing enabled")
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return tr, func() []span {
		t.Helper()
		if err := tr.Shutdown(t.Context()); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		return stdoutSpans(t, &out)
	}
}

// flow runs one batch the way the runner will: message 0 carries the
// producer's context and is dead-lettered, message 1 has none and commits.
// It returns the headers injected into the dead letter.
func flow(t *testing.T, tr *tracing.Tracer) nats.Header {
	t.Helper()
	ctx := t.Context()
	envs := []*sink.Envelope{envelope(42, producerHeaders()), envelope(43, nats.Header{"Nats-Msg-Id": {"O-1002"}})}
	b := tr.StartBatch(ctx, "0123456789abcdef", envs)
	defer b.End()

	_, w := b.StartWrite(ctx, envs, 0)
	w.Results([]sink.Result{
		{Outcome: sink.Permanent, ErrorType: sink.ValidationError, Err: errors.New("amount must be positive")},
		sink.Ok,
	})
	w.End()

	dctx, d := b.StartDeadLetter(ctx, 0, "dlq.orders", sink.ValidationError)
	h := nats.Header{"Traceparent": {"00-stale"}, "x-dead-letter-reason": {"ValidationError"}}
	tracing.Inject(dctx, envs[0], h)
	d.End()

	m0 := b.Span(0)
	m0.Fail(sink.ValidationError, errors.New("amount must be positive"))
	m0.SetOutcome(tracing.OutcomeDeadLettered)
	m0.Term(nil)
	m0.End()

	m1 := b.Span(1)
	m1.SetOutcome(tracing.OutcomeCommitted)
	m1.Ack(nil)
	m1.End()
	return h
}

// checkFlow checks the spans of flow against docs/tracing.md.
func checkFlow(t *testing.T, spans []span, injected nats.Header) {
	t.Helper()
	if len(spans) != 4 {
		t.Fatalf("exported %d spans %v, want 4", len(spans), names(spans))
	}
	proc := byName(spans, "process orders.>")
	if len(proc) != 2 {
		t.Fatalf("process spans: %d, want 2 (%v)", len(proc), names(spans))
	}
	m0, m1 := proc[0], proc[1]
	if m0.Attrs["nats_sink.stream_sequence"] != int64(42) {
		m0, m1 = m1, m0
	}

	// The consume span continues the producer's trace.
	if m0.TraceID != producerTrace || m0.ParentSpanID != producerSpan {
		t.Errorf("message span trace/parent = %s/%s, want %s/%s", m0.TraceID, m0.ParentSpanID, producerTrace, producerSpan)
	}
	if m0.TraceState != "vendor=abc" {
		t.Errorf("message span tracestate = %q, want vendor=abc", m0.TraceState)
	}
	if m0.Kind != "consumer" {
		t.Errorf("message span kind = %s, want consumer", m0.Kind)
	}
	wantAttrs := map[string]any{
		"messaging.system":               "nats",
		"messaging.operation.type":       "process",
		"messaging.operation.name":       "process",
		"messaging.destination.name":     "orders.created",
		"messaging.destination.template": "orders.>",
		"messaging.consumer.group.name":  "orders-file",
		"messaging.message.id":           "O-1001",
		"messaging.message.body.size":    int64(8),
		"nats_sink.stream":               "ORDERS",
		"nats_sink.stream_sequence":      int64(42),
		"nats_sink.delivery_count":       int64(3),
		"nats_sink.sink":                 "postgres",
		"nats_sink.outcome":              "dead_lettered",
		"error.type":                     "ValidationError",
	}
	if diff := cmp.Diff(wantAttrs, m0.Attrs); diff != "" {
		t.Errorf("message span attributes (-want +got):\n%s", diff)
	}
	if !m0.StatusError || m0.StatusDesc != "amount must be positive" {
		t.Errorf("message span status = error %v %q, want error with the failure", m0.StatusError, m0.StatusDesc)
	}
	if diff := cmp.Diff([]event{{Name: "term", Attrs: map[string]any{}}}, m0.Events); diff != "" {
		t.Errorf("message span events (-want +got):\n%s", diff)
	}

	// A message without context starts its own trace.
	if m1.ParentSpanID != "" || m1.TraceID == producerTrace || m1.TraceID == "" {
		t.Errorf("context-less message span trace/parent = %s/%q, want a new root", m1.TraceID, m1.ParentSpanID)
	}
	if m1.Attrs["nats_sink.outcome"] != "committed" || m1.StatusError {
		t.Errorf("committed message span: outcome %v, error %v", m1.Attrs["nats_sink.outcome"], m1.StatusError)
	}
	if diff := cmp.Diff([]event{{Name: "ack", Attrs: map[string]any{}}}, m1.Events); diff != "" {
		t.Errorf("committed message span events (-want +got):\n%s", diff)
	}

	// The write span is a root linked to both message spans.
	w := one(t, spans, "write postgres")
	if w.ParentSpanID != "" || w.TraceID == producerTrace || w.TraceID == m1.TraceID || w.Kind != "internal" {
		t.Errorf("write span trace/parent/kind = %s/%q/%s, want a new internal root", w.TraceID, w.ParentSpanID, w.Kind)
	}
	wantLinks := []link{{TraceID: m0.TraceID, SpanID: m0.SpanID}, {TraceID: m1.TraceID, SpanID: m1.SpanID}}
	if diff := cmp.Diff(wantLinks, w.Links); diff != "" {
		t.Errorf("write span links (-want +got):\n%s", diff)
	}
	wantWrite := map[string]any{
		"messaging.batch.message_count": int64(2),
		"nats_sink.batch_id":            "0123456789abcdef",
		"nats_sink.bisection_depth":     int64(0),
		"nats_sink.failed_count":        int64(1),
		"error.type":                    "ValidationError",
	}
	if diff := cmp.Diff(wantWrite, w.Attrs); diff != "" {
		t.Errorf("write span attributes (-want +got):\n%s", diff)
	}
	if !w.StatusError || w.StatusDesc != "1 of 2 messages not committed: amount must be positive" {
		t.Errorf("write span status = %v %q", w.StatusError, w.StatusDesc)
	}

	// The DLQ publish is a child of the message span, and what it injects
	// names the DLQ span, so the dead letter's consumer continues the trace.
	d := one(t, spans, "publish dlq.orders")
	if d.TraceID != producerTrace || d.ParentSpanID != m0.SpanID || d.Kind != "producer" {
		t.Errorf("dlq span trace/parent/kind = %s/%s/%s, want %s/%s/producer", d.TraceID, d.ParentSpanID, d.Kind, producerTrace, m0.SpanID)
	}
	wantDLQ := map[string]any{
		"messaging.system":           "nats",
		"messaging.operation.type":   "send",
		"messaging.operation.name":   "publish",
		"messaging.destination.name": "dlq.orders",
		"nats_sink.error_type":       "ValidationError",
	}
	if diff := cmp.Diff(wantDLQ, d.Attrs); diff != "" {
		t.Errorf("dlq span attributes (-want +got):\n%s", diff)
	}
	wantHeader := nats.Header{
		"traceparent":          {"00-" + producerTrace + "-" + d.SpanID + "-01"},
		"tracestate":           {"vendor=abc"},
		"baggage":              {"tenant=acme"},
		"x-dead-letter-reason": {"ValidationError"},
	}
	if diff := cmp.Diff(wantHeader, injected); diff != "" {
		t.Errorf("DLQ headers (-want +got):\n%s", diff)
	}

	for _, s := range spans {
		if s.Resource["service.name"] != "orders-sink" || s.Resource["service.version"] != "1.2.3" ||
			len(fmt.Sprint(s.Resource["service.instance.id"])) != 36 || s.Resource["telemetry.sdk.language"] != "go" {
			t.Errorf("span %q resource = %v", s.Name, s.Resource)
		}
		for k, v := range s.Attrs {
			if strings.Contains(fmt.Sprint(v), "tenant=acme") || strings.Contains(fmt.Sprint(v), `"id"`) {
				t.Errorf("span %q attribute %s carries a header value or payload: %v", s.Name, k, v)
			}
		}
	}
}

// TestExporters proves the acceptance test on every exporter: a
// message published with a known traceparent yields a consume span with that
// trace id and parent, and correctly parented child spans.
func TestExporters(t *testing.T) {
	env := map[string]string{"OTLP_KEY": "s3cret-key"}
	t.Run("otlp-http", func(t *testing.T) {
		rcv := newHTTPReceiver(t)
		cfg := tracingConfig(tracing.ExporterOTLPHTTP, rcv.URL())
		cfg.ServiceName = "orders-sink"
		cfg.HeadersEnv = map[string]string{"X-Api-Key": "OTLP_KEY"}
		tr, shutdown := newTracer(t, cfg, options(env))
		h := flow(t, tr)
		shutdown()
		checkFlow(t, rcv.Spans(), h)
		for i, p := range rcv.paths {
			if p != "/v1/traces" || rcv.headers[i]["x-api-key"] != "s3cret-key" {
				t.Errorf("request %d: path %q, x-api-key %q; want /v1/traces with the headers_env value", i, p, rcv.headers[i]["x-api-key"])
			}
		}
	})
	t.Run("otlp-grpc", func(t *testing.T) {
		rcv := newGRPCReceiver(t)
		cfg := tracingConfig(tracing.ExporterOTLPGRPC, rcv.URL())
		cfg.ServiceName = "orders-sink"
		cfg.HeadersEnv = map[string]string{"X-Api-Key": "OTLP_KEY"}
		tr, shutdown := newTracer(t, cfg, options(env))
		h := flow(t, tr)
		shutdown()
		checkFlow(t, rcv.Spans(), h)
		for i, hdr := range rcv.headers {
			if hdr["x-api-key"] != "s3cret-key" {
				t.Errorf("request %d: x-api-key metadata %q, want the headers_env value", i, hdr["x-api-key"])
			}
		}
	})
	t.Run("stdout", func(t *testing.T) {
		cfg := tracingConfig(tracing.ExporterStdout, "")
		cfg.ServiceName = "orders-sink"
		tr, shutdown := newTracer(t, cfg, options(nil))
		h := flow(t, tr)
		checkFlow(t, shutdown(), h)
	})
}

// TestEndpointPath: an endpoint without a path posts to /v1/traces, one with
// a path posts there exactly, and a null endpoint follows
// OTEL_EXPORTER_OTLP_ENDPOINT.
func TestEndpointPath(t *testing.T) {
	for _, tt := range []struct {
		name, suffix, envEndpoint, want string
	}{
		{"no path", "", "", "/v1/traces"},
		{"root path", "/", "", "/v1/traces"},
		{"explicit path", "/otlp/traces", "", "/otlp/traces"},
		{"null endpoint uses OTEL_EXPORTER_OTLP_ENDPOINT", "", "base", "/v1/traces"},
		{"null endpoint uses OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "/custom", "traces", "/custom"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rcv := newHTTPReceiver(t)
			cfg := tracingConfig(tracing.ExporterOTLPHTTP, rcv.URL()+tt.suffix)
			switch tt.envEndpoint {
			case "base":
				cfg.Endpoint = nil
				t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL())
			case "traces":
				cfg.Endpoint = nil
				t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", rcv.URL()+tt.suffix)
			}
			tr, shutdown := newTracer(t, cfg, options(nil))
			_, s := tr.StartConsume(t.Context(), envelope(1, nil))
			s.End()
			shutdown()
			if diff := cmp.Diff([]string{tt.want}, rcv.paths); diff != "" {
				t.Errorf("request paths (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMalformedTraceparent: an invalid traceparent is ignored (a new root
// trace), never an error, and a span already in the caller's context is not
// taken as the parent either.
func TestMalformedTraceparent(t *testing.T) {
	callerTrace, _ := trace.TraceIDFromHex("11111111111111111111111111111111")
	callerSpan, _ := trace.SpanIDFromHex("2222222222222222")
	caller := trace.ContextWithSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: callerTrace, SpanID: callerSpan, TraceFlags: trace.FlagsSampled}))
	for _, tp := range []string{
		"",
		"garbage",
		"ff-" + producerTrace + "-" + producerSpan + "-01",                  // version ff is invalid
		"00-00000000000000000000000000000000-" + producerSpan + "-01",       // zero trace id
		"00-" + producerTrace + "-0000000000000000-01",                      // zero span id
		"00-" + strings.ToUpper(producerTrace) + "-" + producerSpan + "-01", // upper-case hex
		"00-" + producerTrace[:30] + "-" + producerSpan + "-01",             // short trace id
		"00-" + producerTrace + "-" + producerSpan + "-01-extra",            // version 00 has no extra fields
	} {
		t.Run(tp, func(t *testing.T) {
			tr, shutdown := newTracer(t, tracingConfig(tracing.ExporterStdout, ""), options(nil))
			h := nats.Header{"tracestate": {"vendor=abc"}}
			if tp != "" {
				h.Set("traceparent", tp)
			}
			env := envelope(7, h)
			ctx, s := tr.StartConsume(caller, env)
			dctx, _ := tr.StartConsume(ctx, env) // a second consume is a root too, not a child
			trace.SpanFromContext(dctx).End()
			s.End()
			spans := shutdown()
			if len(spans) != 2 {
				t.Fatalf("exported %d spans, want 2", len(spans))
			}
			for _, sp := range spans {
				if sp.ParentSpanID != "" || sp.TraceID == producerTrace || sp.TraceID == callerTrace.String() {
					t.Errorf("span trace/parent = %s/%q, want a new root trace", sp.TraceID, sp.ParentSpanID)
				}
				if sp.TraceState != "" {
					t.Errorf("tracestate %q kept without a valid traceparent", sp.TraceState)
				}
			}
		})
	}
}

// TestSampling: parent-based, with sample_ratio for roots; write spans of
// sampled messages are kept whatever the ratio.
func TestSampling(t *testing.T) {
	unsampled := "00-" + producerTrace + "-" + producerSpan + "-00"
	for _, tt := range []struct {
		name        string
		ratio       float64
		traceparent string
		want        []string // exported span names
	}{
		{"ratio 1, no parent", 1, "", []string{"process orders.>", "write postgres"}},
		{"ratio 0, no parent", 0, "", nil},
		{"ratio 0, sampled parent", 0, traceparent, []string{"process orders.>", "write postgres"}},
		{"ratio 1, unsampled parent", 1, unsampled, []string{"write postgres"}},
		{"ratio 0, unsampled parent", 0, unsampled, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tracingConfig(tracing.ExporterStdout, "")
			cfg.SampleRatio = tt.ratio
			tr, shutdown := newTracer(t, cfg, options(nil))
			h := nats.Header{}
			if tt.traceparent != "" {
				h.Set("traceparent", tt.traceparent)
			}
			envs := []*sink.Envelope{envelope(1, h)}
			b := tr.StartBatch(t.Context(), "b", envs)
			wctx, w := b.StartWrite(t.Context(), envs, 0)
			// Even unsampled, the context propagates: downstream keeps the
			// producer's trace id and its "not sampled" decision.
			got := tracing.Headers(wctx, envs[0])["traceparent"]
			if tt.traceparent != "" && (!strings.HasPrefix(got, "00-"+producerTrace+"-") || got[len(got)-2:] != tt.traceparent[len(tt.traceparent)-2:]) {
				t.Errorf("propagated traceparent %q does not continue %q", got, tt.traceparent)
			}
			w.End()
			b.End()
			if diff := cmp.Diff(tt.want, names(shutdown())); diff != "" {
				t.Errorf("exported spans (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRatioSamplesRoughly: sample_ratio 0.5 keeps some root traces and
// drops others (trace-id based, so the exact count is random).
func TestRatioSamplesRoughly(t *testing.T) {
	cfg := tracingConfig(tracing.ExporterStdout, "")
	cfg.SampleRatio = 0.5
	tr, shutdown := newTracer(t, cfg, options(nil))
	for i := range 400 {
		_, s := tr.StartConsume(t.Context(), envelope(uint64(i+1), nil))
		s.End()
	}
	// P(n outside 100..300) for Binomial(400, 0.5) is below 1e-20.
	if n := len(shutdown()); n < 100 || n > 300 {
		t.Errorf("ratio 0.5 exported %d of 400 root spans", n)
	}
}

// TestNilTracer: tracing disabled costs nothing and breaks nothing; trace
// headers are copied verbatim so context still flows end to end.
func TestNilTracer(t *testing.T) {
	tr, err := tracing.New(t.Context(), &config.Tracing{Exporter: "otlp-http"}, tracing.Options{})
	if tr != nil || err != nil {
		t.Fatalf("New(disabled) = %v, %v; want nil, nil", tr, err)
	}
	if tr, err := tracing.New(t.Context(), nil, tracing.Options{}); tr != nil || err != nil {
		t.Fatalf("New(nil) = %v, %v; want nil, nil", tr, err)
	}
	ctx := t.Context()
	env := envelope(1, producerHeaders())
	cctx, s := tr.StartConsume(ctx, env)
	if cctx != ctx {
		t.Error("StartConsume on a nil Tracer changed the context")
	}
	s.SetOutcome(tracing.OutcomeNak)
	s.Fail("x", errors.New("y"))
	s.Ack(nil)
	s.Term(errors.New("t"))
	s.Nak(time.Second, nil)
	s.Results([]sink.Result{{Outcome: sink.Temporary}})
	s.End()
	if s.IsRecording() || s.SpanContext().IsValid() {
		t.Error("zero Span claims to record")
	}
	b := tr.StartBatch(ctx, "b", []*sink.Envelope{env})
	if b != nil {
		t.Fatal("StartBatch on a nil Tracer returned a batch")
	}
	wctx, w := b.StartWrite(ctx, []*sink.Envelope{env}, 0)
	w.End()
	dctx, d := b.StartDeadLetter(wctx, 0, "dlq", "x")
	d.End()
	b.Span(0).End()
	b.End()
	if got := b.Context(ctx, 0); got != ctx {
		t.Error("Batch.Context on a nil Batch changed the context")
	}
	cl, c := tracing.StartClient(wctx, env, "POST", trace.SpanKindClient)
	c.End()
	if cl != wctx {
		t.Error("StartClient without tracing changed the context")
	}
	if err := tr.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown on a nil Tracer: %v", err)
	}
	if tr.TracerProvider() == nil {
		t.Error("TracerProvider of a nil Tracer is nil")
	}

	h := nats.Header{"TraceParent": {"00-stale"}, "BAGGAGE": {"old=1"}, "Nats-Msg-Id": {"dlq-1"}}
	tracing.Inject(dctx, env, h)
	want := nats.Header{
		"traceparent": {traceparent},
		"tracestate":  {"vendor=abc"},
		"baggage":     {"tenant=acme"},
		"Nats-Msg-Id": {"dlq-1"},
	}
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("Inject with tracing disabled (-want +got):\n%s", diff)
	}
	h = nats.Header{"Traceparent": {"00-stale"}}
	tracing.Inject(ctx, envelope(2, nil), h)
	if len(h) != 0 {
		t.Errorf("Inject for a message without trace headers left %v, want none", h)
	}
}

// TestClientSpans: a sink's client span is a child of the message span, and
// what the sink injects names the client span, or the message span when the
// sink started none.
func TestClientSpans(t *testing.T) {
	tr, shutdown := newTracer(t, tracingConfig(tracing.ExporterStdout, ""), options(nil))
	envs := []*sink.Envelope{envelope(1, producerHeaders()), envelope(2, nil)}
	b := tr.StartBatch(t.Context(), "b", envs)
	wctx, w := b.StartWrite(t.Context(), envs, 1)

	plain := tracing.Headers(wctx, envs[0])
	cctx, c := tracing.StartClient(wctx, envs[0], "POST", trace.SpanKindClient, attribute.String("http.request.method", "POST"))
	withClient := tracing.Headers(cctx, envs[0])
	c.End()
	other := tracing.Headers(wctx, envs[1])
	w.End()
	b.End()

	spans := shutdown()
	var m0, m1 span
	for _, s := range byName(spans, "process orders.>") {
		if s.Attrs["nats_sink.stream_sequence"] == int64(1) {
			m0 = s
		} else {
			m1 = s
		}
	}
	cl := one(t, spans, "POST")
	if cl.ParentSpanID != m0.SpanID || cl.TraceID != producerTrace || cl.Kind != "client" || cl.Attrs["http.request.method"] != "POST" {
		t.Errorf("client span trace/parent/kind/attrs = %s/%s/%s/%v, want child of %s", cl.TraceID, cl.ParentSpanID, cl.Kind, cl.Attrs, m0.SpanID)
	}
	if w := one(t, spans, "write postgres"); w.Attrs["nats_sink.bisection_depth"] != int64(1) {
		t.Errorf("write span depth = %v, want 1", w.Attrs["nats_sink.bisection_depth"])
	}
	for _, tt := range []struct {
		name string
		got  map[string]string
		want map[string]string
	}{
		{"write context, no client span", plain, map[string]string{
			"traceparent": "00-" + producerTrace + "-" + m0.SpanID + "-01", "tracestate": "vendor=abc", "baggage": "tenant=acme"}},
		{"client span", withClient, map[string]string{
			"traceparent": "00-" + producerTrace + "-" + cl.SpanID + "-01", "tracestate": "vendor=abc", "baggage": "tenant=acme"}},
		{"message without producer context", other, map[string]string{
			"traceparent": "00-" + m1.TraceID + "-" + m1.SpanID + "-01"}},
	} {
		if diff := cmp.Diff(tt.want, tt.got); diff != "" {
			t.Errorf("%s: Headers (-want +got):\n%s", tt.name, diff)
		}
	}
}

// TestWriteSpanLinkLimit: a write span links at most 128 message spans.
func TestWriteSpanLinkLimit(t *testing.T) {
	tr, shutdown := newTracer(t, tracingConfig(tracing.ExporterStdout, ""), options(nil))
	envs := make([]*sink.Envelope, 200)
	for i := range envs {
		envs[i] = envelope(uint64(i+1), nil)
	}
	b := tr.StartBatch(t.Context(), "b", envs)
	_, w := b.StartWrite(t.Context(), envs, 0)
	w.End()
	b.End()
	ws := one(t, shutdown(), "write postgres")
	if len(ws.Links) != 128 || ws.Attrs["messaging.batch.message_count"] != int64(200) {
		t.Errorf("write span: %d links, count %v; want 128 links, count 200", len(ws.Links), ws.Attrs["messaging.batch.message_count"])
	}
}

// TestEvents: NAK carries its delay; a failed ACK is marked on its event.
func TestEvents(t *testing.T) {
	tr, shutdown := newTracer(t, tracingConfig(tracing.ExporterStdout, ""), options(nil))
	_, s := tr.StartConsume(t.Context(), envelope(1, nil))
	s.Ack(errors.New("nats: connection closed"))
	s.Nak(1500*time.Millisecond, nil)
	s.SetOutcome(tracing.OutcomeNak)
	s.End()
	got := one(t, shutdown(), "process orders.>").Events
	want := []event{
		{Name: "ack", Attrs: map[string]any{"error.type": "ack_failed", "error.message": "nats: connection closed"}},
		{Name: "nak", Attrs: map[string]any{"nats_sink.delay_ms": int64(1500)}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestResource: OTEL_RESOURCE_ATTRIBUTES adds attributes; neither it nor
// OTEL_SERVICE_NAME overrides the configured service name.
func TestResource(t *testing.T) {
	cfg := tracingConfig(tracing.ExporterStdout, "")
	t.Setenv("OTEL_SERVICE_NAME", "from-env")
	tr, shutdown := newTracer(t, cfg, options(map[string]string{
		"OTEL_SERVICE_NAME":        "from-env",
		"OTEL_RESOURCE_ATTRIBUTES": "k8s.pod.name=sink-0,service.name=other,deployment.environment.name=prod%20eu, bad",
	}))
	_, s := tr.StartConsume(t.Context(), envelope(1, nil))
	s.End()
	res := one(t, shutdown(), "process orders.>").Resource
	for k, want := range map[string]any{
		"service.name":                "nats-sink",
		"service.version":             "1.2.3",
		"k8s.pod.name":                "sink-0",
		"deployment.environment.name": "prod eu",
	} {
		if res[k] != want {
			t.Errorf("resource %s = %v, want %v", k, res[k], want)
		}
	}
}

// TestNewErrors: problems New finds name the configuration key and never
// print secret values.
func TestNewErrors(t *testing.T) {
	withHeaders := tracingConfig(tracing.ExporterOTLPHTTP, "https://collector.example:4318")
	withHeaders.HeadersEnv = map[string]string{"X-Token": "MISSING_TOKEN", "Authorization": "OTLP_AUTH", "X-Other": "ALSO_MISSING"}
	grpcPath := tracingConfig(tracing.ExporterOTLPGRPC, "http://collector:4317/v1/traces")
	query := tracingConfig(tracing.ExporterOTLPHTTP, "http://collector:4318/v1/traces?x=1")
	for _, tt := range []struct {
		name string
		cfg  *config.Tracing
		want string
	}{
		{"missing header variables", withHeaders, "2 problems in \n  tracing.headers_env.X-Other: environment variable ALSO_MISSING is not set\n" +
			"  tracing.headers_env.X-Token: environment variable MISSING_TOKEN is not set"},
		{"grpc endpoint with a path", grpcPath, `tracing.endpoint: must not have a path with exporter "otlp-grpc" (got "/v1/traces")`},
		{"endpoint with a query", query, "tracing.endpoint: must not have a query or fragment"},
		{"unknown exporter", tracingConfig("zipkin", ""), `tracing.exporter: must be one of otlp-http, otlp-grpc, stdout (got "zipkin")`},
		{"endpoint not a URL", tracingConfig(tracing.ExporterOTLPHTTP, "collector:4318"), "tracing.endpoint: must be an http:// or https:// URL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := tracing.New(t.Context(), tt.cfg, options(map[string]string{"OTLP_AUTH": "Bearer s3cret"}))
			if tr != nil {
				_ = tr.Shutdown(t.Context())
			}
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("New = %v, want a *config.Error", err)
			}
			if err.Error() != tt.want {
				t.Errorf("New error = %q, want %q", err.Error(), tt.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error leaks a secret: %v", err)
			}
		})
	}
}

// TestExportFailureIsLogged: a collector that refuses the export produces a
// structured log record, not a line on stderr, and no error for delivery.
func TestExportFailureIsLogged(t *testing.T) {
	rcv := newHTTPReceiver(t)
	rcv.status = 400
	var logs bytes.Buffer
	o := options(nil)
	o.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	tr, shutdown := newTracer(t, tracingConfig(tracing.ExporterOTLPHTTP, rcv.URL()), o)
	_, s := tr.StartConsume(t.Context(), envelope(1, nil))
	s.End()
	shutdown()
	got := logs.String()
	for _, want := range []string{`"msg":"trace export failed"`, `"component":"tracing"`, `"count":1`, `"error_type":"TraceExportError"`} {
		if !strings.Contains(got, want) {
			t.Errorf("log %q lacks %s", got, want)
		}
	}
}
