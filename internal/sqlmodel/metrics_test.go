package sqlmodel

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nats-sinks/nats-sink/telemetry"
)

// TestMetricsNameTaken: a second sink asking for a name its Metrics already
// holds is not refused; it gets the existing collector, never a second,
// separate one; a name the host refuses gives a working no-op.
func TestMetricsNameTaken(t *testing.T) {
	Counter(nil, "x_total", "x").Add(1) // nil Metrics: no-ops, no panic
	Histogram(nil, "x_seconds", "x").Observe(1)
	tm, err := telemetry.NewMetrics(nil, "nats_sinks")
	if err != nil {
		t.Fatal(err)
	}
	m := tm.ForSinks()
	first := Counter(m, "x_total", "x")
	first.Add(2)
	second := Counter(m, "x_total", "x")
	second.Add(3)
	if second != first {
		t.Errorf("second Counter = %v, a new collector beside %v", second, first)
	}
	if got := first.(*telemetry.Counter).Value(); got != 5 {
		t.Errorf("x_total = %d, want 5", got)
	}
	h1, h2 := Histogram(m, "x_seconds", "x"), Histogram(m, "x_seconds", "x")
	if h1 != h2 {
		t.Errorf("Histogram twice = %v, %v", h1, h2)
	}
	// A name of the core metrics is refused by telemetry: the sink gets
	// a no-op, not a failure.
	c := Counter(m, "messages_acked_total", "x")
	c.Add(1)
	if tm.MessagesAcked.Value() != 0 {
		t.Error("a sink counter named like a core metric counted into it")
	}
}

// TestDBMetrics: the eight metrics of a database/sql sink carry the
// dialect's names (docs/oracle.md, docs/delivery.md#per-message-isolation-and-bisection), and Publish and Observe feed them.
func TestDBMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := telemetry.NewMetrics(reg, "nats_sinks")
	if err != nil {
		t.Fatal(err)
	}
	dm := NewDBMetrics(m.ForSinks(), Oracle, "one array-bound statement", "ORA-00001")
	dm.Publish(ModeCounts{Ignored: 1, Noop: 2, Rows: 3, Unknown: 4})
	dm.Observe(Stats{Duplicates: 5, Commit: time.Second})
	dm.Execute.Observe(0.5)
	dm.Conflicts.Add(1)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	type metric struct {
		Help  string
		Value float64
	}
	got := map[string]metric{}
	for _, mf := range mfs {
		name, ok := strings.CutPrefix(mf.GetName(), "nats_sinks_oracle_")
		if !ok {
			continue
		}
		v := mf.GetMetric()[0]
		val := v.GetCounter().GetValue()
		if h := v.GetHistogram(); h != nil {
			val = h.GetSampleSum()
		}
		got[name] = metric{mf.GetHelp(), val}
	}
	want := map[string]metric{
		"execute_seconds":             {"Time spent executing one array-bound statement.", 0.5},
		"commit_seconds":              {"Time spent in COMMIT.", 1},
		"conflicts_total":             {"Statements that failed with a duplicate-key error (ORA-00001).", 1},
		"duplicates_total":            {"Rows found already present (attempted minus affected rows, plus in-batch repeats).", 5},
		"duplicate_ignored_total":     {"Duplicate rows skipped by insert_ignore.", 1},
		"duplicate_noop_total":        {"Duplicate rows left unchanged by merge with no update columns.", 2},
		"merge_rows_total":            {"Rows written by merge statements.", 3},
		"merge_outcome_unknown_total": {"Merge rows (with update columns) whose insert-or-update outcome the affected-row count cannot tell.", 4},
		"deletes_total":               {"Committed deletes by key (mapped layout, delete_when), rows already gone included.", 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("oracle metrics (-want +got):\n%s", diff)
	}

	my := NewDBMetrics(m.ForSinks(), MySQL, "one multi-row INSERT statement", "1062")
	if my.Rows == nil || my.Unknown == nil || my.Execute == nil {
		t.Fatalf("mysql metrics = %+v", my)
	}
	mfs, _ = reg.Gather()
	var names []string
	for _, mf := range mfs {
		if n, ok := strings.CutPrefix(mf.GetName(), "nats_sinks_mysql_"); ok {
			names = append(names, n)
		}
	}
	wantNames := []string{"commit_seconds", "conflicts_total", "deletes_total", "duplicate_ignored_total", "duplicate_noop_total",
		"duplicates_total", "execute_seconds", "upsert_outcome_unknown_total", "upsert_rows_total"}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("mysql metric names (-want +got):\n%s", diff)
	}

	none := NewDBMetrics(nil, MySQL, "x", "1062") // a sink without metrics
	none.Publish(ModeCounts{Rows: 1})
	none.Observe(Stats{Duplicates: 1})
}
