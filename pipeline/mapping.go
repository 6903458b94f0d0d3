package pipeline

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/internal/seal"
	"github.com/nats-sinks/nats-sink/metadata"
	"github.com/nats-sinks/nats-sink/runner"
)

// sealPolicy builds the encryption policy, reading key material now (start-up
// step 4). It returns nil when no subject can be encrypted.
func sealPolicy(e *config.Encryption, env config.Env) (*seal.Policy, error) {
	if !e.Enabled && len(e.Rules) == 0 {
		return nil, nil
	}
	top := seal.Settings{Enabled: e.Enabled, Algorithm: e.Algorithm, KeyID: e.KeyID,
		NonceSize: e.NonceSizeBytes, TagLength: e.TagLength, EnvelopeVersion: e.EnvelopeVersion}
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
		if r.EnvelopeVersion != nil {
			sr.Settings.EnvelopeVersion, sr.Set = *r.EnvelopeVersion, sr.Set|seal.SetEnvelopeVersion
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

// newRunner maps the configuration onto a Runner.
func newRunner(cfg *config.Config, p *Pipeline, consumer jetstream.Consumer, policy *seal.Policy) *runner.Runner {
	d := &cfg.Delivery
	r := &runner.Runner{
		Consumer:      consumer,
		JetStream:     p.js,
		Conn:          p.nc,
		Sink:          p.sink,
		Metadata:      metadataResolver(&cfg.MessageMetadata),
		ConsumerName:  cfg.NATS.Consumer,
		BatchSize:     d.BatchSize,
		BatchTimeout:  ms(d.BatchTimeoutMS),
		MaxBatchBytes: d.MaxBatchBytes,
		MaxInFlight:   d.MaxInFlightBatches,
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
		Tracer:          p.tracer,
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
