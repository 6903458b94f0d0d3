package routing

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/sink"
)

// fakeMetrics records every instrument by name.
type fakeMetrics struct {
	mu     sync.Mutex
	counts map[string]int
	gauges map[string]float64
	obs    map[string][]float64 // observed values per histogram
}

func newFakeMetrics() *fakeMetrics {
	return &fakeMetrics{counts: map[string]int{}, gauges: map[string]float64{}, obs: map[string][]float64{}}
}

type fakeCounter struct {
	m    *fakeMetrics
	name string
}

func (c fakeCounter) Add(n int) {
	if n <= 0 {
		return
	}
	c.m.mu.Lock()
	c.m.counts[c.name] += n
	c.m.mu.Unlock()
}
func (c fakeCounter) Set(v float64) {
	c.m.mu.Lock()
	c.m.gauges[c.name] = v
	c.m.mu.Unlock()
}
func (c fakeCounter) Observe(v float64) {
	c.m.mu.Lock()
	c.m.obs[c.name] = append(c.m.obs[c.name], v)
	c.m.mu.Unlock()
}
func (c fakeCounter) With(...string) sink.Counter { return c }

func (m *fakeMetrics) Counter(n, _ string) (sink.Counter, error) { return fakeCounter{m, n}, nil }
func (m *fakeMetrics) Gauge(n, _ string) (sink.Gauge, error)     { return fakeCounter{m, n}, nil }
func (m *fakeMetrics) Histogram(n, _ string, _ []float64) (sink.Histogram, error) {
	return fakeCounter{m, n}, nil
}
func (m *fakeMetrics) CounterVec(n, _ string, _ ...string) (sink.CounterVec, error) {
	return fakeCounter{m, n}, nil
}

func (m *fakeMetrics) snapshot() (map[string]int, map[string]float64, map[string][]float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, g, o := map[string]int{}, map[string]float64{}, map[string][]float64{}
	for k, v := range m.counts {
		c[k] = v
	}
	for k, v := range m.gauges {
		g[k] = v
	}
	for k, v := range m.obs {
		o[k] = append([]float64(nil), v...)
	}
	return c, g, o
}

