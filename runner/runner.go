// Package runner moves messages from one JetStream pull consumer into one
// sink. It is the only code in nats-sink that acknowledges.
//
// # The invariant
//
// A message is acknowledged (ACK or TERM) only after everything required for
// it has durably happened: its sink reported it Committed or Duplicate, or its
// dead-letter record was published and JetStream acknowledged that publish.
// Every other message stays unacknowledged: it is NAKed or left for AckWait,
// and JetStream redelivers it. No path turns an unknown outcome into an ACK,
// and with several batches in flight each batch is acknowledged after its own
// commit only (README.md#the-guarantee, docs/delivery.md#fetching-and-in-flight-batches).
//
// A Runner is configured like http.Server: set its fields, then call Run.
// Zero values mean the docs/configuration.md defaults.
//
// # Delivery options
//
// Three options are off unless set, as in the configuration:
// InProgress heartbeats keep a slow write from being redelivered (its
// guards, CheckInProgress, run at start); AckConfirmation makes every ACK a
// request the server answers once applied, so a lost ACK is counted and
// logged (the message is then left for redelivery, never NAKed: it is
// committed); PriorityLanes reorders each batch by weighted round-robin
// over lanes before the write, while ACKs stay in delivery order.
//
// Consumer management (EnsureConsumer) binds, creates or reconciles the
// durable consumer. In reconcile mode only immutable drift refuses the
// start, and the error lists just those fields; mutable differences are
// written back over the server's current configuration.
//
// # Tracing
//
// With a Tracer every message has a span from its envelope to its final
// decision, ended by the same code that ACKs, TERMs or NAKs it, with the
// outcome the decision implies (trace.go); the spans never influence a
// decision. A nil Tracer costs a few nil checks per batch.
package runner

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/metadata"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/telemetry"
	"github.com/nats-sinks/nats-sink/tracing"
)

// Temporary-failure actions (delivery.temporary_failure_action).
const (
	ActionNak          = "nak"
	ActionLeaveUnacked = "leave_unacked"
)

// Defaults of docs/configuration.md#delivery that the Runner applies to zero fields.
const (
	DefaultBatchSize       = 100
	DefaultBatchTimeout    = time.Second
	DefaultMaxInFlight     = 1
	DefaultShutdownTimeout = 20 * time.Second
	DefaultPublishTimeout  = 5 * time.Second
	DefaultMaxBatchBytes   = 16 << 20
)

// ErrFailFast is matched (errors.Is) by the error Run returns when
// delivery.fail_fast stopped it; the CLI maps it to exit 1.
var ErrFailFast = errors.New("delivery.fail_fast")

// ErrConsumerNotFound is matched by the error Run returns when the bound
// consumer disappeared from the server (docs/delivery.md#fetching-and-in-flight-batches). Re-running consumer
// management is the caller's job; the CLI exits 2 for bind_only.
var ErrConsumerNotFound = errors.New("consumer not found")

