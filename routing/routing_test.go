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

func ptr[T any](v T) *T { return &v }

func req(n string) Target { return Target{Sink: n, Required: true} }
func opt(n string, w, t int) Target {
	return Target{Sink: n, MinimumWaitMS: ptr(w), TimeoutMS: ptr(t)}
}

func names(ts []Target) []string {
	out := []string{}
	for _, t := range ts {
		out = append(out, t.Sink)
	}
	return out
}

func TestMatch(t *testing.T) {
	env := &sink.Envelope{Subject: "orders.eu.new", Priority: "high", Classification: "secret",
		Labels: []string{"a", "b"}, Headers: sink.Headers{"X-Region": "EU"}}
	bare := &sink.Envelope{Subject: "orders.eu.new", Labels: []string{}}
	for _, tt := range []struct {
		name string
		m    Match
		env  *sink.Envelope
		want bool
	}{
		{"subject wildcard", Match{Subject: ptr("orders.*.new")}, env, true},
		{"subject miss", Match{Subject: ptr("orders.us.>")}, env, false},
		{"priority exact", Match{Priority: []string{"low", "high"}}, env, true},
		{"priority case-sensitive", Match{Priority: []string{"HIGH"}}, env, false},
		{"absent priority never matches", Match{Priority: []string{"high"}}, bare, false},
		{"classification", Match{Classification: []string{"secret"}}, env, true},
		{"absent classification", Match{Classification: []string{"secret"}}, bare, false},
		{"labels_all", Match{LabelsAll: []string{"a", "b"}}, env, true},
		{"labels_all partial", Match{LabelsAll: []string{"a", "c"}}, env, false},
		{"labels_any", Match{LabelsAny: []string{"c", "b"}}, env, true},
		{"labels_any absent labels", Match{LabelsAny: []string{"a"}}, bare, false},
		{"labels_none", Match{LabelsNone: []string{"c"}}, env, true},
		{"labels_none hit", Match{LabelsNone: []string{"b"}}, env, false},
		{"header name case-insensitive", Match{Headers: []HeaderMatch{{Name: "x-region", Values: []string{"EU"}}}}, env, true},
		{"header value case-sensitive", Match{Headers: []HeaderMatch{{Name: "X-Region", Values: []string{"eu"}}}}, env, false},
		{"absent header", Match{Headers: []HeaderMatch{{Name: "X-Region", Values: []string{"EU"}}}}, bare, false},
		{"combined all hold", Match{Subject: ptr("orders.>"), Priority: []string{"high"}, LabelsAny: []string{"a"}}, env, true},
		{"combined one fails", Match{Subject: ptr("orders.>"), Priority: []string{"low"}, LabelsAny: []string{"a"}}, env, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.m.Matches(tt.env); got != tt.want {
				t.Errorf("Matches(%+v) = %v, want %v", tt.env, got, tt.want)
			}
		})
	}
}

func TestSelect(t *testing.T) {
	routes := []Route{
		{Name: "r1", Match: Match{Subject: ptr("orders.>")}, Targets: []Target{req("db"), opt("audit", 100, 1000)}},
		{Name: "r2", Match: Match{Subject: ptr("orders.eu.*")}, Targets: []Target{opt("http", 500, 2000), req("audit")}},
		{Name: "r3", Match: Match{Subject: ptr("orders.eu.*")}, Targets: []Target{opt("http", 900, 1500)}},
	}
	e := &sink.Envelope{Subject: "orders.eu.new"}
	first := Policy{Mode: ModeFirst, Routes: routes}
	if got := first.Select(e); !cmp.Equal(names(got.Targets), []string{"db", "audit"}) || got.Action != ActionMatched || !cmp.Equal(got.Routes, []string{"r1"}) {
		t.Errorf("first: Select = %+v", got)
	}
	all := Policy{Mode: ModeAll, Routes: routes}
	got := all.Select(e)
	want := []Target{req("db"), req("audit"), opt("http", 900, 2000)}
	if diff := cmp.Diff(want, got.Targets); diff != "" {
		t.Errorf("all: Select targets (-want +got):\n%s", diff)
	}
	miss := &sink.Envelope{Subject: "billing.x"}
	for _, tt := range []struct {
		noMatch string
		action  string
		targets []string
	}{
		{NoMatchReject, ActionReject, []string{}},
		{NoMatchIgnore, ActionIgnore, []string{}},
		{NoMatchDefault, ActionDefault, []string{"fallback"}},
	} {
		p := Policy{Mode: ModeFirst, NoMatch: tt.noMatch, Routes: routes, DefaultTargets: []Target{req("fallback")}}
		got := p.Select(miss)
		if got.Action != tt.action || !cmp.Equal(names(got.Targets), tt.targets) {
			t.Errorf("no_match %s: Select = %+v, want %s %v", tt.noMatch, got, tt.action, tt.targets)
		}
	}
}