// TestMetricValues drives a scripted scenario through the gate and checks
// the exact value of every fanout_* series afterwards, and the target
// write calls the sink reports for sink_batches_written_total and
// sink_batch_write_seconds (calls that committed at least one message).
// Every counter of the scenario ends non-zero, so that a wrong increment of
// any of them shows as a difference; the histograms are compared value by
// value (synctest time: the only wait is audit's 100 ms window).
func TestMetricValues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Batch 1: a→{x req, audit opt}, b→{x req, y req}, c (no route,
		// reject), d→{y req} through two matching routes under mode all.
		// x refuses b temporarily; audit hangs past its window.
		x := &fakeTarget{outcome: map[uint64]sink.Result{2: {Outcome: sink.Temporary, Err: errors.New("lock")}}}
		y := &fakeTarget{}
		audit := &fakeTarget{hold: make(chan struct{})}
		spare := &fakeTarget{outcome: map[uint64]sink.Result{1: {Outcome: sink.Temporary, Err: errors.New("down")}}}
		side := &fakeTarget{}
		perm := sink.Result{Outcome: sink.Permanent, ErrorType: sink.ValidationError, Err: errors.New("bad row"), Shared: true}
		bad := &fakeTarget{outcome: map[uint64]sink.Result{2: {Outcome: sink.Permanent, ErrorType: sink.ValidationError, Err: errors.New("bad row")}}, shared: &perm}
		p := Policy{Mode: ModeAll, NoMatch: NoMatchReject, Routes: []Route{
			{Name: "ra", Match: Match{Subject: ptr("a")}, Targets: []Target{req("x"), opt("audit", 100, 500)}},
			{Name: "rb", Match: Match{Subject: ptr("b")}, Targets: []Target{req("x"), req("y")}},
			{Name: "rd1", Match: Match{Subject: ptr("d")}, Targets: []Target{req("y")}},
			{Name: "rd2", Match: Match{Subject: ptr("d")}, Targets: []Target{req("y")}},
			{Name: "re", Match: Match{Subject: ptr("e")}, Targets: []Target{opt("spare", 100, 500)}},
			{Name: "rf", Match: Match{Subject: ptr("f")}, Targets: []Target{opt("side", 100, 500)}},
			{Name: "rg", Match: Match{Subject: ptr("g")}, Targets: []Target{req("bad")}},
		}}
		fm := newFakeMetrics()
		s := newSinkWith(t, p, map[string]sink.Sink{"x": x, "y": y, "audit": audit, "spare": spare, "side": side, "bad": bad}, false, sink.Deps{Metrics: fm})
		var (
			wmu    sync.Mutex
			writes []time.Duration
		)
		s.CountWrites(func(d time.Duration) { wmu.Lock(); writes = append(writes, d); wmu.Unlock() })

		got := s.WriteBatch(context.Background(), envs("a", "b", "c", "d"))
		if diff := cmp.Diff([]sink.Outcome{sink.Committed, sink.Temporary, sink.Permanent, sink.Committed}, outcomes(got)); diff != "" {
			t.Fatalf("batch 1 outcomes (-want +got):\n%s", diff)
		}
		// Batch 2: e routes to the optional spare only, which fails; f to
		// the optional side, which commits.
		if got := s.WriteBatch(context.Background(), envs("e", "f")); got[0].Outcome != sink.Committed || got[1].Outcome != sink.Committed {
			t.Fatalf("batch 2 outcomes = %v, want committed", outcomes(got))
		}
		// Batch 3: three messages to the required bad, which refuses the
		// second one inside a shared transaction: bisection makes four
		// more calls ([1 2], [1], [2], [3]), two of which commit.
		got = s.WriteBatch(context.Background(), envs("g", "g", "g"))
		if diff := cmp.Diff([]sink.Outcome{sink.Committed, sink.Permanent, sink.Committed}, outcomes(got)); diff != "" {
			t.Fatalf("batch 3 outcomes (-want +got):\n%s", diff)
		}
		if bad.calls != 5 {
			t.Errorf("bad called %d times, want 5 (the batch and four bisection parts)", bad.calls)
		}
		c, g, o := fm.snapshot()
		want := map[string]int{
			"fanout_route_matches_total":          1 + 1 + 2 + 1 + 1 + 3, // a, b, d twice, e, f, g×3
			"fanout_messages_routed_total":        3 + 2 + 3,
			"fanout_messages_no_route_total":      1,                     // c
			"fanout_child_sinks_selected_total":   2 + 2 + 1 + 1 + 1 + 3, // d's two routes name y once
			"fanout_required_child_success_total": 1,                     // y
			"fanout_required_child_failure_total": 2,                     // x, bad
			"fanout_optional_child_success_total": 1,                     // side
			"fanout_optional_child_timeout_total": 1,                     // audit
			"fanout_optional_child_failure_total": 1,                     // spare
			"fanout_messages_acked_total":         6,                     // a, d, e, f, g1, g3
			"fanout_messages_ack_blocked_total":   2,                     // b, g2
		}
		if diff := cmp.Diff(want, c); diff != "" {
			t.Errorf("counters (-want +got):\n%s", diff)
		}
		wantG := map[string]float64{"current_fanout_child_sinks_selected": 1, "fanout_targets_unhealthy": 0}
		if diff := cmp.Diff(wantG, g); diff != "" {
			t.Errorf("gauges (-want +got):\n%s", diff)
		}
		// Batch 1 waits audit's minimum_wait_ms after the required copies
		// (TR = T0 here); the others release at once.
		wantO := map[string][]float64{
			"fanout_ack_gate_wait_seconds": {0.1, 0, 0},
			"fanout_batch_seconds":         {0.1, 0, 0},
		}
		if diff := cmp.Diff(wantO, o); diff != "" {
			t.Errorf("histogram observations (-want +got):\n%s", diff)
		}
		// Write calls that committed something: x (a) and y in batch 1,
		// side in batch 2, [1] and [3] in batch 3. audit (cancelled),
		// spare (failed) and bad's failing parts are not counted.
		if diff := cmp.Diff([]time.Duration{0, 0, 0, 0, 0}, writes); diff != "" {
			t.Errorf("reported write calls (-want +got):\n%s", diff)
		}
		close(audit.hold)
	})
}

// healthTarget is a fake target with a scripted destination state and an
// optional Healthcheck.
type healthTarget struct {
	mu     sync.Mutex
	down   bool
	calls  int
	checks int
}

func (h *healthTarget) Type() string { return "fake" }
func (h *healthTarget) WriteBatch(_ context.Context, b []*sink.Envelope) []sink.Result {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	if h.down {
		return all(len(b), sink.Result{Outcome: sink.Destination, Err: errors.New("auth failed")})
	}
	return all(len(b), sink.Ok)
}
func (h *healthTarget) Stop(context.Context) error { return nil }
func (h *healthTarget) Healthcheck(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checks++
	if h.down {
		return errors.New("auth failed")
	}
	return nil
}
func (h *healthTarget) set(down bool) { h.mu.Lock(); h.down = down; h.mu.Unlock() }
func (h *healthTarget) counts() (int, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls, h.checks
}

