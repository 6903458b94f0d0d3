package sqlmodel

import "github.com/nats-sinks/nats-sink/telemetry"

// Counter returns the sink counter name from m for a SQL sink's metrics
// (sinks.md §3–§6). Every SQL sink creates its metrics through Counter and
// Histogram so that they treat a name m already holds alike: the sink
// still starts (a metric must never stop data from moving) and gets the
// collector m returns for the name, or a nil no-op counter when m returns
// none. That happens when one Metrics serves two sinks of one type in a
// library program; the CLI gives every pipeline its own. A nil m gives a
// nil (no-op) counter.
func Counter(m *telemetry.Metrics, name, help string) *telemetry.Counter {
	c, err := m.NewCounter(name, help)
	if err != nil {
		return nil
	}
	return c
}

// Histogram is Counter for a histogram with the default latency buckets.
func Histogram(m *telemetry.Metrics, name, help string) *telemetry.Histogram {
	h, err := m.NewHistogram(name, help, nil)
	if err != nil {
		return nil
	}
	return h
}