// fakeTarget is a hand-written sink whose outcome per stream sequence is
// scripted; hold, when set, blocks WriteBatch until it is closed or ctx ends.
type fakeTarget struct {
	mu      sync.Mutex
	outcome map[uint64]sink.Result
	shared  *sink.Result // every message of a call that holds more than one gets this
	hold    chan struct{}
	written []uint64
	calls   int
}

func (f *fakeTarget) Type() string { return "fake" }
func (f *fakeTarget) WriteBatch(ctx context.Context, b []*sink.Envelope) []sink.Result {
	if f.hold != nil {
		select {
		case <-f.hold:
		case <-ctx.Done():
			return all(len(b), sink.Result{Outcome: sink.Temporary, Err: ctx.Err()})
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	out := make([]sink.Result, len(b))
	if f.shared != nil && len(b) > 1 {
		for _, e := range b {
			if _, bad := f.outcome[e.StreamSequence]; bad {
				return all(len(b), *f.shared)
			}
		}
	}
	for i, e := range b {
		if r, ok := f.outcome[e.StreamSequence]; ok {
			out[i] = r
			continue
		}
		out[i] = sink.Ok
		f.written = append(f.written, e.StreamSequence)
	}
	return out
}
func (f *fakeTarget) Stop(context.Context) error { return nil }

// fakeOpener opens a scripted target, or fails with err.
type fakeOpener struct {
	t   sink.Sink
	err error
}

func (o fakeOpener) Open(context.Context, sink.Deps) (sink.Sink, error) {
	if o.err != nil {
		return nil, o.err
	}
	return o.t, nil
}

func newSinkWith(t *testing.T, p Policy, targets map[string]sink.Sink, byBatch bool, deps sink.Deps) *Sink {
	t.Helper()
	f := &Fanout{Policy: p, Targets: map[string]sink.Opener{}, Isolation: "message",
		ProbeBackoff: func(int) time.Duration { return time.Second }}
	if byBatch {
		f.Isolation = "batch"
	}
	for n, x := range targets {
		f.Targets[n] = fakeOpener{t: x}
	}
	s, err := f.Open(context.Background(), deps)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	return s.(*Sink)
}

func newSink(t *testing.T, p Policy, targets map[string]*fakeTarget, byBatch bool) *Sink {
	t.Helper()
	m := map[string]sink.Sink{}
	for n, x := range targets {
		m[n] = x
	}
	return newSinkWith(t, p, m, byBatch, sink.Deps{})
}

func envs(subjects ...string) []*sink.Envelope {
	out := make([]*sink.Envelope, len(subjects))
	for i, s := range subjects {
		out[i] = &sink.Envelope{Subject: s, StreamSequence: uint64(i + 1)}
	}
	return out
}

func outcomes(rs []sink.Result) []sink.Outcome {
	out := make([]sink.Outcome, len(rs))
	for i, r := range rs {
		out[i] = r.Outcome
	}
	return out
}

// TestGateMixedBatch: A routes to X and Y, B to Y only; X fails
// temporarily, so B is committed and A is not.
func TestGateMixedBatch(t *testing.T) {
	x := &fakeTarget{outcome: map[uint64]sink.Result{1: {Outcome: sink.Temporary, Err: errors.New("lock timeout")}}}
	y := &fakeTarget{}
	p := Policy{Mode: ModeFirst, Routes: []Route{
		{Name: "a", Match: Match{Subject: ptr("a")}, Targets: []Target{req("x"), req("y")}},
		{Name: "b", Match: Match{Subject: ptr("b")}, Targets: []Target{req("y")}},
	}}
	s := newSink(t, p, map[string]*fakeTarget{"x": x, "y": y}, false)
	got := s.WriteBatch(t.Context(), envs("a", "b"))
	if diff := cmp.Diff([]sink.Outcome{sink.Temporary, sink.Committed}, outcomes(got)); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
	var te *TargetError
	if !errors.As(got[0].Err, &te) || te.Target != "x" || got[0].Err.Error() != "x: lock timeout" {
		t.Errorf("error = %v, want a TargetError naming x", got[0].Err)
	}
	if diff := cmp.Diff([]uint64{1, 2}, y.written); diff != "" {
		t.Errorf("y written (-want +got):\n%s", diff)
	}
}

// TestGatePermanentPerTarget: a message a required target refuses is
// permanent with that target's error; the copy in the other target stays.
// Bisection happens inside the refusing target only.
func TestGatePermanentPerTarget(t *testing.T) {
	perm := sink.Result{Outcome: sink.Permanent, ErrorType: sink.ValidationError, Err: errors.New("bad row"), Shared: true}
	x := &fakeTarget{outcome: map[uint64]sink.Result{2: {Outcome: sink.Permanent, ErrorType: sink.ValidationError, Err: errors.New("bad row")}}, shared: &perm}
	y := &fakeTarget{}
	p := Policy{Mode: ModeFirst, Routes: []Route{{Name: "r", Match: Match{Subject: ptr(">")}, Targets: []Target{req("x"), req("y")}}}}
	s := newSink(t, p, map[string]*fakeTarget{"x": x, "y": y}, false)
	got := s.WriteBatch(t.Context(), envs("a", "a", "a"))
	if diff := cmp.Diff([]sink.Outcome{sink.Committed, sink.Permanent, sink.Committed}, outcomes(got)); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
	if got[1].ErrorType != sink.ValidationError || got[1].Err.Error() != "x: bad row" || got[1].Shared {
		t.Errorf("result[1] = %+v", got[1])
	}
	if y.calls != 1 || len(y.written) != 3 {
		t.Errorf("y: %d calls, written %v; want one call with all three", y.calls, y.written)
	}
	// With batch isolation the whole batch takes the temporary path.
	x2 := &fakeTarget{outcome: x.outcome, shared: &perm}
	s = newSink(t, p, map[string]*fakeTarget{"x": x2, "y": &fakeTarget{}}, true)
	got = s.WriteBatch(t.Context(), envs("a", "a", "a"))
	if diff := cmp.Diff([]sink.Outcome{sink.Temporary, sink.Temporary, sink.Temporary}, outcomes(got)); diff != "" {
		t.Errorf("batch isolation outcomes (-want +got):\n%s", diff)
	}
}

func TestGateNoMatch(t *testing.T) {
	x := &fakeTarget{}
	routes := []Route{{Name: "r", Match: Match{Subject: ptr("a")}, Targets: []Target{req("x")}}}
	s := newSink(t, Policy{Mode: ModeFirst, NoMatch: NoMatchReject, Routes: routes}, map[string]*fakeTarget{"x": x}, false)
	got := s.WriteBatch(t.Context(), envs("a", "zzz"))
	if got[0].Outcome != sink.Committed || got[1].Outcome != sink.Permanent || got[1].Err.Error() != ErrNoRoute || got[1].ErrorType != sink.PermanentSinkError {
		t.Errorf("reject: results %+v", got)
	}
	var te *TargetError
	if errors.As(got[1].Err, &te) {
		t.Errorf("reject error names a target: %v", got[1].Err)
	}
	x = &fakeTarget{}
	s = newSink(t, Policy{Mode: ModeFirst, NoMatch: NoMatchReject, Routes: routes}, map[string]*fakeTarget{"x": x}, true)
	got = s.WriteBatch(t.Context(), envs("a", "zzz"))
	if diff := cmp.Diff([]sink.Outcome{sink.Permanent, sink.Permanent}, outcomes(got)); diff != "" || x.calls != 0 {
		t.Errorf("batch reject: outcomes %v, %d writes; want all permanent, none written", outcomes(got), x.calls)
	}
	x = &fakeTarget{}
	s = newSink(t, Policy{Mode: ModeFirst, NoMatch: NoMatchIgnore, Routes: routes}, map[string]*fakeTarget{"x": x}, false)
	got = s.WriteBatch(t.Context(), envs("zzz"))
	if got[0].Outcome != sink.Committed || x.calls != 0 {
		t.Errorf("ignore: %+v, %d writes", got, x.calls)
	}
}

// TestGateHoldsUntilRequiredCommits: WriteBatch does not return while a
// required target is still writing.
func TestGateHoldsUntilRequiredCommits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		x := &fakeTarget{hold: make(chan struct{})}
		p := Policy{Mode: ModeFirst, Routes: []Route{{Name: "r", Match: Match{Subject: ptr(">")}, Targets: []Target{req("x")}}}}
		s := newSink(t, p, map[string]*fakeTarget{"x": x}, false)
		done := make(chan []sink.Result)
		go func() { done <- s.WriteBatch(context.Background(), envs("a", "b")) }()
		time.Sleep(time.Hour)
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("WriteBatch returned while the required target was still writing")
		default:
		}
		close(x.hold)
		got := <-done
		if diff := cmp.Diff([]sink.Outcome{sink.Committed, sink.Committed}, outcomes(got)); diff != "" {
			t.Errorf("outcomes (-want +got):\n%s", diff)
		}
	})
}

