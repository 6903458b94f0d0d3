package routing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-sinks/nats-sink/sink"
)

// Fanout is the configuration of the fanout sink: the policy and the
// Openers of the named sinks it uses. Package config builds it from the
// sinks and routing sections.
type Fanout struct {
	Policy Policy
	// Targets are the Openers of the named sinks the policy uses, by name.
	Targets map[string]sink.Opener
	// Isolation is delivery.permanent_failure_isolation: "message" (the
	// default) or "batch" (upstream's all-or-nothing batches).
	Isolation string
	// ProbeBackoff returns the wait before the n-th probe (n ≥ 1) of an
	// optional-only target whose destination circuit is open: the
	// delivery retry back-off. Nil means 1 s doubling up to 60 s.
	ProbeBackoff func(n int) time.Duration
}

var _ sink.Opener = (*Fanout)(nil)

// TargetError is the failure of one message in one target. Its text is
// "<target>: <sink error>"; the DLQ record of a message a target refused
// also carries the target's name in the x-fanout-target header.
type TargetError struct {
	Target string
	Err    error
}

// Error returns "<target>: <sink error>".
func (e *TargetError) Error() string { return e.Target + ": " + e.Err.Error() }

// Unwrap returns the target's own error.
func (e *TargetError) Unwrap() error { return e.Err }

// FanoutTarget returns the name of the target that refused the message.
func (e *TargetError) FanoutTarget() string { return e.Target }

// Open opens the used targets in ascending name order. When one fails, the
// targets already opened are stopped in reverse order; a configuration
// problem comes back as a *sink.ConfigError with paths starting at
// "sinks.<name>", any other error is prefixed "sinks.<name>: ".
func (f *Fanout) Open(ctx context.Context, deps sink.Deps) (sink.Sink, error) {
	names := make([]string, 0, len(f.Targets))
	for n := range f.Targets {
		names = append(names, n)
	}
	slices.Sort(names)
	s := &Sink{
		policy:       f.Policy,
		names:        names,
		targets:      make(map[string]sink.Sink, len(names)),
		types:        make(map[string]string, len(names)),
		byBatch:      f.Isolation == "batch",
		log:          deps.Log(),
		now:          time.Now,
		health:       make(map[string]*health, len(names)),
		stopping:     make(chan struct{}),
		probeBackoff: f.ProbeBackoff,
	}
	s.tr, _ = deps.Tracing().(writeTracer)
	s.m = newMetrics(deps.Meter())
	for _, n := range names {
		td := deps
		td.Logger = deps.Log().With("target", n)
		t, err := f.Targets[n].Open(ctx, td)
		if err != nil {
			s.stopOpened(ctx)
			if ce, ok := errors.AsType[*sink.ConfigError](err); ok {
				return nil, ce.At("sinks." + n)
			}
			return nil, fmt.Errorf("sinks.%s: %w", n, err)
		}
		s.targets[n] = t
		h := &health{name: n, required: f.Policy.RequiredSomewhere(n)}
		h.hc, _ = t.(sink.HealthChecker)
		s.health[n] = h
		s.types[n] = t.Type()
	}
	s.m.unhealthy.Set(0)
	return s, nil
}

// Sink writes each message to the targets its route selects and reports a
// message committed only when every required target committed it.
type Sink struct {
	policy  Policy
	names   []string // opened targets, ascending
	targets map[string]sink.Sink
	byBatch bool
	log     *slog.Logger
	m       *metrics
	now     func() time.Time
	types   map[string]string // target sink types, for span names
	tr      writeTracer       // nil: no target spans
	// writes observes each target write call that committed at least one
	// message (CountWrites); nil until the host sets it.
	writes atomic.Pointer[func(time.Duration)]

	health       map[string]*health
	unhealthyN   atomic.Int64
	probeBackoff func(int) time.Duration
	stopping     chan struct{} // closed by Stop: probes end
	stopOnce     sync.Once
	wg           sync.WaitGroup // probe goroutines
}

var (
	_ sink.Sink          = (*Sink)(nil)
	_ sink.HealthChecker = (*Sink)(nil)
)

// Type returns "fanout".
func (*Sink) Type() string { return "fanout" }

// Targets returns the names of the opened targets, ascending.
func (s *Sink) Targets() []string { return slices.Clone(s.names) }

