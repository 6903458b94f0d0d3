package runner

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/sink"
)

func TestLaneAssign(t *testing.T) {
	lanes := &PriorityLanes{
		Lanes: []Lane{
			{Name: "high", Priorities: []string{"critical", "high"}, Weight: 2},
			{Name: "default", Weight: 1},
			{Name: "low", Priorities: []string{"low"}, Weight: 1},
		},
	}
	envs := func(prios ...string) []*sink.Envelope {
		out := make([]*sink.Envelope, len(prios))
		for i, p := range prios {
			out[i] = &sink.Envelope{Priority: p}
		}
		return out
	}
	for _, tt := range []struct {
		name      string
		lanes     *PriorityLanes
		prios     []string
		order     []int
		rejected  []int
		defaulted int
		active    int
	}{
		{"weighted round-robin", lanes,
			[]string{"low", "", "HIGH", "low", "critical", "", "high", "high"},
			// pass 1: high 2,4; default 1; low 0. pass 2: high 6,7; default 5; low 3.
			[]int{2, 4, 1, 0, 6, 7, 5, 3}, nil, 2, 3},
		{"unknown goes to the default lane", lanes,
			[]string{"urgent", "high"}, []int{1, 0}, nil, 0, 2},
		{"unknown rejected", &PriorityLanes{Lanes: lanes.Lanes, RejectUnknown: true},
			[]string{"urgent", "high", ""}, []int{1, 2}, []int{0}, 1, 2},
		{"too long and control characters rejected", &PriorityLanes{Lanes: lanes.Lanes, MaxValueLength: 4},
			[]string{"high", "critical", "lo\x01w", "low"}, []int{0, 3}, []int{1, 2}, 0, 2},
		{"length counts characters, not bytes", &PriorityLanes{Lanes: []Lane{{Name: "default"}, {Name: "x", Priorities: []string{"ééé"}}}, MaxValueLength: 3},
			[]string{"ÉÉÉ"}, []int{0}, nil, 0, 1},
		{"defaults: one lane", &PriorityLanes{}, []string{"a", "", "b"}, []int{0, 1, 2}, nil, 1, 1},
		{"custom default lane", &PriorityLanes{Lanes: lanes.Lanes, DefaultLane: "low"},
			[]string{"", "high", "x"}, []int{1, 0, 2}, nil, 1, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			table, err := tt.lanes.compile()
			if err != nil {
				t.Fatal(err)
			}
			a := table.assign(envs(tt.prios...))
			var rejected []int
			for i := range tt.prios {
				if _, ok := a.rejected[i]; ok {
					rejected = append(rejected, i)
				}
			}
			got := []any{a.order, rejected, a.defaulted, a.active}
			want := []any{tt.order, tt.rejected, tt.defaulted, tt.active}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("assign(%q) [order rejected defaulted active] mismatch (-want +got):\n%s", tt.prios, diff)
			}
			for _, err := range a.rejected {
				for _, p := range tt.prios {
					if p != "" && strings.Contains(err.Error(), p) {
						t.Errorf("rejection %q contains the priority value %q", err, p)
					}
				}
			}
		})
	}
}

func TestLaneCompileErrors(t *testing.T) {
	for _, tt := range []struct {
		name  string
		lanes PriorityLanes
	}{
		{"default lane missing", PriorityLanes{Lanes: []Lane{{Name: "high"}}}},
		{"value in two lanes", PriorityLanes{Lanes: []Lane{{Name: "default", Priorities: []string{"a"}}, {Name: "b", Priorities: []string{"A"}}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.lanes.compile(); err == nil {
				t.Errorf("compile() = nil, want an error")
			}
			r := &Runner{Consumer: &wrapConsumer{}, Sink: &funcSink{}, PriorityLanes: &tt.lanes}
			if err := r.Run(t.Context()); err == nil {
				t.Errorf("Run() = nil, want the lane configuration refused")
			}
		})
	}
}

// TestPriorityLanesPipeline: the sink receives the batch in lane order, a
// rejected priority is dead-lettered without reaching the sink, and every
// message is acknowledged in delivery order.
func TestPriorityLanesPipeline(t *testing.T) {
	for _, iso := range []string{IsolationMessage, IsolationBatch} {
		t.Run(iso, func(t *testing.T) {
			e := newEnv(t, true)
			c := e.consumer(ConsumerSpec{})
			for i, p := range []string{"low", "high", "", "bogus", "high"} {
				h := nats.Header{}
				if p != "" {
					h.Set("Nats-Sinks-Priority", p)
				}
				natstest.Publish(t, e.js, "orders.created", fmt.Appendf(nil, `{"n":%d}`, i+1), h)
			}
			var written committedLog
			fs := &funcSink{write: func(ctx context.Context, b []*sink.Envelope) []sink.Result {
				written.add(b)
				return results(len(b), sink.Ok)
			}}
			m := newMetrics(t)
			start(t, &Runner{Consumer: c, JetStream: e.js, Conn: e.nc, Sink: fs, Metrics: m, DeadLetter: dlqOptions(),
				BatchSize: 5, Isolation: iso,
				PriorityLanes: &PriorityLanes{RejectUnknown: true, Lanes: []Lane{
					{Name: "high", Priorities: []string{"high"}, Weight: 1},
					{Name: "default", Weight: 1},
					{Name: "low", Priorities: []string{"low"}, Weight: 1},
				}}})
			e.waitAcked(c, 5)
			dead := e.dlqMessages()
			if iso == IsolationMessage {
				// high 2, default 3, low 1, then high 5; 4 rejected.
				if diff := cmp.Diff([]uint64{2, 3, 1, 5}, written.get()); diff != "" {
					t.Errorf("write order mismatch (-want +got):\n%s", diff)
				}
				if len(dead) != 1 || dead[0].Header.Get("Nats-Sinks-Error-Type") != sink.ValidationError ||
					!strings.HasSuffix(dead[0].Header.Get("Nats-Msg-Id"), ":4") {
					t.Errorf("DLQ = %d messages (first id %q), want stream sequence 4 as ValidationError", len(dead), firstID(dead))
				}
				if got := m.SinkWriteErrors.Value(); got != 0 {
					t.Errorf("sink_write_errors_total = %d, want 0 (the rejection is not the sink's)", got)
				}
			} else {
				if n := fs.callCount(); n != 0 {
					t.Errorf("WriteBatch calls = %d, want 0 (batch isolation with a rejection)", n)
				}
				if len(dead) != 5 {
					t.Errorf("DLQ holds %d messages, want the whole batch (5)", len(dead))
				}
			}
			if b, msgs, d, rj, act := m.PriorityLaneBatches.Value(), m.PriorityLaneMessages.Value(), m.PriorityLaneDefaulted.Value(),
				m.PriorityLaneRejected.Value(), m.CurrentPriorityLanesActive.Value(); b != 1 || msgs != 4 || d != 1 || rj != 1 || act != 3 {
				t.Errorf("priority_lane batches, messages, defaulted, rejected, active = %d, %d, %d, %d, %v, want 1, 4, 1, 1, 3",
					b, msgs, d, rj, act)
			}
		})
	}
}
