package runner

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-sinks/nats-sink/sink"
)

// Isolation modes (delivery.permanent_failure_isolation).
const (
	IsolationMessage = "message"
	IsolationBatch   = "batch"
)

// writeFunc is one WriteBatch call (the runner wraps the sink with metrics,
// panic recovery and the write span). depth is 0 for the call with the
// whole batch and n for a call made by the n-th level of bisection. It
// returns exactly one result per envelope.
type writeFunc func(ctx context.Context, batch []*sink.Envelope, depth int) []sink.Result

// errBisectionStopped marks messages that bisection never wrote because an
// earlier part of the batch failed temporarily (docs/delivery.md#per-message-isolation-and-bisection rule 5).
var errBisectionStopped = errors.New("not attempted: isolation stopped after a temporary failure")

// isolation turns one batch into one final outcome per message (docs/delivery.md#per-message-isolation-and-bisection).
// It is a pure function of the write results, so it is table-tested with a
// fake writeFunc and no server.
type isolation struct {
	write writeFunc
	// byBatch selects upstream's "batch" mode instead of per-message isolation.
	byBatch bool
	// onSplit is called once per bisection split (sink_batch_bisections_total).
	onSplit func()

	calls   int  // WriteBatch calls made, for tests of the 2|S|−1 bound
	stopped bool // a bisection write failed temporarily: write nothing more
}

// run writes batch and resolves every message to committed, duplicate,
// permanent, temporary, destination or not_attempted.
func (iso *isolation) run(ctx context.Context, batch []*sink.Envelope) []sink.Result {
	out := iso.call(ctx, batch, 0)
	if iso.byBatch {
		return byBatch(out)
	}
	if shared := sharedPermanent(out, nil); len(shared) > 1 {
		iso.bisect(ctx, batch, out, shared, 1)
	}
	return out
}

// call makes one write and normalises what the sink returned, so that a
// misbehaving sink can never turn into an ACK: a wrong result count makes the
// whole call temporary, an unknown outcome is temporary, and a permanent
// result without an error type gets PermanentSinkError.
func (iso *isolation) call(ctx context.Context, batch []*sink.Envelope, depth int) []sink.Result {
	iso.calls++
	res := iso.write(ctx, batch, depth)
	return normalise(res, len(batch))
}

func normalise(res []sink.Result, n int) []sink.Result {
	if len(res) != n {
		err := fmt.Errorf("sink returned %d results for %d messages", len(res), n)
		out := make([]sink.Result, n)
		for i := range out {
			out[i] = sink.Result{Outcome: sink.Temporary, Err: err, Shared: true}
		}
		return out
	}
	out := make([]sink.Result, n)
	for i, r := range res {
		switch r.Outcome {
		case sink.Committed, sink.Duplicate, sink.Temporary, sink.Destination, sink.NotAttempted:
		case sink.Held:
			if r.Hold == nil {
				r = sink.Result{Outcome: sink.Temporary, Err: errors.New("sink returned held without a hold"), Shared: r.Shared}
			}
		case sink.Permanent:
			if r.ErrorType == "" {
				r.ErrorType = sink.PermanentSinkError
			}
		default:
			r = sink.Result{Outcome: sink.Temporary, Err: fmt.Errorf("sink returned unknown outcome %d", int(r.Outcome)), Shared: r.Shared}
		}
		if r.Outcome != sink.Held && r.Hold != nil {
			r.Hold = nil // only a Held result carries a hold
		}
		if r.Err == nil && !r.Outcome.Acked() && r.Outcome != sink.Held {
			r.Err = fmt.Errorf("sink reported %s", r.Outcome)
		}
		out[i] = r
	}
	return out
}

// sharedPermanent returns the positions of shared permanent results, mapped
// through idx when it is not nil.
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

// bisect resolves set (indices into batch/out, |set| > 1) whose transaction
// failed permanently as a whole: write its first half as its own
// transaction, then the second, recursing on shared permanent failures.
// depth is the bisection level of the halves' writes (1 for the first split).
func (iso *isolation) bisect(ctx context.Context, batch []*sink.Envelope, out []sink.Result, set []int, depth int) {
	if iso.onSplit != nil {
		iso.onSplit()
	}
	half := (len(set) + 1) / 2
	for _, part := range [][]int{set[:half], set[half:]} {
		if iso.stopped || ctx.Err() != nil {
			iso.stopped = true
			notAttempted(out, part, ctx.Err())
			continue
		}
		sub := make([]*sink.Envelope, len(part))
		for j, i := range part {
			sub[j] = batch[i]
		}
		res := iso.call(ctx, sub, depth)
		for j, i := range part {
			out[i] = res[j]
			switch res[j].Outcome {
			case sink.Temporary, sink.Destination, sink.NotAttempted:
				// Rule 5 speaks of batch-level failures; any temporary
				// result stops here too, which can only cause redelivery,
				// never an unsafe ACK.
				iso.stopped = true
			}
		}
		shared := sharedPermanent(res, part)
		switch {
		case len(shared) <= 1:
			// Rule 3: a single message's own transaction failed: it is the
			// bad one.
		case iso.stopped:
			// We cannot tell which of them is bad; dead-lettering them all
			// would repeat upstream's Q5 mistake.
			notAttempted(out, shared, nil)
		default:
			iso.bisect(ctx, batch, out, shared, depth+1)
		}
	}
}

func notAttempted(out []sink.Result, idx []int, cause error) {
	err := errBisectionStopped
	if cause != nil {
		err = fmt.Errorf("%w: %w", errBisectionStopped, cause)
	}
	for _, i := range idx {
		out[i] = sink.Result{Outcome: sink.NotAttempted, Err: err}
	}
}

// byBatch applies upstream's all-or-nothing rule: any permanent result sends
// every message to the permanent path with the first permanent error in
// delivery order; else any failure sends every message to the temporary path
// (messages a per-message sink already wrote are redelivered and absorbed by
// its duplicate model); else everything is acknowledged.
func byBatch(out []sink.Result) []sink.Result {
	first, failed := -1, -1
	for i, r := range out {
		if r.Outcome == sink.Permanent && first < 0 {
			first = i
		}
		if !r.Outcome.Acked() && r.Outcome != sink.Permanent && r.Outcome != sink.Held && failed < 0 {
			failed = i
		}
	}
	switch {
	case first >= 0:
		p := out[first]
		for i := range out {
			out[i] = sink.Result{Outcome: sink.Permanent, ErrorType: p.ErrorType, Err: p.Err, Shared: true}
		}
	case failed >= 0:
		err := fmt.Errorf("batch isolation: another message of the batch failed: %w", out[failed].Err)
		for i, r := range out {
			// A held message is written and will commit: handing it to the
			// temporary path only costs a duplicate on redelivery.
			if r.Outcome.Acked() || r.Outcome == sink.Held {
				out[i] = sink.Result{Outcome: sink.Temporary, Err: err, Shared: true}
			}
		}
	}
	return out
}
