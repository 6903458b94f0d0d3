package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/dlq"
	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/tracing"
)

// Error types for failures that do not come from the sink. They appear in
// the error_type of the "temporary failure" log record only.
const (
	errTypeNormalization = "NormalizationError"
	errTypeEncryption    = "EncryptionError"
	errTypeAuthenticity  = "AuthenticityError"
	errTypeDLQPublish    = "DLQPublishError"
	errTypePanic         = "InternalError"
)

// dlqParallel bounds concurrent DLQ publishes of one batch: enough to
// pipeline round trips, few enough not to flood the server when a whole
// batch is poison.
const dlqParallel = 16

// flushTimeout bounds the wait for a batch's ACKs to leave the client.
const flushTimeout = 5 * time.Second

// batch is the state of one fetched batch between fetch and final decision.
type batch struct {
	id       string
	msgs     []jetstream.Msg
	envs     []*sink.Envelope // nil until built; stays nil if building failed
	errs     []error          // last failure per message (DLQ error text, logs)
	errTypes []string
	failed   []bool // counted in messages_failed_total
	settled  []bool // ACKed, TERMed, NAKed or deliberately left for AckWait
	dlqTried []bool
	// lastTry marks messages that failed on their last allowed delivery and
	// were not dead-lettered: the server will not deliver them again, so
	// their span's outcome is left_unacked even when they are NAKed.
	lastTry []bool
	// dup marks messages the sink reported Duplicate (for Settled).
	dup []bool
	// holding is set when some messages wait for their holds past the end
	// of process: the hold task then owns the spans and ends them.
	holding bool
	// tr holds the message spans; nil when tracing is off or the envelopes
	// could not be built. Every message span ends with the message's final
	// decision (trace.go).
	tr *tracing.Batch
}

func newBatch(msgs []jetstream.Msg) *batch {
	n := len(msgs)
	return &batch{
		id:       newBatchID(),
		msgs:     msgs,
		errs:     make([]error, n),
		errTypes: make([]string, n),
		failed:   make([]bool, n),
		settled:  make([]bool, n),
		dlqTried: make([]bool, n),
		lastTry:  make([]bool, n),
		dup:      make([]bool, n),
	}
}

// fail records why message i failed and counts it in messages_failed_total
// once, whichever failure paths it takes.
func (r *Runner) fail(b *batch, i int, errType string, err error) {
	b.errs[i], b.errTypes[i] = err, errType
	if !b.failed[i] {
		b.failed[i] = true
		r.metrics().MessagesFailed.Inc()
	}
}

func (b *batch) all() []int {
	idx := make([]int, len(b.msgs))
	for i := range idx {
		idx[i] = i
	}
	return idx
}

func (b *batch) unsettled() []int {
	var idx []int
	for i, s := range b.settled {
		if !s {
			idx = append(idx, i)
		}
	}
	return idx
}

// delivery returns message i's delivery count, 0 when unknown.
func (b *batch) delivery(i int) uint64 {
	if b.envs != nil && b.envs[i] != nil && b.envs[i].DeliveryCount > 0 {
		return b.envs[i].DeliveryCount
	}
	if md, err := b.msgs[i].Metadata(); err == nil {
		return md.NumDelivered
	}
	return 0
}

