package routing

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

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
func isolate(ctx context.Context, w writer, batch []*sink.Envelope, byBatch bool) []sink.Result {
	out := w.call(ctx, batch, 0)
	if byBatch {
		return out
	}
	if shared := sharedPermanent(out, nil); len(shared) > 1 {
		stopped := false
		bisect(ctx, w, batch, out, shared, &stopped, 1)
	}
	for i := range out {
		out[i].Shared = false // final per message: the runner must not bisect across targets
	}
	return out
}

// writer is one operation's target as isolation calls it.
type writer struct {
	name, typ string
	t         sink.Sink
	tr        writeTracer // nil: no spans
	required  bool        // the operation's role
	timedOut  *atomic.Bool
	writes    *func(time.Duration) // nil: write calls are not counted
}

// writeTracer is what the host's sink.Tracer offers beyond client spans
// (package tracing implements it): a "write <sink type>" span per target
// call linked to its messages' spans, and attributes on a message's span.
type writeTracer interface {
	StartWrite(ctx context.Context, set []*sink.Envelope, name string, depth int, attrs ...sink.Attr) (context.Context, sink.Span)
	MessageAttributes(ctx context.Context, e *sink.Envelope, attrs ...sink.Attr)
}

// call makes one WriteBatch call in its own span (depth is the bisection
// level). A panic, a wrong result count or an unknown outcome never turns
// into a commit.
func (w writer) call(ctx context.Context, batch []*sink.Envelope, depth int) []sink.Result {
	if w.tr == nil {
		return w.counted(ctx, batch)
	}
	wctx, span := w.tr.StartWrite(ctx, batch, "write "+w.typ, depth,
		sink.Attr{Key: "nats_sink.target", Value: w.name},
		sink.Attr{Key: "nats_sink.target_required", Value: w.required})
	out := w.counted(wctx, batch)
	status := "committed"
	var failed *sink.Result
	for i := range out {
		if !out[i].Outcome.Acked() {
			failed = &out[i]
			break
		}
	}
	if failed != nil {
		status = "failed"
		if w.timedOut != nil && w.timedOut.Load() {
			status = "timed_out"
		}
		et := failed.ErrorType
		if et == "" {
			et = failed.Outcome.String()
		}
		err := failed.Err
		if err == nil {
			err = errors.New(failed.Outcome.String())
		}
		span.Fail(et, err)
	}
	span.SetAttributes(sink.Attr{Key: "nats_sink.target_status", Value: status})
	span.End()
	return out
}

// counted makes one target call and reports it to the host's write
// metrics when it committed at least one message.
func (w writer) counted(ctx context.Context, batch []*sink.Envelope) []sink.Result {
	if w.writes == nil {
		return call(ctx, w.name, w.t, batch)
	}
	start := time.Now()
	out := call(ctx, w.name, w.t, batch)
	for _, r := range out {
		if r.Outcome.Acked() {
			(*w.writes)(time.Since(start))
			break
		}
	}
	return out
}

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
func bisect(ctx context.Context, w writer, batch []*sink.Envelope, out []sink.Result, set []int, stopped *bool, depth int) {
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
		res := w.call(ctx, sub, depth)
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
			bisect(ctx, w, batch, out, shared, stopped, depth+1)
		}
	}
}
