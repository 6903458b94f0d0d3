package kafkasink

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/nats-sinks/nats-sink/internal/telemetry"
	"github.com/nats-sinks/nats-sink/sink"
)

var (
	_ sink.Sink          = (*Sink)(nil)
	_ sink.HealthChecker = (*Sink)(nil)
)

// Sink produces one Kafka record per message. It is safe for concurrent
// WriteBatch calls: they share one idempotent producer, whose batches may
// mix records of several calls.
type Sink struct {
	cfg     Config
	opts    []kgo.Opt
	client  *kgo.Client
	timeout time.Duration
	conns   *connWatch

	// iso produces one record at a time, so that each of its batches holds
	// exactly one record: a broker rejection there belongs to that record
	// alone. It is created on first use. isoMu serialises its use.
	isoMu sync.Mutex
	iso   *kgo.Client

	produceSeconds *telemetry.Histogram
	records        *telemetry.Counter
	now            func() time.Time

	stopOnce sync.Once
}

// New checks c (a Config built by hand is checked like a decoded one),
// reads the SASL password and the TLS files, and creates the producer. It
// makes no request: an unreachable cluster shows in the healthcheck and as
// temporary write failures, not as a failed start. Invalid values are a
// *sink.ConfigError; an unset password variable or an unreadable file is an
// error wrapping sink.ErrConfig.
func New(_ context.Context, c Config) (*Sink, error) {
	if probs := c.problems(); len(probs) > 0 {
		return nil, &sink.ConfigError{Problems: probs}
	}
	opts, err := c.clientOptions()
	if err != nil {
		return nil, err
	}
	conns := newConnWatch()
	opts = append(opts, kgo.WithHooks(conns))
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka sink: %w: %w", err, sink.ErrConfig)
	}
	s := &Sink{
		cfg:     c,
		opts:    opts,
		client:  client,
		timeout: time.Duration(c.ProduceTimeoutMS) * time.Millisecond,
		conns:   conns,
		now:     time.Now,
	}
	// A second sink on the same Metrics (test-sink, then run) finds the
	// names taken; its metrics are then no-ops rather than a failed start.
	s.produceSeconds, _ = c.Metrics.NewHistogram("kafka_produce_seconds", "Time from handing a record to the producer to the broker's acknowledgement.", nil)
	s.records, _ = c.Metrics.NewCounter("kafka_records_total", "Records the Kafka brokers acknowledged.")
	return s, nil
}

// Type returns "kafka".
func (s *Sink) Type() string { return "kafka" }

// produced is the outcome of one record's produce, as its promise reports it.
type produced struct {
	i     int
	err   error
	start time.Time
}