// Ignored reports whether e is acknowledged without being written anywhere
// (no route matched under no_match "ignore"): the runner leaves such
// messages out of messages_written_total.
func (s *Sink) Ignored(e *sink.Envelope) bool {
	return s.policy.NoMatch == NoMatchIgnore && s.policy.Select(e).Action == ActionIgnore
}

// Healthcheck checks the opened targets that some route (or the default
// targets) requires and that can, in ascending name order; the first
// failure fails the check. An optional-only target is never checked: it
// is probed on its own and never makes the process unhealthy.
//
// While a required target has an open destination circuit, only such
// targets are checked (this is the runner's probe), and a pass closes
// their circuits.
func (s *Sink) Healthcheck(ctx context.Context) error { return s.healthcheck(ctx) }

// CountWrites makes the sink report every target write call (one per
// target and batch, and one per bisection part) that committed at least one
// message to observe, with the call's duration. The host's
// sink_batches_written_total and sink_batch_write_seconds count these calls
// rather than the sink's own WriteBatch, which stands for several target
// writes (docs/routing.md#metrics). Call it before the first WriteBatch;
// nil stops the reports.
func (s *Sink) CountWrites(observe func(time.Duration)) {
	if observe == nil {
		s.writes.Store(nil)
		return
	}
	s.writes.Store(&observe)
}

// Stop stops every opened target in descending name order, also after a
// failure; each failure is logged and the first is returned.
func (s *Sink) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stopping) })
	s.wg.Wait()
	return s.stopOpened(ctx)
}

func (s *Sink) stopOpened(ctx context.Context) error {
	var first error
	for i := len(s.names) - 1; i >= 0; i-- {
		t, ok := s.targets[s.names[i]]
		if !ok {
			continue
		}
		if err := t.Stop(ctx); err != nil {
			s.log.Error("target stop failed", "target", s.names[i], "error", err.Error())
			if first == nil {
				first = fmt.Errorf("sinks.%s: %w", s.names[i], err)
			}
		}
	}
	return first
}

// op is one target's share of one batch: the batch's messages routed to
// it, in batch order, written as one isolated write.
type op struct {
	name     string
	target   sink.Sink
	idx      []int // positions in the batch
	required bool
	wait     time.Duration // optional: grace after the required copies are durable
	timeout  time.Duration // optional: cap since the writes started
	cancel   context.CancelFunc
	done     chan struct{}
	results  []sink.Result // one per idx, valid after done
	timedOut atomic.Bool   // cancelled at its deadline (set before the cancel)
	skipped  bool          // optional-only target with an open circuit: not called
}

