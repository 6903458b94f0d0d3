package httpsink

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	retrydelay "github.com/nats-sinks/nats-sink/internal/backoff"
	"github.com/nats-sinks/nats-sink/internal/fanout"
	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
)

var _ sink.Sink = (*Sink)(nil)

// The Sink deliberately has no Healthcheck: test-sink makes no request
// (docs/http.md), and a probe that sends nothing cannot tell a reachable
// endpoint from a broken one. After a Destination outcome the runner probes
// by retrying the next batch instead (docs/delivery.md#destination-circuit).

// Schema is the schema name of envelope bodies (docs/formats.md#http-body).
const Schema = "nats_sinks.http.message.v1"

// Sink sends one HTTP request per message. It is safe for concurrent
// WriteBatch calls; they share one connection pool.
type Sink struct {
	cfg       Config
	url       string // the endpoint; from url_env or url_file it is a secret
	origin    string // scheme://host:port of url: all that logs, errors and spans show
	client    *http.Client
	transport *http.Transport
	// static holds the headers every request carries: Accept, Content-Type,
	// User-Agent, headers and the resolved headers_env.
	static  http.Header
	timeout time.Duration
	success map[int]bool
	retry   map[int]bool
	// spanAttrs are the request attributes of every client span.
	spanAttrs []sink.Attr
	tracer    sink.Tracer

	reqSeconds sink.Histogram
	// responses counts attempts by response class: responses[c] for
	// classes[c].
	responses [len(responseClasses)]sink.Counter

	// sleep waits d or until ctx is done; tests replace it to record the
	// backoff delays without waiting.
	sleep func(ctx context.Context, d time.Duration) error
	// jitter draws u in [0, 1) for the retry delay.
	jitter func() float64
	now    func() time.Time

	stopOnce sync.Once
}

