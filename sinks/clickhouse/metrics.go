package clickhouse

import "github.com/nats-sinks/nats-sink/sink"

// metrics are the sink's own metrics. sink.Metrics has no labelled counter,
// so the failed requests of each class are a counter of their own:
// clickhouse_errors_<class>_total.
type metrics struct {
	insertSeconds sink.Histogram // clickhouse_insert_seconds: successful INSERTs
	rows          sink.Counter   // clickhouse_rows_total: rows in INSERTs answered 200
	byClass       [classPermanent + 1]sink.Counter
}

// errors returns the failed-request counter of one class.
func (m metrics) errors(cl class) sink.Counter { return m.byClass[cl] }

type nopInstrument struct{}

func (nopInstrument) Add(int)         {}
func (nopInstrument) Observe(float64) {}

// newMetrics registers the metrics with m. A name m refuses gets a no-op: a
// metric must never stop data from moving.
func newMetrics(m sink.Metrics) metrics {
	out := metrics{insertSeconds: nopInstrument{}, rows: nopInstrument{}}
	if h, err := m.Histogram("clickhouse_insert_seconds", "Duration of one successful ClickHouse INSERT request.", nil); err == nil && h != nil {
		out.insertSeconds = h
	}
	out.rows = counter(m, "clickhouse_rows_total", "Rows in ClickHouse INSERTs answered 200.")
	for _, cl := range []class{classTemporary, classDestination, classPermanent} {
		out.byClass[cl] = counter(m, "clickhouse_errors_"+cl.String()+"_total",
			"Failed ClickHouse requests of class "+cl.String()+".")
	}
	return out
}

func counter(m sink.Metrics, name, help string) sink.Counter {
	if c, err := m.Counter(name, help); err == nil && c != nil {
		return c
	}
	return nopInstrument{}
}
