package routing

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/sink"
)

// fakeTracer records the target write spans and message attributes the
// gate produces.
type fakeTracer struct {
	mu    sync.Mutex
	spans []*fakeSpan
	msg   map[uint64]map[string]any
}

type fakeSpan struct {
	name  string
	n     int
	attrs map[string]any
	fail  string
	ended bool
}

func (s *fakeSpan) SetAttributes(attrs ...sink.Attr) {
	for _, a := range attrs {
		s.attrs[a.Key] = a.Value
	}
}
func (s *fakeSpan) Fail(et string, _ error) { s.fail = et }
func (s *fakeSpan) End()                    { s.ended = true }

func (f *fakeTracer) StartClient(ctx context.Context, _ *sink.Envelope, _ string, _ bool, _ ...sink.Attr) (context.Context, sink.Span) {
	return ctx, &fakeSpan{attrs: map[string]any{}}
}
func (f *fakeTracer) TraceHeaders(context.Context, *sink.Envelope) map[string]string { return nil }
func (f *fakeTracer) StartWrite(ctx context.Context, set []*sink.Envelope, name string, depth int, attrs ...sink.Attr) (context.Context, sink.Span) {
	s := &fakeSpan{name: name, n: len(set), attrs: map[string]any{"depth": depth}}
	s.SetAttributes(attrs...)
	f.mu.Lock()
	f.spans = append(f.spans, s)
	f.mu.Unlock()
	return ctx, s
}
func (f *fakeTracer) MessageAttributes(_ context.Context, e *sink.Envelope, attrs ...sink.Attr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := map[string]any{}
	for _, a := range attrs {
		m[a.Key] = a.Value
	}
	f.msg[e.StreamSequence] = m
}

// TestTargetSpans: one "write <type>" span per target call with the target,
// its role and its status; message spans get the route action, routes and
// targets.
func TestTargetSpans(t *testing.T) {
	x := &fakeTarget{outcome: map[uint64]sink.Result{2: {Outcome: sink.Temporary, Err: errors.New("lock")}}}
	y := &fakeTarget{}
	p := Policy{Mode: ModeFirst, NoMatch: NoMatchIgnore, Routes: []Route{
		{Name: "r", Match: Match{Subject: ptr("a")}, Targets: []Target{req("x"), opt("y", 1000, 1000)}},
	}}
	ft := &fakeTracer{msg: map[uint64]map[string]any{}}
	s := newSinkWith(t, p, map[string]sink.Sink{"x": x, "y": y}, false, sink.Deps{Tracer: ft})
	s.WriteBatch(context.Background(), envs("a", "a", "zzz"))
	got := map[string]map[string]any{}
	for _, sp := range ft.spans {
		if !sp.ended || sp.name != "write fake" || sp.n != 2 {
			t.Errorf("span %+v: want an ended \"write fake\" span over 2 messages", sp)
		}
		sp.attrs["fail"] = sp.fail
		got[sp.attrs["nats_sink.target"].(string)] = sp.attrs
	}
	want := map[string]map[string]any{
		"x": {"depth": 0, "nats_sink.target": "x", "nats_sink.target_required": true, "nats_sink.target_status": "failed", "fail": "temporary"},
		"y": {"depth": 0, "nats_sink.target": "y", "nats_sink.target_required": false, "nats_sink.target_status": "committed", "fail": ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("target spans (-want +got):\n%s", diff)
	}
	wantMsg := map[uint64]map[string]any{
		1: {"nats_sink.route_action": "matched", "nats_sink.routes": []string{"r"}, "nats_sink.targets": []string{"x", "y"}},
		2: {"nats_sink.route_action": "matched", "nats_sink.routes": []string{"r"}, "nats_sink.targets": []string{"x", "y"}},
		3: {"nats_sink.route_action": "ignore", "nats_sink.routes": []string{}, "nats_sink.targets": []string{}},
	}
	if diff := cmp.Diff(wantMsg, ft.msg); diff != "" {
		t.Errorf("message span attributes (-want +got):\n%s", diff)
	}
	if !s.Ignored(envs("a", "a", "zzz")[2]) || s.Ignored(envs("a")[0]) {
		t.Errorf("Ignored: want true only for the unrouted message")
	}
}
