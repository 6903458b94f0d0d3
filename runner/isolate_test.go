package runner

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/sink"
)

// txFake models the sinks of docs/library.md#the-sink-boundary: a transactional sink fails the
// whole set with one shared result when any row is bad; a per-message sink
// returns each message's own result.
type txFake struct {
	bad        map[uint64]bool // rows whose insert violates a constraint
	rowBuild   map[uint64]bool // rows that cannot even be built (non-shared permanent)
	perMessage bool
	// temporaryWhen makes a call fail with a shared temporary error.
	temporaryWhen func(set []uint64) bool
	results       func(n int) []sink.Result // overrides everything when set

	calls     int
	committed []uint64
}

func (f *txFake) write(ctx context.Context, b []*sink.Envelope, _ int) []sink.Result {
	f.calls++
	if f.results != nil {
		return f.results(len(b))
	}
	set := seqs(b)
	out := make([]sink.Result, len(b))
	if f.perMessage {
		for i, s := range set {
			if f.bad[s] {
				out[i] = sink.Result{Outcome: sink.Permanent, ErrorType: sink.ValidationError, Err: errors.New("bad row")}
			} else {
				out[i] = sink.Ok
				f.committed = append(f.committed, s)
			}
		}
		return out
	}
	var tx []int
	for i, s := range set {
		if f.rowBuild[s] {
			out[i] = sink.Result{Outcome: sink.Permanent, ErrorType: sink.SerializationError, Err: errors.New("cannot build row")}
			continue
		}
		tx = append(tx, i)
	}
	var txSeqs []uint64
	failed := false
	for _, i := range tx {
		txSeqs = append(txSeqs, set[i])
		failed = failed || f.bad[set[i]]
	}
	switch {
	case ctx.Err() != nil:
		for _, i := range tx {
			out[i] = sink.Result{Outcome: sink.Temporary, Err: ctx.Err(), Shared: true}
		}
	case f.temporaryWhen != nil && f.temporaryWhen(txSeqs):
		for _, i := range tx {
			out[i] = sink.Result{Outcome: sink.Temporary, Err: errors.New("lock timeout"), Shared: true}
		}
	case failed:
		for _, i := range tx {
			out[i] = sink.Result{Outcome: sink.Permanent, ErrorType: sink.PermanentSinkError, Err: errors.New("constraint violation"), Shared: true}
		}
	default:
		for _, i := range tx {
			out[i] = sink.Ok
		}
		f.committed = append(f.committed, txSeqs...)
	}
	return out
}

func envelopes(n int) []*sink.Envelope {
	out := make([]*sink.Envelope, n)
	for i := range out {
		out[i] = &sink.Envelope{StreamSequence: uint64(i + 1)}
	}
	return out
}

func outcomes(res []sink.Result) []string {
	out := make([]string, len(res))
	for i, r := range res {
		out[i] = r.Outcome.String()
		if r.Outcome == sink.Permanent {
			out[i] += ":" + r.ErrorType
		}
	}
	return out
}

