// Package tracing is nats-sink's OpenTelemetry tracing (docs/tracing.md,
// docs/configuration.md#tracing): W3C Trace Context and Baggage propagation through NATS
// headers, the per-message consume span, the write span, the DLQ publish span
// and sink client spans, exported over OTLP/HTTP (protobuf), OTLP/gRPC or as
// JSON lines on stdout.
//
// Nothing here touches OpenTelemetry's global providers or propagators: New
// returns a *Tracer that owns its TracerProvider, and a nil *Tracer (tracing
// disabled) is valid everywhere, as are the zero Span and a nil *Batch. So the
// runner calls every method unconditionally and pays nothing when tracing is
// off.
//
// # Spans of one batch
//
// Per docs/tracing.md, every message gets its own CONSUMER span
// "process <nats.subject>" (the configured subject pattern, which keeps span
// names low-cardinality; the concrete subject is messaging.destination.name).
// It is a child of the producer's span extracted from the message's
// traceparent/tracestate/baggage headers (names matched ignoring case). A
// missing or invalid traceparent starts a new root trace, never an error. The
// span starts when the envelope is built and ends with the final decision;
// ACK, TERM and NAK are events on it, not spans.
//
// A batch's WriteBatch call cannot be the child of 64 different producers,
// so each call gets one INTERNAL span "write <sink type>" that is a new root
// with a link to the message span of every envelope it wrote (at most 128
// links, the SDK's default limit). Isolation's bisection calls get their own
// write spans, with nats_sink.bisection_depth > 0. Sink client spans (HTTP
// request, Kafka produce, NATS republish) and the DLQ publish span are
// children of the message span, not of the write span, so the producer's
// trace shows where its message went.
//
// # Sampling
//
// Parent-based: a message whose producer sampled its trace is traced, one
// whose producer did not is not, and a message without trace context is
// sampled with tracing.sample_ratio. The spec is silent on write spans, which
// are roots: they are sampled when any linked message span is sampled
// (otherwise, at sample_ratio 0, a sampled message's trace would point at a
// write that was never recorded), else with sample_ratio.
//
// # Export
//
// A batch span processor exports asynchronously: a slow or unreachable
// collector drops spans when the queue (2048) is full and never delays
// delivery. Export failures are logged through the injected slog.Logger
// (component "tracing") instead of OpenTelemetry's global error handler,
// which would write unstructured lines to stderr. Shutdown flushes for at
// most 5 s.
//
// The endpoint (docs/configuration.md#tracing): with tracing.endpoint null, the exporters read
// the standard OTEL_EXPORTER_OTLP_* variables themselves, falling back to
// http://localhost:4318/v1/traces (HTTP) or localhost:4317 (gRPC). A
// configured http endpoint without a path (or with "/") posts to /v1/traces,
// as OTEL_EXPORTER_OTLP_ENDPOINT does; with a path, it posts to that path
// exactly, as OTEL_EXPORTER_OTLP_TRACES_ENDPOINT does. The gRPC exporter has
// no use for a path, so New rejects one rather than ignore it. "http" means
// plaintext, "https" TLS with the system roots (or OTEL_EXPORTER_OTLP_CERTIFICATE).
// tracing.headers_env values are read when New runs; when set, they replace
// OTEL_EXPORTER_OTLP_HEADERS.
//
// The resource holds service.name (tracing.service_name; OTEL_SERVICE_NAME
// does not override it), service.version, a random service.instance.id per
// process, telemetry.sdk.*, and the attributes of OTEL_RESOURCE_ATTRIBUTES
// (Kubernetes deployments set pod and namespace there); the configured
// service.* keys win over that variable.
//
// # What never enters a span
//
// Payloads, header values other than the message id, and secrets. Baggage is
// propagated, never recorded. An error's text becomes the span status
// description: by the sink contract it carries no payload or secret.
package tracing
