// Package telemetry holds nats-sink's observability plumbing: the core
// metrics of spec observability.md §1 with their JSON snapshot file
// (data-shapes §14), the metrics/health HTTP endpoint (§2) and the slog
// setup (§3).
//
// Metrics are deliberately passive: every method on *Counter, *Gauge and
// *Histogram is safe on a nil receiver and never returns an error, because
// a metrics failure must never affect delivery.
package telemetry