// where returns the subject and stream sequence of message i for logs.
func (b *batch) where(i int) (string, uint64) {
	if b.envs != nil && b.envs[i] != nil {
		return b.envs[i].Subject, b.envs[i].StreamSequence
	}
	var seq uint64
	if md, err := b.msgs[i].Metadata(); err == nil {
		seq = md.Sequence.Stream
	}
	return b.msgs[i].Subject(), seq
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// process runs steps 1–12 of docs/delivery.md#fetching-and-in-flight-batches for one batch. ctx is the runner's
// in-flight context: it outlives Run's ctx and is cancelled only when the
// shutdown timeout passes. probe marks the half-open circuit probe.
func (r *Runner) process(ctx context.Context, msgs []jetstream.Msg, probe bool) {
	log := r.logger().With("component", "runner")
	m := r.metrics()
	b := newBatch(msgs)
	n := len(msgs)
	// Registered first so that it runs last, after a panic's recovery has
	// settled (and ended the spans of) what it could: whatever span is
	// still open then is ended here rather than leaked.
	defer func() {
		if !b.holding {
			b.tr.End()
		}
	}()
	untrack := r.track()
	defer untrack()
	defer r.probeDone(probe, true) // a no-op if the batch opened or closed the circuit
	defer func() {
		if p := recover(); p != nil {
			// No payload is in the stack: it shows code locations and
			// pointer-sized argument words only.
			err := fmt.Errorf("panic: %v", p)
			log.Error("batch processing panicked", "batch_id", b.id, "error", fmt.Sprintf("%v\n%s", err, debug.Stack()))
			rest := b.unsettled()
			for _, i := range rest {
				r.fail(b, i, errTypePanic, err)
			}
			r.recoverTemporary(ctx, b, rest, log)
		}
	}()

	// Step 1.
	m.MessagesFetched.Add(n)
	m.BatchesFetched.Inc()

	// Step 2: envelopes. Building is pure; an unexpected failure (a panic
	// in it) sends the whole batch to the temporary path.
	start := time.Now()
	envs, err := r.envelopes(msgs)
	m.MessageMappingSeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		m.MessageNormalizationErrors.Add(n)
		r.failAll(ctx, b, errTypeNormalization, err, log)
		return
	}
	b.envs = envs
	// One consume span per message from here to its final decision; ctx
	// carries no span, so each continues its own producer's trace.
	b.tr = r.Tracer.StartBatch(ctx, b.id, envs)

	// Step 2a: authenticity, on the payload as received. Rejected
	// messages are encrypted with the others (their dead letter carries
	// the encryption envelope, never plaintext) but never written.
	policy, err := r.authenticate(envs)
	if err != nil {
		m.AuthenticityEvalErrors.Add(n)
		r.failAll(ctx, b, errTypeAuthenticity, err, log)
		return
	}

	// Step 3: encryption.
	if err := r.encrypt(envs); err != nil {
		m.PayloadEncryptionErrors.Add(n)
		r.failAll(ctx, b, errTypeEncryption, err, log)
		return
	}

	// Step 3a: custody, on what the sink receives (after encryption).
	rejected, err := r.custody(envs, policy)
	if err != nil {
		m.MessageNormalizationErrors.Add(n)
		r.failAll(ctx, b, errTypeNormalization, err, log)
		return
	}

	// Step 4: priority lanes. Rejected messages never reach the sink; they
	// join the permanent path at step 10.
	write := b.all()
	if lanes := r.st.lanes; lanes != nil {
		a := lanes.assign(envs)
		write = a.order
		for i, err := range a.rejected {
			if rejected == nil {
				rejected = map[int]error{}
			}
			if _, ok := rejected[i]; !ok {
				rejected[i] = err
			}
		}
		m.PriorityLaneBatches.Inc()
		m.PriorityLaneMessages.Add(len(a.order))
		m.PriorityLaneDefaulted.Add(a.defaulted)
		m.PriorityLaneRejected.Add(len(a.rejected))
		m.CurrentPriorityLanesActive.Set(float64(a.active))
	}
	if len(policy)+len(rejected) > 0 {
		write = slices.DeleteFunc(write, func(i int) bool {
			_, p := policy[i]
			_, v := rejected[i]
			return p || v
		})
	}

	// Step 5.
	m.MessagesPrepared.Add(len(write))
	m.CurrentBatchMessages.Set(float64(len(write)))

	// Steps 6–8: heartbeats around the write with isolation. They stop
	// before any DLQ publish, ACK or NAK.
	stopHeartbeat := r.heartbeat(b, log)
	defer stopHeartbeat() // a panic below still ends them
	results := make([]sink.Result, n)
	preWrite := make([]bool, n) // outcome decided before the sink was called
	for i, err := range rejected {
		results[i] = sink.Result{Outcome: sink.Permanent, ErrorType: sink.ValidationError, Err: err}
		preWrite[i] = true
	}
	for i, err := range policy {
		results[i] = sink.Result{Outcome: sink.Permanent, ErrorType: sink.PolicyViolationError, Err: err}
		preWrite[i] = true
	}
	switch {
	case len(rejected) > 0 && r.Isolation == IsolationBatch:
		// docs/delivery.md#per-message-isolation-and-bisection "batch": a rejection before the write sends the whole
		// batch to the permanent path without calling the sink. An
		// authenticity rejection stays with its own message.
		first := slices.Min(slices.Collect(maps.Keys(rejected)))
		for i := range results {
			if _, own := policy[i]; own {
				continue
			}
			results[i] = sink.Result{Outcome: sink.Permanent, ErrorType: sink.ValidationError, Err: rejected[first], Shared: true}
			preWrite[i] = true
		}
	case len(write) > 0:
		iso := isolation{
			write:   r.writer(b, log),
			byBatch: r.Isolation == IsolationBatch,
			onSplit: m.SinkBatchBisections.Inc,
		}
		set := make([]*sink.Envelope, len(write))
		for k, i := range write {
			set[k] = envs[i]
		}
		for k, res := range iso.run(ctx, set) {
			results[write[k]] = res
		}
	}
	stopHeartbeat()

	// Step 9 and the split into the three paths.
	var acks, dead, temp, held []int
	var destErr error
	for i, res := range results {
		switch {
		case res.Outcome == sink.Held && r.st.heldEvery > 0:
			held = append(held, i) // leaves steps 11–12 until its hold settles
		case res.Outcome.Acked():
			acks = append(acks, i)
			b.dup[i] = res.Outcome == sink.Duplicate
			b.tr.Span(i).SetOutcome(committedOutcome(res.Outcome))
		case res.Outcome == sink.Permanent:
			r.fail(b, i, res.ErrorType, res.Err)
			if !preWrite[i] {
				m.SinkWriteErrors.Inc()
			}
			dead = append(dead, i)
		default:
			if res.Err == nil { // a Held result from a sink that does not hold
				res.Err = fmt.Errorf("sink reported %s", res.Outcome)
			}
			r.fail(b, i, res.Outcome.String(), res.Err)
			m.SinkWriteErrors.Inc()
			if res.Outcome == sink.Destination {
				m.SinkDestinationErrors.Inc()
				if destErr == nil {
					destErr = res.Err
				}
			}
			temp = append(temp, i)
		}
	}
	written := len(acks)
	if ig, ok := r.Sink.(ignorer); ok {
		for _, i := range acks {
			if ig.Ignored(envs[i]) {
				written--
			}
		}
	}
	m.MessagesWritten.Add(written)
	if len(acks) > 0 && r.Metrics != nil {
		committed := make([]*sink.Envelope, len(acks))
		for k, i := range acks {
			committed[k] = envs[i]
		}
		observeFreshness(m, r.Freshness, committed, r.now())
	}
	if len(acks) > 0 {
		r.committed(log)
	}
	if destErr != nil {
		log.Error("destination unavailable", "sink", r.Sink.Type(), "error_type", sink.Destination.String(), "error", destErr.Error())
		r.openCircuit()
		r.failFast("destination", destErr)
	}

	if ctx.Err() != nil {
		// The shutdown timeout cancelled the write: whatever was not
		// committed has an unknown outcome and is never ACKed.
		r.settle(ctx, b, acks, nil, log)
		r.abandon(b, b.unsettled(), log)
		return
	}

	// Step 10: permanent path.
	var dlqd []int
	if len(dead) > 0 {
		if r.DeadLetter == nil {
			for _, i := range dead {
				subj, seq := b.where(i)
				log.Error("permanent failure and DLQ disabled; left unacknowledged",
					"subject", subj, "stream_sequence", seq, "error_type", b.errTypes[i])
				b.settled[i] = true
				b.traceLeft(i)
				if md := r.maxDeliver(); md > 0 && b.delivery(i) >= uint64(md) {
					r.report(b, i, SettledGivenUp)
				}
			}
		} else {
			var failed []int
			dlqd, failed = r.deadLetter(ctx, b, dead, "", log)
			temp = append(temp, failed...)
			slices.Sort(temp)
		}
	}

	// Step 11: ACK/TERM in delivery order.
	r.settle(ctx, b, acks, dlqd, log)
	if len(acks) > 0 {
		m.LastSinkSuccessEpochSeconds.Set(float64(r.now().UnixNano()) / 1e9)
	}

	// Step 12: temporary path.
	r.temporary(ctx, b, temp, log)

	if len(held) > 0 {
		r.awaitHolds(ctx, b, held, results, log)
	}
}

