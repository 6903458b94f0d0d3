package sqlmodel

import (
	"testing"

	"github.com/nats-sinks/nats-sink/telemetry"
)

// TestMetricsNameTaken: a second sink asking for a name its Metrics already
// holds is not refused; it gets the existing collector or a no-op, never a
// second, separate one.
func TestMetricsNameTaken(t *testing.T) {
	if Counter(nil, "x_total", "x") != nil || Histogram(nil, "x_seconds", "x") != nil {
		t.Error("nil Metrics gave non-nil collectors")
	}
	m, err := telemetry.NewMetrics(nil, "nats_sinks")
	if err != nil {
		t.Fatal(err)
	}
	first := Counter(m, "x_total", "x")
	if first == nil {
		t.Fatal("first Counter = nil")
	}
	first.Add(2)
	second := Counter(m, "x_total", "x")
	second.Add(3) // a nil counter is a no-op
	if second != nil && second != first {
		t.Errorf("second Counter = %p, a new collector beside %p", second, first)
	}
	if got, want := first.Value(), map[bool]uint64{true: 2, false: 5}[second == nil]; got != want {
		t.Errorf("x_total = %d, want %d", got, want)
	}
	h1, h2 := Histogram(m, "x_seconds", "x"), Histogram(m, "x_seconds", "x")
	if h1 == nil || (h2 != nil && h2 != h1) {
		t.Errorf("Histogram twice = %p, %p", h1, h2)
	}
	// A name of the core metrics is refused by telemetry: the sink gets
	// a no-op, not a failure.
	if c := Counter(m, "messages_acked_total", "x"); c != nil {
		t.Errorf("Counter(core name) = %p, want nil", c)
	}
}