// New validates c (Config.Validate; the method is upper-cased first, as
// Decode does), resolves headers_env through deps and prepares the
// connection pool. It makes no request. Invalid values and missing or
// invalid environment variables are reported as a *sink.ConfigError (exit 2
// in the CLI).
func New(_ context.Context, c Config, deps sink.Deps) (*Sink, error) {
	c.Method = strings.ToUpper(strings.TrimSpace(c.Method))
	if err := c.Validate(); err != nil {
		return nil, err
	}
	static := http.Header{}
	static.Set("Accept", "application/json")
	static.Set("Content-Type", "application/json")
	static.Set("User-Agent", c.UserAgent)
	for name, v := range c.Headers {
		static.Set(name, v)
	}
	var envProbs []sink.Problem
	for _, name := range sortedKeys(c.HeadersEnv) {
		envVar := c.HeadersEnv[name]
		v, ok := deps.LookupEnv(envVar)
		msg := ""
		switch {
		case !ok:
			msg = fmt.Sprintf("environment variable %s is not set", envVar)
		case strings.TrimSpace(v) == "":
			msg = fmt.Sprintf("environment variable %s must not be blank", envVar)
		case strings.TrimSpace(v) != v:
			msg = fmt.Sprintf("environment variable %s must not have surrounding whitespace", envVar)
		case fields.HasControl(v):
			msg = fmt.Sprintf("environment variable %s must not contain control characters", envVar)
		}
		if msg != "" {
			envProbs = append(envProbs, sink.Problem{Path: fields.Join("headers_env", name), Message: msg})
			continue
		}
		static.Set(name, v)
	}
	if envProbs != nil {
		return nil, &sink.ConfigError{Problems: envProbs}
	}
	endpoint, err := resolveURL(c, deps)
	if err != nil {
		return nil, err
	}

	// One transport per sink, sized so that every request of a full batch
	// can keep its connection: the default of 2 idle connections per host
	// would close and re-dial most of them at concurrency > 2.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 0
	tr.MaxIdleConnsPerHost = max(c.Concurrency, 2) * 4
	tr.ResponseHeaderTimeout = 0 // the per-attempt context bounds the whole exchange
	s := &Sink{
		cfg:       c,
		url:       endpoint,
		origin:    origin(endpoint),
		transport: tr,
		client: &http.Client{
			Transport: tr,
			// Redirects are not followed (docs/http.md): the 3xx itself is
			// classified, so a moved endpoint cannot silently receive data.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		static:  static,
		timeout: time.Duration(c.RequestTimeoutSeconds * float64(time.Second)),
		success: set(c.SuccessStatuses),
		retry:   set(c.RetryStatuses),
		sleep:   retrydelay.Sleep,
		jitter:  retrydelay.Draw,
		now:     time.Now,
	}
	s.spanAttrs = clientAttrs(c.Method, endpoint)
	s.tracer = deps.Tracing()
	s.reqSeconds, _ = deps.Meter().Histogram("http_request_seconds", "Duration of one HTTP sink request attempt, response body included.", nil)
	vec, _ := deps.Meter().CounterVec("http_responses_total", "HTTP sink request attempts by response class (transport_error: no HTTP response).", "class")
	for i, class := range responseClasses {
		// Every class exists from the start, at 0, so that a rate over
		// it is defined before the first failure.
		s.responses[i] = vec.With(class)
	}
	return s, nil
}

// responseClasses are the values of http_responses_total's class label.
var responseClasses = [...]string{"2xx", "3xx", "4xx", "5xx", "transport_error"}

const transportError = len(responseClasses) - 1

// responseClass returns the index in responseClasses of a response status.
// A status outside 200..599 (a 101, or a server's made-up 7xx) is not a
// valid answer to a request and counts with the server errors.
func responseClass(code int) int {
	if code >= 200 && code < 600 {
		return code/100 - 2
	}
	return 3
}

func set(xs []int) map[int]bool {
	m := make(map[int]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// Type returns "http".
func (s *Sink) Type() string { return "http" }

// Stop closes idle connections. Requests are bound to their WriteBatch
// context, and the runner calls Stop after the last WriteBatch returned, so
// nothing is in flight.
func (s *Sink) Stop(context.Context) error {
	s.stopOnce.Do(s.transport.CloseIdleConnections)
	return nil
}

// WriteBatch sends one request per envelope and returns one result per
// envelope (docs/library.md#the-sink-boundary, docs/http.md).
//
// With concurrency 1 the messages go in order, and after a Temporary or
// Destination result the rest are NotAttempted: the endpoint is failing,
// and sending more would only reorder the stream. With concurrency > 1 up
// to that many requests are in flight and each message keeps its own
// result; after a Destination result, messages not yet started are
// NotAttempted, since the fixed URL fails the same way for all of them.
func (s *Sink) WriteBatch(ctx context.Context, batch []*sink.Envelope) []sink.Result {
	return fanout.Write(ctx, "http sink", batch, s.cfg.Concurrency, s.write)
}

// write builds and sends one message, retrying temporary failures per
// retry, and returns its result.
func (s *Sink) write(ctx context.Context, e *sink.Envelope) sink.Result {
	body, key, err := s.build(e)
	if err != nil {
		return sink.Failed(fmt.Errorf("http sink (stream seq %d): %w", e.StreamSequence, err))
	}
	for attempt := 1; ; attempt++ {
		err := s.send(ctx, e, body, key, attempt)
		if err == nil {
			return sink.Ok
		}
		res := sink.Failed(fmt.Errorf("http sink (stream seq %d): %w", e.StreamSequence, err))
		if res.Outcome != sink.Temporary || attempt > s.cfg.Retry.MaxRetries || ctx.Err() != nil {
			return res
		}
		if serr := s.sleep(ctx, backoff(attempt, s.cfg.Retry, s.jitter())); serr != nil {
			return res
		}
	}
}

// errBodyTooLarge is the spec's text for an oversized request body.
var errBodyTooLarge = errors.New("HTTP request body exceeds max_request_bytes")

// build returns the request body and the idempotency key ("" = no header).
func (s *Sink) build(e *sink.Envelope) ([]byte, string, error) {
	key, err := s.key(e)
	if err != nil {
		return nil, "", err
	}
	p, err := record.NormalisePayload(e, record.PayloadMode(s.cfg.PayloadMode))
	if err != nil {
		return nil, "", err
	}
	var doc any = p.Value
	if s.cfg.BodyFormat == "envelope" {
		// docs/formats.md#http-body: idempotency_key is the header's key (null
		// without one), labels keep the ","-joined form.
		doc = record.MessageEnvelope(e, p, record.EnvelopeOptions{
			Schema:          Schema,
			LabelSeparator:  ",",
			IdempotencyKey:  true,
			Key:             key,
			Metadata:        s.cfg.IncludeMetadata,
			StoredAt:        s.now(),
			MissionMetadata: s.cfg.IncludeMissionMetadata,
			SecurityLabels:  s.cfg.IncludeSecurityLabels,
			Custody:         s.cfg.IncludeCustody,
		})
	}
	body := jsonx.Marshal(doc, jsonx.UTF8)
	if len(body) > s.cfg.MaxRequestBytes {
		return nil, "", sink.AsPermanentType(sink.SerializationError, errBodyTooLarge)
	}
	return body, key, nil
}

// key returns the idempotency key of e per strategy (docs/formats.md#idempotency-keys), ""
// when idempotency is disabled or the material is missing and not
// required.
func (s *Sink) key(e *sink.Envelope) (string, error) {
	id := s.cfg.Idempotency
	if !id.Enabled {
		return "", nil
	}
	var key string
	switch id.Strategy {
	case "stream_sequence":
		if e.Stream != "" && e.StreamSequence != 0 {
			key = "stream-sequence:" + e.Stream + ":" + strconv.FormatUint(e.StreamSequence, 10)
		} else if id.Required {
			return "", sink.AsPermanent(errors.New("stream_sequence idempotency strategy requires JetStream stream and sequence metadata"))
		}
	case "message_id":
		if e.MessageID != "" {
			key = "message-id:" + e.MessageID
		} else if id.Required {
			return "", sink.AsPermanent(errors.New("message_id idempotency strategy requires a message id"))
		}
	case "payload_sha256":
		// docs/migrating.md Q17: hashing the empty body of a headers-only message
		// would give every such message on a subject the same key, and
		// the endpoint would drop all but the first as duplicates.
		if e.Payload.Omitted {
			return "", sink.AsPermanentType(sink.ValidationError,
				errors.New("payload_sha256 idempotency key is unavailable because the original payload bytes were omitted"))
		}
		sum := sha256.Sum256(e.Data)
		key = "payload-sha256:" + e.Subject + ":" + hex.EncodeToString(sum[:])
	default: // idempotency_key
		k, err := record.CoreKey(e)
		if err != nil {
			return "", err
		}
		key = k
	}
	if key != "" && !validHeaderValue(key) {
		// A stream name, message id or subject with control characters
		// cannot travel in a header; sending without the key would break
		// the duplicate model, so the message is rejected.
		return "", sink.AsPermanentType(sink.ValidationError, errors.New("idempotency key contains characters not allowed in an HTTP header value"))
	}
	return key, nil
}

// statusError is a response whose status is not in success_statuses.
type statusError struct{ code int }

func (e *statusError) Error() string {
	return "HTTP sink returned non-success HTTP status " + strconv.Itoa(e.code)
}

// errResponseTooLarge reports a response body over max_response_bytes.
var errResponseTooLarge = errors.New("HTTP response body exceeds max_response_bytes")

// send makes one request attempt (attempt counts from 1) and returns nil
// when the endpoint stored the message, else an error classified for
// sink.Failed.
//
// With tracing, each attempt is a CLIENT span, a child of the message's
// span, and the request carries that span's traceparent; without it the
// message's own trace headers are copied (docs/tracing.md).
func (s *Sink) send(ctx context.Context, e *sink.Envelope, body []byte, key string, attempt int) (err error) {
	actx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	actx, span := s.tracer.StartClient(actx, e, s.cfg.Method, false, s.spanAttrs...)
	defer func() { endClientSpan(span, err) }()
	if attempt > 1 {
		span.SetAttributes(sink.Attr{Key: "http.request.resend_count", Value: attempt - 1})
	}
	req, err := http.NewRequestWithContext(actx, s.cfg.Method, s.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("build HTTP request: %w", err)
	}
	req.Header = s.static.Clone()
	if key != "" {
		req.Header.Set(s.cfg.Idempotency.Header, key)
	}
	for name, v := range s.tracer.TraceHeaders(actx, e) {
		// A value the transport would refuse is dropped, not sent: broken
		// trace context must not keep a message from being delivered.
		if validHeaderValue(v) {
			req.Header.Set(name, v)
		}
	}
	start := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		s.reqSeconds.Observe(time.Since(start).Seconds())
		s.responses[transportError].Add(1)
		// Timeouts, refused connections, resets, cancellation: the
		// outcome is unknown or the endpoint unreachable, so Temporary.
		// net/http's error names the URL, whose path may hold a webhook
		// token: it is replaced by the origin.
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = s.origin
		}
		return fmt.Errorf("HTTP request: %w", err)
	}
	n, rerr := io.Copy(io.Discard, io.LimitReader(resp.Body, int64(s.cfg.MaxResponseBytes)+1))
	resp.Body.Close()
	s.reqSeconds.Observe(time.Since(start).Seconds())
	code := resp.StatusCode
	s.responses[responseClass(code)].Add(1)
	span.SetAttributes(sink.Attr{Key: "http.response.status_code", Value: code})
	switch {
	case s.success[code]:
		// The response is read before the status is trusted: a body cut
		// off by a reset or timeout leaves the outcome unknown.
		if rerr != nil {
			return fmt.Errorf("read HTTP response (status %d): %w", code, rerr)
		}
		if n > int64(s.cfg.MaxResponseBytes) {
			return fmt.Errorf("status %d: %w", code, errResponseTooLarge)
		}
		return nil
	case s.retry[code]:
		return &statusError{code}
	case code == http.StatusUnauthorized, code == http.StatusForbidden,
		code == http.StatusNotFound, code == http.StatusProxyAuthRequired:
		// The URL is fixed, so these fail every message alike.
		return sink.AsDestination(&statusError{code})
	case code >= 500:
		// A server error outside retry_statuses says nothing about the
		// message; dead-lettering it would move the endpoint's problem
		// into the DLQ. The spec's table says Permanent; we deviate on
		// purpose (docs/status.md). A message that keeps failing is still
		// dead-lettered on its last delivery (dead_letter.on_max_deliver).
		return &statusError{code}
	default:
		return sink.AsPermanent(&statusError{code})
	}
}

// resolveURL returns the endpoint URL from url, url_env or url_file,
// checked like url is at load. Problems name url_env or url_file and never
// contain the URL.
func resolveURL(c Config, deps sink.Deps) (string, error) {
	if c.URL != "" {
		return c.URL, nil
	}
	v, _, err := secret.Resolve("url", nil, c.URLEnv, c.URLFile, deps.LookupEnv)
	if err != nil {
		return "", err
	}
	path := "url_env"
	if c.URLFile != nil {
		path = "url_file"
	}
	raw := v.Reveal()
	msg := ""
	switch {
	case strings.TrimSpace(raw) == "":
		msg = "the URL it holds is blank"
	case strings.TrimSpace(raw) != raw || fields.HasControl(raw):
		msg = "the URL it holds has surrounding whitespace or control characters"
	default:
		if m := checkURL(raw, c.AllowHTTPForLocalTesting, c.EndpointAllowedHosts); m != "" {
			msg = "the URL it holds " + m
		}
	}
	if msg != "" {
		return "", &sink.ConfigError{Problems: []sink.Problem{{Path: path, Message: msg}}}
	}
	return raw, nil
}

// origin returns scheme://host:port of an endpoint URL (the port made
// explicit), or "" when raw does not parse.
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return u.Scheme + "://" + net.JoinHostPort(u.Hostname(), port)
}