// TestGateOptionalWindow: a hanging optional target is cancelled at
// D = max(TR, min(TR+w, T0+t)) and never blocks the commit; an all-optional
// route commits even when the copy fails.
func TestGateOptionalWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		x := &fakeTarget{}
		hang := &fakeTarget{hold: make(chan struct{})}
		p := Policy{Mode: ModeFirst, Routes: []Route{{Name: "r", Match: Match{Subject: ptr(">")}, Targets: []Target{req("x"), opt("hang", 250, 1000)}}}}
		s := newSink(t, p, map[string]*fakeTarget{"x": x, "hang": hang}, false)
		start := time.Now()
		got := s.WriteBatch(context.Background(), envs("a"))
		if el := time.Since(start); el != 250*time.Millisecond {
			t.Errorf("gate released after %v, want 250ms (TR + minimum_wait_ms)", el)
		}
		if got[0].Outcome != sink.Committed {
			t.Errorf("outcome = %v, want committed", got[0].Outcome)
		}

		failing := &fakeTarget{outcome: map[uint64]sink.Result{1: {Outcome: sink.Temporary, Err: errors.New("down")}}}
		p = Policy{Mode: ModeFirst, Routes: []Route{{Name: "r", Match: Match{Subject: ptr(">")}, Targets: []Target{opt("f", 100, 1000)}}}}
		s = newSink(t, p, map[string]*fakeTarget{"f": failing}, false)
		if got := s.WriteBatch(context.Background(), envs("a")); got[0].Outcome != sink.Committed {
			t.Errorf("all-optional outcome = %v, want committed", got[0].Outcome)
		}
	})
}

