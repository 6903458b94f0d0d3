// Package telemetry holds nats-sink's observability plumbing: the core
// metrics of docs/observability.md#metrics with their JSON snapshot file
// (docs/formats.md#metrics-snapshot), the metrics/health HTTP endpoint (docs/observability.md#health-endpoints) and the slog
// setup (docs/observability.md#logs).
//
// Metrics are deliberately passive: every method on *Counter, *Gauge and
// *Histogram is safe on a nil receiver and never returns an error, because
// a metrics failure must never affect delivery.
package telemetry