// A Runner moves messages from one pull consumer to one sink: fetch → envelope
// → encrypt → WriteBatch with isolation → dead-letter → ACK/TERM → NAK.
//
// Set the fields before Run and do not change them afterwards. A nil optional
// field disables that feature; a zero value means the docs/configuration.md default.
// A Runner runs once.
type Runner struct {
	// Consumer is the bound pull consumer. Required.
	Consumer jetstream.Consumer
	// JetStream publishes dead letters. Required when DeadLetter is set.
	JetStream jetstream.JetStream
	// Conn, when set, is flushed after each batch's ACKs so that a batch is
	// only released once its ACKs have left the client.
	Conn *nats.Conn
	// Sink is the started destination. Required. The caller stops it after
	// Run returns: Run never calls Stop.
	Sink sink.Sink
	// Metadata resolves priority, classification and labels; nil means the
	// defaults (standard header names, no rules).
	Metadata *metadata.Resolver
	// Encrypt, when set, replaces an envelope's Data with its encryption
	// envelope (docs/security.md#payload-encryption-keys). It is not called for headers-only messages,
	// whose payload was omitted. An error sends the whole batch to the
	// temporary path.
	Encrypt func(*sink.Envelope) error
	// Authenticate, when set, verifies each envelope before encryption
	// (docs/integrity.md#message-authenticity). A non-nil reject rejects
	// that message: it never reaches the sink and is dead-lettered with
	// error type PolicyViolationError and reject's text, in both isolation
	// modes. A non-nil err (an unexpected evaluation failure) sends the
	// whole batch to the temporary path. The runner calls it concurrently
	// for the messages of a larger batch (up to GOMAXPROCS at once), so it
	// must be safe for concurrent use; the decisions are those of calling
	// it once per message in batch order.
	Authenticate func(*sink.Envelope) (reject, err error)
	// Custody, when set, attaches the custody document to each envelope
	// that will be written, after encryption
	// (docs/integrity.md#chain-of-custody). A permanent error
	// (sink.AsPermanentType) dead-letters that message, or the whole batch
	// with permanent_failure_isolation "batch"; any other error sends the
	// whole batch to the temporary path.
	Custody func(*sink.Envelope) error
	// DeadLetter configures the DLQ; nil disables it.
	DeadLetter *DeadLetter
	// ConsumerName is nats.consumer, used in the DLQ Nats-Msg-Id; "" means
	// the name from consumer info.
	ConsumerName string

	// BatchSize is the largest fetch; 0 means 100.
	BatchSize int
	// BatchTimeout is the fetch expiry; 0 means 1 s.
	BatchTimeout time.Duration
	// MaxBatchBytes bounds the bytes one fetch may return (JetStream pull
	// max_bytes), so that a batch of large messages never exceeds what the
	// server lets a client have pending, nor the process's memory; 0 means
	// 16 MiB. A fetch the limit cuts short is an ordinary, smaller batch.
	// It must be at least the server's max_payload (CheckMaxBatchBytes).
	// A replicated consumer is fetched without a byte limit, with a count
	// small enough to stay within it (Conn's max_payload per message).
	MaxBatchBytes int
	// MaxInFlight is the number of batches processed concurrently; 0 means 1.
	MaxInFlight int
	// Retry holds max_retries and the NAK back-off settings.
	Retry Retry
	// TemporaryAction is "nak" (default) or "leave_unacked".
	TemporaryAction string
	// Isolation is "message" (default) or "batch".
	Isolation string
	// ShutdownTimeout bounds how long in-flight batches may continue after
	// ctx ends (or after a fail-fast stop). nil means 20 s; a pointer to 0
	// cancels in-flight writes at once (config allows shutdown_timeout_ms 0).
	ShutdownTimeout *time.Duration
	// FailFast stops the runner after an ACK, TERM, DLQ-publish or
	// destination failure, once in-flight batches settle.
	FailFast bool
	// MaxDeliver is the consumer's MaxDeliver. 0 means "read it from consumer
	// info" (at start and on every 10 s refresh); a negative value means
	// unlimited regardless of the server.
	MaxDeliver int
	// InProgress, when set, sends InProgress (+WPI) heartbeats for every
	// message of a batch while the sink writes it, so that a write slower
	// than AckWait is not redelivered behind its back (docs/delivery.md#inprogress-heartbeats). nil
	// disables heartbeats (delivery.in_progress.enabled false). Run refuses
	// to start (*ConfigError) when the consumer fails CheckInProgress.
	InProgress *InProgress
	// AckConfirmation, when set, waits for the server to confirm every ACK
	// (docs/delivery.md#ack-order); nil sends plain, fire-and-forget ACKs
	// (delivery.ack_confirmation.enabled false). It requires Conn, the
	// connection the Consumer's messages arrive on.
	AckConfirmation *AckConfirmation
	// PriorityLanes, when set, assigns every message a lane by its priority
	// and orders each batch by weighted round-robin over the lanes before the
	// write (docs/delivery.md#fetching-and-in-flight-batches step 4); nil disables lanes
	// (delivery.priority_lanes.enabled false).
	PriorityLanes *PriorityLanes

	// Settled, when set, is called once for each message whose handling
	// ended for good in this delivery: ACKed after a commit
	// (SettledWritten, SettledDuplicate), ACKed or TERMed after its dead
	// letter's PubAck (SettledDeadLettered), or failed on its last allowed
	// delivery without a dead letter (SettledGivenUp: the server does not
	// deliver it again). Messages that are NAKed or left for redelivery, and
	// those whose ACK failed, are not reported: they come back. It is called
	// from the batches' goroutines, concurrently when batches are in flight,
	// and must return quickly. `nats-sink replay` uses it to know when its
	// range is done and what happened to each message.
	Settled func(msg jetstream.Msg, s Settlement)

	// Freshness configures the event freshness metrics.
	Freshness Freshness
	// Metrics receives every runner metric; nil disables metrics.
	Metrics *telemetry.Metrics
	// Tracer, when set, traces every message (docs/tracing.md): a
	// "process" span per message from its envelope to its final decision
	// (ACK, TERM and NAK are events on it), a "write" span per WriteBatch
	// call linked to the spans of the messages it wrote, and a "publish"
	// span per dead letter, whose context the dead letter carries. The
	// context WriteBatch receives lets sinks start client spans under each
	// message's span (tracing.StartClient). nil disables tracing; the
	// runner then only copies trace headers verbatim into dead letters.
	// The caller shuts the Tracer down after Run returns.
	Tracer *tracing.Tracer
	// Logger receives runner logs; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Rand draws the jitter u in [0, 1); nil means JitterDraw (crypto/rand).
	Rand func() float64

	// refreshEvery and oldestEvery are how often consumer info and the
	// oldest in-flight batch are read; 0 means 10 s and 1 s. Tests shorten
	// them.
	refreshEvery, oldestEvery time.Duration
	// timedProbe makes tests use the fallback probe (see noWaitOpt).
	timedProbe bool

	started atomic.Bool
	st      state
}

