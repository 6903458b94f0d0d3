package tracing

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/nats-sinks/nats-sink/sink"
)

// Outcome is a message span's nats_sink.outcome (observability.md §4).
type Outcome string

// The outcomes of one message.
const (
	OutcomeCommitted    Outcome = "committed"
	OutcomeDuplicate    Outcome = "duplicate"
	OutcomeDeadLettered Outcome = "dead_lettered"
	OutcomeNak          Outcome = "nak"
	OutcomeLeftUnacked  Outcome = "left_unacked"
)

// maxLinks bounds a write span's links (observability.md §4: ≤ 128).
const maxLinks = 128

// maxDescription bounds a span status description in bytes.
const maxDescription = 1024

// A Span is one span started by this package. The zero Span (tracing
// disabled) does nothing. Spans are safe for concurrent use.
type Span struct{ s trace.Span }

// SpanContext returns the span's identity; invalid for the zero Span.
func (s Span) SpanContext() trace.SpanContext {
	if s.s == nil {
		return trace.SpanContext{}
	}
	return s.s.SpanContext()
}

// IsRecording reports whether the span is sampled and not yet ended.
func (s Span) IsRecording() bool { return s.s != nil && s.s.IsRecording() }

// End ends the span. Later calls do nothing.
func (s Span) End() {
	if s.s != nil {
		s.s.End()
	}
}

// SetAttributes sets attributes on the span: a sink client span's response
// attributes (status code, partition), known only when the request ends.
// Never pass payloads, header values or secrets.
func (s Span) SetAttributes(attrs ...attribute.KeyValue) {
	if s.s != nil {
		s.s.SetAttributes(attrs...)
	}
}

// SetOutcome sets nats_sink.outcome on a message span.
func (s Span) SetOutcome(o Outcome) {
	if s.s != nil {
		s.s.SetAttributes(attribute.String("nats_sink.outcome", string(o)))
	}
}

// Fail marks the span failed: status Error with the error's text, and
// error.type set to errorType (a sink error type such as
// PermanentSinkError, or the runner's, such as DLQPublishError).
func (s Span) Fail(errorType string, err error) {
	if s.s == nil {
		return
	}
	desc := errorType
	if err != nil {
		desc = err.Error()
	}
	s.s.SetStatus(codes.Error, truncate(desc, maxDescription))
	if errorType != "" {
		s.s.SetAttributes(attribute.String("error.type", errorType))
	}
}

// Ack records the "ack" event on a message span; err is the ACK's failure,
// if any.
func (s Span) Ack(err error) { s.event("ack", err) }

// Term records the "term" event on a message span.
func (s Span) Term(err error) { s.event("term", err) }

// Nak records the "nak" event with nats_sink.delay_ms on a message span.
func (s Span) Nak(delay time.Duration, err error) {
	s.event("nak", err, attribute.Int64("nats_sink.delay_ms", delay.Milliseconds()))
}

func (s Span) event(name string, err error, attrs ...attribute.KeyValue) {
	if s.s == nil {
		return
	}
	if err != nil {
		// The error text of a failed ACK comes from the client and names no
		// header or payload.
		attrs = append(attrs, attribute.String("error.type", name+"_failed"),
			attribute.String("error.message", truncate(err.Error(), maxDescription)))
	}
	s.s.AddEvent(name, trace.WithAttributes(attrs...))
}

// Results records a write span's per-message results: status Error when any
// message was not committed, with nats_sink.failed_count and the first
// failure's error.type.
func (s Span) Results(res []sink.Result) {
	if s.s == nil {
		return
	}
	failed, first := 0, -1
	for i, r := range res {
		if !r.Outcome.Acked() {
			failed++
			if first < 0 {
				first = i
			}
		}
	}
	if failed == 0 {
		return
	}
	r := res[first]
	errType := r.ErrorType
	if errType == "" {
		errType = r.Outcome.String()
	}
	desc := fmt.Sprintf("%d of %d messages not committed", failed, len(res))
	if r.Err != nil {
		desc += ": " + r.Err.Error()
	}
	s.s.SetAttributes(attribute.Int("nats_sink.failed_count", failed), attribute.String("error.type", errType))
	s.s.SetStatus(codes.Error, truncate(desc, maxDescription))
}

