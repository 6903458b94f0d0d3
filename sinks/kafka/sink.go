package kafkasink

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

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

	produceSeconds sink.Histogram
	records        sink.Counter
	tracer         sink.Tracer
	now            func() time.Time

	stopOnce sync.Once
}

// New validates c (Config.Validate), reads the SASL password (through
// deps) and the TLS files, and creates the producer. It makes no request:
// an unreachable cluster shows in the healthcheck and as temporary write
// failures, not as a failed start. Invalid values, an unset password
// variable and an unreadable or unusable file are a *sink.ConfigError
// naming the key.
func New(_ context.Context, c Config, deps sink.Deps) (*Sink, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	opts, err := c.clientOptions(deps)
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
		tracer:  deps.Tracing(),
		now:     time.Now,
	}
	// A second sink on the same Metrics (test-sink, then run) gets the
	// collectors already registered under these names.
	m := deps.Meter()
	s.produceSeconds, _ = m.Histogram("kafka_produce_seconds", "Time from handing a record to the producer to the broker's acknowledgement.", nil)
	s.records, _ = m.Counter("kafka_records_total", "Records the Kafka brokers acknowledged.")
	return s, nil
}

// Type returns "kafka".
func (s *Sink) Type() string { return "kafka" }

// produced is the outcome of one record's produce, as its promise reports it.
type produced struct {
	i         int
	err       error
	start     time.Time
	partition int32
	offset    int64
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
//
// With tracing, each record is a PRODUCER span "send <topic>", a child of
// its message's span, lasting until the broker's acknowledgement, and the
// record carries that span's context (docs/tracing.md); without tracing it
// carries the message's own trace headers.
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
	spans := make([]sink.Span, len(batch))
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
		if err == nil {
			spans[i], err = s.traceRecord(ctx, e, r)
		}
		if err != nil {
			results[i] = sink.Failed(errorf(e, "", err))
			endSpan(spans[i], results[i])
			continue
		}
		recs[i] = r
		pending++
		start := time.Now()
		s.client.Produce(wctx, r, func(r *kgo.Record, err error) {
			done <- produced{i: i, err: err, start: start, partition: r.Partition, offset: r.Offset}
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
				s.records.Add(1)
				results[d.i] = sink.Ok
				spans[d.i].SetAttributes(sink.Attr{Key: "messaging.destination.partition.id", Value: strconv.Itoa(int(d.partition))},
					sink.Attr{Key: "messaging.kafka.offset", Value: d.offset})
				endSpan(spans[d.i], sink.Ok)
				continue
			}
			if batchRejection(d.err) {
				suspects = append(suspects, d.i)
				// Its own span records the refusal; isolate's lone
				// produce gets a new one.
				endSpan(spans[d.i], sink.Failed(d.err))
				continue
			}
			results[d.i] = sink.Failed(errorf(batch[d.i], recs[d.i].Topic, classify(d.err)))
			endSpan(spans[d.i], results[d.i])
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
				endSpan(spans[i], results[i])
			}
		}
	}
	for _, i := range suspects {
		results[i] = s.isolate(wctx, batch[i], recs[i])
	}
	return results
}

// traceRecord starts r's produce span under e's message span and puts the
// span's context into r's trace headers. Without tracing (no message span
// in ctx) r keeps the message's own trace headers and the span does
// nothing. A record the new headers push over max_record_bytes (the
// message's traceparent was shorter, or missing) is refused like any
// oversized record.
func (s *Sink) traceRecord(ctx context.Context, e *sink.Envelope, r *kgo.Record) (sink.Span, error) {
	pctx, span := s.tracer.StartClient(ctx, e, "send "+r.Topic, true,
		sink.Attr{Key: "messaging.system", Value: "kafka"},
		sink.Attr{Key: "messaging.operation.type", Value: "send"},
		sink.Attr{Key: "messaging.operation.name", Value: "send"},
		sink.Attr{Key: "messaging.destination.name", Value: r.Topic},
	)
	if pctx == ctx {
		return span, nil
	}
	setTraceHeaders(r, s.tracer.TraceHeaders(pctx, e))
	if n := framedSize(r); n > s.cfg.MaxRecordBytes {
		return span, sink.AsPermanentType(sink.SerializationError,
			fmt.Errorf("kafka record of %d bytes exceeds max_record_bytes (%d)", n, s.cfg.MaxRecordBytes))
	}
	return span, nil
}

// endSpan ends a produce span with its record's result; nil (no span was
// started: the record could not be built) does nothing.
func endSpan(span sink.Span, r sink.Result) {
	if span == nil {
		return
	}
	if !r.Outcome.Acked() {
		errType := r.ErrorType
		if errType == "" {
			errType = r.Outcome.String()
		}
		span.Fail(errType, r.Err)
	}
	span.End()
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
// itself is at fault: Permanent (docs/kafka.md, record too large or invalid).
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
	// A fresh record: the first attempt left producer state on r. Its
	// headers are copied: traceRecord replaces the trace headers in place.
	alone := &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Headers: slices.Clone(r.Headers), Timestamp: r.Timestamp}
	span, err := s.traceRecord(ctx, e, alone)
	res := func() sink.Result {
		if err != nil {
			return sink.Failed(errorf(e, r.Topic, err))
		}
		start := time.Now()
		results := s.iso.ProduceSync(ctx, alone)
		err := results.FirstErr()
		switch {
		case err == nil:
			s.produceSeconds.Observe(time.Since(start).Seconds())
			s.records.Add(1)
			if rec, _ := results.First(); rec != nil {
				span.SetAttributes(sink.Attr{Key: "messaging.destination.partition.id", Value: strconv.Itoa(int(rec.Partition))},
					sink.Attr{Key: "messaging.kafka.offset", Value: rec.Offset})
			}
			return sink.Ok
		case batchRejection(err):
			return sink.Failed(errorf(e, r.Topic, sink.AsPermanent(fmt.Errorf("broker refused the record: %w", err))))
		}
		return sink.Failed(errorf(e, r.Topic, classify(err)))
	}()
	endSpan(span, res)
	return res
}

// classify marks a produce error per docs/kafka.md: authorization and SASL
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
