package mqtt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"

	"github.com/nats-sinks/nats-sink/internal/broker"
	"github.com/nats-sinks/nats-sink/sink"
)

var (
	_ sink.Sink          = (*Sink)(nil)
	_ sink.HealthChecker = (*Sink)(nil)
)

// MQTT 5 reason codes the sink tells apart.
const (
	noMatchingSubscribers = 0x10
	unspecifiedError      = 0x80
	unsupportedProtocol   = 0x84
	clientIDNotValid      = 0x85
	badUserNameOrPassword = 0x86
	notAuthorized         = 0x87
	badAuthMethod         = 0x8C
	sessionTakenOver      = 0x8E
	topicNameInvalid      = 0x90
	payloadFormatInvalid  = 0x99
)

// Sink publishes one MQTT message per NATS message. It is safe for
// concurrent WriteBatch calls: they share one connection and session, and
// at most max_inflight publishes await their acknowledgement at once.
type Sink struct {
	cfg      Config
	clientID string
	topic    broker.Template
	log      *slog.Logger
	tracer   sink.Tracer
	now      func() time.Time

	cm      *autopaho.ConnectionManager
	stop    context.CancelFunc // ends the connection manager
	session *watchedSession
	slots   chan struct{} // one per publish in flight

	up         atomic.Bool
	maxPacket  atomic.Uint32 // the server's Maximum Packet Size; 0 = none
	connects   atomic.Int64
	lastErr    atomic.Pointer[error] // latest failed connection attempt
	firstOK    chan struct{}         // closed on the first CONNACK success
	firstErr   chan error            // the first failed attempt before it
	firstFails atomic.Bool

	publishSeconds sink.Histogram
	noSubscribers  sink.Counter
	reconnects     sink.Counter

	stopOnce sync.Once
}

// New checks c, reads the password and TLS files, and connects. Invalid
// values, unreadable secrets and a CONNACK refusing the protocol or the
// client identifier are configuration errors (exit 2); an unreachable
// broker or refused credentials are plain errors (exit 1).
func New(ctx context.Context, c Config, deps sink.Deps) (*Sink, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	t, _ := parseURL(c.URL)
	tmpl, _ := broker.ParseTemplate(c.Topic, broker.Topic)
	pw, _, err := broker.ResolvePassword(&c.Auth, deps.LookupEnv)
	if err != nil {
		return nil, err
	}
	id := ""
	if c.ClientID != nil {
		id = *c.ClientID
	} else {
		var b [8]byte
		rand.Read(b[:])
		id = c.ClientIDPrefix + "-" + hex.EncodeToString(b[:])
	}
	s := &Sink{
		cfg:      c,
		clientID: id,
		topic:    tmpl,
		log:      deps.Log(),
		tracer:   deps.Tracing(),
		now:      time.Now,
		session:  newSession(),
		slots:    make(chan struct{}, c.MaxInflight),
		firstOK:  make(chan struct{}),
		firstErr: make(chan error, 1),
	}
	m := deps.Meter()
	if s.publishSeconds, err = m.Histogram("mqtt_publish_seconds", "Time from PUBLISH to its PUBACK or PUBCOMP.", nil); err != nil {
		s.publishSeconds = nop{}
	}
	if s.noSubscribers, err = m.Counter("mqtt_no_subscribers_total", "Publishes the broker answered with reason 0x10 (no matching subscribers)."); err != nil {
		s.noSubscribers = nop{}
	}
	if s.reconnects, err = m.Counter("mqtt_reconnects_total", "Connections re-established after a loss."); err != nil {
		s.reconnects = nop{}
	}

	cc := autopaho.ClientConfig{
		ServerUrls: []*url.URL{t.url},
		KeepAlive:  uint16(c.KeepAliveSeconds),
		// A reused client_id must not inherit packet identifiers this
		// process does not know; every reconnect resumes the session.
		CleanStartOnInitialConnection: true,
		SessionExpiryInterval:         uint32(c.SessionExpirySeconds),
		ReconnectBackoff:              backoff,
		ConnectTimeout:                min(max(c.PublishTimeout(), time.Second), 30*time.Second),
		ConnectUsername:               c.Auth.User(),
		ConnectPassword:               []byte(pw),
		OnConnectionUp:                s.connectionUp,
		OnConnectionDown:              s.connectionDown,
		OnConnectError:                s.connectError,
		ClientConfig: paho.ClientConfig{
			ClientID: id,
			Session:  s.session,
			// WriteBatch bounds each publish by publish_timeout_ms; this
			// only backs it up.
			PacketTimeout:      c.PublishTimeout() + time.Second,
			OnServerDisconnect: s.serverDisconnect,
		},
	}
	if c.TLS.Enabled || t.tls {
		if cc.TlsCfg, err = broker.TLSConfig(&c.TLS, t.host); err != nil {
			return nil, err
		}
	}
	// The connection manager outlives ctx (the start context); Stop ends it.
	mctx, stop := context.WithCancel(context.Background())
	cm, err := autopaho.NewConnection(mctx, cc)
	if err != nil {
		stop()
		return nil, fmt.Errorf("mqtt sink: %w", err)
	}
	s.cm, s.stop = cm, stop
	wait, cancel := context.WithTimeout(ctx, cc.ConnectTimeout+time.Second)
	defer cancel()
	select {
	case <-s.firstOK:
		return s, nil
	case err = <-s.firstErr:
	case <-wait.Done():
		err = fmt.Errorf("no CONNACK within %v: %w", cc.ConnectTimeout, wait.Err())
	}
	s.Stop(context.Background())
	var ce *autopaho.ConnackError
	if errors.As(err, &ce) && (ce.ReasonCode == unsupportedProtocol || ce.ReasonCode == clientIDNotValid) {
		return nil, fmt.Errorf("mqtt sink: connect to %s as %s: %w: %w", t.url.Host, id, classifyConnect(err), sink.ErrConfig)
	}
	return nil, fmt.Errorf("mqtt sink: connect to %s as %s: %w", t.url.Host, id, classifyConnect(err))
}