// StartConsume starts env's CONSUMER span "process <nats.subject>" as a
// child of the producer's span, extracted from env's traceparent,
// tracestate and baggage headers whatever their case. Without a valid
// traceparent the span starts a new trace, ignoring any span already in
// ctx. The returned context carries the span and the message's baggage.
func (t *Tracer) StartConsume(ctx context.Context, env *sink.Envelope) (context.Context, Span) {
	if t == nil || env == nil {
		return ctx, Span{}
	}
	ctx = extract(ctx, env.Headers)
	ctx, s := t.tracer.Start(ctx, t.processName(env), trace.WithSpanKind(trace.SpanKindConsumer))
	if s.IsRecording() {
		// Set after the sampling decision (the sampler ignores attributes):
		// unsampled messages, the common case at low ratios, skip building
		// them.
		s.SetAttributes(t.consumeAttrs(env)...)
	}
	return ctx, Span{s}
}

func (t *Tracer) processName(env *sink.Envelope) string {
	if t.process != "" {
		return t.process
	}
	return "process " + env.Subject
}

func (t *Tracer) consumeAttrs(env *sink.Envelope) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 13)
	attrs = append(attrs,
		attribute.String("messaging.system", "nats"),
		attribute.String("messaging.operation.type", "process"),
		attribute.String("messaging.operation.name", "process"),
		attribute.String("messaging.destination.name", env.Subject),
	)
	if t.opts.Subject != "" {
		attrs = append(attrs, attribute.String("messaging.destination.template", t.opts.Subject))
	}
	consumer := env.Consumer
	if consumer == "" {
		consumer = t.opts.Consumer
	}
	if consumer != "" {
		attrs = append(attrs, attribute.String("messaging.consumer.group.name", consumer))
	}
	if env.MessageID != "" {
		attrs = append(attrs, attribute.String("messaging.message.id", env.MessageID))
	}
	if env.Payload.OriginalSize >= 0 {
		// The producer's payload size: for a headers-only consumer the body
		// was never delivered, but Nats-Msg-Size still says how big it was.
		attrs = append(attrs, attribute.Int64("messaging.message.body.size", env.Payload.OriginalSize))
	}
	if env.Stream != "" {
		attrs = append(attrs, attribute.String("nats_sink.stream", env.Stream))
	}
	if env.StreamSequence > 0 {
		attrs = append(attrs, attribute.Int64("nats_sink.stream_sequence", int64(min(env.StreamSequence, 1<<63-1))))
	}
	if env.DeliveryCount > 0 {
		attrs = append(attrs, attribute.Int64("nats_sink.delivery_count", int64(min(env.DeliveryCount, 1<<63-1))))
	}
	if t.opts.Sink != "" {
		attrs = append(attrs, attribute.String("nats_sink.sink", t.opts.Sink))
	}
	return attrs
}

// A Batch holds the message spans of one fetched batch, so that write, DLQ
// and sink client spans can find the span of each envelope. A nil *Batch
// (tracing disabled) does nothing. Its methods are safe for concurrent use.
type Batch struct {
	t     *Tracer
	id    string
	index map[*sink.Envelope]int
	spans []Span
	bags  []baggage.Baggage
}

// StartBatch starts one message span per envelope (StartConsume). id is the
// batch_id (nats_sink.batch_id of its write spans). It returns nil when t is
// nil.
func (t *Tracer) StartBatch(ctx context.Context, id string, envs []*sink.Envelope) *Batch {
	if t == nil {
		return nil
	}
	b := &Batch{
		t:     t,
		id:    id,
		index: make(map[*sink.Envelope]int, len(envs)),
		spans: make([]Span, len(envs)),
		bags:  make([]baggage.Baggage, len(envs)),
	}
	for i, env := range envs {
		if env == nil {
			continue
		}
		mctx, s := t.StartConsume(ctx, env)
		b.index[env] = i
		b.spans[i] = s
		b.bags[i] = baggage.FromContext(mctx)
	}
	return b
}

// Span returns the message span of envelope i (the zero Span when b is nil).
func (b *Batch) Span(i int) Span {
	if b == nil || i < 0 || i >= len(b.spans) {
		return Span{}
	}
	return b.spans[i]
}

// Context returns ctx carrying envelope i's message span and baggage: the
// parent for any span about that message alone. ctx's deadline and values
// are kept. It returns ctx when b is nil.
func (b *Batch) Context(ctx context.Context, i int) context.Context {
	if b == nil || i < 0 || i >= len(b.spans) || b.spans[i].s == nil {
		return ctx
	}
	ctx = trace.ContextWithSpan(ctx, b.spans[i].s)
	return baggage.ContextWithBaggage(ctx, b.bags[i])
}

// End ends every message span still open. The runner defers it so that a
// panic cannot leave spans unfinished; a normally settled message's span
// has already ended with its ACK, TERM or NAK and is not touched.
func (b *Batch) End() {
	if b == nil {
		return
	}
	for _, s := range b.spans {
		s.End()
	}
}