// A Settlement is how the handling of a message ended (Runner.Settled).
type Settlement int

// The settlements Runner.Settled reports.
const (
	SettledWritten      Settlement = iota + 1 // committed by the sink, then ACKed
	SettledDuplicate                          // already stored (Duplicate), then ACKed
	SettledDeadLettered                       // dead letter PubAcked, then ACKed or TERMed
	SettledGivenUp                            // failed on its last delivery, not dead-lettered, never ACKed
)

// DeadLetter configures dead-lettering (docs/configuration.md#dead_letter). Unlike the Runner's
// own fields, the booleans here default to true in the configuration while
// their Go zero value is false: build one with NewDeadLetter, which applies
// the config defaults, then change what the configuration says.
type DeadLetter struct {
	// Subject is the literal DLQ subject; a JetStream stream must capture it
	// (CheckDLQ).
	Subject string
	// IncludePayload, IncludeHeaders and IncludeError shape the DLQ body
	// (docs/formats.md#dlq-body).
	IncludePayload bool
	IncludeHeaders bool
	IncludeError   bool
	// TermAfterPublish sends TERM instead of ACK after the DLQ PubAck.
	TermAfterPublish bool
	// OnMaxDeliver dead-letters a message whose temporary failure happened on
	// its last allowed delivery (docs/delivery.md#retries-and-back-off step 3a).
	OnMaxDeliver bool
	// PublishTimeout bounds the wait for each PubAck; 0 means 5 s.
	PublishTimeout time.Duration
}

// NewDeadLetter returns the docs/configuration.md#dead_letter defaults for subject: payload,
// headers and error included, ACK (not TERM) after publish, last deliveries
// dead-lettered, 5 s PubAck timeout.
func NewDeadLetter(subject string) *DeadLetter {
	return &DeadLetter{
		Subject:        subject,
		IncludePayload: true,
		IncludeHeaders: true,
		IncludeError:   true,
		OnMaxDeliver:   true,
		PublishTimeout: DefaultPublishTimeout,
	}
}

// Status is the runner's part of /readyz (docs/observability.md#health-endpoints).
type Status struct {
	// Bound is true while Run is running with its consumer bound.
	Bound bool
	// FetchFailing is true after 3 consecutive failed fetches, until the next
	// successful one.
	FetchFailing bool
	// SinkUnhealthy is true after a destination failure until the next commit.
	SinkUnhealthy bool
	// CircuitOpen is true while fetching is paused for a broken destination.
	CircuitOpen bool
	// Draining is true once shutdown (or a fail-fast stop) began.
	Draining bool
	// InFlight is the number of batches between fetch and final decision.
	InFlight int
	// Heartbeat is when the fetch loop last showed that it is alive: it went
	// round, or a fetch returned. While the loop waits deliberately (every
	// in-flight slot holds a batch being written, the destination circuit is
	// open, a failed fetch's back-off) it is the current time. A Heartbeat
	// that falls behind means the loop is stuck (a fetch that does not
	// return); systemd's watchdog uses it. Zero before Run.
	Heartbeat time.Time
}

// state is the mutable part of a running Runner.
type state struct {
	mu            sync.Mutex
	bound         bool
	fetchFailures int
	loopBeat      time.Time // see Status.Heartbeat
	loopWaiting   bool      // the fetch loop waits deliberately
	sinkUnhealthy bool
	draining      bool
	inFlight      map[uint64]time.Time // batch start times, for the stuck gauge
	nextBatch     uint64
	maxDeliver    int
	consumerName  string
	abandoned     int // messages NAKed because the drain timed out
	// Held results (held.go): heldEvery is the heartbeat interval of held
	// messages, 0 when the sink does not hold; holds owns the hold tasks.
	heldEvery time.Duration
	holds     sync.WaitGroup
	held      int
	heldSince map[*batch]time.Time
	heldCount map[*batch]int
	failErr   error // first fail-fast cause
	fatalErr  error // consumer gone
	stop      chan struct{}
	stopOnce  sync.Once

	noWait jetstream.FetchOpt // noWaitOpt(); nil if nats.go has changed
	// replicated is true while the consumer has replicas (from consumer
	// info): its fetches carry no byte limit (see fetch).
	replicated bool
	circuit    circuit
	metrics    *telemetry.Metrics // never nil while running
	lanes      *laneTable         // nil without PriorityLanes
}