// WriteBatch produces one record per envelope, all at once, and returns one
// result per envelope once the broker acknowledged (or refused) each
// record, or produce_timeout_ms has passed.
//
// A record still unacknowledged at the deadline is Temporary: the producer
// keeps such a record only while it is in flight (the idempotent producer
// must learn its outcome to keep its sequence numbers), and the deadline
// cancels every record not yet sent. A record that lands after the
// deadline is written a second time on redelivery — a duplicate key, never
// a loss.
func (s *Sink) WriteBatch(ctx context.Context, batch []*sink.Envelope) []sink.Result {
	results := make([]sink.Result, len(batch))
	if err := ctx.Err(); err != nil {
		// Nothing is handed to the producer: a cancelled write must not
		// write.
		for i, e := range batch {
			results[i] = sink.Failed(errorf(e, "", err))
		}
		return results
	}
	wctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel() // fails the records still buffered after a timeout

	recs := make([]*kgo.Record, len(batch))
	// Buffered for every record: a promise never blocks, not even one
	// that reports after WriteBatch has returned.
	done := make(chan produced, len(batch))
	// Taken before producing: a connection failure from here on ends the
	// wait early.
	broken := s.conns.brokenCh()
	storedAt := s.now()
	pending := 0
	for i, e := range batch {
		r, err := s.cfg.Record(e, storedAt)
		if err != nil {
			results[i] = sink.Failed(errorf(e, "", err))
			continue
		}
		recs[i] = r
		pending++
		start := time.Now()
		s.client.Produce(wctx, r, func(_ *kgo.Record, err error) {
			done <- produced{i: i, err: err, start: start}
		})
	}

	var suspects []int
	resolved := make([]bool, len(batch))
	brokenNow := false
collect:
	for pending > 0 {
		select {
		case d := <-done:
			pending--
			resolved[d.i] = true
			if d.err == nil {
				s.produceSeconds.Observe(time.Since(d.start).Seconds())
				s.records.Inc()
				results[d.i] = sink.Ok
				continue
			}
			if batchRejection(d.err) {
				suspects = append(suspects, d.i)
				continue
			}
			results[d.i] = sink.Failed(errorf(batch[d.i], recs[d.i].Topic, classify(d.err)))
		case <-broken:
			// Authentication or certificate failure: waiting out
			// produce_timeout_ms would not change it.
			brokenNow = true
			break collect
		case <-wctx.Done():
			break collect
		}
	}
	if pending > 0 {
		var err error
		switch {
		case brokenNow:
			err = classify(fmt.Errorf("broker connection failed: %w", s.conns.lastFatal()))
		case ctx.Err() != nil:
			err = ctx.Err()
		default:
			err = s.timeoutError(wctx.Err())
		}
		for i, r := range recs {
			if r != nil && !resolved[i] {
				results[i] = sink.Failed(errorf(batch[i], r.Topic, err))
			}
		}
	}
	for _, i := range suspects {
		results[i] = s.isolate(wctx, batch[i], recs[i])
	}
	return results
}

// timeoutError describes records that got no acknowledgement in time. The
// producer retries connection failures without failing the records, so a
// wrong SASL password or an untrusted broker certificate only shows as a
// timeout; when the latest broker connection attempt failed, its error is
// included and classified, so those become Destination while a refused or
// lost connection stays Temporary.
func (s *Sink) timeoutError(err error) error {
	err = fmt.Errorf("no broker acknowledgement within produce_timeout_ms (%d): %w", s.cfg.ProduceTimeoutMS, err)
	if cerr := s.conns.last(); cerr != nil {
		return classify(fmt.Errorf("%w (last broker connection error: %w)", err, cerr))
	}
	return err
}

// connWatch is a franz-go hook that remembers the outcome of the latest
// broker connection attempt (dial, TLS handshake, ApiVersions, SASL), and
// wakes waiting writes when an attempt fails for a reason that retrying
// cannot fix (classify says Destination).
type connWatch struct {
	mu     sync.Mutex
	err    error
	fatal  error         // the latest Destination-class failure
	broken chan struct{} // closed, and replaced, on each such failure
}

var _ kgo.HookBrokerConnect = (*connWatch)(nil)

func newConnWatch() *connWatch { return &connWatch{broken: make(chan struct{})} }

// OnBrokerConnect records err, or clears it when a connection succeeded.
func (w *connWatch) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.err = err
	if err != nil && sink.Failed(classify(err)).Outcome == sink.Destination {
		w.fatal = err
		close(w.broken)
		w.broken = make(chan struct{})
	}
}

// last returns the latest connection error, nil after a success.
func (w *connWatch) last() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// brokenCh returns a channel closed by the next connection failure that
// classify calls Destination.
func (w *connWatch) brokenCh() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.broken
}

// lastFatal returns the latest connection failure classify calls
// Destination; a later successful connection does not clear it.
func (w *connWatch) lastFatal() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fatal
}

// batchRejection reports errors with which a broker refuses a whole record
// batch for the content of some record in it: too large, invalid,
// corrupt, or a timestamp out of range. The batch may hold records of
// other messages (and of other WriteBatch calls), so the error does not
// yet say which message is at fault.
func batchRejection(err error) bool {
	return errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge) ||
		errors.Is(err, kerr.InvalidRecord) || errors.Is(err, kerr.CorruptMessage) ||
		errors.Is(err, kerr.InvalidTimestamp)
}