// TestOptionalOnlyTargetCircuit: a destination failure of a target that no
// route requires opens only its own circuit: messages still commit, later
// operations fail at once without calling it, it is probed with the
// back-off, and a passing probe closes the circuit.
func TestOptionalOnlyTargetCircuit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		x := &healthTarget{}
		side := &healthTarget{down: true}
		p := Policy{Mode: ModeFirst, Routes: []Route{{Name: "r", Match: Match{Subject: ptr(">")}, Targets: []Target{req("x"), opt("side", 1000, 1000)}}}}
		fm := newFakeMetrics()
		s := newSinkWith(t, p, map[string]sink.Sink{"x": x, "side": side}, false, sink.Deps{Metrics: fm})
		if got := s.WriteBatch(context.Background(), envs("a")); got[0].Outcome != sink.Committed {
			t.Fatalf("outcome = %v, want committed (optional destination failure)", got[0].Outcome)
		}
		if diff := cmp.Diff(map[string]bool{"x": true, "side": false}, s.TargetHealth()); diff != "" {
			t.Errorf("TargetHealth after the failure (-want +got):\n%s", diff)
		}
		if _, g, _ := fm.snapshot(); g["fanout_targets_unhealthy"] != 1 {
			t.Errorf("fanout_targets_unhealthy = %v, want 1", g["fanout_targets_unhealthy"])
		}
		if err := s.Healthcheck(context.Background()); err != nil {
			t.Errorf("Healthcheck = %v; an optional-only target must not fail it", err)
		}
		// While open, side is skipped.
		if got := s.WriteBatch(context.Background(), envs("b")); got[0].Outcome != sink.Committed {
			t.Fatalf("outcome = %v, want committed", got[0].Outcome)
		}
		if calls, _ := side.counts(); calls != 1 {
			t.Errorf("side called %d times, want 1 (skipped while its circuit is open)", calls)
		}
		c, _, _ := fm.snapshot()
		if c["fanout_optional_child_failure_total"] != 2 {
			t.Errorf("fanout_optional_child_failure_total = %d, want 2", c["fanout_optional_child_failure_total"])
		}
		// The first probe (after 1 s) fails; the second passes.
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()
		if _, checks := side.counts(); checks != 1 {
			t.Errorf("probes after 1.1 s = %d, want 1", checks)
		}
		side.set(false)
		time.Sleep(time.Second)
		synctest.Wait()
		if diff := cmp.Diff(map[string]bool{"x": true, "side": true}, s.TargetHealth()); diff != "" {
			t.Errorf("TargetHealth after the probe passed (-want +got):\n%s", diff)
		}
		if _, g, _ := fm.snapshot(); g["fanout_targets_unhealthy"] != 0 {
			t.Errorf("fanout_targets_unhealthy = %v, want 0", g["fanout_targets_unhealthy"])
		}
		s.WriteBatch(context.Background(), envs("c"))
		if calls, _ := side.counts(); calls != 2 {
			t.Errorf("side called %d times, want 2 (written again once healthy)", calls)
		}
	})
}

// TestRequiredTargetCircuit: a destination failure of a required target
// reaches the runner as the message's destination result (the process
// circuit); the other target still commits its messages; Healthcheck then
// probes only the broken target and closes its circuit when it passes.
func TestRequiredTargetCircuit(t *testing.T) {
	x := &healthTarget{down: true}
	y := &healthTarget{down: true}
	p := Policy{Mode: ModeFirst, Routes: []Route{
		{Name: "a", Match: Match{Subject: ptr("a")}, Targets: []Target{req("x")}},
		{Name: "b", Match: Match{Subject: ptr("b")}, Targets: []Target{req("y")}},
	}}
	s := newSinkWith(t, p, map[string]sink.Sink{"x": x, "y": y}, false, sink.Deps{})
	y.set(false)
	got := s.WriteBatch(context.Background(), envs("a", "b"))
	if diff := cmp.Diff([]sink.Outcome{sink.Destination, sink.Committed}, outcomes(got)); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]bool{"x": false, "y": true}, s.TargetHealth()); diff != "" {
		t.Errorf("TargetHealth (-want +got):\n%s", diff)
	}
	if err := s.Healthcheck(context.Background()); err == nil || err.Error() != "sinks.x: auth failed" {
		t.Errorf("Healthcheck = %v, want sinks.x: auth failed", err)
	}
	_, yChecks := y.counts()
	x.set(false)
	if err := s.Healthcheck(context.Background()); err != nil {
		t.Errorf("Healthcheck = %v, want nil", err)
	}
	if _, n := y.counts(); n != yChecks {
		t.Errorf("y checked during x's probe")
	}
	if diff := cmp.Diff(map[string]bool{"x": true, "y": true}, s.TargetHealth()); diff != "" {
		t.Errorf("TargetHealth after the probe (-want +got):\n%s", diff)
	}
}