// report passes message i's final settlement to the Settled hook.
func (r *Runner) report(b *batch, i int, s Settlement) {
	if r.Settled != nil {
		r.Settled(b.msgs[i], s)
	}
}

// recoverTemporary runs the temporary path after a panic. Should that panic
// too, the messages are NAKed without delay: a crash of the process would
// redeliver them anyway, only later.
func (r *Runner) recoverTemporary(ctx context.Context, b *batch, idx []int, log *slog.Logger) {
	defer func() {
		if p := recover(); p != nil {
			log.Error("batch processing panicked", "batch_id", b.id, "error", fmt.Sprintf("panic: %v\n%s", p, debug.Stack()))
			r.nakIdx(b, b.unsettled(), log)
		}
	}()
	r.temporary(ctx, b, idx, log)
}

// failAll sends the whole batch to the temporary path.
func (r *Runner) failAll(ctx context.Context, b *batch, errType string, err error, log *slog.Logger) {
	for i := range b.msgs {
		r.fail(b, i, errType, err)
	}
	r.temporary(ctx, b, b.all(), log)
}

// envelopes builds one envelope per message (docs/delivery.md#fetching-and-in-flight-batches step 2).
func (r *Runner) envelopes(msgs []jetstream.Msg) (envs []*sink.Envelope, err error) {
	defer func() {
		if p := recover(); p != nil {
			envs, err = nil, fmt.Errorf("building envelopes: panic: %v", p)
		}
	}()
	now := r.now()
	envs = make([]*sink.Envelope, len(msgs))
	for i, msg := range msgs {
		envs[i] = intake.Build(intake.Message{
			Subject: msg.Subject(),
			Reply:   msg.Reply(),
			Data:    msg.Data(),
			Header:  msg.Headers(),
		}, r.Metadata, now)
	}
	return envs, nil
}

