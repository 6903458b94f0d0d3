package telemetry

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

func newTestMetrics(t *testing.T, reg prometheus.Registerer) *Metrics {
	t.Helper()
	m, err := NewMetrics(reg, "nats_sinks")
	if err != nil {
		t.Fatalf("NewMetrics: %v", err)
	}
	return m
}

// fill sets distinctive values on a few metrics of each kind, including
// those with snapshot aliases.
func fill(m *Metrics) {
	m.MessagesFetched.Add(7)
	m.MessagesPrepared.Add(5)
	m.MessagesAcked.Add(4)
	m.SinkBatchesWritten.Inc()
	m.SinkBatchesWritten.Inc()
	m.SinkBatchWriteSeconds.Observe(0.5)
	m.SinkBatchWriteSeconds.Observe(0.125)
	m.SinkBatchWriteSeconds.Observe(0.25)
	m.RetryBackoffDelaySeconds.Observe(2)
	m.LastSinkSuccessEpochSeconds.Set(1700000000.5)
	m.CurrentBatchMessages.Set(5)
	m.NATSConnected.Set(1)
}

func TestSnapshotGolden(t *testing.T) {
	m := newTestMetrics(t, nil)
	fill(m)
	got := m.Snapshot(time.Unix(1700000001, 250000000))

	golden := filepath.Join("testdata", "snapshot.golden")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("Snapshot mismatch (-want +got):\n%s", diff)
	}
}

// snapshotDoc is the snapshot parsed with numbers kept as written, so the
// tests can tell 3 from 3.0.
type snapshotDoc struct {
	Counters     map[string]json.Number            `json:"counters"`
	Gauges       map[string]json.Number            `json:"gauges"`
	Generated    json.Number                       `json:"generated_at_epoch_seconds"`
	Namespace    string                            `json:"namespace"`
	Observations map[string]map[string]json.Number `json:"observations"`
	Schema       string                            `json:"schema"`
}

func parseSnapshot(t *testing.T, b []byte) snapshotDoc {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	d.DisallowUnknownFields()
	var doc snapshotDoc
	if err := d.Decode(&doc); err != nil {
		t.Fatalf("snapshot is not the §14 document: %v\n%s", err, b)
	}
	return doc
}

func TestSnapshotShape(t *testing.T) {
	m := newTestMetrics(t, nil)
	fill(m)
	b := m.Snapshot(time.Unix(1700000001, 0))

	if !bytes.HasSuffix(b, []byte("}\n")) || bytes.Count(b, []byte("\n")) != 1 {
		t.Errorf("snapshot is not one compact line ending in newline: %q", b)
	}
	for i, c := range b {
		if c >= 0x7f {
			t.Fatalf("snapshot byte %d = %#x, want ascii only", i, c)
		}
	}
	doc := parseSnapshot(t, b)
	if doc.Schema != "nats_sinks.metrics.snapshot.v1" || doc.Namespace != "nats_sinks" {
		t.Errorf("schema, namespace = %q, %q", doc.Schema, doc.Namespace)
	}
	if doc.Generated != "1700000001.0" {
		t.Errorf("generated_at_epoch_seconds = %s, want 1700000001.0", doc.Generated)
	}
	isInt := func(n json.Number) bool { return !strings.ContainsAny(string(n), ".eE") }
	for k, v := range doc.Counters {
		if !isInt(v) {
			t.Errorf("counter %s = %s, want an integer", k, v)
		}
	}
	for k, v := range doc.Gauges {
		if isInt(v) {
			t.Errorf("gauge %s = %s, want a float", k, v)
		}
	}
	for k, o := range doc.Observations {
		if len(o) != 5 {
			t.Errorf("observation %s has keys %v, want count,last,max,min,sum", k, o)
		}
		for f, v := range o {
			if isInt(v) {
				t.Errorf("observation %s.%s = %s, want a float", k, f, v)
			}
		}
	}

	for _, tt := range []struct{ section, alias, canonical, want string }{
		{"counters", "messages_received_total", "messages_prepared_total", "5"},
		{"counters", "batches_written_total", "sink_batches_written_total", "2"},
		{"gauges", "last_success_timestamp", "last_sink_success_epoch_seconds", "1700000000.5"},
		{"gauges", "current_batch_size", "current_batch_messages", "5.0"},
	} {
		sec := doc.Counters
		if tt.section == "gauges" {
			sec = doc.Gauges
		}
		if sec[tt.alias] != json.Number(tt.want) || sec[tt.canonical] != json.Number(tt.want) {
			t.Errorf("%s: %s = %q, %s = %q, want both %s", tt.section, tt.alias, sec[tt.alias], tt.canonical, sec[tt.canonical], tt.want)
		}
	}
	wantWrite := map[string]json.Number{"count": "3.0", "last": "0.25", "max": "0.5", "min": "0.125", "sum": "0.875"}
	for _, name := range []string{"batch_write_seconds", "sink_batch_write_seconds"} {
		if diff := cmp.Diff(wantWrite, doc.Observations[name]); diff != "" {
			t.Errorf("observation %s mismatch (-want +got):\n%s", name, diff)
		}
	}
	const empty = `"nats_fetch_seconds":{"count":0.0,"last":0.0,"max":0.0,"min":0.0,"sum":0.0}`
	if !bytes.Contains(b, []byte(empty)) {
		t.Errorf("snapshot lacks the empty observation form %s", empty)
	}
}

