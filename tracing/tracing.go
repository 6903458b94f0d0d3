package tracing

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/nats-sinks/nats-sink/config"
)

// Exporter names (docs/configuration.md#tracing tracing.exporter).
const (
	ExporterOTLPHTTP = "otlp-http"
	ExporterOTLPGRPC = "otlp-grpc"
	ExporterStdout   = "stdout"
)

// ScopeName is the instrumentation scope of every span nats-sink starts.
const ScopeName = "github.com/nats-sinks/nats-sink"

// ShutdownTimeout bounds the final flush (docs/tracing.md).
const ShutdownTimeout = 5 * time.Second

// defaultHTTPPath is the OTLP/HTTP traces path appended to an endpoint
// without one.
const defaultHTTPPath = "/v1/traces"

// Options are the parts of a Tracer that do not come from the tracing
// section. All are optional.
type Options struct {
	// Version is service.version.
	Version string
	// Sink is the sink type: nats_sink.sink on message spans and the name of
	// write spans ("write postgres").
	Sink string
	// Subject is nats.subject, the consumer's subject pattern: the message
	// span's name and messaging.destination.template.
	Subject string
	// Consumer names the durable consumer; it is
	// messaging.consumer.group.name when the envelope does not know it.
	Consumer string
	// Env resolves tracing.headers_env and OTEL_RESOURCE_ATTRIBUTES; nil
	// means the process environment.
	Env config.Env
	// Logger receives export failures (component "tracing"); nil discards.
	Logger *slog.Logger
	// Stdout is where the stdout exporter writes; nil means os.Stdout.
	Stdout io.Writer
}

// A Tracer starts nats-sink's spans and owns their export pipeline. A nil
// *Tracer is tracing disabled: every method is a no-op.
type Tracer struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	opts     Options
	process  string // the message span name, "" when Options.Subject is unset
}

// New builds the tracer that cfg describes. It returns nil, nil when cfg is
// nil or tracing is disabled, so the caller can pass the result on without
// checking. Exporters connect lazily: an unreachable collector is not an
// error here, it shows up later as logged export failures.
func New(ctx context.Context, cfg *config.Tracing, o Options) (*Tracer, error) {
	if cfg == nil || !cfg.Enabled {
		return nil, nil
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Logger = o.Logger.With("component", "tracing")
	exp, err := newExporter(ctx, cfg, o)
	if err != nil {
		return nil, err
	}
	res, err := newResource(cfg, o)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(loggingExporter{SpanExporter: exp, log: o.Logger}),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(newSampler(cfg.SampleRatio)),
	)
	return newTracer(tp, o), nil
}

// NewWithProcessor returns a Tracer whose spans go to sp rather than to an
// exporter built from the tracing section: tests record spans in memory with
// it (package tracingtest), and a library user can plug in a pipeline of
// their own. Sampling is as with New, at sampleRatio; the resource has
// service.name "nats-sink" and Options' version. Shutdown shuts sp down.
func NewWithProcessor(sp sdktrace.SpanProcessor, sampleRatio float64, o Options) *Tracer {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	cfg := config.Default().Tracing
	cfg.SampleRatio = sampleRatio
	res, err := newResource(&cfg, o)
	if err != nil {
		// Only crypto/rand failing can get here; a resource without the
		// instance id is still usable.
		res = resource.Empty()
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(sp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(newSampler(sampleRatio)),
	)
	return newTracer(tp, o)
}

func newTracer(tp *sdktrace.TracerProvider, o Options) *Tracer {
	t := &Tracer{
		provider: tp,
		tracer:   tp.Tracer(ScopeName, trace.WithInstrumentationVersion(o.Version)),
		opts:     o,
	}
	if o.Subject != "" {
		t.process = "process " + o.Subject
	}
	return t
}

// Shutdown flushes the spans not yet exported, for at most ShutdownTimeout
// or until ctx is done, and stops the exporter. Spans started afterwards
// are dropped.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, ShutdownTimeout)
	defer cancel()
	if err := t.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("flush traces: %w", err)
	}
	return nil
}

// TracerProvider returns the provider behind t, for libraries that take one
// (a no-op provider when t is nil). It is not installed globally.
func (t *Tracer) TracerProvider() trace.TracerProvider {
	if t == nil {
		return noop.NewTracerProvider()
	}
	return t.provider
}