// encrypt applies the Encrypt hook (docs/delivery.md#fetching-and-in-flight-batches step 3). Headers-only
// messages are skipped: there is no producer payload to protect, and
// encrypting the empty body would pretend there was (docs/migrating.md Q14).
func (r *Runner) encrypt(envs []*sink.Envelope) (err error) {
	if r.Encrypt == nil {
		return nil
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("encrypting: panic: %v", p)
		}
	}()
	for _, e := range envs {
		if e.Payload.Omitted {
			continue
		}
		if err := r.Encrypt(e); err != nil {
			return fmt.Errorf("encrypt message (stream seq %d): %w", e.StreamSequence, err)
		}
	}
	return nil
}

// authenticate runs the Authenticate hook (step 2a), in parallel for
// larger batches (checkAll), and returns the rejected messages with their
// dead-letter errors. A panic or evaluation error fails the whole batch.
func (r *Runner) authenticate(envs []*sink.Envelope) (rejected map[int]error, err error) {
	if r.Authenticate == nil {
		return nil, nil
	}
	vs := checkAll(envs, r.Authenticate)
	if err := firstFailure(envs, vs); err != nil {
		return nil, err
	}
	var order []int // rejected indices in batch order, for the log
	for i, v := range vs {
		if v.reject != nil {
			if rejected == nil {
				rejected = map[int]error{}
			}
			rejected[i] = v.reject
			order = append(order, i)
		}
	}
	m := r.metrics()
	m.AuthenticityPassed.Add(len(envs) - len(rejected))
	m.AuthenticityRejected.Add(len(rejected))
	if len(rejected) < len(envs) {
		m.AuthenticityBatchesPassed.Inc()
	}
	if len(rejected) > 0 {
		m.AuthenticityBatchesReject.Inc()
		log := r.logger().With("component", "runner")
		for _, i := range order {
			// Reason and rule only: never header values, signatures or keys.
			log.Warn("message authenticity rejected", "subject", envs[i].Subject, "stream", envs[i].Stream,
				"stream_sequence", envs[i].StreamSequence, "error", rejected[i].Error())
		}
	}
	return rejected, nil
}

// custody runs the Custody hook (step 3a) on every message not rejected by
// authenticity. It returns the messages whose custody failed permanently;
// err (a temporary failure or a panic) fails the whole batch.
func (r *Runner) custody(envs []*sink.Envelope, skip map[int]error) (rejected map[int]error, err error) {
	if r.Custody == nil {
		return nil, nil
	}
	defer func() {
		if p := recover(); p != nil {
			rejected, err = nil, fmt.Errorf("custody: panic: %v", p)
		}
	}()
	for i, e := range envs {
		if _, ok := skip[i]; ok {
			continue
		}
		if cerr := r.Custody(e); cerr != nil {
			if res := sink.Failed(cerr); res.Outcome == sink.Permanent {
				if rejected == nil {
					rejected = map[int]error{}
				}
				rejected[i] = cerr
				continue
			}
			return nil, fmt.Errorf("custody (stream seq %d): %w", e.StreamSequence, cerr)
		}
	}
	return rejected, nil
}

