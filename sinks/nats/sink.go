package natssink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/subject"
	"github.com/nats-sinks/nats-sink/sink"
)

var (
	_ sink.Sink          = (*Sink)(nil)
	_ sink.HealthChecker = (*Sink)(nil)
)

// Sink republishes messages to JetStream. It is safe for concurrent
// WriteBatch calls: they share one JetStream publisher and one bound on
// outstanding publishes (max_concurrent_publishes).
type Sink struct {
	cfg    Config
	nc     *nats.Conn
	ownsNC bool // nc was opened by the sink (connection set); Stop closes it
	js     jetstream.JetStream
	stream string // the stream found at start for the probe subject

	// slots bounds outstanding publishes across all WriteBatch calls.
	slots chan struct{}

	seconds sink.Histogram
	dups    sink.Counter
	tracer  sink.Tracer
	now     func() time.Time
	// spanName names the PRODUCER span of each republish: "publish " and
	// the subject, or prefix.> (a template keeps span names few).
	spanName string

	// afterPublish, when set by a test, runs after message i of a batch
	// was handed to the connection.
	afterPublish func(i int)

	stopOnce sync.Once
}

// New starts a nats sink: it validates c (Config.Validate), applies the
// loop rule against the source's filters (deps.Source.FilterSubjects),
// connects (or, with connection null, reuses the source connection,
// deps.Source.Connection), and looks up the stream that stores the target. Invalid
// values, a loop, a missing source connection and an unresolvable secret
// are a *sink.ConfigError naming the key; a target that no stream stores is
// an error wrapping sink.ErrConfig.
func New(ctx context.Context, c Config, deps sink.Deps) (*Sink, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := c.checkLoop(deps.Source.FilterSubjects); err != nil {
		return nil, err
	}
	s := &Sink{cfg: c, slots: make(chan struct{}, c.MaxConcurrentPublishes), now: time.Now,
		spanName: "publish " + c.probeTarget(), tracer: deps.Tracing()}
	if c.Connection == nil {
		conn, err := deps.Source.Connection()
		if err != nil {
			return nil, err // the host's connect error
		}
		nc, _ := conn.(*nats.Conn)
		if nc == nil {
			return nil, problem("connection", "null reuses the source connection, and there is none to reuse")
		}
		s.nc = nc
	} else {
		opts, err := c.options(deps)
		if err != nil {
			return nil, err
		}
		nc, err := nats.Connect(strings.Join(c.Connection.Servers(), ","), opts...)
		if err != nil {
			// The error names no URL: the URL may carry a token.
			return nil, fmt.Errorf("nats sink: connect: %w", err)
		}
		s.nc, s.ownsNC = nc, true
	}
	var err error
	s.js, err = c.jetStream(s.nc, deps.Source,
		// The sink's own bound (slots) keeps outstanding publishes at
		// max_concurrent_publishes; twice that leaves room for publishes
		// whose waiter gave up on a cancelled context but whose PubAck
		// timer still runs.
		jetstream.WithPublishAsyncMaxPending(2*c.MaxConcurrentPublishes),
		jetstream.WithPublishAsyncTimeout(time.Duration(c.PublishTimeoutMS)*time.Millisecond),
	)
	if err == nil {
		s.stream, err = s.lookup(ctx)
	}
	if err != nil {
		s.close()
		return nil, err
	}
	// A second sink on the same Metrics (test-sink, then run) gets the
	// collectors already registered under these names.
	m := deps.Meter()
	s.seconds, _ = m.Histogram("nats_republish_seconds", "Time from a republish to its PubAck.", nil)
	s.dups, _ = m.Counter("nats_republish_duplicates_total", "Republished messages the target stream reported as duplicates.")
	return s, nil
}

func problem(path, msg string) error {
	return &sink.ConfigError{Problems: []sink.Problem{{Path: path, Message: msg}}}
}

// checkLoop refuses a target that the source consumer's filters would
// deliver again (docs/nats-sink.md): every republished message would be read,
// republished under a new stream sequence (so a new Nats-Msg-Id), and read
// again, forever.
func (c *Config) checkLoop(filters []string) error {
	for _, f := range filters {
		var loops bool
		if c.Subject != nil {
			loops = subject.Match(f, *c.Subject)
		} else {
			// Targets are <prefix>.<S> for subjects S the filters deliver.
			for _, g := range filters {
				loops = loops || overlap(f, *c.SubjectPrefix+"."+g)
			}
		}
		if loops {
			key := "subject"
			if c.Subject == nil {
				key = "subject_prefix"
			}
			return problem(key, fmt.Sprintf("target subject %s would be consumed again by source filter %s (republish loop)",
				c.probeTarget(), f))
		}
	}
	return nil
}