func TestIsolation(t *testing.T) {
	const (
		C  = "committed"
		P  = "permanent:PermanentSinkError"
		PV = "permanent:ValidationError"
		PS = "permanent:SerializationError"
		T  = "temporary"
		NA = "not_attempted"
	)
	for _, tt := range []struct {
		name     string
		n        int
		fake     *txFake
		byBatch  bool
		want     []string
		maxCalls int // 0: 2|S|-1 with S the batch
		splits   int // -1: do not check
	}{
		{"all committed in one call", 4, &txFake{}, false, []string{C, C, C, C}, 1, 0},
		{"per-message permanent is final", 4, &txFake{perMessage: true, bad: map[uint64]bool{3: true}}, false,
			[]string{C, C, PV, C}, 1, 0},
		{"one bad row of 8 is isolated", 8, &txFake{bad: map[uint64]bool{5: true}}, false,
			[]string{C, C, C, C, P, C, C, C}, 0, -1},
		{"two bad rows of 8", 8, &txFake{bad: map[uint64]bool{2: true, 7: true}}, false,
			[]string{C, P, C, C, C, C, P, C}, 0, -1},
		{"every row bad", 4, &txFake{bad: map[uint64]bool{1: true, 2: true, 3: true, 4: true}}, false,
			[]string{P, P, P, P}, 7, 3},
		{"shared permanent of one message needs no split", 1, &txFake{bad: map[uint64]bool{1: true}}, false,
			[]string{P}, 1, 0},
		{"odd set: left half is the larger", 3, &txFake{bad: map[uint64]bool{3: true}}, false,
			[]string{C, C, P}, 3, 1},
		{"row-build failures are not bisected", 5, &txFake{rowBuild: map[uint64]bool{1: true}, bad: map[uint64]bool{4: true}}, false,
			[]string{PS, C, C, P, C}, 7, -1},
		{"temporary during bisection stops it", 8, &txFake{
			bad:           map[uint64]bool{6: true},
			temporaryWhen: func(set []uint64) bool { return len(set) == 4 && set[0] == 1 },
		}, false, []string{T, T, T, T, NA, NA, NA, NA}, 2, 1},
		{"temporary in the right half keeps the committed left half", 8, &txFake{
			bad:           map[uint64]bool{6: true},
			temporaryWhen: func(set []uint64) bool { return len(set) == 2 && set[0] == 5 },
		}, false, []string{C, C, C, C, T, T, NA, NA}, 4, 2},
		{"batch mode: first permanent error for everyone", 4, &txFake{perMessage: true, bad: map[uint64]bool{2: true}}, true,
			[]string{PV, PV, PV, PV}, 1, 0},
		{"batch mode: any temporary sends all to retry", 3, &txFake{results: func(n int) []sink.Result {
			return []sink.Result{sink.Ok, {Outcome: sink.Temporary, Err: errors.New("timeout")}, {Outcome: sink.NotAttempted}}
		}}, true, []string{T, T, NA}, 1, 0},
		{"batch mode: all committed", 3, &txFake{perMessage: true}, true, []string{C, C, C}, 1, 0},
		{"batch mode: shared permanent is not bisected", 4, &txFake{bad: map[uint64]bool{2: true}}, true,
			[]string{P, P, P, P}, 1, 0},
		{"wrong result count is temporary", 3, &txFake{results: func(n int) []sink.Result { return []sink.Result{sink.Ok} }}, false,
			[]string{T, T, T}, 1, 0},
		{"unknown outcome is temporary", 2, &txFake{results: func(n int) []sink.Result {
			return []sink.Result{{Outcome: 0}, {Outcome: 99}}
		}}, false, []string{T, T}, 1, 0},
		{"permanent without error type gets PermanentSinkError", 1, &txFake{results: func(n int) []sink.Result {
			return []sink.Result{{Outcome: sink.Permanent}}
		}}, false, []string{P}, 1, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			splits := 0
			iso := isolation{write: tt.fake.write, byBatch: tt.byBatch, onSplit: func() { splits++ }}
			got := iso.run(context.Background(), envelopes(tt.n))
			if diff := cmp.Diff(tt.want, outcomes(got)); diff != "" {
				t.Errorf("outcomes mismatch (-want +got):\n%s", diff)
			}
			maxCalls := tt.maxCalls
			if maxCalls == 0 {
				maxCalls = 2*tt.n - 1
			}
			if iso.calls > maxCalls || tt.fake.calls != iso.calls {
				t.Errorf("write calls = %d (fake saw %d), want at most %d", iso.calls, tt.fake.calls, maxCalls)
			}
			if tt.splits >= 0 && splits != tt.splits {
				t.Errorf("bisections = %d, want %d", splits, tt.splits)
			}
			if !slices.IsSorted(tt.fake.committed) {
				t.Errorf("committed order = %v, want delivery order", tt.fake.committed)
			}
			for i, r := range got {
				if !r.Outcome.Acked() && r.Err == nil {
					t.Errorf("result %d (%s) has no error", i, r.Outcome)
				}
			}
		})
	}
}

func TestIsolationCancelledStopsBisection(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	fake := &txFake{bad: map[uint64]bool{4: true}}
	calls := 0
	iso := isolation{write: func(c context.Context, b []*sink.Envelope, depth int) []sink.Result {
		calls++
		res := fake.write(c, b, depth)
		cancel() // shutdown timeout reached during the first write
		return res
	}}
	got := iso.run(ctx, envelopes(4))
	want := []string{"not_attempted", "not_attempted", "not_attempted", "not_attempted"}
	if diff := cmp.Diff(want, outcomes(got)); diff != "" {
		t.Errorf("outcomes mismatch (-want +got):\n%s", diff)
	}
	if calls != 1 {
		t.Errorf("write calls = %d, want 1", calls)
	}
	if !errors.Is(got[0].Err, context.Canceled) {
		t.Errorf("not_attempted error = %v, want it to wrap context.Canceled", got[0].Err)
	}
}