// clientAttrs returns the HTTP client span attributes known before the
// request (OpenTelemetry HTTP semantic conventions). The URL's path is
// never recorded (webhook tokens live there): url.full holds the origin,
// scheme://host:port, only.
func clientAttrs(method, raw string) []sink.Attr {
	attrs := []sink.Attr{{Key: "http.request.method", Value: method}}
	u, err := url.Parse(raw)
	if err != nil {
		return attrs
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		port = 80
		if u.Scheme == "https" {
			port = 443
		}
	}
	return append(attrs,
		sink.Attr{Key: "server.address", Value: u.Hostname()},
		sink.Attr{Key: "server.port", Value: port},
		sink.Attr{Key: "url.full", Value: origin(raw)},
	)
}

// endClientSpan records err on an attempt's client span and ends it.
// error.type is the status code for an unsuccessful status (as the HTTP
// conventions have it), "timeout" for an attempt that ran out of time, and
// "_OTHER" for any other failure.
func endClientSpan(span sink.Span, err error) {
	if err != nil {
		var se *statusError
		var ne net.Error
		errType := "_OTHER"
		switch {
		case errors.As(err, &se):
			errType = strconv.Itoa(se.code)
		case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
			errType = "timeout"
		}
		span.Fail(errType, err)
	}
	span.End()
}

// validHeaderValue reports whether v can be sent as a header value: no
// control characters other than horizontal tab.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// backoff returns the delay before retry attempt a (a ≥ 1) with the formula
// of docs/delivery.md#retries-and-back-off over the "retry" object's keys: raw delay of the mode,
// capped at max_backoff_ms, then jittered with u in [0, 1).
func backoff(a int, r Retry, u float64) time.Duration {
	return retrydelay.Policy{Base: time.Duration(r.BackoffMS) * time.Millisecond, Max: time.Duration(r.MaxBackoffMS) * time.Millisecond,
		Mode: r.BackoffMode, Multiplier: r.BackoffMultiplier, Jitter: r.Jitter}.Delay(a, u)
}
