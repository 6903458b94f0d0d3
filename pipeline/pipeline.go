// Package pipeline runs nats-sink from a loaded configuration: it performs
// the start-up sequence of the spec (docs/delivery.md#start-up: secrets and keys, the sink,
// the NATS connection, the dead-letter stream check, consumer management,
// the batch-size check), builds the runner from the configuration, and
// shuts everything down in the documented order (docs/delivery.md#shutdown).
//
// It is what `nats-sink run` uses, and the way in for a Go program that wants
// the whole connector from a configuration file:
//
//	cfg, err := config.Load("nats-sink.json", builtin.Registry(), nil)
//	…
//	p, err := pipeline.Start(ctx, cfg, pipeline.Options{Logger: log, Registerer: reg})
//	…
//	defer p.Close(5 * time.Second)
//	err = p.Run(ctx) // until ctx ends; in-flight batches drain first
//
// Programs that build the runner and sink in code use package runner
// directly. Errors that mean "fix the configuration" satisfy
// errors.Is(err, sink.ErrConfig); the CLI exits 2 for them, and every other
// error is a runtime failure.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/runner"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/telemetry"
	"github.com/nats-sinks/nats-sink/tracing"
)

// Options carries what the embedding program supplies. The zero value is
// usable: process environment, no logs, metrics counted but not exported,
// a connection of its own, the configured sink.
type Options struct {
	// Env resolves environment-backed secrets and keys; nil means the
	// process environment.
	Env config.Env
	// Logger receives every log record; nil discards them.
	Logger *slog.Logger
	// Registerer receives the metrics when the configuration's
	// metrics.enabled is true; nil leaves them unregistered (they are still
	// counted, see Metrics).
	Registerer prometheus.Registerer
	// Conn, when set, is used instead of connecting from the nats section.
	// The pipeline never closes or drains a connection it was given.
	Conn *nats.Conn
	// Sink, when set, replaces the configured sink. Close stops it.
	Sink sink.Sink
	// Version is reported as service.version on trace spans.
	Version string
	// Consumer, when set, is bound instead of nats.consumer: consumer
	// management (start-up step 8) is skipped, so the pipeline never looks
	// up, creates or changes nats.consumer, and Run ends when this consumer
	// disappears. It must come from a JetStream context on Conn. Dead
	// letters still carry nats.consumer in their Nats-Msg-Id. `nats-sink
	// replay` runs on such a consumer of its own.
	Consumer jetstream.Consumer
	// Settled is passed to the runner (runner.Runner.Settled).
	Settled func(jetstream.Msg, runner.Settlement)
}

// Pipeline is one started connector: connection, consumer, sink and runner.
type Pipeline struct {
	cfg     *config.Config
	log     *slog.Logger
	metrics *telemetry.Metrics
	nc      *nats.Conn
	ownConn bool
	js      jetstream.JetStream
	sink    sink.Sink
	spec    runner.ConsumerSpec
	runner  *runner.Runner
	hooks   integrity
	tracer  *tracing.Tracer // nil when tracing is disabled
	refused *refusals       // permissions violations on nc; nil before connecting
	bound   bool            // the consumer came from Options.Consumer
	// targets reports the health of a fanout sink's targets; nil for
	// other sinks. Set once in Start, before Ready can be called.
	targets func() map[string]bool
}

// startError marks a start-up failure as a configuration problem found while
// starting (consumer drift, a missing DLQ stream, a heartbeat that does not
// fit the consumer): errors.Is(err, sink.ErrConfig), exit 2 in the CLI
// (docs/delivery.md#start-up, docs/delivery.md#failures-at-a-glance).
type startError struct{ err error }

func (e *startError) Error() string        { return e.err.Error() }
func (e *startError) Unwrap() error        { return e.err }
func (e *startError) Is(target error) bool { return target == sink.ErrConfig }

func configFailure(err error) error { return &startError{err: err} }

// fromRunner marks the runner's configuration errors (*runner.ConfigError,
// runner.ErrConsumerNotFound) as configuration errors, so that a caller
// needs only errors.Is(err, sink.ErrConfig).
func fromRunner(err error) error {
	var ce *runner.ConfigError
	if errors.As(err, &ce) || errors.Is(err, runner.ErrConsumerNotFound) {
		return configFailure(err)
	}
	return err
}

