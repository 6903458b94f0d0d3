package routing

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-sinks/nats-sink/sink"
)

// errStopped marks messages of an operation that bisection never wrote
// because an earlier part failed temporarily.
var errStopped = errors.New("not attempted: isolation stopped after a temporary failure")

// isolate writes batch to one target and resolves every message to its own
// outcome, within that target only: a transaction that failed permanently
// as a whole is split in halves and rewritten until the offending message
// is found (docs/delivery.md#per-message-isolation). With byBatch the
// target's results are returned as they are.
func isolate(ctx context.Context, name string, t sink.Sink, batch []*sink.Envelope, byBatch bool) []sink.Result {
	out := call(ctx, name, t, batch)
	if byBatch {
		return out
	}
	if shared := sharedPermanent(out, nil); len(shared) > 1 {
		stopped := false
		bisect(ctx, name, t, batch, out, shared, &stopped)
	}
	for i := range out {
		out[i].Shared = false // final per message: the runner must not bisect across targets
	}
	return out
}

// call makes one WriteBatch call. A panic, a wrong result count or an
// unknown outcome never turns into a commit.
func call(ctx context.Context, name string, t sink.Sink, batch []*sink.Envelope) (out []sink.Result) {
	defer func() {
		if p := recover(); p != nil {
			out = all(len(batch), sink.Result{Outcome: sink.Temporary, Err: fmt.Errorf("target %s panicked: %v", name, p), Shared: true})
		}
	}()
	if t == nil {
		return all(len(batch), sink.Result{Outcome: sink.NotAttempted, Err: fmt.Errorf("target %s is not open", name), Shared: true})
	}
	res := t.WriteBatch(ctx, batch)
	if len(res) != len(batch) {
		return all(len(batch), sink.Result{Outcome: sink.Temporary, Err: fmt.Errorf("sink returned %d results for %d messages", len(res), len(batch)), Shared: true})
	}
	return res
}

func all(n int, r sink.Result) []sink.Result {
	out := make([]sink.Result, n)
	for i := range out {
		out[i] = r
	}
	return out
}

func sharedPermanent(res []sink.Result, idx []int) []int {
	var s []int
	for j, r := range res {
		if r.Shared && r.Outcome == sink.Permanent {
			if idx != nil {
				s = append(s, idx[j])
			} else {
				s = append(s, j)
			}
		}
	}
	return s
}

// bisect resolves set (positions in batch/out, more than one) whose
// transaction failed permanently as a whole: the first ⌈n/2⌉ as their own
// write, then the rest, recursing; after a temporary failure nothing more
// is written and the rest is not attempted.
func bisect(ctx context.Context, name string, t sink.Sink, batch []*sink.Envelope, out []sink.Result, set []int, stopped *bool) {
	half := (len(set) + 1) / 2
	for _, part := range [][]int{set[:half], set[half:]} {
		if *stopped || ctx.Err() != nil {
			*stopped = true
			for _, i := range part {
				out[i] = sink.Result{Outcome: sink.NotAttempted, Err: errStopped}
			}
			continue
		}
		sub := make([]*sink.Envelope, len(part))
		for j, i := range part {
			sub[j] = batch[i]
		}
		res := call(ctx, name, t, sub)
		for j, i := range part {
			out[i] = res[j]
			if !res[j].Outcome.Acked() && res[j].Outcome != sink.Permanent {
				*stopped = true
			}
		}
		shared := sharedPermanent(res, part)
		switch {
		case len(shared) <= 1:
		case *stopped:
			for _, i := range shared {
				out[i] = sink.Result{Outcome: sink.NotAttempted, Err: errStopped}
			}
		default:
			bisect(ctx, name, t, batch, out, shared, stopped)
		}
	}
}
