package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/nats-sinks/nats-sink/internal/broker"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/sink"
)

var (
	_ sink.Sink          = (*Sink)(nil)
	_ sink.HealthChecker = (*Sink)(nil)
)

// returnsBuffer is the capacity of each channel's basic.return queue. The
// client hands a return to its listener before it processes the confirm
// that follows it, and gives up on a listener that does not take it within
// five seconds; a buffer lets a whole batch of unroutable messages queue
// while WriteBatch is busy, so no return is ever dropped (a dropped return
// would turn an unroutable message into a false commit).
const returnsBuffer = 4096

// Sink publishes one AMQP message per NATS message. It is safe for
// concurrent WriteBatch calls: each uses its own confirm-mode channel on
// the one connection, so a channel's returns and confirms belong to one
// batch.
type Sink struct {
	cfg     Config
	target  *target
	amqpCfg amqp.Config
	routing broker.Template
	log     *slog.Logger
	tracer  sink.Tracer
	now     func() time.Time

	confirmSeconds sink.Histogram
	returns        sink.Counter
	nacks          sink.Counter
	blocked        sink.Gauge

	frameSize atomic.Int64 // negotiated by the latest connection

	mu      sync.Mutex
	conn    *amqp.Connection
	free    []*channel
	stopped bool
	wg      sync.WaitGroup // publishers, channel closers, blocked watchers
}

// channel is one confirm-mode channel with its returns and close reason.
type channel struct {
	conn    *amqp.Connection
	ch      *amqp.Channel
	returns chan amqp.Return
	closes  chan *amqp.Error

	reason *amqp.Error // the close reason, once seen
}

// closeReason returns why the channel was closed, or nil while it is open.
func (c *channel) closeReason() *amqp.Error {
	if c.reason != nil {
		return c.reason
	}
	select {
	case e, ok := <-c.closes:
		if ok && e != nil {
			c.reason = e
		}
	default:
	}
	return c.reason
}

// closeReasonAfter returns why the channel was closed after a publish
// failed with err. When err says the channel is already closed (504
// CHANNEL_ERROR, the client's ErrClosed), the server's reason (404 for a
// deleted exchange, for instance) is delivered on the close notification a
// moment later, asynchronously: wait up to a second for it, so that every
// message of the batch gets the broker's reason and not a generic
// "channel is not open".
func (c *channel) closeReasonAfter(err error) *amqp.Error {
	if r := c.closeReason(); r != nil {
		return r
	}
	var ae *amqp.Error
	if !errors.Is(err, amqp.ErrClosed) && !(errors.As(err, &ae) && ae.Code == amqp.ChannelError) {
		return nil
	}
	select {
	case e, ok := <-c.closes:
		if ok && e != nil {
			c.reason = e
		}
	case <-time.After(time.Second):
	}
	return c.reason
}

// New checks c, reads the password and TLS files, connects, and checks with
// a passive declare that the exchange exists. Invalid values, unreadable
// secrets and a missing exchange are configuration errors (exit 2); an
// unreachable broker or refused credentials are plain errors (exit 1).
func New(ctx context.Context, c Config, deps sink.Deps) (*Sink, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	t, _ := parseURL(c.URL) // Validate parsed it
	tmpl, _ := broker.ParseTemplate(c.RoutingKey, broker.Raw)
	pw, ok, err := broker.ResolvePassword(&c.Auth, deps.LookupEnv)
	if err != nil {
		return nil, err
	}
	user := c.Auth.User()
	if !ok {
		// RabbitMQ lets guest in from loopback only.
		user, pw = "guest", "guest"
	}
	dialTimeout := min(max(c.PublishTimeout(), time.Second), 30*time.Second)
	ac := amqp.Config{
		SASL:       []amqp.Authentication{&amqp.PlainAuth{Username: user, Password: pw}},
		Vhost:      t.vhost,
		Heartbeat:  time.Duration(c.HeartbeatSeconds) * time.Second,
		Properties: amqp.Table{"connection_name": c.ConnectionName},
		Dial:       amqp.DefaultDial(dialTimeout),
		Locale:     "en_US",
	}
	if c.TLS.Enabled || t.tls {
		if ac.TLSClientConfig, err = broker.TLSConfig(&c.TLS, t.host); err != nil {
			return nil, err
		}
	}
	s := &Sink{
		cfg:     c,
		target:  t,
		amqpCfg: ac,
		routing: tmpl,
		log:     deps.Log(),
		tracer:  deps.Tracing(),
		now:     time.Now,
	}
	m := deps.Meter()
	if s.confirmSeconds, err = m.Histogram("rabbitmq_confirm_seconds", "Time from a batch's first publish to its last broker confirm.", nil); err != nil {
		s.confirmSeconds = nop{}
	}
	if s.returns, err = m.Counter("rabbitmq_returns_total", "Messages the broker returned as unroutable (no queue bound)."); err != nil {
		s.returns = nop{}
	}
	if s.nacks, err = m.Counter("rabbitmq_nacks_total", "Messages the broker nacked."); err != nil {
		s.nacks = nop{}
	}
	if s.blocked, err = m.Gauge("rabbitmq_connection_blocked", "1 while the broker blocks the connection (memory or disk alarm)."); err != nil {
		s.blocked = nop{}
	}
	if err := s.checkExchange(ctx, true); err != nil {
		s.Stop(ctx)
		return nil, err
	}
	return s, nil
}