// probeTarget names the target in messages: the subject, or prefix.>.
func (c *Config) probeTarget() string {
	if c.Subject != nil {
		return *c.Subject
	}
	return *c.SubjectPrefix + ".>"
}

// overlap reports whether some subject matches both patterns.
func overlap(a, b string) bool {
	for {
		at, arest, amore := strings.Cut(a, ".")
		bt, brest, bmore := strings.Cut(b, ".")
		switch {
		case at == ">" || bt == ">":
			return true
		case at != "*" && bt != "*" && at != bt:
			return false
		case !amore || !bmore:
			return amore == bmore
		}
		a, b = arest, brest
	}
}

// lookup returns the stream storing the probe subject. None, or one other
// than expected_stream, is a configuration error.
func (s *Sink) lookup(ctx context.Context) (string, error) {
	probe := s.cfg.probeSubject()
	name, err := s.js.StreamNameBySubject(ctx, probe)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return "", fmt.Errorf("nats sink: no JetStream stream stores subject %s: %w", probe, sink.ErrConfig)
	case err != nil:
		return "", fmt.Errorf("nats sink: look up the stream storing %s: %w", probe, err)
	case s.cfg.ExpectedStream != nil && name != *s.cfg.ExpectedStream:
		return "", fmt.Errorf("nats sink: subject %s is stored by stream %s, not expected_stream %s: %w",
			probe, name, *s.cfg.ExpectedStream, sink.ErrConfig)
	}
	return name, nil
}

// Type returns "nats".
func (s *Sink) Type() string { return "nats" }

// Stream returns the name of the stream found at start for the target.
func (s *Sink) Stream() string { return s.stream }

// inflight is one published message waiting for its PubAck.
type inflight struct {
	i      int
	target string
	paf    jetstream.PubAckFuture
	start  time.Time
	span   sink.Span
}

// WriteBatch republishes each envelope and returns one result per envelope
// once its own PubAck (or failure) is known. Publishes are pipelined: up to
// max_concurrent_publishes are outstanding at once, in batch order, while
// one goroutine collects their acknowledgements.
//
// With tracing, each republish is a PRODUCER span, a child of the message's
// span, lasting until the PubAck, and the republished message carries that
// span's context (docs/tracing.md); without tracing it carries the
// original message's trace headers.
func (s *Sink) WriteBatch(ctx context.Context, batch []*sink.Envelope) []sink.Result {
	results := make([]sink.Result, len(batch))
	pending := make(chan inflight, min(len(batch), cap(s.slots)))
	var wg sync.WaitGroup
	wg.Go(func() {
		for f := range pending {
			results[f.i] = s.await(ctx, batch[f.i], f)
			endSpan(f.span, results[f.i])
			<-s.slots
		}
	})
	storedAt := s.now()
	for i, e := range batch {
		m, err := s.cfg.Message(e, storedAt)
		if err != nil {
			results[i] = sink.Failed(fmt.Errorf("nats sink (stream seq %d): %w", e.StreamSequence, err))
			continue
		}
		if err := ctx.Err(); err != nil {
			results[i] = sink.Failed(errorf(e, m.Subject, err))
			continue
		}
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			results[i] = sink.Failed(errorf(e, m.Subject, ctx.Err()))
			continue
		}
		pctx, span := s.tracer.StartClient(ctx, e, s.spanName, true,
			sink.Attr{Key: "messaging.system", Value: "nats"},
			sink.Attr{Key: "messaging.operation.type", Value: "send"},
			sink.Attr{Key: "messaging.operation.name", Value: "publish"},
			sink.Attr{Key: "messaging.destination.name", Value: m.Subject},
		)
		if pctx != ctx {
			// A span started: its context replaces the copy Message made
			// of the original's trace headers.
			setTraceHeaders(m.Header, s.tracer.TraceHeaders(pctx, e))
		}
		start := time.Now()
		paf, err := s.js.PublishMsgAsync(m)
		if err != nil {
			<-s.slots
			results[i] = sink.Failed(errorf(e, m.Subject, s.classify(err, m.Subject)))
			endSpan(span, results[i])
			continue
		}
		pending <- inflight{i: i, target: m.Subject, paf: paf, start: start, span: span}
		if s.afterPublish != nil {
			s.afterPublish(i)
		}
	}
	close(pending)
	wg.Wait()
	return results
}