// writer wraps b's WriteBatch calls with their metrics and write span, and
// turns a panicking sink into a temporary failure of that call. depth is the
// bisection depth of the call (0 for the whole batch).
func (r *Runner) writer(b *batch, log *slog.Logger) writeFunc {
	m := r.metrics()
	return func(ctx context.Context, set []*sink.Envelope, depth int) (res []sink.Result) {
		// The write context carries the write span and lets the sink find
		// each envelope's message span for its client spans.
		wctx, ws := b.tr.StartWrite(ctx, set, depth)
		defer func() {
			if p := recover(); p != nil {
				err := fmt.Errorf("sink %s panicked: %v", r.Sink.Type(), p)
				log.Error("sink panicked", "sink", r.Sink.Type(), "error", fmt.Sprintf("%v\n%s", err, debug.Stack()))
				res = make([]sink.Result, len(set))
				for i := range res {
					res[i] = sink.Result{Outcome: sink.Temporary, Err: err, Shared: true}
				}
			}
			ws.Results(res)
			ws.End()
		}()
		start := time.Now()
		res = r.Sink.WriteBatch(wctx, set)
		if _, own := r.Sink.(writeCounter); own {
			return res // the sink reports its own write calls (Run)
		}
		for _, x := range res {
			if x.Outcome.Acked() {
				m.SinkBatchWriteSeconds.Observe(time.Since(start).Seconds())
				m.SinkBatchesWritten.Inc()
				break
			}
		}
		return res
	}
}

// committed notes a commit: a destination that commits is healthy again, and
// a half-open circuit closes.
func (r *Runner) committed(log *slog.Logger) {
	r.st.mu.Lock()
	unhealthy := r.st.sinkUnhealthy
	r.st.mu.Unlock()
	r.st.circuit.mu.Lock()
	open := r.st.circuit.open
	r.st.circuit.mu.Unlock()
	if unhealthy || open {
		r.closeCircuit(log)
	}
}

// track registers a batch as in flight until the returned func runs, and
// keeps current_batches_in_flight at the number of such batches: slots
// holding messages, not a fetch waiting for some.
func (r *Runner) track() func() {
	m := r.metrics()
	r.st.mu.Lock()
	r.st.nextBatch++
	key := r.st.nextBatch
	r.st.inFlight[key] = time.Now()
	m.CurrentBatchesInFlight.Set(float64(len(r.st.inFlight)))
	r.st.mu.Unlock()
	return func() {
		r.st.mu.Lock()
		delete(r.st.inFlight, key)
		m.CurrentBatchesInFlight.Set(float64(len(r.st.inFlight)))
		r.st.mu.Unlock()
	}
}

// deadLetter publishes the messages idx to the DLQ (docs/delivery.md#dead-letter-queue), pipelined,
// each awaited for its own PubAck within PublishTimeout. errorType, when not
// empty, replaces the recorded error type (MaxDeliveriesExceeded). It returns
// the messages whose PubAck arrived and those that must take the temporary
// path instead.
func (r *Runner) deadLetter(ctx context.Context, b *batch, idx []int, errorType string, log *slog.Logger) (ok, failed []int) {
	dl := r.DeadLetter
	dlog := r.logger().With("component", "dlq")
	m := r.metrics()
	opts := dlq.Options{
		IncludePayload: dl.IncludePayload,
		IncludeHeaders: dl.IncludeHeaders,
		IncludeError:   dl.IncludeError,
		Consumer:       r.consumerName(),
	}
	type outcome struct {
		dup bool
		err error
	}
	outs := make([]outcome, len(idx))
	msgs := make([]dlq.Message, len(idx))
	types := make([]string, len(idx)) // the error type each dead letter carries
	for k, i := range idx {
		b.dlqTried[i] = true
		f := dlq.Failure{ErrorType: b.errTypes[i], Error: errText(b.errs[i])}
		if t, ok := errors.AsType[dlq.Targeted](b.errs[i]); ok {
			f.Target = t.FanoutTarget()
		}
		if errorType != "" {
			f.ErrorType = errorType
		}
		types[k] = f.ErrorType
		msgs[k] = dlq.Build(b.envs[i], f, opts, r.now())
	}
	sem := make(chan struct{}, dlqParallel)
	var wg sync.WaitGroup
	for k, i := range idx {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			outs[k].dup, outs[k].err = r.publishDLQ(ctx, b, i, types[k], msgs[k])
		})
	}
	wg.Wait()
	for k, i := range idx {
		subj, seq := b.where(i)
		if err := outs[k].err; err != nil {
			m.DLQPublishErrors.Inc()
			dlog.Error("dlq publish failed", "subject", subj, "stream_sequence", seq, "error", err.Error())
			r.fail(b, i, errTypeDLQPublish, fmt.Errorf("dlq publish (stream seq %d): %w", seq, err))
			r.failFast("dlq publish", err)
			failed = append(failed, i)
			continue
		}
		m.MessagesDLQ.Inc()
		if outs[k].dup {
			m.DLQPublishDuplicates.Inc()
		}
		et := types[k]
		dlog.Warn("permanent failure dead-lettered", "subject", subj, "stream_sequence", seq, "error_type", et)
		s := b.tr.Span(i)
		s.Fail(et, b.errs[i])
		s.SetOutcome(tracing.OutcomeDeadLettered)
		ok = append(ok, i)
	}
	return ok, failed
}

