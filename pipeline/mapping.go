package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/internal/metadata"
	"github.com/nats-sinks/nats-sink/internal/seal"
	"github.com/nats-sinks/nats-sink/internal/telemetry"
	"github.com/nats-sinks/nats-sink/internal/tracing"
	"github.com/nats-sinks/nats-sink/runner"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sinks/file"
	natssink "github.com/nats-sinks/nats-sink/sinks/nats"
)

// startError is a start-up failure with its exit class: configuration
// problems found while starting (missing secret, consumer drift, missing DLQ
// stream) exit 2, everything else exits 1 (runtime §2, §17).
type startError struct {
	config bool
	err    error
}

func (e *startError) Error() string { return e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

func configFailure(err error) error  { return &startError{config: true, err: err} }
func runtimeFailure(err error) error { return &startError{err: err} }

// classify wraps err as a configuration failure when it is one.
func classify(err error) error {
	var ce *runner.ConfigError
	if isConfigError(err) || errors.As(err, &ce) {
		return configFailure(err)
	}
	return runtimeFailure(err)
}

// exitCode prints a start-up or runtime failure and returns its exit code.
func exitCode(env *Env, err error) int {
	var se *startError
	if errors.As(err, &se) && se.config {
		fmt.Fprintf(env.Stderr, "Configuration error: %v\n", se.err)
		return exitConfig
	}
	fmt.Fprintf(env.Stderr, "Runtime error: %v\n", err)
	return exitRuntime
}

// pipeline is one configured runner with its connection and sink. run, demo
// and bench build theirs the same way.
type pipeline struct {
	cfg     *config.Config
	log     *slog.Logger
	metrics *telemetry.Metrics // registered for export only when metrics.enabled
	nc      *nats.Conn
	js      jetstream.JetStream
	sink    sink.Sink
	spec    runner.ConsumerSpec
	runner  *runner.Runner
	tracer  *tracing.Tracer // nil when tracing is disabled
	refused *refusals       // permissions violations on nc; nil before connecting
}

// sealPolicy builds the encryption policy, reading key material now (start-up
// step 4). It returns nil when no subject can be encrypted.
func sealPolicy(e *config.Encryption, env config.Env) (*seal.Policy, error) {
	if !e.Enabled && len(e.Rules) == 0 {
		return nil, nil
	}
	top := seal.Settings{Enabled: e.Enabled, Algorithm: e.Algorithm, KeyID: e.KeyID,
		NonceSize: e.NonceSizeBytes, TagLength: e.TagLength}
	if key, ok, err := e.EncryptionKey(env); err != nil {
		return nil, err
	} else if ok {
		top.Key = key
	}
	var rules []seal.Rule
	for i, r := range e.Rules {
		sr := seal.Rule{Subject: r.Subject, Settings: top}
		sr.Settings.Enabled = r.Enabled
		if r.Algorithm != nil {
			sr.Settings.Algorithm, sr.Set = *r.Algorithm, sr.Set|seal.SetAlgorithm
		}
		if r.KeyID != nil {
			sr.Settings.KeyID, sr.Set = *r.KeyID, sr.Set|seal.SetKeyID
		}
		if r.NonceSizeBytes != nil {
			sr.Settings.NonceSize, sr.Set = *r.NonceSizeBytes, sr.Set|seal.SetNonceSize
		}
		if r.TagLength != nil {
			sr.Settings.TagLength, sr.Set = *r.TagLength, sr.Set|seal.SetTagLength
		}
		if r.Enabled && r.HasKey() {
			key, _, err := e.RuleKey(i, env)
			if err != nil {
				return nil, err
			}
			sr.Settings.Key, sr.Set = key, sr.Set|seal.SetKey
		}
		rules = append(rules, sr)
	}
	p, err := seal.NewPolicy(top, rules)
	if err != nil {
		return nil, configFailure(err)
	}
	return p, nil
}

// metadataResolver maps message_metadata onto the resolver.
func metadataResolver(m *config.MessageMetadata) *metadata.Resolver {
	r := &metadata.Resolver{
		Priority:       metadata.Field{Header: m.Priority.Header, Default: deref(m.Priority.Default)},
		Classification: metadata.Field{Header: m.Classification.Header, Default: deref(m.Classification.Default)},
		Labels:         metadata.LabelsField{Header: m.Labels.Header, Default: m.Labels.Default},
	}
	for _, rule := range m.Rules {
		mr := metadata.Rule{Subject: rule.Subject}
		if rule.HasPriority {
			mr.Priority = ptr(deref(rule.Priority))
		}
		if rule.HasClassification {
			mr.Classification = ptr(deref(rule.Classification))
		}
		if rule.HasLabels {
			labels := rule.Labels
			mr.Labels = &labels
		}
		r.Rules = append(r.Rules, mr)
	}
	return r
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func ptr[T any](v T) *T { return &v }

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// consumerSpec maps nats and consumer_management onto the runner's spec.
func consumerSpec(cfg *config.Config) runner.ConsumerSpec {
	cm := &cfg.ConsumerManagement
	s := runner.ConsumerSpec{
		Stream: cfg.NATS.Stream, Name: cfg.NATS.Consumer, Subject: cfg.NATS.Subject,
		Ephemeral: !cfg.NATS.Durable, Mode: cm.Mode, FilterSubjects: cm.FilterSubjects,
		DeliverPolicy: cm.DeliverPolicy, ReplayPolicy: cm.ReplayPolicy,
		MaxDeliver: cm.MaxDeliver, MaxAckPending: cm.MaxAckPending, MaxWaiting: cm.MaxWaiting,
		HeadersOnly: cm.HeadersOnly, Replicas: cm.NumReplicas, MemoryStorage: cm.MemoryStorage,
		Metadata: cm.Metadata,
	}
	if cm.AckWaitSeconds != nil {
		s.AckWait = ptr(seconds(*cm.AckWaitSeconds))
	}
	if cm.BackoffSeconds != nil {
		for _, b := range *cm.BackoffSeconds {
			s.BackOff = append(s.BackOff, seconds(b))
		}
	}
	return s
}

// openSink opens the configured sink, passing runtime settings the sink
// needs from other sections. m and nc may be nil (test-sink).
func openSink(ctx context.Context, cfg *config.Config, m *telemetry.Metrics, log *slog.Logger, nc *nats.Conn) (sink.Sink, error) {
	var op sink.Opener
	switch c := cfg.Sink.Opener.(type) {
	case natssink.Config:
		// connection null reuses the source connection; the loop check
		// needs the source consumer's filters.
		c.Source = nc
		c.SourceFilters = cfg.ConsumerManagement.FilterSubjects
		if len(c.SourceFilters) == 0 {
			c.SourceFilters = []string{cfg.NATS.Subject}
		}
		op = c
	case file.Config:
		// Stale temp files are only removed when older than twice the drain
		// bound, so another live process's temp file is never touched.
		c.TempMaxAge = 2 * ms(max(cfg.Delivery.ShutdownTimeoutMS, 1000))
		op = c
	default:
		op = c
	}
	if wm, ok := op.(interface {
		WithMetrics(*telemetry.Metrics) sink.Opener
	}); ok {
		op = wm.WithMetrics(m)
	}
	if wl, ok := op.(interface {
		WithLogger(*slog.Logger) sink.Opener
	}); ok {
		op = wl.WithLogger(log.With("component", "sink"))
	}
	return op.Open(ctx)
}

// pipelineOptions carries what differs between run, demo and bench.
type pipelineOptions struct {
	env      config.Env
	log      *slog.Logger
	registry prometheus.Registerer // nil: metrics unregistered (demo, bench)
	// conn, when set, is used instead of connecting from the nats section.
	conn *nats.Conn
	// sink, when set, replaces the configured sink (bench's null sink).
	sink sink.Sink
}

// startPipeline runs start-up steps 4–9 of runtime §2 for cfg. On error
// everything opened so far is closed again.
func startPipeline(ctx context.Context, cfg *config.Config, o pipelineOptions) (_ *pipeline, err error) {
	p := &pipeline{cfg: cfg, log: o.log}
	defer func() {
		if err != nil {
			p.close(context.WithoutCancel(ctx), time.Second)
			p.flushTraces(time.Second)
			if o.conn == nil && p.nc != nil {
				p.nc.Close() // ours: opened below
			}
		}
	}()
	// Metrics are always counted (demo and bench read them); they are
	// registered for export only when metrics.enabled.
	var reg prometheus.Registerer
	if cfg.Metrics.Enabled {
		reg = o.registry
	}
	if p.metrics, err = telemetry.NewMetrics(reg, cfg.Metrics.Namespace); err != nil {
		return nil, runtimeFailure(err)
	}
	// Tracing (observability §4): nil when disabled. Exporter problems the
	// loader cannot see (an unusable endpoint) are configuration errors.
	p.tracer, err = tracing.New(ctx, &cfg.Tracing, tracing.Options{Version: Version, Sink: cfg.Sink.Type,
		Subject: cfg.NATS.Subject, Consumer: cfg.NATS.Consumer, Env: o.env, Logger: o.log})
	if err != nil {
		return nil, classify(fmt.Errorf("tracing: %w", err))
	}

	// Step 4: secrets and key material.
	policy, err := sealPolicy(&cfg.Encryption, o.env)
	if err != nil {
		return nil, classify(err)
	}
	var natsOpts []nats.Option
	if o.conn == nil {
		if natsOpts, err = natsOptions(&cfg.NATS, o.env, o.log, p.metrics); err != nil {
			return nil, classify(err)
		}
	}

	// Steps 5 and 6: the sink and NATS. A NATS republish sink may reuse the
	// source connection, so it opens after the connection; every other sink
	// opens first, as runtime §2 orders it.
	openTheSink := func() error {
		if o.sink != nil {
			p.sink = o.sink
			return nil
		}
		var err error
		if p.sink, err = openSink(ctx, cfg, p.metrics, p.log, p.nc); err != nil {
			return classify(fmt.Errorf("open %s sink: %w", cfg.Sink.Type, err))
		}
		return nil
	}
	sinkNeedsConn := cfg.Sink.Type == "nats"
	if !sinkNeedsConn {
		if err := openTheSink(); err != nil {
			return nil, err
		}
	}
	if o.conn != nil {
		p.nc = o.conn
	} else {
		p.nc, err = nats.Connect(strings.Join(cfg.NATS.Servers(), ","), natsOpts...)
		if err != nil {
			return nil, runtimeFailure(fmt.Errorf("connect to NATS: %w", err))
		}
	}
	if sinkNeedsConn {
		if err := openTheSink(); err != nil {
			return nil, err
		}
	}
	p.metrics.NATSConnected.Set(1)
	if p.js, err = newJetStream(p.nc, &cfg.NATS); err != nil {
		return nil, runtimeFailure(err)
	}

	// Steps 7 and 8 wait for JetStream API replies; a request the user has
	// no permission for ends its step at once, and a refused fetch later
	// shows in readiness (refusals). Restored by close.
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
			return nil, configFailure(err)
		} else if err != nil {
			o.log.Warn("dead-letter stream lookup not permitted; skipping the check", "component", "dlq", "error", err.Error())
		}
	}

	// Step 8: consumer management.
	p.spec = consumerSpec(cfg)
	sctx, done := refused.step(ctx)
	consumer, action, err := runner.EnsureConsumer(sctx, p.js, p.spec)
	err = refused.explain(sctx, err)
	done()
	if err != nil {
		return nil, classify(err)
	}
	o.log.Info("consumer ready", "component", "consumer", "action", action,
		"stream", cfg.NATS.Stream, "consumer", cfg.NATS.Consumer)
	info := consumer.CachedInfo()
	if info != nil && dlqStream != "" {
		sctx, done := refused.step(ctx)
		if w := runner.DLQWindowWarning(sctx, p.js, dlqStream, info); w != "" {
			o.log.Warn(w, "component", "dlq")
		}
		done()
	}

	// Heartbeats must fit inside the consumer's AckWait and BackOff
	// (config §5.2): checked against the server's view of the consumer.
	if cfg.Delivery.InProgress.Enabled {
		if err := runner.CheckInProgress(info, ms(cfg.Delivery.InProgress.IntervalMS)); err != nil {
			return nil, configFailure(err)
		}
	}

	// Step 9: batch size against the consumer's max_batch. (The runner
	// warns at start when max_ack_pending is below its in-flight capacity.)
	if err := runner.CheckBatchSize(info, cfg.Delivery.BatchSize); err != nil {
		return nil, configFailure(err)
	}

	p.runner = newRunner(cfg, p, consumer, policy)
	return p, nil
}