// WriteBatch routes every message, writes each target's share concurrently
// and returns one result per message: committed when every required target
// committed it (or it routes to optional targets only, or nowhere under
// no_match "ignore"), else the failure of the first required target in the
// message's target order, a temporary one before a permanent one. Optional
// targets never decide a result; they are cancelled at their deadline.
func (s *Sink) WriteBatch(ctx context.Context, batch []*sink.Envelope) []sink.Result {
	start := s.now()
	results := make([]sink.Result, len(batch))
	sels := make([]Selection, len(batch))
	rejected := false
	for i, e := range batch {
		sels[i] = s.policy.Select(e)
		s.m.observeSelection(sels[i])
		if s.tr != nil {
			names := make([]string, len(sels[i].Targets))
			for k, t := range sels[i].Targets {
				names[k] = t.Sink
			}
			s.tr.MessageAttributes(ctx, e,
				sink.Attr{Key: "nats_sink.route_action", Value: sels[i].Action},
				sink.Attr{Key: "nats_sink.routes", Value: append([]string{}, sels[i].Routes...)},
				sink.Attr{Key: "nats_sink.targets", Value: names})
		}
		if sels[i].Action == ActionReject {
			rejected = true
			results[i] = sink.Result{Outcome: sink.Permanent, ErrorType: sink.PermanentSinkError, Err: errors.New(ErrNoRoute)}
			s.log.Warn("routing selected no target", "subject", e.Subject, "stream_sequence", e.StreamSequence, "action", ActionReject)
		}
		if sels[i].Action == ActionIgnore {
			s.log.Debug("routing selected no target", "subject", e.Subject, "stream_sequence", e.StreamSequence, "action", ActionIgnore)
		}
	}
	if rejected && s.byBatch {
		// Upstream's batch rule: one unroutable message sends the whole
		// batch to the permanent path before anything is written.
		for i := range results {
			results[i] = sink.Result{Outcome: sink.Permanent, ErrorType: sink.PermanentSinkError, Err: errors.New(ErrNoRoute), Shared: true}
		}
		s.m.batchSeconds.Observe(s.now().Sub(start).Seconds())
		return results
	}

	ops := s.plan(sels)
	t0 := s.now()
	var reqWG sync.WaitGroup
	for _, o := range ops {
		octx := ctx
		if !o.required {
			octx, o.cancel = context.WithCancel(ctx)
		}
		sub := make([]*sink.Envelope, len(o.idx))
		for j, i := range o.idx {
			sub[j] = batch[i]
		}
		o.done = make(chan struct{})
		if !o.required && s.health[o.name].skip() {
			// Paused optional-only target: fail at once, messages unaffected.
			o.skipped = true
			o.results = all(len(sub), sink.Result{Outcome: sink.NotAttempted, Err: errCircuitOpen})
			close(o.done)
			continue
		}
		if o.required {
			reqWG.Add(1)
		}
		w := writer{name: o.name, typ: s.types[o.name], t: o.target, tr: s.tr, required: o.required, timedOut: &o.timedOut, writes: s.writes.Load()}
		go func() {
			defer close(o.done)
			if o.required {
				defer reqWG.Done()
			}
			o.results = isolate(octx, w, sub, s.byBatch)
		}()
	}
	reqWG.Wait()
	tr := s.now()

	// Optional deadlines, all from the same instants: D = max(TR,
	// min(TR+w, T0+t)). When no message can be acknowledged, waiting for
	// side copies helps nobody: cancel them at TR.
	anyAck := false
	for i := range batch {
		if sels[i].Action != ActionReject && len(sels[i].Targets) > 0 && s.requiredOK(i, sels[i], ops) {
			anyAck = true
			break
		}
	}
	for _, o := range ops {
		if o.required {
			continue
		}
		d := tr
		if anyAck {
			d = tr.Add(o.wait)
			if cap := t0.Add(o.timeout); cap.Before(d) {
				d = cap
			}
			if d.Before(tr) {
				d = tr
			}
		}
		wait := d.Sub(s.now())
		if wait <= 0 {
			select {
			case <-o.done:
			default:
				o.timedOut.Store(true)
				o.cancel()
				<-o.done
			}
			continue
		}
		timer := time.NewTimer(wait)
		select {
		case <-o.done:
		case <-timer.C:
			o.timedOut.Store(true)
			o.cancel()
			<-o.done // the slot is freed only after the cancelled call returned
		}
		timer.Stop()
	}
	for _, o := range ops {
		if o.cancel != nil {
			o.cancel()
		}
	}
	release := s.now()

	s.decide(batch, sels, ops, results)
	s.m.observeOps(ops)
	s.observeHealth(ops)
	if len(ops) > 0 {
		s.m.gateSeconds.Observe(release.Sub(t0).Seconds())
	}
	s.m.batchSeconds.Observe(release.Sub(start).Seconds())
	s.log.Debug("fan-out gate released", "count", len(batch), "duration_ms", release.Sub(t0).Milliseconds())
	return results
}

// plan builds one operation per selected target, in ascending name order.
// An operation is required when its target is required for at least one of
// its messages; else its window is the largest among its messages.
func (s *Sink) plan(sels []Selection) []*op {
	byName := map[string]*op{}
	for i, sel := range sels {
		for _, t := range sel.Targets {
			o := byName[t.Sink]
			if o == nil {
				o = &op{name: t.Sink, target: s.targets[t.Sink]}
				byName[t.Sink] = o
			}
			o.idx = append(o.idx, i)
			if t.Required {
				o.required = true
			}
			w, to := t.Wait()
			o.wait = max(o.wait, time.Duration(w)*time.Millisecond)
			o.timeout = max(o.timeout, time.Duration(to)*time.Millisecond)
		}
	}
	ops := make([]*op, 0, len(byName))
	for _, n := range s.names {
		if o := byName[n]; o != nil {
			ops = append(ops, o)
		}
	}
	return ops
}

