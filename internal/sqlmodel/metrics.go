package sqlmodel

import (
	"strings"

	"github.com/nats-sinks/nats-sink/telemetry"
)

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

// DBMetrics are the metrics of a database/sql sink (sinks.md §3 oracle_*,
// §4 mysql_*): the same eight collectors under the dialect's name. Nil
// collectors are no-ops.
type DBMetrics struct {
	Execute    *telemetry.Histogram // <dialect>_execute_seconds, per statement
	Commit     *telemetry.Histogram // <dialect>_commit_seconds
	Conflicts  *telemetry.Counter   // <dialect>_conflicts_total: duplicate-key errors
	Duplicates *telemetry.Counter   // <dialect>_duplicates_total
	Ignored    *telemetry.Counter   // <dialect>_duplicate_ignored_total (insert_ignore)
	Noop       *telemetry.Counter   // <dialect>_duplicate_noop_total (keyed write, no update columns)
	Rows       *telemetry.Counter   // <dialect>_<upsert|merge>_rows_total
	Unknown    *telemetry.Counter   // <dialect>_<upsert|merge>_outcome_unknown_total
}

// NewDBMetrics creates the metrics of dialect d through Counter and
// Histogram. statement describes what one execution is ("one multi-row
// INSERT statement") and dupCode names the duplicate-key error ("1062"),
// for the help texts.
func NewDBMetrics(m *telemetry.Metrics, d Dialect, statement, dupCode string) DBMetrics {
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
	}
}

// Observe records a committed transaction; it is the Writer's Observe.
func (m *DBMetrics) Observe(st Stats) {
	m.Commit.Observe(st.Commit.Seconds())
	m.Duplicates.Add(st.Duplicates)
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