// Status reports readiness inputs. It is safe to call concurrently with Run.
func (r *Runner) Status() Status {
	r.st.mu.Lock()
	defer r.st.mu.Unlock()
	s := Status{
		Bound:         r.st.bound,
		FetchFailing:  r.st.fetchFailures >= 3,
		SinkUnhealthy: r.st.sinkUnhealthy,
		Draining:      r.st.draining,
		InFlight:      len(r.st.inFlight),
		Heartbeat:     r.st.loopBeat,
	}
	if r.st.loopWaiting {
		s.Heartbeat = r.now()
	}
	r.st.circuit.mu.Lock()
	s.CircuitOpen = r.st.circuit.open
	r.st.circuit.mu.Unlock()
	return s
}

// Resolved settings.

func (r *Runner) batchSize() int {
	if r.BatchSize <= 0 {
		return DefaultBatchSize
	}
	return r.BatchSize
}

func (r *Runner) batchTimeout() time.Duration {
	if r.BatchTimeout <= 0 {
		return DefaultBatchTimeout
	}
	return r.BatchTimeout
}

// fetchBytes is the max_bytes of every pull request: MaxBatchBytes plus
// room for one message's subject and reply subject, which the server
// counts too. Without that room a message of exactly max_payload bytes
// would never fit a limit of max_payload, and the consumer would stall on
// it with every fetch coming back empty.
func (r *Runner) fetchBytes() int {
	b := r.MaxBatchBytes
	if b <= 0 {
		b = DefaultMaxBatchBytes
	}
	return b + fetchBytesMargin
}

// fetchBytesMargin bounds a delivered message's subject plus its reply
// subject: subjects fit the server's 4 KiB control line, an ack reply
// subject is the stream and consumer names plus a few numbers.
const fetchBytesMargin = 8 << 10

func (r *Runner) maxInFlight() int {
	if r.MaxInFlight <= 0 {
		return DefaultMaxInFlight
	}
	return r.MaxInFlight
}

func (r *Runner) shutdownTimeout() time.Duration {
	if r.ShutdownTimeout == nil {
		return DefaultShutdownTimeout
	}
	return max(*r.ShutdownTimeout, 0)
}

func (r *Runner) publishTimeout() time.Duration {
	if r.DeadLetter == nil || r.DeadLetter.PublishTimeout <= 0 {
		return DefaultPublishTimeout
	}
	return r.DeadLetter.PublishTimeout
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Runner) draw() float64 {
	if r.Rand != nil {
		return r.Rand()
	}
	return JitterDraw()
}

func (r *Runner) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.New(slog.DiscardHandler)
}

func (r *Runner) metrics() *telemetry.Metrics { return r.st.metrics }

