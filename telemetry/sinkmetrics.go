package telemetry

import "github.com/nats-sinks/nats-sink/sink"

// ForSinks returns m as the sink.Metrics a host hands sinks in sink.Deps.
// A sink's counter, gauge or histogram is created by NewCounter, NewGauge
// or NewHistogram: under m's namespace and registerer, in m's snapshot, and
// shared with an earlier sink metric of the same name and kind (two sinks of
// one type in one program add to one series). On an error (a name taken by
// a core metric or by another kind) the instrument returned with it is a
// no-op. A nil m returns nil, which sinks read as "no metrics".
func (m *Metrics) ForSinks() sink.Metrics {
	if m == nil {
		return nil
	}
	return sinkMetrics{m}
}

// sinkMetrics adapts *Metrics to sink.Metrics. The instruments are the
// nil-safe *Counter, *Gauge and *Histogram: a nil one returned with an
// error does nothing.
type sinkMetrics struct{ m *Metrics }

func (s sinkMetrics) Counter(name, help string) (sink.Counter, error) {
	c, err := s.m.NewCounter(name, help)
	return c, err
}

func (s sinkMetrics) Gauge(name, help string) (sink.Gauge, error) {
	g, err := s.m.NewGauge(name, help)
	return g, err
}

func (s sinkMetrics) Histogram(name, help string, buckets []float64) (sink.Histogram, error) {
	h, err := s.m.NewHistogram(name, help, buckets)
	return h, err
}