// TestSnapshotNamesMatchRegistry checks that the snapshot and the Prometheus
// registry list the same metrics: every registered core metric appears
// un-prefixed in the snapshot, and the snapshot has nothing else but the
// five legacy aliases.
func TestSnapshotNamesMatchRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newTestMetrics(t, reg)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var registered []string
	for _, mf := range mfs {
		name, ok := strings.CutPrefix(mf.GetName(), "nats_sinks_")
		if !ok {
			t.Errorf("metric %s lacks the namespace prefix", mf.GetName())
		}
		for _, met := range mf.GetMetric() {
			if len(met.GetLabel()) != 0 {
				t.Errorf("core metric %s has labels %v, want none", mf.GetName(), met.GetLabel())
			}
		}
		registered = append(registered, name)
	}
	doc := parseSnapshot(t, m.Snapshot(time.Unix(0, 0)))
	var inSnapshot []string
	for _, sec := range []map[string]json.Number{doc.Counters, doc.Gauges} {
		for k := range sec {
			inSnapshot = append(inSnapshot, k)
		}
	}
	for k := range doc.Observations {
		inSnapshot = append(inSnapshot, k)
	}
	want := append(registered, snapshotAliases()...)
	sort.Strings(want)
	sort.Strings(inSnapshot)
	if diff := cmp.Diff(want, inSnapshot); diff != "" {
		t.Errorf("snapshot names mismatch registry + aliases (-want +got):\n%s", diff)
	}
	// +2: held_messages and oldest_held_message_seconds (held results);
	// +5: the message_authenticity_* counters.
	if got, want := len(registered), 44+11+13+2+5; got != want {
		t.Errorf("registered %d core metrics, want %d", got, want)
	}
}

func TestHistogramBuckets(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newTestMetrics(t, reg)
	m.NATSFetchSeconds.Observe(0.003)
	m.NATSFetchSeconds.Observe(100)
	m.RetryBackoffDelaySeconds.Observe(1)
	m.EventAgeAtStoreSeconds.Observe(7)

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	bounds := map[string][]float64{}
	byName := map[string]*dto.Histogram{}
	for _, mf := range mfs {
		if mf.GetType() != dto.MetricType_HISTOGRAM {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		byName[mf.GetName()] = h
		for _, b := range h.GetBucket() {
			bounds[mf.GetName()] = append(bounds[mf.GetName()], b.GetUpperBound())
		}
	}
	for _, tt := range []struct {
		name string
		want []float64
	}{
		{"nats_sinks_nats_fetch_seconds", LatencyBuckets()},
		{"nats_sinks_sink_batch_write_seconds", LatencyBuckets()},
		{"nats_sinks_in_progress_heartbeat_seconds", LatencyBuckets()},
		{"nats_sinks_retry_backoff_delay_seconds", BackoffBuckets()},
		{"nats_sinks_event_age_at_receive_seconds", AgeBuckets()},
		{"nats_sinks_event_age_at_store_seconds", AgeBuckets()},
		{"nats_sinks_event_source_clock_skew_seconds", AgeBuckets()},
	} {
		if diff := cmp.Diff(tt.want, bounds[tt.name]); diff != "" {
			t.Errorf("%s buckets mismatch (-want +got):\n%s", tt.name, diff)
		}
	}
	if got := LatencyBuckets(); got[0] != 0.0005 || got[len(got)-1] != 60 || len(got) != 16 {
		t.Errorf("LatencyBuckets() = %v", got)
	}
	fetch := byName["nats_sinks_nats_fetch_seconds"]
	if fetch.GetSampleCount() != 2 || fetch.GetSampleSum() != 100.003 {
		t.Errorf("fetch histogram count, sum = %d, %v, want 2, 100.003", fetch.GetSampleCount(), fetch.GetSampleSum())
	}
	// 0.003 falls in le=0.005 (index 3); 100 only in +Inf.
	if got := fetch.GetBucket()[3].GetCumulativeCount(); got != 1 {
		t.Errorf("fetch le=0.005 cumulative = %d, want 1", got)
	}
}

func TestPrometheusValuesFollowWrappers(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newTestMetrics(t, reg)
	m.MessagesAcked.Add(3)
	m.MessagesAcked.Inc()
	m.MessagesAcked.Add(-5) // ignored, a Prometheus counter would panic
	m.ConsumerNumPending.Set(10)
	m.ConsumerNumPending.Add(-2.5)
	m.ConsumerNumPending.Set(math.NaN()) // ignored

	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		met := mf.GetMetric()[0]
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			got[mf.GetName()] = met.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			got[mf.GetName()] = met.GetGauge().GetValue()
		}
	}
	if got["nats_sinks_messages_acked_total"] != 4 || m.MessagesAcked.Value() != 4 {
		t.Errorf("messages_acked_total = %v (prometheus), %d (wrapper), want 4", got["nats_sinks_messages_acked_total"], m.MessagesAcked.Value())
	}
	if got["nats_sinks_consumer_num_pending"] != 7.5 || m.ConsumerNumPending.Value() != 7.5 {
		t.Errorf("consumer_num_pending = %v (prometheus), %v (wrapper), want 7.5", got["nats_sinks_consumer_num_pending"], m.ConsumerNumPending.Value())
	}
}