func newExporter(ctx context.Context, cfg *config.Tracing, o Options) (sdktrace.SpanExporter, error) {
	headers, err := exportHeaders(cfg, o.Env)
	if err != nil {
		return nil, err
	}
	var u *url.URL
	if cfg.Endpoint != nil {
		u, err = url.Parse(*cfg.Endpoint)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			// config.Parse rejects these; a library caller may not have used it.
			return nil, &config.Error{Problems: []config.Problem{{Path: "tracing.endpoint", Message: "must be an http:// or https:// URL"}}}
		}
		if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
			// The exporters would silently drop them.
			return nil, &config.Error{Problems: []config.Problem{{Path: "tracing.endpoint", Message: "must not have a query or fragment"}}}
		}
	}
	switch cfg.Exporter {
	case ExporterOTLPHTTP:
		var opts []otlptracehttp.Option
		if u != nil {
			path := u.Path
			if path == "" || path == "/" {
				path = defaultHTTPPath
			}
			opts = append(opts, otlptracehttp.WithEndpoint(u.Host), otlptracehttp.WithURLPath(path))
			if u.Scheme == "http" {
				opts = append(opts, otlptracehttp.WithInsecure())
			}
		}
		if len(headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(headers))
		}
		return otlptracehttp.New(ctx, opts...)
	case ExporterOTLPGRPC:
		var opts []otlptracegrpc.Option
		if u != nil {
			if u.Path != "" && u.Path != "/" {
				return nil, &config.Error{Problems: []config.Problem{{Path: "tracing.endpoint",
					Message: fmt.Sprintf("must not have a path with exporter %q (got %q)", ExporterOTLPGRPC, u.Path)}}}
			}
			opts = append(opts, otlptracegrpc.WithEndpoint(u.Host))
			if u.Scheme == "http" {
				opts = append(opts, otlptracegrpc.WithInsecure())
			}
		}
		if len(headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(headers))
		}
		return otlptracegrpc.New(ctx, opts...)
	case ExporterStdout:
		w := o.Stdout
		if w == nil {
			w = os.Stdout
		}
		return stdouttrace.New(stdouttrace.WithWriter(w))
	default:
		return nil, &config.Error{Problems: []config.Problem{{Path: "tracing.exporter",
			Message: fmt.Sprintf("must be one of %s, %s, %s (got %q)", ExporterOTLPHTTP, ExporterOTLPGRPC, ExporterStdout, cfg.Exporter)}}}
	}
}

// exportHeaders resolves tracing.headers_env. Every missing variable is
// reported at once; values never appear in errors.
func exportHeaders(cfg *config.Tracing, env config.Env) (map[string]string, error) {
	if len(cfg.HeadersEnv) == 0 {
		return nil, nil
	}
	h := make(map[string]string, len(cfg.HeadersEnv))
	var problems []config.Problem
	for _, name := range slices.Sorted(maps.Keys(cfg.HeadersEnv)) {
		v, ok := env.Lookup(cfg.HeadersEnv[name])
		if !ok {
			problems = append(problems, config.Problem{Path: "tracing.headers_env." + name,
				Message: fmt.Sprintf("environment variable %s is not set", cfg.HeadersEnv[name])})
			continue
		}
		h[name] = v
	}
	if problems != nil {
		return nil, &config.Error{Problems: problems}
	}
	return h, nil
}

// newResource describes this process (docs/tracing.md). The resource is
// built by hand rather than with resource.Default, which reads the process
// environment directly and would let OTEL_SERVICE_NAME override the
// configured name.
func newResource(cfg *config.Tracing, o Options) (*resource.Resource, error) {
	id, err := instanceID()
	if err != nil {
		return nil, err
	}
	var attrs []attribute.KeyValue
	if v, ok := o.Env.Lookup("OTEL_RESOURCE_ATTRIBUTES"); ok {
		attrs = append(attrs, parseResourceAttributes(v)...)
	}
	attrs = append(attrs,
		attribute.String("telemetry.sdk.name", "opentelemetry"),
		attribute.String("telemetry.sdk.language", "go"),
		attribute.String("telemetry.sdk.version", sdk.Version()),
		attribute.String("service.name", cfg.ServiceName),
		attribute.String("service.instance.id", id),
	)
	if o.Version != "" {
		attrs = append(attrs, attribute.String("service.version", o.Version))
	}
	// NewSchemaless keeps the last value of a repeated key: the configured
	// service.* attributes above win over OTEL_RESOURCE_ATTRIBUTES.
	return resource.NewSchemaless(attrs...), nil
}

// parseResourceAttributes reads OTEL_RESOURCE_ATTRIBUTES
// ("k1=v1,k2=v2", values percent-encoded). Malformed members are skipped,
// as the SDK's own detector does, rather than failing the start.
func parseResourceAttributes(s string) []attribute.KeyValue {
	var attrs []attribute.KeyValue
	for member := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(member, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			continue
		}
		dv, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			continue
		}
		attrs = append(attrs, attribute.String(k, dv))
	}
	return attrs
}

// instanceID returns a random UUID (version 4): service.instance.id is
// random per process (docs/tracing.md).
func instanceID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("service.instance.id: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

// newSampler is parent-based with a ratio sampler for roots; a root with a
// sampled link (a write span of sampled messages) is always sampled.
func newSampler(ratio float64) sdktrace.Sampler {
	return sdktrace.ParentBased(linkSampler{ratio: sdktrace.TraceIDRatioBased(ratio)})
}

// linkSampler samples a root span when one of its links is sampled, else
// defers to the ratio sampler.
type linkSampler struct{ ratio sdktrace.Sampler }

func (s linkSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	for _, l := range p.Links {
		if l.SpanContext.IsSampled() {
			return sdktrace.SamplingResult{
				Decision:   sdktrace.RecordAndSample,
				Tracestate: trace.SpanContextFromContext(p.ParentContext).TraceState(),
			}
		}
	}
	return s.ratio.ShouldSample(p)
}

func (s linkSampler) Description() string {
	return "SampledLinkOr{" + s.ratio.Description() + "}"
}

// loggingExporter logs export failures instead of returning them: the batch
// processor hands returned errors to OpenTelemetry's global error handler,
// which prints unstructured lines to stderr. Tracing failures never affect
// delivery, so a log record is all they produce.
type loggingExporter struct {
	sdktrace.SpanExporter
	log *slog.Logger
}

func (e loggingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if err := e.SpanExporter.ExportSpans(ctx, spans); err != nil {
		errType := "TraceExportError"
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			errType = "TraceExportTimeout"
		}
		e.log.Warn("trace export failed", "count", len(spans), "error_type", errType, "error", err.Error())
	}
	return nil
}