type nop struct{}

func (nop) Add(int)         {}
func (nop) Observe(float64) {}

// backoff is the wait before reconnection attempt n: none before the first,
// then doubling from 100 ms up to 5 s, so a broker that comes back is used
// within seconds without a failing one being flooded.
func backoff(n int) time.Duration {
	if n == 0 {
		return 0
	}
	d := 100 * time.Millisecond << min(n-1, 6)
	return min(d, 5*time.Second)
}

func (s *Sink) connectionUp(_ *autopaho.ConnectionManager, ca *paho.Connack) {
	var maxPacket uint32
	if ca.Properties != nil && ca.Properties.MaximumPacketSize != nil {
		maxPacket = *ca.Properties.MaximumPacketSize
	}
	s.maxPacket.Store(maxPacket)
	s.lastErr.Store(nil)
	s.up.Store(true)
	if s.connects.Add(1) == 1 {
		close(s.firstOK)
	} else {
		s.reconnects.Add(1)
	}
}

func (s *Sink) connectionDown() bool {
	s.up.Store(false)
	return true // keep reconnecting until Stop
}

func (s *Sink) connectError(err error) {
	s.lastErr.Store(&err)
	if s.connects.Load() == 0 && s.firstFails.CompareAndSwap(false, true) {
		s.firstErr <- err
	}
}

func (s *Sink) serverDisconnect(d *paho.Disconnect) {
	if d.ReasonCode == sessionTakenOver {
		s.log.Error("mqtt session taken over", "error", fmt.Sprintf("another client connected with client id %s", s.clientID))
	}
}

// Type returns "mqtt".
func (s *Sink) Type() string { return "mqtt" }

// message is one prepared publish.
type message struct {
	i    int
	pub  *paho.Publish
	span sink.Span
}

// WriteBatch publishes every message of batch concurrently (at most
// max_inflight at once across all batches) and returns each message's
// result from its acknowledgement: Committed on PUBACK, or PUBCOMP after a
// successful PUBREC. A publish cut by a lost connection is completed after
// the reconnect when the broker kept the session; without an answer within
// publish_timeout_ms it is Temporary (the broker may have routed it, and
// the redelivery is a second copy).
func (s *Sink) WriteBatch(ctx context.Context, batch []*sink.Envelope) []sink.Result {
	results := make([]sink.Result, len(batch))
	if err := ctx.Err(); err != nil {
		for i, e := range batch {
			results[i] = sink.Failed(errorf(e, "", err))
		}
		return results
	}
	storedAt := s.now()
	wctx, cancel := context.WithTimeout(ctx, s.cfg.PublishTimeout())
	defer cancel()
	var wg sync.WaitGroup
	for i, e := range batch {
		m, err := s.prepare(ctx, i, e, storedAt)
		if err != nil {
			results[i] = sink.Failed(err)
			if m != nil {
				broker.EndSpan(m.span, results[i])
			}
			continue
		}
		select {
		case s.slots <- struct{}{}:
		case <-wctx.Done():
			results[i] = sink.Failed(errorf(e, m.pub.Topic, s.waitError(wctx, ctx)))
			broker.EndSpan(m.span, results[i])
			continue
		}
		wg.Go(func() {
			defer func() { <-s.slots }()
			results[i] = s.publish(wctx, ctx, e, m)
			broker.EndSpan(m.span, results[i])
		})
	}
	wg.Wait()
	return results
}