// newRunner maps the configuration onto a Runner.
func newRunner(cfg *config.Config, p *pipeline, consumer jetstream.Consumer, policy *seal.Policy) *runner.Runner {
	d := &cfg.Delivery
	r := &runner.Runner{
		Consumer:     consumer,
		JetStream:    p.js,
		Conn:         p.nc,
		Sink:         p.sink,
		Metadata:     metadataResolver(&cfg.MessageMetadata),
		ConsumerName: cfg.NATS.Consumer,
		BatchSize:    d.BatchSize,
		BatchTimeout: ms(d.BatchTimeoutMS),
		MaxInFlight:  d.MaxInFlightBatches,
		Retry: runner.Retry{
			MaxRetries: ptr(d.MaxRetries), Backoff: ptr(ms(d.RetryBackoffMS)), MaxBackoff: ptr(ms(d.RetryBackoffMaxMS)),
			Mode: d.RetryBackoffMode, Multiplier: d.RetryBackoffMultiplier, Jitter: d.RetryJitter,
		},
		TemporaryAction: d.TemporaryFailureAction,
		Isolation:       d.PermanentFailureIsolation,
		ShutdownTimeout: ptr(ms(d.ShutdownTimeoutMS)),
		FailFast:        d.FailFast,
		Freshness:       freshness(&cfg.Metrics),
		Metrics:         p.metrics,
		Logger:          p.log,
	}
	if policy != nil {
		r.Encrypt = policy.Seal
	}
	if ip := d.InProgress; ip.Enabled {
		r.InProgress = &runner.InProgress{Interval: ms(ip.IntervalMS), MaxHeartbeats: ip.MaxHeartbeats,
			ShutdownTimeout: ptr(ms(ip.ShutdownTimeoutMS))}
	}
	if ac := d.AckConfirmation; ac.Enabled {
		r.AckConfirmation = &runner.AckConfirmation{Timeout: ms(ac.TimeoutMS)}
	}
	if pl := d.PriorityLanes; pl.Enabled {
		lanes := make([]runner.Lane, len(pl.Lanes))
		for i, l := range pl.Lanes {
			lanes[i] = runner.Lane{Name: l.Name, Priorities: l.Priorities, Weight: l.Weight}
		}
		r.PriorityLanes = &runner.PriorityLanes{Lanes: lanes, DefaultLane: pl.DefaultLane,
			RejectUnknown: pl.UnknownPriorityAction == "reject", MaxValueLength: pl.MaxPriorityValueLength}
	}
	if dl := &cfg.DeadLetter; dl.Enabled {
		r.DeadLetter = &runner.DeadLetter{
			Subject: *dl.Subject, IncludePayload: dl.IncludePayload, IncludeHeaders: dl.IncludeHeaders,
			IncludeError: dl.IncludeError, TermAfterPublish: dl.AckTermAfterPublish,
			OnMaxDeliver: dl.OnMaxDeliver, PublishTimeout: ms(dl.PublishTimeoutMS),
		}
	}
	return r
}

// freshness maps the metrics section's freshness keys.
func freshness(m *config.Metrics) runner.Freshness {
	f := runner.Freshness{Disabled: !m.EventFreshnessEnabled, FutureSkewTolerance: ptr(seconds(m.EventFutureSkewToleranceSeconds))}
	if m.EventStaleAfterSeconds == nil {
		f.StaleAfter = ptr(time.Duration(-1)) // null disables the stale counters
	} else {
		f.StaleAfter = ptr(seconds(*m.EventStaleAfterSeconds))
	}
	return f
}

// close stops the sink and drains the connection (if the pipeline owns it),
// each bounded by budget (runtime §14).
func (p *pipeline) close(ctx context.Context, budget time.Duration) {
	if p.refused != nil {
		p.refused.stop()
	}
	if p.sink != nil {
		sctx, cancel := context.WithTimeout(ctx, budget)
		if err := p.sink.Stop(sctx); err != nil {
			p.log.Warn("sink stop failed", "component", "sink", "error", err.Error())
		}
		cancel()
	}
}

// flushTraces exports the spans still buffered, bounded by budget; run calls
// it last, after the connection drained, so the final ACK events are in.
func (p *pipeline) flushTraces(budget time.Duration) {
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
