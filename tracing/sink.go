package tracing

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/nats-sinks/nats-sink/sink"
)

// ForSinks returns the sink.Tracer a host hands sinks in sink.Deps: client
// and producer spans through StartClient, downstream trace headers through
// Headers, with the same spans, names and attributes a sink would get
// calling them itself. It holds no state: the spans' tracer comes from the
// write context WriteBatch receives (Batch.StartWrite), so one value serves
// every sink, and with tracing disabled it starts nothing and passes the
// producer's trace headers through.
func ForSinks() sink.Tracer { return sinkTracer{} }

type sinkTracer struct{}

func (sinkTracer) StartClient(ctx context.Context, e *sink.Envelope, name string, producer bool, attrs ...sink.Attr) (context.Context, sink.Span) {
	pctx, tr, ok := clientParent(ctx, e)
	if !ok {
		return ctx, noSpan{}
	}
	kind := trace.SpanKindClient
	if producer {
		kind = trace.SpanKindProducer
	}
	ctx, s := tr.Start(pctx, name, trace.WithSpanKind(kind), trace.WithAttributes(keyValues(attrs)...))
	return ctx, sinkSpan{Span{s}}
}

func (sinkTracer) TraceHeaders(ctx context.Context, e *sink.Envelope) map[string]string {
	return Headers(ctx, e)
}

// StartWrite starts a "write" span (name, for example "write file") for a
// call a sink makes to another sink on behalf of set: the fanout sink's
// per-target writes. It is linked to each envelope's message span like the
// runner's own write span, carries attrs, and returns a write context, so
// the inner sink's client spans still find their message spans. Outside a
// write context (tracing disabled) it returns ctx and a span that does
// nothing.
func (sinkTracer) StartWrite(ctx context.Context, set []*sink.Envelope, name string, depth int, attrs ...sink.Attr) (context.Context, sink.Span) {
	ws, _ := ctx.Value(writeKey{}).(*writeScope)
	if ws == nil {
		return ctx, noSpan{}
	}
	ctx, s := ws.b.startWrite(ctx, set, depth, name, keyValues(attrs)...)
	return ctx, sinkSpan{s}
}

// MessageAttributes adds attrs to e's message span, found through the write
// context ctx; outside one it does nothing.
func (sinkTracer) MessageAttributes(ctx context.Context, e *sink.Envelope, attrs ...sink.Attr) {
	ws, _ := ctx.Value(writeKey{}).(*writeScope)
	if ws == nil {
		return
	}
	if i, ok := ws.b.index[e]; ok {
		if s := ws.b.spans[i]; s.IsRecording() {
			s.SetAttributes(keyValues(attrs)...)
		}
	}
}

// sinkSpan is a Span as a sink sees it.
type sinkSpan struct{ s Span }

func (s sinkSpan) SetAttributes(attrs ...sink.Attr) {
	if s.s.IsRecording() {
		s.s.SetAttributes(keyValues(attrs)...)
	}
}

func (s sinkSpan) Fail(errorType string, err error) { s.s.Fail(errorType, err) }
func (s sinkSpan) End()                             { s.s.End() }

// noSpan is the span of a call made without tracing; being empty, it costs
// no allocation.
type noSpan struct{}

func (noSpan) SetAttributes(...sink.Attr) {}
func (noSpan) Fail(string, error)         {}
func (noSpan) End()                       {}

// keyValues converts sink attributes to OpenTelemetry's, keeping the value
// types (an int is an INT64 attribute, as attribute.Int makes it).
func keyValues(attrs []sink.Attr) []attribute.KeyValue {
	if len(attrs) == 0 {
		return nil
	}
	out := make([]attribute.KeyValue, len(attrs))
	for i, a := range attrs {
		switch v := a.Value.(type) {
		case string:
			out[i] = attribute.String(a.Key, v)
		case bool:
			out[i] = attribute.Bool(a.Key, v)
		case int:
			out[i] = attribute.Int(a.Key, v)
		case int64:
			out[i] = attribute.Int64(a.Key, v)
		case float64:
			out[i] = attribute.Float64(a.Key, v)
		case []string:
			out[i] = attribute.StringSlice(a.Key, v)
		default:
			out[i] = attribute.String(a.Key, fmt.Sprint(v))
		}
	}
	return out
}