// stopTarget records its Stop in order.
type stopTarget struct {
	fakeTarget
	name string
	log  *[]string
}

func (s *stopTarget) Stop(context.Context) error { *s.log = append(*s.log, "stop "+s.name); return nil }

// TestOpenFailureStopsOpened: a target failing to open stops the ones
// opened before it in reverse order; its error names sinks.<name>, and a
// configuration problem keeps its paths under sinks.<name>.
func TestOpenFailureStopsOpened(t *testing.T) {
	var log []string
	f := &Fanout{Policy: Policy{}, Targets: map[string]sink.Opener{
		"a": fakeOpener{t: &stopTarget{name: "a", log: &log}},
		"b": fakeOpener{t: &stopTarget{name: "b", log: &log}},
		"c": fakeOpener{err: errors.New("connection refused")},
		"d": fakeOpener{t: &stopTarget{name: "d", log: &log}},
	}}
	_, err := f.Open(context.Background(), sink.Deps{})
	if err == nil || err.Error() != "sinks.c: connection refused" {
		t.Errorf("Open = %v, want sinks.c: connection refused", err)
	}
	if diff := cmp.Diff([]string{"stop b", "stop a"}, log); diff != "" {
		t.Errorf("stops (-want +got):\n%s", diff)
	}
	f.Targets["c"] = fakeOpener{err: &sink.ConfigError{Problems: []sink.Problem{{Path: "password_env", Message: "not set"}}}}
	log = nil
	_, err = f.Open(context.Background(), sink.Deps{})
	ce, ok := errors.AsType[*sink.ConfigError](err)
	if !ok || len(ce.Problems) != 1 || ce.Problems[0].Path != "sinks.c.password_env" {
		t.Errorf("Open = %#v, want a configuration error at sinks.c.password_env", err)
	}
}

// TestHealthcheckIgnoresOptionalOnlyTargets: the fanout health check (the
// runner's probe while the process circuit is open) never fails because of
// a target that no route requires, whether or not its circuit is open; a
// failing required target fails it.
func TestHealthcheckIgnoresOptionalOnlyTargets(t *testing.T) {
	x := &healthTarget{}
	side := &healthTarget{down: true} // circuit closed: it has not been written yet
	p := Policy{Mode: ModeFirst, Routes: []Route{{Name: "r", Match: Match{Subject: ptr(">")}, Targets: []Target{req("x"), opt("side", 0, 0)}}}}
	s := newSinkWith(t, p, map[string]sink.Sink{"x": x, "side": side}, false, sink.Deps{})
	if err := s.Healthcheck(context.Background()); err != nil {
		t.Errorf("Healthcheck = %v with only the optional-only target failing, want nil", err)
	}
	if _, checks := side.counts(); checks != 0 {
		t.Errorf("optional-only target checked %d times, want 0", checks)
	}
	if _, checks := x.counts(); checks != 1 {
		t.Errorf("required target checked %d times, want 1", checks)
	}
	x.set(true)
	if err := s.Healthcheck(context.Background()); err == nil || err.Error() != "sinks.x: auth failed" {
		t.Errorf("Healthcheck = %v with the required target failing, want sinks.x: auth failed", err)
	}
}

// TestProbeByWrite: a required target without a health check whose circuit
// is open makes the sink ask for a half-open probe batch; a commit closes
// its circuit and ends that; an optional-only target never asks for it.
func TestProbeByWrite(t *testing.T) {
	dest := sink.Result{Outcome: sink.Destination, Err: errors.New("401")}
	web := &fakeTarget{outcome: map[uint64]sink.Result{1: dest}}
	side := &fakeTarget{outcome: map[uint64]sink.Result{1: dest}}
	p := Policy{Mode: ModeFirst, Routes: []Route{{Name: "r", Match: Match{Subject: ptr(">")}, Targets: []Target{req("web"), opt("side", 0, 1000)}}}}
	s := newSink(t, p, map[string]*fakeTarget{"web": web, "side": side}, false)
	if s.ProbeByWrite() {
		t.Fatalf("ProbeByWrite before any failure = true")
	}
	s.WriteBatch(t.Context(), envs("a"))
	if !s.ProbeByWrite() {
		t.Errorf("ProbeByWrite with the required target down = false, want true")
	}
	delete(web.outcome, 1)
	s.WriteBatch(t.Context(), envs("a"))
	if diff := cmp.Diff(map[string]bool{"web": true, "side": false}, s.TargetHealth()); diff != "" {
		t.Errorf("TargetHealth (-want +got):\n%s", diff)
	}
	if s.ProbeByWrite() {
		t.Errorf("ProbeByWrite with only the optional-only target down = true, want false")
	}
}