// publish sends one message and classifies the broker's answer.
func (s *Sink) publish(wctx, ctx context.Context, e *sink.Envelope, m *message) sink.Result {
	if !s.up.Load() {
		if err := s.cm.AwaitConnection(wctx); err != nil {
			return sink.Failed(errorf(e, m.pub.Topic, s.waitError(wctx, ctx)))
		}
	}
	if n, limit := packetSize(m.pub), s.maxPacket.Load(); limit > 0 && n > int(limit) {
		return sink.Failed(errorf(e, m.pub.Topic, sink.AsPermanent(
			fmt.Errorf("PUBLISH of %d bytes exceeds the server's Maximum Packet Size (%d); not sent", n, limit))))
	}
	pctx, cancel := context.WithCancel(wctx)
	defer cancel()
	f := &flight{cancel: cancel}
	start := time.Now()
	resp, err := s.cm.Publish(withFlight(pctx, f), m.pub)
	switch {
	case f.sessionLost.Load():
		return sink.Failed(errorf(e, m.pub.Topic, errors.New("the broker did not keep the session across a reconnect; the outcome is unknown")))
	case resp != nil:
		code := resp.ReasonCode
		if code == 0 && f.noSubscribers.Load() {
			code = noMatchingSubscribers // QoS 2: the PUBREC said so
		}
		res := s.reason(e, m.pub.Topic, code, resp)
		if res.Outcome.Acked() {
			s.publishSeconds.Observe(time.Since(start).Seconds())
		}
		return res
	case err == nil:
		return sink.Failed(errorf(e, m.pub.Topic, errors.New("no acknowledgement")))
	case errors.Is(err, paho.ErrInvalidArguments):
		// A QoS above the server's Maximum QoS: every message alike.
		return sink.Failed(errorf(e, m.pub.Topic, sink.AsDestination(err)))
	case wctx.Err() != nil:
		return sink.Failed(errorf(e, m.pub.Topic, s.waitError(wctx, ctx)))
	}
	return sink.Failed(errorf(e, m.pub.Topic, err))
}

// reason classifies an acknowledgement's reason code.
func (s *Sink) reason(e *sink.Envelope, topic string, code byte, resp *paho.PublishResponse) sink.Result {
	text := ""
	if resp.Properties != nil && resp.Properties.ReasonString != "" {
		text = ": " + resp.Properties.ReasonString
	}
	switch {
	case code == 0:
		return sink.Ok
	case code == noMatchingSubscribers:
		s.noSubscribers.Add(1)
		if !s.cfg.RequireSubscribers {
			return sink.Ok
		}
		return sink.Failed(errorf(e, topic, sink.AsDestination(fmt.Errorf(
			"no subscription matches topic %q (reason 0x10); set require_subscribers false to accept that", topic))))
	case code == notAuthorized:
		return sink.Failed(errorf(e, topic, sink.AsDestination(fmt.Errorf("publish not authorized (reason 0x87)%s", text))))
	case code == topicNameInvalid || code == payloadFormatInvalid:
		return sink.Failed(errorf(e, topic, sink.AsPermanent(fmt.Errorf("broker refused the message (reason 0x%02X)%s", code, text))))
	case code < unspecifiedError:
		// Another success code (none is defined for PUBACK/PUBCOMP).
		return sink.Ok
	}
	// 0x80 unspecified, 0x83 implementation specific, 0x91 packet id in
	// use, 0x92 packet id not found (PUBCOMP), 0x97 quota exceeded, and
	// any other failure: the next attempt may succeed.
	return sink.Failed(errorf(e, topic, fmt.Errorf("broker refused the message (reason 0x%02X)%s", code, text)))
}

// waitError is the error of a publish that ran out of time: with the
// connection down, the latest connection failure, classified (refused
// credentials are Destination).
func (s *Sink) waitError(wctx, ctx context.Context) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	err := fmt.Errorf("no acknowledgement within publish_timeout_ms (%d): %w", s.cfg.PublishTimeoutMS, wctx.Err())
	if !s.up.Load() {
		if last := s.lastErr.Load(); last != nil {
			return classifyConnect(fmt.Errorf("%w; the connection is down (%w)", err, *last))
		}
		return fmt.Errorf("%w; the connection is down", err)
	}
	return err
}

// classifyConnect marks a failed connection attempt: CONNACK refusing
// credentials or authorisation (0x86, 0x87, 0x8C) and certificate failures
// are Destination; a busy or unavailable server and network errors are
// Temporary.
func classifyConnect(err error) error {
	var ce *autopaho.ConnackError
	if errors.As(err, &ce) {
		name := connackNames[ce.ReasonCode]
		if name == "" {
			name = "refused"
		}
		err = fmt.Errorf("broker refused the connection: %s (CONNACK reason 0x%02X): %w", name, ce.ReasonCode, err)
		switch ce.ReasonCode {
		case badUserNameOrPassword, notAuthorized, badAuthMethod, unsupportedProtocol, clientIDNotValid:
			return sink.AsDestination(err)
		}
		return err
	}
	if broker.CertificateError(err) {
		return sink.AsDestination(err)
	}
	return err
}