// resultOf returns message i's result in operation o.
func resultOf(o *op, i int) (sink.Result, bool) {
	j, found := slices.BinarySearch(o.idx, i)
	if !found || o.results == nil {
		return sink.Result{}, false
	}
	return o.results[j], true
}

func findOp(ops []*op, name string) *op {
	for _, o := range ops {
		if o.name == name {
			return o
		}
	}
	return nil
}

// requiredOK reports whether every required target of message i committed
// it (true when it has none).
func (s *Sink) requiredOK(i int, sel Selection, ops []*op) bool {
	for _, t := range sel.Targets {
		if !t.Required {
			continue
		}
		r, ok := resultOf(findOp(ops, t.Sink), i)
		if !ok || !r.Outcome.Acked() {
			return false
		}
	}
	return true
}

// decide sets each routed message's result from its required targets'
// results.
func (s *Sink) decide(batch []*sink.Envelope, sels []Selection, ops []*op, results []sink.Result) {
	failed := -1
	for i, sel := range sels {
		if sel.Action == ActionReject {
			continue
		}
		results[i] = sink.Ok
		var temp, perm *sink.Result
		for _, t := range sel.Targets {
			if !t.Required {
				continue
			}
			o := findOp(ops, t.Sink)
			r, ok := resultOf(o, i)
			if !ok {
				r = sink.Result{Outcome: sink.NotAttempted, Err: errors.New("not attempted")}
			}
			if r.Err == nil && !r.Outcome.Acked() {
				r.Err = fmt.Errorf("sink reported %s", r.Outcome)
			}
			te := sink.Result{Outcome: r.Outcome, ErrorType: r.ErrorType, Err: &TargetError{Target: t.Sink, Err: r.Err}}
			switch r.Outcome {
			case sink.Committed, sink.Duplicate:
			case sink.Permanent:
				if perm == nil {
					if te.ErrorType == "" {
						te.ErrorType = sink.PermanentSinkError
					}
					perm = &te
				}
			case sink.Temporary, sink.Destination, sink.NotAttempted:
				if temp == nil || (temp.Outcome != sink.Destination && r.Outcome == sink.Destination) {
					temp = &te
				}
			default:
				// An outcome this gate does not know (added to package sink
				// later) is not a commit: never acknowledge on it.
				if temp == nil {
					te = sink.Result{Outcome: sink.Temporary, Err: &TargetError{Target: t.Sink, Err: fmt.Errorf("outcome %s is not handled by the fan-out gate; not acknowledged", r.Outcome)}}
					temp = &te
				}
			}
		}
		switch {
		case temp != nil:
			results[i] = *temp
		case perm != nil:
			results[i] = *perm
		}
		if !results[i].Outcome.Acked() && failed < 0 {
			failed = i
		}
	}
	for _, o := range ops {
		if !o.required {
			continue
		}
		for j, r := range o.results {
			if !r.Outcome.Acked() {
				s.log.Warn("required target failed; message not acknowledged", "target", o.name,
					"outcome", r.Outcome.String(), "error_type", r.ErrorType, "count", countFailed(o.results[j:]))
				break
			}
		}
	}
	for _, o := range ops {
		if o.required {
			continue
		}
		if n := countFailed(o.results); o.timedOut.Load() {
			s.log.Warn("optional target timed out", "target", o.name, "count", len(o.results))
		} else if n > 0 {
			s.log.Warn("optional target failed", "target", o.name, "count", n)
		}
	}
	if s.byBatch && failed >= 0 {
		// Upstream's batch rule: any failure in a required operation sends
		// the whole batch to the temporary path.
		err := fmt.Errorf("batch isolation: another message of the batch failed: %w", results[failed].Err)
		for i := range results {
			if results[i].Outcome.Acked() || results[i].Outcome == sink.Permanent {
				results[i] = sink.Result{Outcome: sink.Temporary, Err: err, Shared: true}
			}
		}
	}
	s.m.observeDecisions(sels, results)
}

func countFailed(rs []sink.Result) int {
	n := 0
	for _, r := range rs {
		if !r.Outcome.Acked() {
			n++
		}
	}
	return n
}