func TestHistogramSummary(t *testing.T) {
	for _, tt := range []struct {
		name string
		obs  []float64
		want Summary
	}{
		{"none", nil, Summary{}},
		{"one", []float64{2}, Summary{Count: 1, Sum: 2, Min: 2, Max: 2, Last: 2}},
		{"min max last", []float64{3, 1, 5, 2}, Summary{Count: 4, Sum: 11, Min: 1, Max: 5, Last: 2}},
		{"negative first", []float64{-1, 4}, Summary{Count: 2, Sum: 3, Min: -1, Max: 4, Last: 4}},
		{"non-finite ignored", []float64{1, math.NaN(), math.Inf(1), math.Inf(-1)}, Summary{Count: 1, Sum: 1, Min: 1, Max: 1, Last: 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := newTestMetrics(t, nil)
			for _, v := range tt.obs {
				m.MessageAckSeconds.Observe(v)
			}
			if diff := cmp.Diff(tt.want, m.MessageAckSeconds.Summary()); diff != "" {
				t.Errorf("Summary() after %v mismatch (-want +got):\n%s", tt.obs, diff)
			}
		})
	}
}

func TestNilMetricsAreNoOps(t *testing.T) {
	var (
		c *Counter
		g *Gauge
		h *Histogram
		m *Metrics
	)
	c.Add(1)
	c.Inc()
	g.Set(1)
	g.Add(1)
	h.Observe(1)
	if c.Value() != 0 || g.Value() != 0 || h.Summary() != (Summary{}) {
		t.Errorf("nil metrics report values: %d %v %v", c.Value(), g.Value(), h.Summary())
	}
	// A Metrics literal (nil fields) and a nil *Metrics both snapshot zeros.
	var lit Metrics
	lit.MessagesAcked.Inc()
	for _, mm := range []*Metrics{m, &lit} {
		doc := parseSnapshot(t, mm.Snapshot(time.Unix(5, 0)))
		if doc.Counters["messages_acked_total"] != "0" {
			t.Errorf("messages_acked_total = %s, want 0", doc.Counters["messages_acked_total"])
		}
	}
	if cc, err := m.NewCounter("x_total", "x"); cc != nil || err != nil {
		t.Errorf("nil Metrics NewCounter = %v, %v, want nil, nil", cc, err)
	}
}

func TestNewMetricsRegistrationConflict(t *testing.T) {
	reg := prometheus.NewRegistry()
	newTestMetrics(t, reg)
	before, _ := reg.Gather()
	if _, err := NewMetrics(reg, "nats_sinks"); err == nil {
		t.Fatal("second NewMetrics on the same registry: got nil error")
	}
	after, _ := reg.Gather()
	if len(before) != len(after) {
		t.Errorf("failed NewMetrics changed the registry: %d families, want %d", len(after), len(before))
	}
	// Another namespace on the same registry works.
	if _, err := NewMetrics(reg, "other"); err != nil {
		t.Errorf("NewMetrics with another namespace: %v", err)
	}
}

func TestExtraMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newTestMetrics(t, reg)
	c, err := m.NewCounter("postgres_duplicates_total", "Rows already present.")
	if err != nil {
		t.Fatal(err)
	}
	h, err := m.NewHistogram("postgres_commit_seconds", "Commit duration.", nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.NewGauge("postgres_pool_open", "Open connections.")
	if err != nil {
		t.Fatal(err)
	}
	c.Add(2)
	h.Observe(0.5)
	g.Set(3)

	doc := parseSnapshot(t, m.Snapshot(time.Unix(0, 0)))
	if doc.Counters["postgres_duplicates_total"] != "2" || doc.Gauges["postgres_pool_open"] != "3.0" ||
		doc.Observations["postgres_commit_seconds"]["sum"] != "0.5" {
		t.Errorf("extras in snapshot: counter %s, gauge %s, histogram %v", doc.Counters["postgres_duplicates_total"],
			doc.Gauges["postgres_pool_open"], doc.Observations["postgres_commit_seconds"])
	}
	mfs, _ := reg.Gather()
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	for _, n := range []string{"nats_sinks_postgres_duplicates_total", "nats_sinks_postgres_commit_seconds", "nats_sinks_postgres_pool_open"} {
		if !slices.Contains(names, n) {
			t.Errorf("%s not registered", n)
		}
	}
	// A second sink of the same type shares the collector.
	if again, err := m.NewCounter("postgres_duplicates_total", "Rows already present."); err != nil || again != c {
		t.Errorf("NewCounter of an existing sink counter = %p, %v; want the same counter %p", again, err, c)
	}
	if again, err := m.NewHistogram("postgres_commit_seconds", "Commit duration.", nil); err != nil || again != h {
		t.Errorf("NewHistogram of an existing sink histogram = %p, %v; want %p", again, err, h)
	}
	for _, name := range []string{"postgres_commit_seconds", "postgres_pool_open", "messages_acked_total", "batch_write_seconds"} {
		if _, err := m.NewCounter(name, "dup"); err == nil {
			t.Errorf("NewCounter(%q) of a name taken by a core metric or another kind: got nil error", name)
		}
	}
}

func TestRegisterBuildInfo(t *testing.T) {
	reg := NewRegistry()
	if err := RegisterBuildInfo(reg, "nats_sinks", "1.2.3", "abc123"); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	var goCollector, processCollector bool
	for _, mf := range mfs {
		switch {
		case mf.GetName() == "nats_sinks_build_info":
			found = true
			met := mf.GetMetric()[0]
			labels := map[string]string{}
			for _, l := range met.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["version"] != "1.2.3" || labels["commit"] != "abc123" || !strings.HasPrefix(labels["go_version"], "go") {
				t.Errorf("build_info labels = %v", labels)
			}
			if v := met.GetGauge().GetValue(); v != 1 {
				t.Errorf("build_info = %v, want 1", v)
			}
		case mf.GetName() == "go_goroutines":
			goCollector = true
		case strings.HasPrefix(mf.GetName(), "process_"):
			processCollector = true
		}
	}
	if !found || !goCollector || !processCollector {
		t.Errorf("build_info %v, go collector %v, process collector %v; want all", found, goCollector, processCollector)
	}
	if err := RegisterBuildInfo(reg, "nats_sinks", "1.2.3", "abc123"); err == nil {
		t.Error("second RegisterBuildInfo: got nil error")
	}
}

func TestConcurrentUpdates(t *testing.T) {
	m := newTestMetrics(t, prometheus.NewRegistry())
	const workers, each = 8, 1000
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				m.MessagesAcked.Inc()
				m.CurrentBatchesInFlight.Add(1)
				m.CurrentBatchesInFlight.Add(-0.5)
				m.MessageAckSeconds.Observe(0.001)
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			if b := m.Snapshot(time.Unix(0, 0)); !json.Valid(b) {
				t.Errorf("snapshot during updates is not JSON: %s", b)
			}
		}
	})
	wg.Wait()
	if got := m.MessagesAcked.Value(); got != workers*each {
		t.Errorf("messages_acked_total = %d, want %d", got, workers*each)
	}
	if got := m.CurrentBatchesInFlight.Value(); got != workers*each*0.5 {
		t.Errorf("current_batches_in_flight = %v, want %v", got, workers*each*0.5)
	}
	if got := m.MessageAckSeconds.Summary().Count; got != workers*each {
		t.Errorf("message_ack_seconds count = %v, want %d", got, workers*each)
	}
}