// connackNames name the CONNACK refusals an operator acts on.
var connackNames = map[byte]string{
	unsupportedProtocol:   "unsupported protocol version",
	clientIDNotValid:      "client identifier not valid",
	badUserNameOrPassword: "bad user name or password",
	notAuthorized:         "not authorized",
	0x88:                  "server unavailable",
	0x89:                  "server busy",
	0x8A:                  "banned",
	badAuthMethod:         "bad authentication method",
	0x97:                  "quota exceeded",
}

// prepare builds the PUBLISH of e. A returned message with an error carries
// the span to end.
func (s *Sink) prepare(ctx context.Context, i int, e *sink.Envelope, storedAt time.Time) (*message, error) {
	r, err := broker.Build(&s.cfg.Options, "mqtt", e, storedAt)
	if err != nil {
		return nil, errorf(e, "", err)
	}
	topic, err := s.topic.Render(e)
	if err != nil {
		return nil, errorf(e, "", err)
	}
	if len(topic) == 0 || len(topic) > 65535 || !utf8.ValidString(topic) {
		return nil, errorf(e, "", sink.AsPermanentType(sink.ValidationError,
			fmt.Errorf("rendered topic of %d bytes is not 1 to 65535 bytes of UTF-8", len(topic))))
	}
	m := &message{i: i}
	m.span = broker.Trace(ctx, s.tracer, e, r, "mqtt", topic)
	if err := broker.CheckSize("mqtt", r.Size(), s.cfg.MaxRecordBytes); err != nil {
		return m, errorf(e, topic, err)
	}
	props := &paho.PublishProperties{User: make(paho.UserProperties, 0, len(r.Headers)+len(r.Meta))}
	for _, ps := range [][]broker.Pair{r.Headers, r.Meta} {
		for _, p := range ps {
			// MQTT strings may not carry U+0000: a broker closes the
			// connection on such a packet.
			if strings.ContainsRune(p.Name, 0) || strings.ContainsRune(p.Value, 0) {
				return m, errorf(e, topic, sink.AsPermanent(fmt.Errorf("header %q holds U+0000, which an MQTT user property cannot carry", p.Name)))
			}
			props.User = append(props.User, paho.UserProperty{Key: p.Name, Value: p.Value})
		}
	}
	if r.ContentType == broker.JSON {
		one := byte(1)
		props.PayloadFormat = &one
		props.ContentType = broker.JSON
	}
	if s.cfg.MessageExpirySeconds != nil {
		v := uint32(*s.cfg.MessageExpirySeconds)
		props.MessageExpiry = &v
	}
	m.pub = &paho.Publish{QoS: byte(s.cfg.QoS), Topic: topic, Payload: r.Body, Properties: props}
	return m, nil
}

// packetSize is an upper bound of p's encoded PUBLISH: fixed header, topic,
// packet identifier, properties and payload.
func packetSize(p *paho.Publish) int {
	n := 5 + 2 + len(p.Topic) + 2 + 4
	if pr := p.Properties; pr != nil {
		n += 2 + 3 + len(pr.ContentType) + 5
		for _, u := range pr.User {
			n += 1 + 2 + len(u.Key) + 2 + len(u.Value)
		}
	}
	return n + len(p.Payload)
}

// errorf wraps err with the message's origin; the text names the subject,
// stream sequence and topic only, never payload or header values.
func errorf(e *sink.Envelope, topic string, err error) error {
	if topic == "" {
		return fmt.Errorf("mqtt sink (subject %s, stream seq %d): %w", e.Subject, e.StreamSequence, err)
	}
	return fmt.Errorf("mqtt sink: publish to %s (subject %s, stream seq %d): %w", topic, e.Subject, e.StreamSequence, err)
}

// Healthcheck reports whether the connection is up (the latest CONNACK
// was a success). While it is down, the latest connection failure is
// returned, classified: refused credentials are a Destination error.
func (s *Sink) Healthcheck(context.Context) error {
	if s.up.Load() {
		return nil
	}
	if last := s.lastErr.Load(); last != nil {
		return fmt.Errorf("mqtt sink: not connected: %w", classifyConnect(*last))
	}
	return errors.New("mqtt sink: not connected")
}

// Stop disconnects and waits for the connection manager to end. The runner
// calls it once, after the last WriteBatch returned; later calls do
// nothing.
func (s *Sink) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.stop()
		select {
		case <-s.cm.Done():
		case <-ctx.Done():
		}
	})
	return nil
}
