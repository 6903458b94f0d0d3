package clickhouse

import "github.com/nats-sinks/nats-sink/sink"

// metrics are the sink's own metrics.
type metrics struct {
	insertSeconds sink.Histogram // clickhouse_insert_seconds: successful INSERTs
	rows          sink.Counter   // clickhouse_rows_total: rows in INSERTs answered 200
	errorsBy      sink.CounterVec
}

// errors returns the clickhouse_errors_total counter of one class.
func (m metrics) errors(cl class) sink.Counter { return m.errorsBy.With(cl.String()) }

type nopInstrument struct{}

func (nopInstrument) Add(int)                  {}
func (nopInstrument) Observe(float64)          {}
func (nopInstrument) With(string) sink.Counter { return nopInstrument{} }

// newMetrics registers the metrics with m. A name m refuses gets a no-op: a
// metric must never stop data from moving.
func newMetrics(m sink.Metrics) metrics {
	out := metrics{insertSeconds: nopInstrument{}, rows: nopInstrument{}, errorsBy: nopInstrument{}}
	if h, err := m.Histogram("clickhouse_insert_seconds", "Duration of one successful ClickHouse INSERT request.", nil); err == nil && h != nil {
		out.insertSeconds = h
	}
	if c, err := m.Counter("clickhouse_rows_total", "Rows in ClickHouse INSERTs answered 200."); err == nil && c != nil {
		out.rows = c
	}
	if v, err := m.CounterVec("clickhouse_errors_total", "Failed ClickHouse requests by class (temporary, destination, permanent).", "class"); err == nil && v != nil {
		out.errorsBy = v
	}
	return out
}