// StartWrite starts the INTERNAL span "write <sink type>" of one WriteBatch
// call over set: a new root (the set has many parents) linked to the message
// span of each envelope, with messaging.batch.message_count,
// nats_sink.batch_id and nats_sink.bisection_depth (0 for the first call,
// n for a call made by the n-th level of isolation's bisection). Pass the
// returned context to WriteBatch: StartClient and Headers use it to find
// each envelope's message span.
func (b *Batch) StartWrite(ctx context.Context, set []*sink.Envelope, depth int) (context.Context, Span) {
	if b == nil {
		return ctx, Span{}
	}
	name := "write"
	if b.t.opts.Sink != "" {
		name += " " + b.t.opts.Sink
	}
	return b.startWrite(ctx, set, depth, name)
}

// startWrite starts a write span named name; see StartWrite.
func (b *Batch) startWrite(ctx context.Context, set []*sink.Envelope, depth int, name string, extra ...attribute.KeyValue) (context.Context, Span) {
	links := make([]trace.Link, 0, min(len(set), maxLinks))
	for _, e := range set {
		if len(links) == maxLinks {
			break
		}
		if i, ok := b.index[e]; ok {
			if sc := b.spans[i].SpanContext(); sc.IsValid() {
				links = append(links, trace.Link{SpanContext: sc})
			}
		}
	}
	attrs := append([]attribute.KeyValue{
		attribute.Int("messaging.batch.message_count", len(set)),
		attribute.String("nats_sink.batch_id", b.id),
		attribute.Int("nats_sink.bisection_depth", depth),
	}, extra...)
	ctx, s := b.t.tracer.Start(ctx, name, trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithLinks(links...), trace.WithAttributes(attrs...))
	return context.WithValue(ctx, writeKey{}, &writeScope{b: b, span: s.SpanContext()}), Span{s}
}

// StartDeadLetter starts the PRODUCER span "publish <dead_letter.subject>"
// for envelope i as a child of its message span; it lasts until the PubAck.
// Inject the returned context into the DLQ message's headers.
func (b *Batch) StartDeadLetter(ctx context.Context, i int, subject, errorType string) (context.Context, Span) {
	if b == nil || i < 0 || i >= len(b.spans) || b.spans[i].s == nil {
		return ctx, Span{}
	}
	ctx, s := b.t.tracer.Start(b.Context(ctx, i), "publish "+subject, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			attribute.String("messaging.system", "nats"),
			attribute.String("messaging.operation.type", "send"),
			attribute.String("messaging.operation.name", "publish"),
			attribute.String("messaging.destination.name", subject),
			attribute.String("nats_sink.error_type", errorType),
		))
	return ctx, Span{s}
}

// writeKey is the context key of the write scope StartWrite sets up.
type writeKey struct{}

// writeScope lets code that only has the write context and an envelope (a
// sink) find that envelope's message span.
type writeScope struct {
	b    *Batch
	span trace.SpanContext // the write span itself
}

// messageContext returns ctx with env's message span when ctx is a write
// context from StartWrite whose current span is still the write span; else
// ctx. A span the sink started itself stays current.
func messageContext(ctx context.Context, env *sink.Envelope) context.Context {
	ws, _ := ctx.Value(writeKey{}).(*writeScope)
	if ws == nil || !trace.SpanContextFromContext(ctx).Equal(ws.span) {
		return ctx
	}
	i, ok := ws.b.index[env]
	if !ok {
		return ctx
	}
	return ws.b.Context(ctx, i)
}

// StartClient starts a sink's client span for env (an HTTP request, a Kafka
// produce, a NATS republish: kind CLIENT or PRODUCER) as a child of env's
// message span, found through the write context WriteBatch received. Outside
// a write context it is a child of ctx's current span, using that span's
// provider; without one (tracing disabled) it returns ctx and the zero
// Span. Inject or Headers with the returned context then carry this span
// downstream.
func StartClient(ctx context.Context, env *sink.Envelope, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, Span) {
	pctx, tr, ok := clientParent(ctx, env)
	if !ok {
		return ctx, Span{}
	}
	ctx, s := tr.Start(pctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	return ctx, Span{s}
}

// clientParent returns the parent context and tracer of a client span for
// env (see StartClient), and false when there is no span to be a child of.
func clientParent(ctx context.Context, env *sink.Envelope) (context.Context, trace.Tracer, bool) {
	pctx := messageContext(ctx, env)
	parent := trace.SpanFromContext(pctx)
	if !parent.SpanContext().IsValid() {
		return ctx, nil, false
	}
	tr := parent.TracerProvider().Tracer(ScopeName)
	if ws, _ := ctx.Value(writeKey{}).(*writeScope); ws != nil {
		tr = ws.b.t.tracer
	}
	return pctx, tr, true
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