// setTraceHeaders replaces every traceparent, tracestate and baggage header
// of h, in any case, with th, so a stale or differently-cased copy never
// travels next to the new one.
func setTraceHeaders(h nats.Header, th map[string]string) {
	for k := range h {
		if isTraceHeader(k) {
			delete(h, k)
		}
	}
	for k, v := range th {
		h[k] = []string{v}
	}
}

// endSpan ends a republish span with its message's result.
func endSpan(span sink.Span, r sink.Result) {
	switch {
	case r.Outcome == sink.Duplicate:
		span.SetAttributes(sink.Attr{Key: "nats_sink.duplicate", Value: true})
	case !r.Outcome.Acked():
		errType := r.ErrorType
		if errType == "" {
			errType = r.Outcome.String()
		}
		span.Fail(errType, r.Err)
	}
	span.End()
}

// await waits for f's PubAck. A duplicate PubAck means the target stream
// already holds the message (a redelivery inside its duplicate window).
func (s *Sink) await(ctx context.Context, e *sink.Envelope, f inflight) sink.Result {
	select {
	case ack := <-f.paf.Ok():
		s.seconds.Observe(time.Since(f.start).Seconds())
		if ack.Duplicate {
			s.dups.Add(1)
			return sink.Result{Outcome: sink.Duplicate}
		}
		return sink.Ok
	case err := <-f.paf.Err():
		return sink.Failed(errorf(e, f.target, s.classify(err, f.target)))
	case <-ctx.Done():
		// The publish may still be stored: unknown outcome, so Temporary;
		// the redelivery is absorbed by the duplicate window.
		return sink.Failed(errorf(e, f.target, fmt.Errorf("waiting for PubAck: %w", ctx.Err())))
	}
}

// JetStream API error codes the sink classifies (nats-server errors.json).
const (
	codeStreamNotMatch = 10060 // Nats-Expected-Stream names another stream
	codeSealed         = 10109 // stream sealed: no message can be stored
)

// classify marks a publish error per docs/nats-sink.md: a message over the
// server's or stream's maximum is Permanent; no stream answering, an
// expected-stream mismatch, a sealed stream and a permission violation are
// Destination (they hit every message); timeouts, disconnections and
// everything else are Temporary.
func (s *Sink) classify(err error, target string) error {
	var api *jetstream.APIError
	switch {
	case errors.Is(err, nats.ErrMaxPayload), errors.Is(err, jetstream.ErrStreamMessageExceedsMaximum):
		return sink.AsPermanent(err)
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, nats.ErrPermissionViolation):
		return sink.AsDestination(err)
	case errors.As(err, &api) && (api.ErrorCode == codeStreamNotMatch || api.ErrorCode == codeSealed):
		return sink.AsDestination(err)
	case errors.Is(err, jetstream.ErrAsyncPublishTimeout):
		// The server answers a denied publish with an asynchronous -ERR
		// and drops the message, so the publish only times out; the
		// connection's last error tells the two apart.
		if last := s.nc.LastError(); errors.Is(last, nats.ErrPermissionViolation) &&
			strings.Contains(strings.ToLower(last.Error()), strings.ToLower(`publish to "`+target+`"`)) {
			return sink.AsDestination(fmt.Errorf("%w (%w)", err, last))
		}
	}
	return err
}

// Healthcheck looks up the stream that stores the target subject
// (<prefix>.healthcheck for subject_prefix), as Start does.
func (s *Sink) Healthcheck(ctx context.Context) error {
	_, err := s.lookup(ctx)
	return err
}

// Stop releases the publisher. A connection the sink opened is closed; the
// source connection is left to its owner. The runner calls Stop once, after
// the last WriteBatch; later calls do nothing.
func (s *Sink) Stop(ctx context.Context) error {
	s.stopOnce.Do(s.close)
	return nil
}

func (s *Sink) close() {
	if s.js != nil {
		// Unsubscribes the PubAck reply subscription, which would
		// otherwise stay on a shared source connection.
		s.js.CleanupPublisher()
	}
	if s.ownsNC {
		s.nc.Close()
	}
}