// Start runs start-up steps 4–9 of docs/delivery.md#start-up for cfg. On error everything
// opened so far is closed again, and the error says which step failed.
func Start(ctx context.Context, cfg *config.Config, o Options) (_ *Pipeline, err error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Pipeline{cfg: cfg, log: log}
	defer func() {
		if err != nil {
			p.stopSink(context.WithoutCancel(ctx), time.Second)
			p.flushTraces(time.Second)
			if p.ownConn {
				p.nc.Close()
			}
		}
	}()
	// Metrics are always counted (demo and bench read them); they are
	// registered for export only when metrics.enabled.
	var reg prometheus.Registerer
	if cfg.Metrics.Enabled {
		reg = o.Registerer
	}
	if p.metrics, err = telemetry.NewMetrics(reg, cfg.Metrics.Namespace); err != nil {
		return nil, err
	}
	// Tracing (docs/tracing.md): nil when disabled. Exporter problems the
	// loader cannot see (an unusable endpoint) are configuration errors.
	p.tracer, err = tracing.New(ctx, &cfg.Tracing, tracing.Options{Version: o.Version, Sink: cfg.Sink.Type,
		Subject: cfg.NATS.Subject, Consumer: cfg.NATS.Consumer, Env: o.Env, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}

	// Step 4: secrets and key material.
	policy, err := sealPolicy(&cfg.Encryption, o.Env)
	if err != nil {
		return nil, err
	}
	if p.hooks, err = integrityHooks(cfg, o.Env); err != nil {
		return nil, err
	}
	var natsOpts []nats.Option
	if o.Conn == nil {
		if natsOpts, err = NATSOptions(&cfg.NATS, o.Env, log, p.metrics); err != nil {
			return nil, err
		}
	}

	// Steps 5 and 6: the sink, then NATS, as docs/delivery.md#start-up orders them. A sink
	// that reuses the source connection (the NATS republish sink with
	// connection null) asks for it while it opens: connect then connects
	// early, and step 6 finds the connection made.
	var connErr error
	connect := func() (*nats.Conn, error) {
		if p.nc != nil || connErr != nil {
			return p.nc, connErr
		}
		nc, err := nats.Connect(strings.Join(cfg.NATS.Servers(), ","), natsOpts...)
		if err != nil {
			connErr = fmt.Errorf("connect to NATS: %w", err)
			return nil, connErr
		}
		p.nc, p.ownConn = nc, true
		return nc, nil
	}
	if o.Conn != nil {
		p.nc = o.Conn
	}
	if o.Sink != nil {
		p.sink = o.Sink
	} else if p.sink, err = OpenSink(ctx, cfg, p.metrics, log, connect, o.Env); err != nil {
		if connErr != nil {
			return nil, connErr // the sink could not get the connection: a NATS failure
		}
		if _, keyed := errors.AsType[*config.Error](err); keyed {
			return nil, err // names its key: "sink.password_env: ..."
		}
		return nil, fmt.Errorf("open %s sink: %w", cfg.Sink.Type, err)
	}
	if th, ok := p.sink.(interface{ TargetHealth() map[string]bool }); ok {
		p.targets = th.TargetHealth
	}
	if _, err := connect(); err != nil {
		return nil, err
	}
	p.metrics.NATSConnected.Set(1)
	if p.js, err = NewJetStream(p.nc, &cfg.NATS); err != nil {
		return nil, err
	}
	// One message of the largest size the server accepts must fit a fetch.
	if err := runner.CheckMaxBatchBytes(p.nc.MaxPayload(), cfg.Delivery.MaxBatchBytes); err != nil {
		return nil, err
	}

	// Steps 7 and 8 wait for JetStream API replies; a request the user has
	// no permission for ends its step at once, and a refused fetch later
	// shows in readiness (refusals). Restored by Close.
	p.refused = watchRefusals(p.nc, cfg.NATS.Stream)
	refused := p.refused

	// Step 7: the DLQ stream.
	var dlqStream string
	if cfg.DeadLetter.Enabled {
		sctx, done := refused.step(ctx)
		dlqStream, err = runner.CheckDLQ(sctx, p.js, *cfg.DeadLetter.Subject)
		err = refused.explain(sctx, err)
		done()
		var ce *runner.ConfigError
		if errors.As(err, &ce) {
			return nil, fromRunner(err)
		} else if err != nil {
			log.Warn("dead-letter stream lookup not permitted; skipping the check", "component", "dlq", "error", err.Error())
		}
	}

	// Step 8: consumer management, unless the caller brought a consumer.
	p.spec = consumerSpec(cfg)
	if h, ok := p.sink.(sink.Holder); ok && h.MaxHeld() > 0 && p.spec.MaxAckPending == nil {
		// A holding sink keeps up to MaxHeld messages unacknowledged beside
		// the batches in flight: a consumer the product creates gets room
		// for both, so that the defaults start (docs/segments.md).
		p.spec.MaxAckPending = ptr(h.MaxHeld() + cfg.Delivery.MaxInFlightBatches*cfg.Delivery.BatchSize)
	}
	consumer := o.Consumer
	if consumer != nil {
		p.bound = true
	} else {
		sctx, done := refused.step(ctx)
		var action string
		consumer, action, err = runner.EnsureConsumer(sctx, p.js, p.spec)
		err = refused.explain(sctx, err)
		done()
		if err != nil {
			return nil, fromRunner(err)
		}
		log.Info("consumer ready", "component", "consumer", "action", action,
			"stream", cfg.NATS.Stream, "consumer", cfg.NATS.Consumer)
	}
	info := consumer.CachedInfo()
	if info != nil && dlqStream != "" {
		sctx, done := refused.step(ctx)
		if w := runner.DLQWindowWarning(sctx, p.js, dlqStream, info); w != "" {
			log.Warn(w, "component", "dlq")
		}
		done()
	}

	// Heartbeats must fit inside the consumer's AckWait and BackOff
	// (docs/configuration.md#delivery): checked against the server's view of the consumer.
	if cfg.Delivery.InProgress.Enabled {
		if err := runner.CheckInProgress(info, ms(cfg.Delivery.InProgress.IntervalMS)); err != nil {
			return nil, configFailure(err)
		}
	}

	if w := fanoutAckWaitWarning(cfg, info); w != "" {
		log.Warn(w, "component", "routing")
	}

	// Step 9: batch size against the consumer's max_batch. (The runner
	// warns at start when max_ack_pending is below its in-flight capacity.)
	if err := runner.CheckBatchSize(info, cfg.Delivery.BatchSize); err != nil {
		return nil, configFailure(err)
	}

	p.runner = newRunner(cfg, p, consumer, policy)
	p.runner.Settled = o.Settled
	p.hooks.apply(p.runner)
	return p, nil
}

// ConnClosedError is the error of a Run that stopped because the NATS
// connection closed for good: reconnecting was off, or every attempt of
// max_reconnect_attempts failed. A process in that state can never become
// ready again; the CLI exits 1 so that its supervisor restarts it.
type ConnClosedError struct {
	// Last is the connection's last error, if any.
	Last error
}

// Error says the connection closed, with its last error when known.
func (e *ConnClosedError) Error() string {
	if e.Last == nil {
		return "NATS connection closed"
	}
	return "NATS connection closed: " + e.Last.Error()
}

// Run consumes until ctx ends, then lets in-flight batches settle within
// delivery.shutdown_timeout_ms and returns nil. It returns early with an
// error on a fail-fast stop (runner.ErrFailFast), a consumer that vanished in
// bind_only mode (runner.ErrConsumerNotFound, which is also a
// sink.ErrConfig), or a connection closed for good (*ConnClosedError). When
// the consumer disappears and the mode may create it, consumer management
// runs once more and a new runner takes over (docs/delivery.md#fetching-and-in-flight-batches). Run may be
// called once.
func (p *Pipeline) Run(ctx context.Context) error {
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopWatch := watchClosed(p.nc, cancel)
	err := p.runUntilDone(runCtx)
	stopWatch()
	var closed *ConnClosedError
	if errors.As(context.Cause(runCtx), &closed) {
		return closed
	}
	return fromRunner(err)
}

func (p *Pipeline) runUntilDone(ctx context.Context) error {
	for {
		err := p.runner.Run(ctx)
		if !errors.Is(err, runner.ErrConsumerNotFound) || p.spec.Mode == runner.ModeBindOnly || p.spec.Ephemeral || p.bound {
			return err
		}
		// Every time, not once: an operator may delete the consumer again
		// (a redeploy of the stream's tooling), and the mode says to create
		// it whenever it is missing.
		p.log.Warn("consumer disappeared; running consumer management again", "component", "consumer")
		consumer, action, err := runner.EnsureConsumer(ctx, p.js, p.spec)
		if err != nil {
			return err
		}
		p.log.Info("consumer ready", "component", "consumer", "action", action)
		// A Runner runs once: build a new one with the same settings.
		encrypt, settled := p.runner.Encrypt, p.runner.Settled
		p.runner = newRunner(p.cfg, p, consumer, nil)
		p.runner.Encrypt, p.runner.Settled = encrypt, settled
		p.hooks.apply(p.runner)
	}
}

// Close finishes the shutdown sequence after Run returned (docs/delivery.md#shutdown):
// stops the sink, drains and closes the connection if the pipeline opened it,
// and exports the spans still buffered. budget bounds the whole sequence;
// each step gets what is left of it, at least one second.
func (p *Pipeline) Close(budget time.Duration) {
	deadline := time.Now().Add(budget)
	left := func() time.Duration { return max(time.Until(deadline), time.Second) }
	p.stopSink(context.Background(), left())
	if p.ownConn {
		drainConn(p.nc, left())
	}
	p.flushTraces(left())
}

// Metrics returns the pipeline's metrics. They are counted even when the
// configuration does not export them.
func (p *Pipeline) Metrics() *telemetry.Metrics { return p.metrics }

// Ready reports the readiness checks of /readyz (docs/observability.md#health-endpoints).
func (p *Pipeline) Ready() telemetry.Readiness {
	st := p.runner.Status()
	r := telemetry.Readiness{NATS: telemetry.CheckOK, Consumer: telemetry.CheckOK, Sink: telemetry.CheckOK, Draining: st.Draining}
	switch {
	case p.nc.IsConnected():
	case p.nc.IsReconnecting(), p.nc.IsClosed():
		r.NATS = telemetry.NATSDisconnected
	default:
		r.NATS = telemetry.NATSConnecting
	}
	switch {
	case !st.Bound:
		r.Consumer = telemetry.ConsumerNotBound
	case st.FetchFailing, p.refused != nil && p.refused.fetchRefused():
		// A refused pull request looks like an empty fetch to the runner;
		// the server's permissions violation says otherwise.
		r.Consumer = telemetry.ConsumerFetchFailing
	}
	if st.SinkUnhealthy {
		r.Sink = telemetry.SinkUnhealthy
	}
	if p.targets != nil {
		h := p.targets()
		r.Targets = make(map[string]string, len(h))
		for n, ok := range h {
			r.Targets[n] = telemetry.CheckOK
			if !ok {
				r.Targets[n] = telemetry.SinkUnhealthy
			}
		}
	}
	return r
}

// Heartbeat returns when the runner's fetch loop last showed that it is
// alive (runner.Status.Heartbeat): the current time while it waits
// deliberately, an older time when a fetch hangs. The CLI pings systemd's
// watchdog only while it is fresh. Zero before Run.
func (p *Pipeline) Heartbeat() time.Time { return p.runner.Status().Heartbeat }

// stopSink stops the sink within budget and restores the connection's error
// handler.
func (p *Pipeline) stopSink(ctx context.Context, budget time.Duration) {
	if p.refused != nil {
		p.refused.stop()
		p.refused = nil
	}
	if p.sink != nil {
		sctx, cancel := context.WithTimeout(ctx, budget)
		if err := p.sink.Stop(sctx); err != nil {
			p.log.Warn("sink stop failed", "component", "sink", "error", err.Error())
		}
		cancel()
		p.sink = nil
	}
}

// flushTraces exports the spans still buffered, bounded by budget; it runs
// last, after the connection drained, so the final ACK events are in.
func (p *Pipeline) flushTraces(budget time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	if err := p.tracer.Shutdown(ctx); err != nil {
		p.log.Warn("trace export at shutdown failed", "component", "tracing", "error", err.Error())
	}
}

// drainConn drains and closes nc within budget.
func drainConn(nc *nats.Conn, budget time.Duration) {
	if nc == nil || nc.IsClosed() {
		return
	}
	if err := nc.Drain(); err != nil {
		nc.Close()
		return
	}
	deadline := time.Now().Add(budget)
	for !nc.IsClosed() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	nc.Close()
}

// fanoutAckWaitWarning returns the start-up warning for an active fanout
// sink whose largest optional timeout_ms in use reaches 80 % of the
// consumer's AckWait while delivery.in_progress is off: a batch held at
// the gate that long may be redelivered before it is acknowledged. It
// returns "" otherwise or when the AckWait is unknown.
func fanoutAckWaitWarning(cfg *config.Config, info *jetstream.ConsumerInfo) string {
	if cfg.Sink.Type != "fanout" || cfg.Delivery.InProgress.Enabled || info == nil || info.Config.AckWait <= 0 {
		return ""
	}
	pol := cfg.Routing.Policy()
	t := pol.MaxOptionalTimeoutMS()
	ackWait := info.Config.AckWait
	if t <= 0 || time.Duration(t)*time.Millisecond*5 < ackWait*4 {
		return ""
	}
	return fmt.Sprintf("routing: optional target timeout_ms %d approaches the consumer AckWait of %s s; enable delivery.in_progress or lower it",
		t, strconv.FormatFloat(ackWait.Seconds(), 'f', -1, 64))
}
