package sqlmodel

import (
	"strings"

	"github.com/nats-sinks/nats-sink/sink"
)

// Counter returns the sink counter name from m for a SQL sink's metrics
// (docs/oracle.md). Every SQL sink creates its metrics through Counter and
// Histogram so that they treat a name m refuses alike: the sink still
// starts (a metric must never stop data from moving) with a no-op in its
// place. A name m already holds for a sink metric of the same kind gives
// that metric (sink.Metrics), so two sinks of one type in one library
// program add to one series.
func Counter(m sink.Metrics, name, help string) sink.Counter {
	if m == nil {
		return nop{}
	}
	c, err := m.Counter(name, help)
	if err != nil || c == nil {
		return nop{}
	}
	return c
}

// Histogram is Counter for a histogram with the host's latency buckets.
func Histogram(m sink.Metrics, name, help string) sink.Histogram {
	if m == nil {
		return nop{}
	}
	h, err := m.Histogram(name, help, nil)
	if err != nil || h == nil {
		return nop{}
	}
	return h
}

// nop is the instrument of a metric the host refused.
type nop struct{}

func (nop) Add(int)         {}
func (nop) Observe(float64) {}

// DBMetrics are the metrics of a database/sql sink (docs/oracle.md oracle_*,
// docs/delivery.md#per-message-isolation-and-bisection mysql_*): the same eight collectors under the dialect's name. Build it
// with NewDBMetrics; every collector is then non-nil.
type DBMetrics struct {
	Execute    sink.Histogram // <dialect>_execute_seconds, per statement
	Commit     sink.Histogram // <dialect>_commit_seconds
	Conflicts  sink.Counter   // <dialect>_conflicts_total: duplicate-key errors
	Duplicates sink.Counter   // <dialect>_duplicates_total
	Ignored    sink.Counter   // <dialect>_duplicate_ignored_total (insert_ignore)
	Noop       sink.Counter   // <dialect>_duplicate_noop_total (keyed write, no update columns)
	Rows       sink.Counter   // <dialect>_<upsert|merge>_rows_total
	Unknown    sink.Counter   // <dialect>_<upsert|merge>_outcome_unknown_total
	Deletes    sink.Counter   // <dialect>_deletes_total (mapped layout, delete_when)
}

// NewDBMetrics creates the metrics of dialect d through Counter and
// Histogram. statement describes what one execution is ("one multi-row
// INSERT statement") and dupCode names the duplicate-key error ("1062"),
// for the help texts. A nil m gives no-ops.
func NewDBMetrics(m sink.Metrics, d Dialect, statement, dupCode string) DBMetrics {
	p, w := d.String()+"_", string(d.UpdateMode()) // "mysql_", "upsert"
	title := strings.ToUpper(w[:1]) + w[1:]
	return DBMetrics{
		Execute:    Histogram(m, p+"execute_seconds", "Time spent executing "+statement+"."),
		Commit:     Histogram(m, p+"commit_seconds", "Time spent in COMMIT."),
		Conflicts:  Counter(m, p+"conflicts_total", "Statements that failed with a duplicate-key error ("+dupCode+")."),
		Duplicates: Counter(m, p+"duplicates_total", "Rows found already present (attempted minus affected rows, plus in-batch repeats)."),
		Ignored:    Counter(m, p+"duplicate_ignored_total", "Duplicate rows skipped by insert_ignore."),
		Noop:       Counter(m, p+"duplicate_noop_total", "Duplicate rows left unchanged by "+w+" with no update columns."),
		Rows:       Counter(m, p+w+"_rows_total", "Rows written by "+w+" statements."),
		Unknown: Counter(m, p+w+"_outcome_unknown_total",
			title+" rows (with update columns) whose insert-or-update outcome the affected-row count cannot tell."),
		Deletes: DeletesCounter(m, d),
	}
}

// Observe records a committed transaction; it is the Writer's Observe.
func (m *DBMetrics) Observe(st Stats) {
	m.Commit.Observe(st.Commit.Seconds())
	m.Duplicates.Add(st.Duplicates)
	m.Deletes.Add(st.Deletes)
}

// DeletesCounter registers <dialect>_deletes_total: committed deletes of
// the mapped layout (delete_when), missing rows included.
func DeletesCounter(m sink.Metrics, d Dialect) sink.Counter {
	return Counter(m, d.String()+"_deletes_total", "Committed deletes by key (mapped layout, delete_when), rows already gone included.")
}

// ModeCounts are one transaction's contributions to the Ignored, Noop,
// Rows and Unknown counters. A dialect's Tx collects them while it runs
// and publishes them only after COMMIT succeeds, so that a rolled-back
// batch counts nothing.
type ModeCounts struct {
	Ignored, Noop, Rows, Unknown int
}

// Publish adds c to the counters.
func (m *DBMetrics) Publish(c ModeCounts) {
	m.Ignored.Add(c.Ignored)
	m.Noop.Add(c.Noop)
	m.Rows.Add(c.Rows)
	m.Unknown.Add(c.Unknown)
}
