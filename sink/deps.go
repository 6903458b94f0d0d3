package sink

import (
	"context"
	"log/slog"
	"os"
	"time"
)

// Deps is everything a sink gets from its host, passed to Opener.Open. The
// host (the pipeline, or a program using the runner directly) fills what it
// has; the zero Deps is valid: the process environment, a discarding logger,
// no metrics, no spans, no source information. Sinks read it through its
// methods (LookupEnv, Log, Meter, Tracing), which supply those defaults.
//
// Deps is how a sink stays independent of the application: it imports this
// package, its own driver and leaf helpers, never the configuration loader,
// the metrics registry or the tracing SDK. The pipeline fills it from the
// configuration's other sections (metrics.namespace, tracing, nats,
// delivery.shutdown_timeout_ms).
type Deps struct {
	// Env looks up environment variables for *_env keys; nil means
	// os.LookupEnv. Sinks read secrets at Open, never while decoding.
	Env func(name string) (value string, ok bool)
	// Logger receives the sink's own log lines; nil discards them. It never
	// gets payloads, header values or secrets.
	Logger *slog.Logger
	// Metrics registers the sink's own metrics; nil means none.
	Metrics Metrics
	// Tracer starts client spans and renders trace-context headers; nil means
	// no spans (trace headers the producer sent still travel, see Tracer).
	Tracer Tracer
	// Source describes what the host consumes, for sinks that must avoid
	// loops or may share the host's connection.
	Source Source
	// DrainTimeout is the host's bound for finishing in-flight writes at
	// shutdown; 0 means unknown. Sinks that clean up leftovers of other
	// processes use it to tell a live writer's files from abandoned ones.
	DrainTimeout time.Duration
}

// LookupEnv looks name up through d.Env, or the process environment when
// d.Env is nil.
func (d Deps) LookupEnv(name string) (string, bool) {
	if d.Env == nil {
		return os.LookupEnv(name)
	}
	return d.Env(name)
}

// Log returns d.Logger, or a logger that discards everything.
func (d Deps) Log() *slog.Logger {
	if d.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return d.Logger
}

// Meter returns d.Metrics, or a Metrics whose instruments do nothing, so a
// sink can register its metrics without checking for nil.
func (d Deps) Meter() Metrics {
	if d.Metrics == nil {
		return nopMetrics{}
	}
	return d.Metrics
}

// Tracing returns d.Tracer, or a Tracer that starts no spans and passes the
// envelope's own trace-context headers through unchanged.
func (d Deps) Tracing() Tracer {
	if d.Tracer == nil {
		return passThroughTracer{}
	}
	return d.Tracer
}

// Source describes the JetStream source the host consumes.
type Source struct {
	Stream string
	// FilterSubjects are the consumer's filter subjects (at least one when
	// known).
	FilterSubjects []string
	// Domain and APIPrefix are the source's JetStream domain and API prefix;
	// "" = none.
	Domain    string
	APIPrefix string
	// Conn returns the host's NATS connection, a *nats.Conn of
	// github.com/nats-io/nats.go, for sinks that may publish over it; the
	// host connects when it is first asked, so a sink that does not call it
	// does not make the host connect before the sink has opened. It returns
	// nil, nil when the host has no connection, and the host's connect
	// error, which the sink returns as it is. Nil means no connection. Read
	// it through Connection. The result is typed any so that this package
	// imports only the standard library.
	Conn func() (any, error)
}

// Connection returns the host's NATS connection through s.Conn: nil, nil
// when there is none.
func (s Source) Connection() (any, error) {
	if s.Conn == nil {
		return nil, nil
	}
	return s.Conn()
}

// Metrics registers a sink's metrics with the host. Names are given without
// the host's namespace ("http_request_seconds"); the host prefixes them.
// Registering a name twice returns the instrument already registered under
// it, so several sinks of one type share one series. An error means the name
// clashes with a metric of another kind or with the host's own metrics; the
// instrument returned with it is a working no-op, so that a sink may ignore
// the error (a metric must never stop data from moving). Instruments are
// safe for concurrent use.
type Metrics interface {
	Counter(name, help string) (Counter, error)
	Gauge(name, help string) (Gauge, error)
	// Histogram observes values in seconds; nil buckets means the host's
	// latency buckets.
	Histogram(name, help string, buckets []float64) (Histogram, error)
}

// Counter is a monotonically increasing count. Add ignores n ≤ 0.
type Counter interface{ Add(n int) }

// Gauge is a value that goes up and down.
type Gauge interface{ Set(v float64) }

// Histogram records observations, such as durations in seconds.
type Histogram interface{ Observe(v float64) }

// Tracer is the host's tracing as a sink sees it. Spans a sink starts are
// children of the envelope's message span, found through the context
// WriteBatch received.
type Tracer interface {
	// StartClient starts a span of kind client (producer when producer is
	// true) for one envelope's call to the destination, named name (for
	// example the HTTP method). The returned context carries the span, so
	// TraceHeaders with it propagates the span downstream. Without a span
	// to be a child of (tracing disabled, or ctx is not the context
	// WriteBatch received) it returns ctx itself and a Span that does
	// nothing, so a sink may skip header work when the two contexts are
	// equal.
	StartClient(ctx context.Context, e *Envelope, name string, producer bool, attrs ...Attr) (context.Context, Span)
	// TraceHeaders returns the W3C trace-context headers (traceparent,
	// tracestate, baggage) to send downstream for e: those of the span in
	// ctx, or, without one, e's own trace headers copied verbatim.
	TraceHeaders(ctx context.Context, e *Envelope) map[string]string
}

// Span is one client span a sink started.
type Span interface {
	// SetAttributes adds attributes to the span.
	SetAttributes(attrs ...Attr)
	// Fail records a failed call with its outcome class or error type
	// (for example "temporary" or "PermanentSinkError") and the error.
	Fail(errorType string, err error)
	// End ends the span. Later calls do nothing.
	End()
}

// Attr is one span attribute. Value is a string, bool, int, int64 or
// float64; other types are rendered with fmt.
type Attr struct {
	Key   string
	Value any
}

type nopMetrics struct{}

func (nopMetrics) Counter(string, string) (Counter, error) { return nopInstrument{}, nil }
func (nopMetrics) Gauge(string, string) (Gauge, error)     { return nopInstrument{}, nil }
func (nopMetrics) Histogram(string, string, []float64) (Histogram, error) {
	return nopInstrument{}, nil
}

type nopInstrument struct{}

func (nopInstrument) Add(int)               {}
func (nopInstrument) Set(float64)           {}
func (nopInstrument) Observe(float64)       {}
func (nopInstrument) SetAttributes(...Attr) {}
func (nopInstrument) Fail(string, error)    {}
func (nopInstrument) End()                  {}

// traceHeaderNames are the W3C trace-context headers a sink forwards.
var traceHeaderNames = [...]string{"traceparent", "tracestate", "baggage"}

type passThroughTracer struct{}

func (passThroughTracer) StartClient(ctx context.Context, _ *Envelope, _ string, _ bool, _ ...Attr) (context.Context, Span) {
	return ctx, nopInstrument{}
}

func (passThroughTracer) TraceHeaders(_ context.Context, e *Envelope) map[string]string {
	out := make(map[string]string, len(traceHeaderNames))
	if e == nil {
		return out
	}
	for _, name := range traceHeaderNames {
		if v, ok := e.Headers.Get(name); ok {
			out[name] = v
		}
	}
	return out
}