// isolate produces r again as the only record of its batch, on a producer
// used by one record at a time. If the broker refuses it alone, the record
// itself is at fault: Permanent (sinks.md §9, record too large or invalid).
// If it is accepted, it was an innocent neighbour of the offending record:
// Committed. Dead-lettering every record of a refused batch would move
// healthy messages to the DLQ.
func (s *Sink) isolate(ctx context.Context, e *sink.Envelope, r *kgo.Record) sink.Result {
	s.isoMu.Lock()
	defer s.isoMu.Unlock()
	if s.iso == nil {
		iso, err := kgo.NewClient(s.opts...)
		if err != nil {
			return sink.Failed(errorf(e, r.Topic, err))
		}
		s.iso = iso
	}
	// A fresh record: the first attempt left producer state on r.
	alone := &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp}
	start := time.Now()
	err := s.iso.ProduceSync(ctx, alone).FirstErr()
	switch {
	case err == nil:
		s.produceSeconds.Observe(time.Since(start).Seconds())
		s.records.Inc()
		return sink.Ok
	case batchRejection(err):
		return sink.Failed(errorf(e, r.Topic, sink.AsPermanent(fmt.Errorf("broker refused the record: %w", err))))
	}
	return sink.Failed(errorf(e, r.Topic, classify(err)))
}

// classify marks a produce error per sinks.md §9: authorization and SASL
// failures, an unknown or invalid topic (franz-go reports it after
// repeated metadata refreshes) and TLS certificate failures are Destination,
// since they fail every message alike; everything else — timeouts,
// retriable broker errors, lost connections, cancellation — is Temporary.
// Batch rejections are settled by isolate, not here.
func classify(err error) error {
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		invalidCert      x509.CertificateInvalidError
		verify           *tls.CertificateVerificationError
	)
	switch {
	case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed),
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed),
		errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, kerr.UnsupportedSaslMechanism),
		errors.Is(err, kerr.IllegalSaslState),
		errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.UnknownTopicID),
		errors.Is(err, kerr.InvalidTopicException),
		errors.As(err, &unknownAuthority), errors.As(err, &hostname), errors.As(err, &invalidCert),
		errors.As(err, &verify):
		return sink.AsDestination(err)
	}
	return err
}

// errorf wraps err with the message's origin; the text names the subject,
// stream sequence and topic only, never payload or header values.
func errorf(e *sink.Envelope, topic string, err error) error {
	if topic == "" {
		return fmt.Errorf("kafka sink (subject %s, stream seq %d): %w", e.Subject, e.StreamSequence, err)
	}
	return fmt.Errorf("kafka sink: produce to topic %s (subject %s, stream seq %d): %w", topic, e.Subject, e.StreamSequence, err)
}

// Healthcheck asks the cluster for the metadata of every configured topic
// (topic and each topic_routes topic) and fails unless all of them exist.
// A missing topic or an authorization failure is a Destination error; an
// unreachable cluster is a plain (temporary) one.
func (s *Sink) Healthcheck(ctx context.Context) error {
	topics := s.cfg.topics()
	details, err := kadm.NewClient(s.client).ListTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("kafka sink: topic metadata: %w", classify(err))
	}
	for _, t := range topics {
		d, ok := details[t]
		switch {
		case !ok:
			return sink.AsDestination(fmt.Errorf("kafka sink: topic %s does not exist", t))
		case errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			return sink.AsDestination(fmt.Errorf("kafka sink: topic %s does not exist", t))
		case d.Err != nil:
			return fmt.Errorf("kafka sink: topic %s: %w", t, classify(d.Err))
		}
	}
	return nil
}

// Stop closes the producers. The runner calls Stop once, after the last
// WriteBatch returned, so every record of a returned batch has its result;
// a record still in flight after a timed-out write is abandoned (its
// message was reported Temporary and is redelivered). Later calls do
// nothing.
func (s *Sink) Stop(context.Context) error {
	s.stopOnce.Do(func() {
		s.client.Close()
		s.isoMu.Lock()
		if s.iso != nil {
			s.iso.Close()
		}
		s.isoMu.Unlock()
	})
	return nil
}
