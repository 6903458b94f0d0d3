package runner

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/nats-sinks/nats-sink/sink"
)

// sequentialVerdicts is the reference checkAll must agree with: one call
// per message in batch order, stopping at the first failure.
func sequentialVerdicts(envs []*sink.Envelope, hook func(*sink.Envelope) (error, error)) (rejects map[int]string, failure error) {
	rejects = map[int]string{}
	for i, e := range envs {
		var reject, err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					failure = fmt.Errorf("message authenticity: panic: %v", p)
				}
			}()
			reject, err = hook(e)
		}()
		if failure != nil {
			return nil, failure
		}
		if err != nil {
			return nil, fmt.Errorf("message authenticity (stream seq %d): %w", e.StreamSequence, err)
		}
		if reject != nil {
			rejects[i] = reject.Error()
		}
	}
	return rejects, nil
}

func seqEnvs(n int) []*sink.Envelope {
	envs := make([]*sink.Envelope, n)
	for i := range envs {
		envs[i] = &sink.Envelope{Subject: "orders.created", StreamSequence: uint64(i + 1)}
	}
	return envs
}

// TestCheckAllMatchesSequential: for batches below and above the parallel
// threshold, every message is checked exactly once, and the rejections
// and the batch failure (lowest-indexed evaluation error or panic) are
// those of the sequential loop.
func TestCheckAllMatchesSequential(t *testing.T) {
	type hookSpec struct {
		name           string
		errAt, panicAt map[uint64]bool
	}
	specs := []hookSpec{
		{"rejections only", nil, nil},
		{"evaluation errors", map[uint64]bool{14: true, 30: true, 3: true}, nil},
		{"panic before an error", map[uint64]bool{40: true}, map[uint64]bool{20: true}},
		{"error before a panic", map[uint64]bool{5: true}, map[uint64]bool{6: true}},
	}
	for _, n := range []int{0, 1, 15, 16, 17, 64, 257} {
		for _, sp := range specs {
			t.Run(fmt.Sprintf("%d/%s", n, sp.name), func(t *testing.T) {
				newHook := func(calls []atomic.Int32) func(e *sink.Envelope) (error, error) {
					return func(e *sink.Envelope) (error, error) {
						calls[e.StreamSequence-1].Add(1)
						if sp.panicAt[e.StreamSequence] {
							panic("boom")
						}
						if sp.errAt[e.StreamSequence] {
							return nil, errors.New("broken key store")
						}
						if e.StreamSequence%3 == 0 {
							return fmt.Errorf("rejected seq %d", e.StreamSequence), nil
						}
						return nil, nil
					}
				}
				envs := seqEnvs(n)
				wantRejects, wantErr := sequentialVerdicts(envs, newHook(make([]atomic.Int32, n)))
				calls := make([]atomic.Int32, n)
				hook := newHook(calls)
				vs := checkAll(envs, hook)
				gotErr := firstFailure(envs, vs)
				if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
					t.Fatalf("failure = %v, want %v", gotErr, wantErr)
				}
				if wantErr != nil {
					return
				}
				for i := range calls {
					if c := calls[i].Load(); c != 1 {
						t.Errorf("message %d checked %d times, want 1", i+1, c)
					}
				}
				got := map[int]string{}
				for i, v := range vs {
					if v.reject != nil {
						got[i] = v.reject.Error()
					}
				}
				if fmt.Sprint(got) != fmt.Sprint(wantRejects) {
					t.Errorf("rejections = %v, want %v", got, wantRejects)
				}
			})
		}
	}
}

// TestAuthWorkers: small batches stay on the calling goroutine; larger
// ones never use more than GOMAXPROCS goroutines.
func TestAuthWorkers(t *testing.T) {
	for _, tt := range []struct{ n, procs, want int }{
		{0, 8, 1}, {1, 8, 1}, {15, 8, 1}, {16, 8, 2}, {64, 8, 8}, {1000, 8, 8}, {1000, 2, 2}, {1000, 1, 1},
	} {
		if got := authWorkers(tt.n, tt.procs); got != tt.want {
			t.Errorf("authWorkers(%d, %d) = %d, want %d", tt.n, tt.procs, got, tt.want)
		}
	}
}
