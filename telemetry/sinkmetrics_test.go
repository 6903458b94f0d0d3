package telemetry

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestForSinks: a sink's metrics get the namespace, are registered once
// and shared by a second sink asking for the same name, and a name taken
// by a core metric gives a working no-op instead of failing the sink.
func TestForSinks(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, "ns")
	if err != nil {
		t.Fatal(err)
	}
	if (*Metrics)(nil).ForSinks() != nil {
		t.Error("nil Metrics: ForSinks() is not nil")
	}
	sm := m.ForSinks()
	c1, err := sm.Counter("x_total", "x")
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := sm.Counter("x_total", "x")
	c1.Add(2)
	c2.Add(3)
	h, err := sm.Histogram("x_seconds", "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	h.Observe(0.5)
	g, _ := sm.Gauge("x_level", "x")
	g.Set(7)
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		v := mf.GetMetric()[0]
		switch {
		case v.GetCounter() != nil:
			got[mf.GetName()] = v.GetCounter().GetValue()
		case v.GetGauge() != nil:
			got[mf.GetName()] = v.GetGauge().GetValue()
		case v.GetHistogram() != nil:
			got[mf.GetName()] = v.GetHistogram().GetSampleSum()
		}
	}
	for name, want := range map[string]float64{"ns_x_total": 5, "ns_x_seconds": 0.5, "ns_x_level": 7} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
	taken, err := sm.Counter("messages_acked_total", "x")
	if err == nil {
		t.Error("a sink counter named like a core metric was accepted")
	}
	taken.Add(1) // a no-op, not a panic
	if m.MessagesAcked.Value() != 0 {
		t.Error("the refused sink counter counted into the core metric")
	}
}