func (r *Runner) validate() error {
	var errs []error
	if r.Consumer == nil {
		errs = append(errs, errors.New("runner: Consumer is required"))
	}
	if r.Sink == nil {
		errs = append(errs, errors.New("runner: Sink is required"))
	}
	if r.DeadLetter != nil {
		if r.JetStream == nil {
			errs = append(errs, errors.New("runner: JetStream is required when DeadLetter is set"))
		}
		if r.DeadLetter.Subject == "" {
			errs = append(errs, errors.New("runner: DeadLetter.Subject is required"))
		}
	}
	switch r.TemporaryAction {
	case "", ActionNak, ActionLeaveUnacked:
	default:
		errs = append(errs, fmt.Errorf("runner: unknown TemporaryAction %q", r.TemporaryAction))
	}
	switch r.Isolation {
	case "", IsolationMessage, IsolationBatch:
	default:
		errs = append(errs, fmt.Errorf("runner: unknown Isolation %q", r.Isolation))
	}
	if r.AckConfirmation != nil && r.Conn == nil {
		errs = append(errs, errors.New("runner: Conn is required when AckConfirmation is set"))
	}
	if r.PriorityLanes != nil {
		if _, err := r.PriorityLanes.compile(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Run fetches and processes batches until ctx ends, then drains: it stops
// fetching, NAKs (without delay) what an interrupted fetch returned, lets
// in-flight batches finish for up to ShutdownTimeout, cancels the writes still
// running after that and NAKs their messages without delay, never ACKing
// them. It returns nil after such a drain.
//
// With FailFast, the first ACK/TERM, DLQ-publish or destination failure stops
// fetching and Run returns an error matching ErrFailFast once in-flight
// batches settled. If the consumer disappears Run returns an error matching
// ErrConsumerNotFound. Run does not stop the sink.
func (r *Runner) Run(ctx context.Context) error {
	if err := r.validate(); err != nil {
		return err
	}
	if !r.started.CompareAndSwap(false, true) {
		return errors.New("runner: Run called twice")
	}
	r.st.metrics = r.Metrics
	if r.st.metrics == nil {
		// Fields of a zero Metrics are nil, and nil metrics are no-ops.
		r.st.metrics = &telemetry.Metrics{}
	}
	r.st.stop = make(chan struct{})
	if wc, ok := r.Sink.(writeCounter); ok {
		m := r.st.metrics
		wc.CountWrites(func(d time.Duration) {
			m.SinkBatchWriteSeconds.Observe(d.Seconds())
			m.SinkBatchesWritten.Inc()
		})
	}
	if !r.timedProbe {
		r.st.noWait = noWaitOpt()
	}
	r.st.mu.Lock() // Status may already be polling
	r.st.inFlight = map[uint64]time.Time{}
	r.st.maxDeliver = r.MaxDeliver
	r.st.consumerName = r.ConsumerName
	r.st.mu.Unlock()
	r.st.circuit.mu.Lock()
	r.st.circuit.changed = make(chan struct{})
	r.st.circuit.mu.Unlock()
	log := r.logger().With("component", "runner")
	info := r.Consumer.CachedInfo()
	if r.InProgress != nil {
		// docs/delivery.md#inprogress-heartbeats start-up guards; the CLI checks them at step 8 too.
		if err := CheckInProgress(info, r.InProgress.interval()); err != nil {
			return err
		}
	}
	if r.PriorityLanes != nil {
		r.st.lanes, _ = r.PriorityLanes.compile() // validated above
	}
	if r.st.noWait == nil {
		log.Warn("this nats.go has no no-wait pull request with a byte limit; probing with a 5 ms expiry instead")
	}
	if info != nil && info.Cluster != nil && len(info.Cluster.Replicas) > 0 && r.replicatedCount() < r.batchSize() {
		log.Info("replicated consumer: each fetch asks for fewer messages than the batch size, so that max_batch_bytes holds without a byte limit",
			"consumer", info.Name, "count", r.replicatedCount())
	}
	holder, _ := r.Sink.(sink.Holder)
	if holder != nil && holder.MaxHeld() > 0 {
		if err := CheckHeld(info, holder.MaxHeld(), r.maxInFlight(), r.batchSize()); err != nil {
			return err
		}
		r.st.heldEvery, _ = HeldInterval(info)
	} else {
		holder = nil
	}
	if info != nil {
		r.applyInfo(info)
		if w := maxAckPendingWarning(info, r.maxInFlight()*r.batchSize()); holder == nil && w != "" {
			log.Warn(w, "consumer", info.Name)
		}
	}

	m := r.metrics()
	m.SinkHealthy.Set(1)
	m.SinkCircuitOpen.Set(0)

	// hard is the context of in-flight work. It survives ctx so that a batch
	// already written can still be acknowledged (a committed, unacked batch
	// is written twice), and is cancelled ShutdownTimeout after the drain
	// begins.
	hard, cancelHard := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHard()
	var drainOnce sync.Once
	var drainTimer *time.Timer
	var drainMu sync.Mutex
	beginDrain := func() {
		drainOnce.Do(func() {
			r.st.mu.Lock()
			r.st.draining = true
			r.st.mu.Unlock()
			drainMu.Lock()
			drainTimer = time.AfterFunc(r.shutdownTimeout(), cancelHard)
			drainMu.Unlock()
		})
	}
	defer func() {
		drainMu.Lock()
		if drainTimer != nil {
			drainTimer.Stop()
		}
		drainMu.Unlock()
	}()
	stopAfter := context.AfterFunc(ctx, beginDrain)
	defer stopAfter()

	r.st.mu.Lock()
	r.st.bound = true
	r.st.mu.Unlock()
	defer func() {
		r.st.mu.Lock()
		r.st.bound = false
		r.st.mu.Unlock()
	}()

	// loopCtx ends the background helpers when Run returns.
	loopCtx, cancelLoop := context.WithCancel(ctx)
	defer cancelLoop()
	var bg sync.WaitGroup
	bg.Go(func() { r.refreshConsumer(loopCtx, log) })
	bg.Go(func() { r.reportOldest(loopCtx) })
	defer bg.Wait()

	var batches sync.WaitGroup
	r.fetchLoop(ctx, hard, &batches, log)
	beginDrain()
	batches.Wait()
	if holder != nil {
		// Close and commit every open segment; holds not settled by the
		// shutdown deadline are NAKed by their tasks.
		if err := holder.Flush(hard); err != nil {
			log.Warn("sink flush at shutdown failed", "error", err.Error())
		}
		r.st.holds.Wait()
	}
	cancelLoop()

	r.st.mu.Lock()
	failErr, fatalErr := r.st.failErr, r.st.fatalErr
	r.st.mu.Unlock()
	r.st.mu.Lock()
	abandoned := r.st.abandoned
	r.st.mu.Unlock()
	if abandoned > 0 {
		log.Warn("drain timed out", "count", abandoned)
	} else {
		log.Info("drain complete")
	}
	switch {
	case fatalErr != nil:
		return fatalErr
	case failErr != nil:
		return failErr
	}
	return nil
}

// stopping reports whether the fetch loop must end for a reason other than
// ctx (fail-fast, vanished consumer).
func (r *Runner) stopping() bool {
	select {
	case <-r.st.stop:
		return true
	default:
		return false
	}
}

// failFast records the first fail-fast cause and stops fetching. It is a
// no-op unless FailFast is set.
func (r *Runner) failFast(reason string, err error) {
	if !r.FailFast {
		return
	}
	r.st.mu.Lock()
	if r.st.failErr == nil {
		r.st.failErr = &FailFastError{Reason: reason, Err: err}
	}
	r.st.mu.Unlock()
	r.st.stopOnce.Do(func() { close(r.st.stop) })
}

// fatal records an error that ends Run (the consumer is gone).
func (r *Runner) fatal(err error) {
	r.st.mu.Lock()
	if r.st.fatalErr == nil {
		r.st.fatalErr = err
	}
	r.st.mu.Unlock()
	r.st.stopOnce.Do(func() { close(r.st.stop) })
}

// FailFastError is returned by Run when delivery.fail_fast stopped it.
type FailFastError struct {
	// Reason names the failure: "ack", "term", "dlq publish" or
	// "destination".
	Reason string
	Err    error
}

// Error names the failure that stopped the runner and its cause.
func (e *FailFastError) Error() string {
	return fmt.Sprintf("delivery.fail_fast: stopping after %s failure: %v", e.Reason, e.Err)
}

// Unwrap returns ErrFailFast and the cause.
func (e *FailFastError) Unwrap() []error { return []error{ErrFailFast, e.Err} }

// fetchLoop issues fetches into free in-flight slots (docs/delivery.md#fetching-and-in-flight-batches, docs/delivery.md#ordering)
// until ctx ends or the runner stops.
func (r *Runner) fetchLoop(ctx, hard context.Context, batches *sync.WaitGroup, log *slog.Logger) {
	slots := make(chan struct{}, r.maxInFlight())
	release := func() { <-slots }
	retryWait := 100 * time.Millisecond
	for {
		r.beat()
		if !r.acquire(ctx, slots) {
			return
		}
		probe, ok := r.waitCircuit(ctx, log)
		if !ok {
			release()
			return
		}
		msgs, err := r.fetch(ctx)
		r.beat()
		if ctx.Err() != nil || r.stopping() {
			// Shutdown: what the fetch returned is never processed and
			// never ACKed; NAK it without delay so another process (or the
			// next start) gets it at once.
			r.nakNow(msgs, log)
			r.probeDone(probe, false)
			release()
			return
		}
		if err != nil && len(msgs) == 0 {
			r.probeDone(probe, false)
			release()
			if r.consumerGone(ctx, err) {
				r.fatal(fmt.Errorf("runner: fetch from consumer %q: %w", r.consumerName(), ErrConsumerNotFound))
				log.Error("consumer not found", "consumer", r.consumerName(), "error", err.Error())
				return
			}
			r.st.mu.Lock()
			r.st.fetchFailures++
			n := r.st.fetchFailures
			r.st.mu.Unlock()
			log.Warn("fetch failed", "attempt", n, "delay_ms", retryWait.Milliseconds(), "error", err.Error())
			waited := r.waiting()
			ok := sleep(ctx, r.st.stop, retryWait)
			waited()
			if !ok {
				return
			}
			retryWait = min(2*retryWait, 5*time.Second)
			continue
		}
		retryWait = 100 * time.Millisecond
		r.st.mu.Lock()
		r.st.fetchFailures = 0
		r.st.mu.Unlock()
		if len(msgs) == 0 {
			r.probeDone(probe, false)
			release()
			continue
		}
		batches.Go(func() {
			defer release()
			r.process(hard, msgs, probe)
		})
	}
}

// acquire takes a free in-flight slot; false means the loop must end.
func (r *Runner) acquire(ctx context.Context, slots chan struct{}) bool {
	select {
	case slots <- struct{}{}:
		return true
	default:
	}
	// Every slot holds a batch: the loop waits for a write to finish, which
	// is not a stall of the loop itself. (A write that hangs shows in
	// oldest_in_flight_batch_seconds; the sinks bound their writes.)
	defer r.waiting()()
	select {
	case slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	case <-r.st.stop:
		return false
	}
}

// beat records that the fetch loop is alive now (Status.Heartbeat).
func (r *Runner) beat() {
	now := r.now()
	r.st.mu.Lock()
	r.st.loopBeat = now
	r.st.mu.Unlock()
}

// waiting marks the start of a deliberate wait of the fetch loop; the
// function it returns marks its end, which is also a beat.
func (r *Runner) waiting() (done func()) {
	r.st.mu.Lock()
	r.st.loopWaiting = true
	r.st.mu.Unlock()
	return func() {
		now := r.now()
		r.st.mu.Lock()
		r.st.loopWaiting = false
		r.st.loopBeat = now
		r.st.mu.Unlock()
	}
}

// probeWait is the expiry of the probe when no no-wait option could be
// built (noWaitOpt returned nil).
const probeWait = 5 * time.Millisecond

// fetch returns the next batch: a no-wait probe returns what is pending at
// once; only when nothing is, a lingering fetch waits up to BatchTimeout.
// Without the probe nats.go would hold every partial batch until expiry.
// Both requests carry the byte limit (so the probe is Fetch with noWaitOpt,
// not FetchNoWait), and both end early when the batch is full by count or
// by bytes.
//
// Both requests end at the server's expiry or its "no messages" answer,
// never at a client-side deadline: nats.go's FetchContext stops listening
// 10 % (at most 1 s) after the expiry it asks the server for, and messages
// the server delivers after that (a loaded machine, a batch of large
// messages) reach no subscriber and sit unacknowledged until AckWait. When
// ctx ends or the runner stops, fetch returns at once with what has
// arrived, as a cancelled FetchContext would: shutdown does not wait for
// the request's expiry, and what the server delivers to it afterwards waits
// for AckWait (the connection drain that follows shutdown ends the
// request).
//
// A replicated consumer gets no byte limit: its server sends a delivered
// message only once the replicas agreed on it, but the status that ends a
// byte-limited request early ("409 Batch Completed" when the count is
// reached with bytes to spare, "409 Message Size Exceeds MaxBytes") at
// once, so it overtakes the request's own messages; nats.go's Fetch ends
// at the status and the messages, delivered to no one, wait for AckWait
// (seen with nats-server 2.15 and an R3 consumer: no message of a batch
// arrived). For such a consumer the count carries the bound instead
// (replicatedCount).
func (r *Runner) fetch(ctx context.Context) ([]jetstream.Msg, error) {
	start := time.Now()
	defer func() { r.metrics().NATSFetchSeconds.Observe(time.Since(start).Seconds()) }()
	n := r.batchSize()
	var limit []jetstream.FetchOpt
	var probe func() (jetstream.MessageBatch, error)
	r.st.mu.Lock()
	replicated := r.st.replicated
	r.st.mu.Unlock()
	switch {
	case replicated:
		n = min(n, r.replicatedCount())
		probe = func() (jetstream.MessageBatch, error) { return r.Consumer.FetchNoWait(n) }
	default:
		limit = []jetstream.FetchOpt{jetstream.FetchMaxBytes(r.fetchBytes())}
		// Without the no-wait option, a probe with a short expiry: a
		// partial batch then costs probeWait, and a loaded server may end
		// the probe before it delivered all that is pending (a smaller
		// batch).
		p := r.st.noWait
		if p == nil {
			p = jetstream.FetchMaxWait(min(probeWait, r.batchTimeout()))
		}
		probe = func() (jetstream.MessageBatch, error) { return r.Consumer.Fetch(n, append(limit, p)...) }
	}
	b, err := probe()
	if err != nil {
		return nil, err
	}
	msgs, err := r.collect(ctx, b)
	if len(msgs) > 0 || err != nil || ctx.Err() != nil || r.stopping() {
		return msgs, err
	}
	b, err = r.Consumer.Fetch(n, append(limit, jetstream.FetchMaxWait(r.batchTimeout()))...)
	if err != nil {
		return nil, err
	}
	return r.collect(ctx, b)
}

// replicatedCount is the count of a fetch from a replicated consumer: as
// many messages of the largest size the server accepts (max_payload from
// Conn's INFO, the server default of 1 MiB without Conn) as fit
// MaxBatchBytes, at least one. Servers configured with a smaller
// max_payload, or a larger max_batch_bytes, get larger batches.
func (r *Runner) replicatedCount() int {
	maxPayload := int64(1 << 20)
	if r.Conn != nil && r.Conn.MaxPayload() > 0 {
		maxPayload = r.Conn.MaxPayload()
	}
	return max(1, int(int64(r.fetchBytes())/(maxPayload+fetchBytesMargin)))
}

// collect reads b until the request ends. If ctx ends or the runner stops
// first, it returns what has arrived, including what nats.go buffered but
// was not read yet, so that the caller NAKs it.
func (r *Runner) collect(ctx context.Context, b jetstream.MessageBatch) ([]jetstream.Msg, error) {
	var msgs []jetstream.Msg
	ch := b.Messages()
	for {
		select {
		case msg, ok := <-ch:
			if !ok {
				return msgs, b.Error()
			}
			msgs = append(msgs, msg)
		case <-ctx.Done():
			return buffered(msgs, ch), nil
		case <-r.st.stop:
			return buffered(msgs, ch), nil
		}
	}
}

// buffered appends to msgs what ch holds now, without waiting.
func buffered(msgs []jetstream.Msg, ch <-chan jetstream.Msg) []jetstream.Msg {
	for {
		select {
		case msg, ok := <-ch:
			if !ok {
				return msgs
			}
			msgs = append(msgs, msg)
		default:
			return msgs
		}
	}
}

// consumerGone reports whether a fetch error means the consumer no longer
// exists, confirmed by a consumer info request so that a transient error is
// never mistaken for deletion.
func (r *Runner) consumerGone(ctx context.Context, err error) bool {
	if !errors.Is(err, jetstream.ErrConsumerDeleted) && !errors.Is(err, jetstream.ErrConsumerNotFound) &&
		!errors.Is(err, jetstream.ErrNoHeartbeat) && !errors.Is(err, nats.ErrNoResponders) {
		return false
	}
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, ierr := r.Consumer.Info(ictx)
	return errors.Is(ierr, jetstream.ErrConsumerNotFound)
}

func (r *Runner) consumerName() string {
	r.st.mu.Lock()
	defer r.st.mu.Unlock()
	return r.st.consumerName
}

func (r *Runner) maxDeliver() int {
	r.st.mu.Lock()
	defer r.st.mu.Unlock()
	return r.st.maxDeliver
}

// applyInfo takes the consumer name and MaxDeliver from consumer info, and
// sets the lag gauges.
func (r *Runner) applyInfo(info *jetstream.ConsumerInfo) {
	r.st.mu.Lock()
	if r.ConsumerName == "" {
		r.st.consumerName = info.Name
	}
	if r.MaxDeliver == 0 {
		r.st.maxDeliver = info.Config.MaxDeliver
	}
	r.st.replicated = info.Cluster != nil && len(info.Cluster.Replicas) > 0
	r.st.mu.Unlock()
	m := r.metrics()
	m.ConsumerNumPending.Set(float64(info.NumPending))
	m.ConsumerNumAckPending.Set(float64(info.NumAckPending))
	m.ConsumerNumRedelivered.Set(float64(info.NumRedelivered))
	m.ConsumerNumWaiting.Set(float64(info.NumWaiting))
}

// maxAckPendingWarning returns the start-up warning of docs/delivery.md#ordering when the
// consumer's effective max_ack_pending is below the in-flight capacity
// need: the server then stops handing out messages while batches wait for
// their commit, and throughput silently drops.
func maxAckPendingWarning(info *jetstream.ConsumerInfo, need int) string {
	limit := info.Config.MaxAckPending
	if limit == 0 {
		limit = 1000 // the server default when the consumer does not say
	}
	if limit < 0 || limit >= need {
		return "" // -1 = unlimited
	}
	return fmt.Sprintf("consumer max_ack_pending %d is below max_in_flight_batches x batch_size (%d); fetches will stall until ACKs free room",
		limit, need)
}

// consumerRefresh is how often consumer info (lag gauges, MaxDeliver) is
// re-read (docs/observability.md#metrics).
const consumerRefresh = 10 * time.Second

func (r *Runner) refreshConsumer(ctx context.Context, log *slog.Logger) {
	t := time.NewTicker(cmp.Or(r.refreshEvery, consumerRefresh))
	defer t.Stop()
	for {
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		info, err := r.Consumer.Info(ictx)
		cancel()
		switch {
		case err == nil:
			r.applyInfo(info)
		case errors.Is(err, jetstream.ErrConsumerNotFound):
			log.Error("consumer not found", "consumer", r.consumerName())
			r.fatal(fmt.Errorf("runner: consumer %q: %w", r.consumerName(), ErrConsumerNotFound))
			return
		case ctx.Err() == nil:
			log.Debug("consumer info failed", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// reportOldest keeps oldest_in_flight_batch_seconds current for stuck-write
// alerts.
func (r *Runner) reportOldest(ctx context.Context) {
	t := time.NewTicker(cmp.Or(r.oldestEvery, time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			r.metrics().OldestInFlightBatchSeconds.Set(0)
			return
		case <-t.C:
		}
		r.st.mu.Lock()
		var oldest time.Time
		for _, s := range r.st.inFlight {
			if oldest.IsZero() || s.Before(oldest) {
				oldest = s
			}
		}
		r.st.mu.Unlock()
		age := 0.0
		if !oldest.IsZero() {
			age = time.Since(oldest).Seconds()
		}
		r.metrics().OldestInFlightBatchSeconds.Set(age)
		if r.st.heldEvery > 0 {
			r.metrics().OldestHeldMessageSeconds.Set(r.oldestHeld())
		}
	}
}

// sleep waits d unless ctx ends or stop closes; it reports whether the full
// wait happened.
func sleep(ctx context.Context, stop <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	}
}

// newBatchID returns 16 random hex characters (docs/delivery.md#fetching-and-in-flight-batches step 1).
func newBatchID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}
