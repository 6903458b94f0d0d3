package tracing

import (
	"context"
	"strings"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/nats-sinks/nats-sink/sink"
)

// The W3C header names, lower case as the W3C specifications write them.
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
	HeaderBaggage     = "baggage"
)

// traceHeaders lists the three headers Inject and Headers carry.
var traceHeaders = [...]string{HeaderTraceparent, HeaderTracestate, HeaderBaggage}

// propagator reads and writes W3C Trace Context and Baggage. It is a
// stateless value of this package, not OpenTelemetry's global propagator.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// headerCarrier reads a normalised header map ignoring the case of names:
// NATS headers are case-sensitive on the wire and producers write
// "Traceparent" as often as "traceparent".
type headerCarrier sink.Headers

func (h headerCarrier) Get(key string) string {
	v, _ := sink.Headers(h).Get(key)
	return v
}

func (headerCarrier) Set(string, string) {}

func (h headerCarrier) Keys() []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	return keys
}

// extract returns ctx carrying the producer's span context and baggage from
// h, and nothing else: any span or baggage already in ctx is dropped, so an
// invalid traceparent yields a new root rather than a child of the caller.
func extract(ctx context.Context, h sink.Headers) context.Context {
	ctx = trace.ContextWithSpanContext(ctx, trace.SpanContext{})
	ctx = baggage.ContextWithoutBaggage(ctx)
	return propagator.Extract(ctx, headerCarrier(h))
}

// Headers returns the trace headers to send downstream for env, keyed by
// their lower-case names (docs/tracing.md):
//
//   - when ctx carries a valid span (a client or DLQ span, or the message
//     span when ctx is WriteBatch's write context), the traceparent and
//     tracestate of that span and the message's baggage;
//   - otherwise (tracing disabled) env's own traceparent, tracestate and
//     baggage, copied verbatim when present, so context still flows end to
//     end.
func Headers(ctx context.Context, env *sink.Envelope) map[string]string {
	ctx = messageContext(ctx, env)
	out := make(map[string]string, len(traceHeaders))
	if trace.SpanContextFromContext(ctx).IsValid() {
		propagator.Inject(ctx, propagation.MapCarrier(out))
		return out
	}
	if env == nil {
		return out
	}
	for _, name := range traceHeaders {
		if v, ok := env.Headers.Get(name); ok {
			out[name] = v
		}
	}
	return out
}

// Inject writes Headers(ctx, env) into h, first removing every
// traceparent, tracestate and baggage header h already has in any case, so
// a stale or differently-cased copy never travels next to the new one.
func Inject(ctx context.Context, env *sink.Envelope, h nats.Header) {
	for k := range h {
		for _, name := range traceHeaders {
			if strings.EqualFold(k, name) {
				delete(h, k)
			}
		}
	}
	for k, v := range Headers(ctx, env) {
		h[k] = []string{v}
	}
}