// publishDLQ publishes dm, the dead letter of message i (failed with
// errorType), and waits for its PubAck. The deterministic Nats-Msg-Id lets
// the DLQ stream drop the copy that a lost ACK and redelivery would
// otherwise add. With tracing, the publish has its own span, a child of the
// message's, and the dead letter carries that span's context instead of the
// trace headers dlq.Build copied.
func (r *Runner) publishDLQ(ctx context.Context, b *batch, i int, errorType string, dm dlq.Message) (duplicate bool, err error) {
	ctx, span := b.tr.StartDeadLetter(ctx, i, r.DeadLetter.Subject, errorType)
	defer span.End()
	pctx, cancel := context.WithTimeout(ctx, r.publishTimeout())
	defer cancel()
	h := nats.Header{}
	for k, v := range dm.Header {
		h[k] = slices.Clone(v)
	}
	if b.tr != nil {
		// Without tracing dlq.Build's verbatim copy is what the spec asks
		// for, and Inject would only rewrite it.
		tracing.Inject(ctx, b.envs[i], h)
	}
	msg := &nats.Msg{Subject: r.DeadLetter.Subject, Data: dm.Body, Header: h}
	var opts []jetstream.PublishOpt
	if dm.MsgID != "" && h.Get(jetstream.MsgIDHeader) == "" {
		opts = append(opts, jetstream.WithMsgID(dm.MsgID))
	}
	ack, err := r.JetStream.PublishMsg(pctx, msg, opts...)
	if err != nil {
		span.Fail(errTypeDLQPublish, err)
		return false, err
	}
	return ack.Duplicate, nil
}

// flush waits until buffered ACKs/NAKs have been written to the server.
// Ack() is fire-and-forget; without a flush a batch could be released, and
// the process stopped, with its ACKs still in the client buffer.
func (r *Runner) flush(log *slog.Logger) {
	if r.Conn == nil || !r.Conn.IsConnected() {
		return
	}
	if err := r.Conn.FlushTimeout(flushTimeout); err != nil {
		log.Debug("flush failed", "error", err.Error())
	}
}