type nop struct{}

func (nop) Add(int)         {}
func (nop) Observe(float64) {}
func (nop) Set(float64)     {}

// checkExchange proves the exchange exists with a passive declare on a
// channel of its own (a failed declare closes the channel). At start a
// missing exchange is a configuration error; later it is Destination.
func (s *Sink) checkExchange(ctx context.Context, start bool) error {
	type outcome struct{ err error }
	done := make(chan outcome, 1)
	// The client's channel calls take no context; run them aside so that a
	// broker that stops answering cannot hold the caller past ctx.
	s.wg.Go(func() {
		conn, err := s.connection()
		if err != nil {
			done <- outcome{err}
			return
		}
		ch, err := conn.Channel()
		if err != nil {
			done <- outcome{fmt.Errorf("rabbitmq sink: open channel: %w", classify(err))}
			return
		}
		defer ch.Close()
		if s.cfg.Exchange == "" {
			done <- outcome{} // the default exchange always exists
			return
		}
		err = ch.ExchangeDeclarePassive(s.cfg.Exchange, "topic", false, false, false, false, nil)
		var ae *amqp.Error
		switch {
		case err == nil:
		case errors.As(err, &ae) && ae.Code == amqp.NotFound && start:
			err = broker.ConfigError("exchange", fmt.Sprintf("exchange %q does not exist in vhost %q", s.cfg.Exchange, s.target.vhost))
		case errors.As(err, &ae) && ae.Code == amqp.NotFound:
			err = sink.AsDestination(fmt.Errorf("rabbitmq sink: exchange %q does not exist in vhost %q", s.cfg.Exchange, s.target.vhost))
		default:
			err = fmt.Errorf("rabbitmq sink: check exchange %q: %w", s.cfg.Exchange, classify(err))
		}
		done <- outcome{err}
	})
	select {
	case o := <-done:
		return o.err
	case <-ctx.Done():
		return fmt.Errorf("rabbitmq sink: check exchange %q: %w", s.cfg.Exchange, ctx.Err())
	}
}

// connection returns the live connection, dialling a new one when there is
// none or the last one closed.
func (s *Sink) connection() (*amqp.Connection, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil, errors.New("rabbitmq sink: stopped")
	}
	if s.conn != nil && !s.conn.IsClosed() {
		return s.conn, nil
	}
	scheme := "amqp://"
	if s.amqpCfg.TLSClientConfig != nil {
		scheme = "amqps://"
	}
	conn, err := amqp.DialConfig(scheme+s.target.addr+"/", s.amqpCfg)
	if err != nil {
		return nil, fmt.Errorf("rabbitmq sink: connect to %s: %w", s.target.addr, classify(err))
	}
	blocked := conn.NotifyBlocked(make(chan amqp.Blocking, 4))
	s.wg.Go(func() {
		// The client closes blocked when the connection closes.
		for b := range blocked {
			if b.Active {
				s.blocked.Set(1)
				s.log.Warn("rabbitmq broker blocked the connection; publishes wait", "error", b.Reason)
			} else {
				s.blocked.Set(0)
			}
		}
		s.blocked.Set(0)
	})
	s.frameSize.Store(int64(conn.Config.FrameSize))
	s.conn = conn
	s.free = nil // channels of a closed connection are closed too
	return conn, nil
}

