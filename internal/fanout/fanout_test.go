package fanout

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/sink"
)

// outcomes returns the outcome of each result, for diffs.
func outcomes(rs []sink.Result) []sink.Outcome {
	out := make([]sink.Outcome, len(rs))
	for i, r := range rs {
		out[i] = r.Outcome
	}
	return out
}

// recorder is a write func that returns the outcome set for a sequence
// (Committed by default) and records which sequences it was called for.
type recorder struct {
	mu      sync.Mutex
	called  map[uint64]bool
	outcome map[uint64]sink.Outcome
	// hold, when set, runs before the write returns (inside the bubble).
	hold func(ctx context.Context, e *sink.Envelope)
}

func (r *recorder) write(ctx context.Context, e *sink.Envelope) sink.Result {
	r.mu.Lock()
	if r.called == nil {
		r.called = map[uint64]bool{}
	}
	r.called[e.StreamSequence] = true
	o, ok := r.outcome[e.StreamSequence]
	r.mu.Unlock()
	if r.hold != nil {
		r.hold(ctx, e)
	}
	if !ok {
		o = sink.Committed
	}
	return sink.Result{Outcome: o, Err: errors.New(o.String())}
}

func (r *recorder) calls() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []uint64
	for seq := uint64(1); seq <= 100; seq++ {
		if r.called[seq] {
			out = append(out, seq)
		}
	}
	return out
}

// TestOrder: results come back in batch order whatever order the writes
// finish in, and Permanent or Temporary results of concurrent writes do
// not stop the others.
func TestOrder(t *testing.T) {
	for _, conc := range []int{1, 4} {
		synctest.Test(t, func(t *testing.T) {
			r := &recorder{
				outcome: map[uint64]sink.Outcome{2: sink.Permanent, 5: sink.Duplicate},
				// Later messages finish first.
				hold: func(_ context.Context, e *sink.Envelope) {
					time.Sleep(time.Duration(10-e.StreamSequence) * time.Second)
				},
			}
			if conc > 1 {
				r.outcome[3] = sink.Temporary
			}
			got := outcomes(Write(t.Context(), "test sink", shapestest.Batch("S", 6), conc, r.write))
			want := []sink.Outcome{sink.Committed, sink.Permanent, sink.Committed, sink.Committed, sink.Duplicate, sink.Committed}
			if conc > 1 {
				want[2] = sink.Temporary
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("concurrency %d: outcomes (-want +got):\n%s", conc, diff)
			}
		})
	}
}

// TestSequentialStopsAtFailure: in order, a Temporary or Destination
// result leaves the rest NotAttempted and unwritten; a Permanent one does
// not.
func TestSequentialStopsAtFailure(t *testing.T) {
	for _, o := range []sink.Outcome{sink.Temporary, sink.Destination} {
		r := &recorder{outcome: map[uint64]sink.Outcome{1: sink.Permanent, 3: o}}
		rs := Write(t.Context(), "test sink", shapestest.Batch("S", 5), 1, r.write)
		want := []sink.Outcome{sink.Permanent, sink.Committed, o, sink.NotAttempted, sink.NotAttempted}
		if diff := cmp.Diff(want, outcomes(rs)); diff != "" {
			t.Errorf("%v: outcomes (-want +got):\n%s", o, diff)
		}
		if got := r.calls(); !cmp.Equal(got, []uint64{1, 2, 3}) {
			t.Errorf("%v: wrote %v, want [1 2 3]", o, got)
		}
		if msg := rs[4].Err.Error(); msg != "not attempted: message 2 of the batch failed first" {
			t.Errorf("%v: NotAttempted error = %q", o, msg)
		}
	}
}

// TestDestinationStopsConcurrent: after a Destination result, messages
// not yet started are NotAttempted and never written; the one in flight
// finishes with its own result.
func TestDestinationStopsConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started := make(chan struct{})
		r := &recorder{
			outcome: map[uint64]sink.Outcome{1: sink.Destination},
			hold: func(_ context.Context, e *sink.Envelope) {
				switch e.StreamSequence {
				case 1:
					<-started // both slots are taken before the failure
				case 2:
					close(started)
					// Holds its slot until everything else is blocked:
					// the only slot that frees up is message 1's.
					time.Sleep(time.Hour)
				}
			},
		}
		rs := Write(t.Context(), "test sink", shapestest.Batch("S", 5), 2, r.write)
		want := []sink.Outcome{sink.Destination, sink.Committed, sink.NotAttempted, sink.NotAttempted, sink.NotAttempted}
		if diff := cmp.Diff(want, outcomes(rs)); diff != "" {
			t.Errorf("outcomes (-want +got):\n%s", diff)
		}
		if got := r.calls(); !cmp.Equal(got, []uint64{1, 2}) {
			t.Errorf("wrote %v, want [1 2]", got)
		}
		if msg := rs[2].Err.Error(); msg != "not attempted: message 0 of the batch hit a destination failure" {
			t.Errorf("NotAttempted error = %q", msg)
		}
	})
}

// TestCancel: once ctx ends no write starts, and the messages not started
// are Temporary with the context's error under the sink's name.
func TestCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		r := &recorder{hold: func(ctx context.Context, _ *sink.Envelope) { <-ctx.Done() }}
		r.outcome = map[uint64]sink.Outcome{1: sink.Temporary, 2: sink.Temporary}
		rs := Write(ctx, "test sink", shapestest.Batch("S", 4), 2, r.write)
		if got := r.calls(); !cmp.Equal(got, []uint64{1, 2}) {
			t.Errorf("wrote %v, want [1 2]", got)
		}
		for i, res := range rs[2:] {
			if res.Outcome != sink.Temporary || !errors.Is(res.Err, context.DeadlineExceeded) ||
				!strings.HasPrefix(res.Err.Error(), "test sink (stream seq ") {
				t.Errorf("message %d: %v %v, want Temporary \"test sink (stream seq …): context deadline exceeded\"", i+2, res.Outcome, res.Err)
			}
		}
	})
}

// TestConcurrencyBound: never more than concurrency writes at once, and
// that many when the batch allows it.
func TestConcurrencyBound(t *testing.T) {
	for _, conc := range []int{2, 3, 16} {
		synctest.Test(t, func(t *testing.T) {
			var now, peak atomic.Int64
			r := &recorder{hold: func(context.Context, *sink.Envelope) {
				n := now.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				time.Sleep(time.Second)
				now.Add(-1)
			}}
			rs := Write(t.Context(), "test sink", shapestest.Batch("S", 10), conc, r.write)
			if want := int64(min(conc, 10)); peak.Load() != want {
				t.Errorf("concurrency %d: peak in flight = %d, want %d", conc, peak.Load(), want)
			}
			for i, res := range rs {
				if res.Outcome != sink.Committed {
					t.Errorf("concurrency %d: message %d = %v", conc, i, res.Outcome)
				}
			}
		})
	}
}