// temporary runs the temporary path of docs/delivery.md#retries-and-back-off for the messages idx.
func (r *Runner) temporary(ctx context.Context, b *batch, idx []int, log *slog.Logger) {
	if len(idx) == 0 {
		return
	}
	if ctx.Err() != nil {
		r.abandon(b, idx, log)
		return
	}
	m := r.metrics()

	// Step 3a: a failure on the last allowed delivery is never dropped
	// silently.
	if md := r.maxDeliver(); md > 0 {
		var last []int
		for _, i := range idx {
			if b.delivery(i) >= uint64(md) {
				last = append(last, i)
			}
		}
		if len(last) > 0 {
			var dead []int
			if r.DeadLetter != nil && r.DeadLetter.OnMaxDeliver && b.envs != nil {
				for _, i := range last {
					if !b.dlqTried[i] {
						dead = append(dead, i)
					}
				}
			}
			var ok []int
			if len(dead) > 0 {
				ok, _ = r.deadLetter(ctx, b, dead, sink.MaxDeliveriesExceeded, log)
				r.settle(ctx, b, nil, ok, log)
				idx = slices.DeleteFunc(slices.Clone(idx), func(i int) bool { return slices.Contains(ok, i) })
			}
			for _, i := range last {
				if slices.Contains(ok, i) {
					continue
				}
				b.lastTry[i] = true
				r.report(b, i, SettledGivenUp)
				subj, seq := b.where(i)
				log.Error("max deliveries reached", "subject", subj, "stream_sequence", seq, "error_type", b.errTypes[i])
				m.MessagesMaxDeliverReached.Inc()
			}
			if len(idx) == 0 {
				return
			}
		}
	}

	attempt := uint64(1)
	for _, i := range idx {
		attempt = max(attempt, b.delivery(i))
	}
	first := idx[0]
	if attempt > uint64(r.Retry.maxRetries()) {
		log.Error("retry budget exhausted; left for redelivery", "batch_id", b.id, "count", len(idx), "attempt", attempt)
		for _, i := range idx {
			b.settled[i] = true
			b.traceLeft(i)
		}
		return
	}
	delay := Backoff(int(min(attempt, 1<<31)), r.Retry, r.draw())
	m.RetryBackoffDelaySeconds.Observe(delay.Seconds())
	log.Warn("temporary failure; batch will be redelivered", "batch_id", b.id, "count", len(idx),
		"attempt", attempt, "delay_ms", delay.Milliseconds(), "error_type", b.errTypes[first], "error", errText(b.errs[first]))
	if r.TemporaryAction == ActionLeaveUnacked {
		for _, i := range idx {
			b.settled[i] = true
			b.traceLeft(i)
		}
		return
	}
	for _, i := range idx {
		var err error
		if delay > 0 {
			err = b.msgs[i].NakWithDelay(delay)
		} else {
			err = b.msgs[i].Nak()
		}
		b.settled[i] = true
		b.traceNak(i, delay, err)
		if err != nil {
			_, seq := b.where(i)
			log.Warn("nak failed", "stream_sequence", seq, "error", err.Error())
			continue
		}
		m.MessagesNacked.Inc()
	}
	r.flush(log)
}

// abandon NAKs without delay the messages a shutdown cut off
// (shutdown_abandoned_messages_total): their outcome is unknown, so they are
// never ACKed, and an immediate NAK hands them to another process at once.
func (r *Runner) abandon(b *batch, idx []int, log *slog.Logger) {
	if len(idx) == 0 {
		return
	}
	r.metrics().ShutdownAbandonedMessages.Add(len(idx))
	r.st.mu.Lock()
	r.st.abandoned += len(idx)
	r.st.mu.Unlock()
	r.nakIdx(b, idx, log)
}

// nakIdx NAKs the messages idx of b without delay, settling them and ending
// their spans.
func (r *Runner) nakIdx(b *batch, idx []int, log *slog.Logger) {
	if len(idx) == 0 {
		return
	}
	m := r.metrics()
	for _, i := range idx {
		err := b.msgs[i].Nak()
		b.settled[i] = true
		b.traceNak(i, 0, err)
		if err != nil {
			_, seq := b.where(i)
			log.Warn("nak failed", "stream_sequence", seq, "error", err.Error())
			continue
		}
		m.MessagesNacked.Inc()
	}
	r.flush(log)
}

// nakNow NAKs msgs without delay.
func (r *Runner) nakNow(msgs []jetstream.Msg, log *slog.Logger) {
	if len(msgs) == 0 {
		return
	}
	m := r.metrics()
	for _, msg := range msgs {
		if err := msg.Nak(); err != nil {
			log.Warn("nak failed", "error", err.Error())
			continue
		}
		m.MessagesNacked.Inc()
	}
	r.flush(log)
}

// ignorer is implemented by a sink that acknowledges some messages without
// writing them anywhere: the fanout sink under routing.no_match "ignore".
// messages_written_total leaves those out. Ignored must be a pure function
// of the envelope.
type ignorer interface{ Ignored(*sink.Envelope) bool }

// writeCounter is implemented by a sink whose WriteBatch makes several
// write calls of its own: the fanout sink, one per target (and bisection
// part). sink_batches_written_total and sink_batch_write_seconds count
// those calls, not the runner's one: Run hands the sink the observer and
// the runner leaves its own call uncounted.
type writeCounter interface {
	CountWrites(observe func(time.Duration))
}