// unknownOutcome is an outcome the gate does not know, standing for one
// added to package sink later.
const unknownOutcome = sink.Outcome(99)

func TestGateUnknownOutcomeIsNotCommitted(t *testing.T) {
	x := &fakeTarget{outcome: map[uint64]sink.Result{1: {Outcome: unknownOutcome}}}
	p := Policy{Mode: ModeFirst, Routes: []Route{{Name: "r", Match: Match{Subject: ptr(">")}, Targets: []Target{req("x")}}}}
	s := newSink(t, p, map[string]*fakeTarget{"x": x}, false)
	if got := s.WriteBatch(t.Context(), envs("a")); got[0].Outcome != sink.Temporary {
		t.Errorf("outcome = %v, want temporary", got[0].Outcome)
	}
}

// TestGateDefaultRoute: under no_match "default_route" a message no route
// matches is written to the default targets only, and a matching one to
// its route's targets only.
func TestGateDefaultRoute(t *testing.T) {
	x, fallback := &fakeTarget{}, &fakeTarget{}
	p := Policy{Mode: ModeFirst, NoMatch: NoMatchDefault, DefaultTargets: []Target{req("fallback")},
		Routes: []Route{{Name: "r", Match: Match{Subject: ptr("a")}, Targets: []Target{req("x")}}}}
	s := newSink(t, p, map[string]*fakeTarget{"x": x, "fallback": fallback}, false)
	got := s.WriteBatch(t.Context(), envs("a", "zzz", "a", "yyy"))
	if diff := cmp.Diff([]sink.Outcome{sink.Committed, sink.Committed, sink.Committed, sink.Committed}, outcomes(got)); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]uint64{1, 3}, x.written); diff != "" {
		t.Errorf("route target written (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]uint64{2, 4}, fallback.written); diff != "" {
		t.Errorf("default target written (-want +got):\n%s", diff)
	}
	if s.Ignored(envs("zzz")[0]) {
		t.Errorf("a default-routed message reported as ignored")
	}
}