// channel returns a free confirm-mode channel of the live connection, or
// opens one.
func (s *Sink) channel() (*channel, error) {
	conn, err := s.connection()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	for len(s.free) > 0 {
		c := s.free[len(s.free)-1]
		s.free = s.free[:len(s.free)-1]
		if c.conn == conn && !c.ch.IsClosed() {
			s.mu.Unlock()
			return c, nil
		}
	}
	s.mu.Unlock()
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("rabbitmq sink: open channel: %w", classify(err))
	}
	if err := ch.Confirm(false); err != nil {
		ch.Close()
		return nil, fmt.Errorf("rabbitmq sink: confirm mode: %w", classify(err))
	}
	return &channel{
		conn:    conn,
		ch:      ch,
		returns: ch.NotifyReturn(make(chan amqp.Return, returnsBuffer)),
		closes:  ch.NotifyClose(make(chan *amqp.Error, 1)),
	}, nil
}

// release puts a channel whose batch is settled back into the pool, or
// closes it when it cannot be reused.
func (s *Sink) release(c *channel, reuse bool) {
	if reuse && !c.ch.IsClosed() {
		s.mu.Lock()
		if !s.stopped && c.conn == s.conn {
			s.free = append(s.free, c)
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
	// A late return must not block the connection's reader while the
	// channel closes: drain them until the client closes the queue.
	s.wg.Go(func() {
		for range c.returns {
		}
	})
	c.ch.Close()
}

// Type returns "rabbitmq".
func (s *Sink) Type() string { return "rabbitmq" }

// message is one prepared publish.
type message struct {
	i          int
	routingKey string
	pub        amqp.Publishing
	span       sink.Span
}

// event is what the publishing goroutine reports to WriteBatch.
type event struct {
	ready *channel // the batch's channel, first
	err   error    // no channel (ready nil), or this publish failed
	msg   int      // index into the batch's messages
	dc    *amqp.DeferredConfirmation
}

// WriteBatch publishes every message of batch on one confirm-mode channel,
// with mandatory set, then waits for each confirm. A message is Committed
// when the broker acked it without returning it first; a return (no queue
// bound) is Destination; a nack is Temporary; a channel closed before the
// confirm is Destination when the broker closed it for a missing exchange
// or a permission, else Temporary. Whatever has no answer within
// publish_timeout_ms is Temporary: the broker may still route it, and the
// redelivery is a second copy with the same message_id.
func (s *Sink) WriteBatch(ctx context.Context, batch []*sink.Envelope) []sink.Result {
	results := make([]sink.Result, len(batch))
	if err := ctx.Err(); err != nil {
		for i, e := range batch {
			results[i] = sink.Failed(errorf(e, "", err))
		}
		return results
	}
	storedAt := s.now()
	msgs := make([]*message, 0, len(batch))
	for i, e := range batch {
		m, err := s.prepare(ctx, i, e, storedAt)
		if err != nil {
			results[i] = sink.Failed(err)
			if m != nil {
				broker.EndSpan(m.span, results[i])
			}
			continue
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		return results
	}
	wctx, cancel := context.WithTimeout(ctx, s.cfg.PublishTimeout())
	defer cancel()

	// The client's publish can block on a connection the broker stopped
	// reading (a resource alarm), and opening a channel takes no context:
	// both run in a goroutine of their own, so that WriteBatch returns at
	// its deadline whatever the broker does.
	events := make(chan event, len(msgs)+1)
	keep := make(chan bool, 1)
	s.wg.Go(func() { s.publish(wctx, msgs, events, keep) })

	settled := s.collect(wctx, ctx, batch, msgs, events, results)
	keep <- settled
	for _, m := range msgs {
		broker.EndSpan(m.span, results[m.i])
	}
	return results
}

// publish opens the batch's channel and publishes msgs on it, reporting
// each step on events; then it returns the channel to the pool or closes
// it, as WriteBatch decides through keep.
func (s *Sink) publish(ctx context.Context, msgs []*message, events chan<- event, keep <-chan bool) {
	c, err := s.channel()
	if err != nil {
		events <- event{err: err}
		return
	}
	events <- event{ready: c}
	exchange := s.cfg.Exchange
	for j, m := range msgs {
		if err := ctx.Err(); err != nil {
			events <- event{msg: j, err: err}
			continue
		}
		dc, err := c.ch.PublishWithDeferredConfirmWithContext(ctx, exchange, m.routingKey, true, false, m.pub)
		events <- event{msg: j, dc: dc, err: err}
	}
	s.release(c, <-keep)
}

// collect gathers the outcome of every message of msgs into results and
// reports whether the channel is settled (every publish confirmed, the
// channel open) and may serve another batch.
func (s *Sink) collect(wctx, ctx context.Context, batch []*sink.Envelope, msgs []*message, events <-chan event, results []sink.Result) bool {
	var c *channel
	var retCh <-chan amqp.Return // c's returns; nil once the client closed them
	returned := map[string]*amqp.Return{}
	var waiting []int // indices into msgs, in publish order
	dcs := make([]*amqp.DeferredConfirmation, len(msgs))
	resolved := 0
	published := 0
	start := time.Now()

	drainReturns := func() {
		for retCh != nil {
			select {
			case r, ok := <-retCh:
				if !ok {
					retCh = nil
					return
				}
				returned[r.MessageId] = &r
				s.returns.Add(1)
			default:
				return
			}
		}
	}
	settle := func(j int) {
		m := msgs[j]
		e := batch[m.i]
		dc := dcs[j]
		drainReturns() // a message's return precedes its confirm
		switch {
		case dc.Acked() && returned[m.pub.MessageId] != nil:
			r := returned[m.pub.MessageId]
			results[m.i] = sink.Failed(errorf(e, m.routingKey, sink.AsDestination(fmt.Errorf(
				"rabbitmq: no queue bound for routing key %q on exchange %q (%d %s)", m.routingKey, s.cfg.Exchange, r.ReplyCode, r.ReplyText))))
		case dc.Acked():
			results[m.i] = sink.Ok
		case c.closeReason() != nil:
			results[m.i] = sink.Failed(errorf(e, m.routingKey, closeError(c.closeReason())))
		default:
			s.nacks.Add(1)
			results[m.i] = sink.Failed(errorf(e, m.routingKey, errors.New("broker nacked the message")))
		}
		resolved++
	}

	for resolved < len(msgs) {
		var head <-chan struct{}
		if len(waiting) > 0 {
			head = dcs[waiting[0]].Done()
		}
		select {
		case ev := <-events:
			switch {
			case ev.ready != nil:
				c, retCh = ev.ready, ev.ready.returns
			case c == nil:
				// No channel: every message fails alike.
				for _, m := range msgs {
					results[m.i] = sink.Failed(errorf(batch[m.i], m.routingKey, ev.err))
				}
				return false
			case ev.err != nil:
				published++
				m := msgs[ev.msg]
				err := classify(ev.err)
				if r := c.closeReasonAfter(ev.err); r != nil {
					err = closeError(r)
				}
				results[m.i] = sink.Failed(errorf(batch[m.i], m.routingKey, err))
				resolved++
			default:
				published++
				dcs[ev.msg] = ev.dc
				waiting = append(waiting, ev.msg)
			}
		case r, ok := <-retCh:
			if !ok {
				retCh = nil
				continue
			}
			returned[r.MessageId] = &r
			s.returns.Add(1)
		case <-head:
			settle(waiting[0])
			waiting = waiting[1:]
			// Later confirms that arrived meanwhile settle now.
			for len(waiting) > 0 {
				select {
				case <-dcs[waiting[0]].Done():
					settle(waiting[0])
					waiting = waiting[1:]
					continue
				default:
				}
				break
			}
		case <-wctx.Done():
			err := fmt.Errorf("no broker confirm within publish_timeout_ms (%d): %w", s.cfg.PublishTimeoutMS, wctx.Err())
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			for _, m := range msgs {
				if results[m.i].Outcome == 0 {
					results[m.i] = sink.Failed(errorf(batch[m.i], m.routingKey, err))
				}
			}
			return false
		}
	}
	s.confirmSeconds.Observe(time.Since(start).Seconds())
	return published == len(msgs) && c != nil && c.closeReason() == nil
}

// prepare builds the AMQP message of e. A returned message with an error
// carries the span to end.
func (s *Sink) prepare(ctx context.Context, i int, e *sink.Envelope, storedAt time.Time) (*message, error) {
	r, err := broker.Build(&s.cfg.Options, "rabbitmq", e, storedAt)
	if err != nil {
		return nil, errorf(e, "", err)
	}
	rk, err := s.routing.Render(e)
	if err != nil {
		return nil, errorf(e, "", err)
	}
	if len(rk) > 255 {
		return nil, errorf(e, "", sink.AsPermanentType(sink.ValidationError,
			fmt.Errorf("routing key of %d bytes is longer than 255", len(rk))))
	}
	m := &message{i: i, routingKey: rk}
	dest := s.cfg.Exchange
	if dest == "" {
		dest = "amq.default"
	}
	m.span = broker.Trace(ctx, s.tracer, e, r, "rabbitmq", dest, sink.Attr{Key: "messaging.rabbitmq.destination.routing_key", Value: rk})
	if err := broker.CheckSize("rabbitmq", r.Size(), s.cfg.MaxRecordBytes); err != nil {
		return m, errorf(e, rk, err)
	}
	if len(r.Key) > 255 {
		// message_id is an AMQP short string.
		return m, errorf(e, rk, sink.AsPermanent(fmt.Errorf("idempotency key of %d bytes does not fit the AMQP message_id (at most 255 bytes)", len(r.Key))))
	}
	headers := make(amqp.Table, len(r.Headers)+len(r.Meta))
	for _, p := range r.Headers {
		if len(p.Name) > 255 {
			return m, errorf(e, rk, sink.AsPermanent(fmt.Errorf("header name of %d bytes is longer than an AMQP header name may be (255)", len(p.Name))))
		}
		headers[p.Name] = p.Value
	}
	for _, p := range r.Meta {
		headers[p.Name] = p.Value
	}
	ts := record.CreatedAt(e).Time
	if ts.IsZero() {
		ts = s.now()
	}
	m.pub = amqp.Publishing{
		Headers:      headers,
		ContentType:  r.ContentType,
		DeliveryMode: amqp.Persistent,
		MessageId:    r.Key,
		Timestamp:    ts.Truncate(time.Second),
		AppId:        "nats-sink",
		Body:         r.Body,
	}
	if n := headerFrameSize(&m.pub); n > s.frameLimit() {
		// The properties travel in one frame; a larger one would make
		// the broker close the whole connection.
		return m, errorf(e, rk, sink.AsPermanent(fmt.Errorf("AMQP properties of %d bytes exceed the frame size (%d)", n, s.frameLimit())))
	}
	return m, nil
}

// frameLimit is the largest header frame payload the connection takes: the
// negotiated frame size less the frame's own framing.
func (s *Sink) frameLimit() int {
	size := int(s.frameSize.Load())
	if size <= 0 {
		size = 131072 // RabbitMQ's default frame_max, until a connection says
	}
	return size - 8
}

// headerFrameSize is an upper bound of the encoded content header of p.
func headerFrameSize(p *amqp.Publishing) int {
	n := 14 + 2 // class, weight, body size, property flags
	n += 1 + len(p.ContentType) + 1 + 1 + len(p.MessageId) + 8 + 1 + len(p.AppId)
	n += 4
	for k, v := range p.Headers {
		n += 1 + len(k) + 1 + 4
		if s, ok := v.(string); ok {
			n += len(s)
		}
	}
	return n
}

// classify marks a client error per the sink's error table: refused
// credentials (403 ACCESS_REFUSED), a refused virtual host (530
// NOT_ALLOWED), a missing exchange (404 NOT_FOUND) and certificate failures
// are Destination; other closes, refused connections and timeouts are
// Temporary.
func classify(err error) error {
	var ae *amqp.Error
	if errors.As(err, &ae) {
		switch ae.Code {
		case amqp.AccessRefused, amqp.NotAllowed, amqp.NotFound:
			return sink.AsDestination(err)
		}
		return err
	}
	if broker.CertificateError(err) {
		return sink.AsDestination(err)
	}
	return err
}

// closeError is the error of a message whose channel closed before its
// confirm.
func closeError(r *amqp.Error) error {
	return classify(fmt.Errorf("channel closed before the confirm: %w", r))
}

// errorf wraps err with the message's origin; the text names the subject,
// stream sequence, exchange and routing key only, never payload or header
// values.
func errorf(e *sink.Envelope, rk string, err error) error {
	return fmt.Errorf("rabbitmq sink (subject %s, stream seq %d, routing key %q): %w", e.Subject, e.StreamSequence, rk, err)
}

// Healthcheck connects when needed, opens a channel, declares the exchange
// passively and closes the channel. A missing exchange, refused
// credentials or vhost are Destination errors; an unreachable broker is a
// plain (temporary) one.
func (s *Sink) Healthcheck(ctx context.Context) error {
	return s.checkExchange(ctx, false)
}

// Stop closes the channels and the connection and waits for the sink's
// goroutines. The runner calls it once, after the last WriteBatch
// returned; later calls do nothing.
func (s *Sink) Stop(context.Context) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	conn := s.conn
	free := s.free
	s.free = nil
	s.mu.Unlock()
	for _, c := range free {
		c.ch.Close()
	}
	if conn != nil {
		// A broker that stopped reading (resource alarm) would hold Close.
		conn.CloseDeadline(time.Now().Add(5 * time.Second))
	}
	s.wg.Wait()
	return nil
}
