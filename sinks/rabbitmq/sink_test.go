package rabbitmq

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/nats-sinks/nats-sink/internal/broker/brokertest"
	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/tcpproxy"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sink/sinktest"
)

func headersOnlyPoison(stream string, _ uint64) *sink.Envelope {
	return intake.Build(intake.Message{Subject: "sinktest." + stream,
		Header: map[string][]string{"Nats-Msg-Size": {"64"}}}, nil, time.Now())
}

// TestConformance runs the contract suite against a durable quorum queue
// bound with "#". RabbitMQ does not de-duplicate, so the redelivery check
// is skipped: a redelivered message is a second copy (TestRedeliveryCopies).
func TestConformance(t *testing.T) {
	srv := rabbitServer(t)
	ex, q := srv.exchange(t, "conformance", true)
	c := srv.config(ex)
	sinktest.Run(t, sinktest.Harness{
		Open:     func(t *testing.T) sink.Sink { return open(t, c, sink.Deps{}) },
		ReadBack: func(t *testing.T) []sinktest.Stored { return srv.stored(t, q) },
		Poison:   headersOnlyPoison,
	})
}

// TestMessageShape: persistent, message_id = idempotency key, content
// type, timestamp = creation time, app_id, headers = forwarded headers and
// the metadata set; routed by the subject.
func TestMessageShape(t *testing.T) {
	srv := rabbitServer(t)
	ex, q := srv.exchange(t, "shape", true)
	c := srv.config(ex)
	c.RecordFormat = "payload"
	s := open(t, c, sink.Deps{})
	e := env("orders.created", "ORDERS", 42, map[string][]string{
		"X-Tenant": {"acme"}, "Nats-Time-Stamp": {"2026-05-29T09:59:58.5Z"},
		"Nats-Sinks-Classification": {"secret"}, "nats-sinks-subject": {"spoofed"},
	}, `{"b":2,"a":1}`)
	if got := outcomes(s.WriteBatch(t.Context(), []*sink.Envelope{e})); !slices.Equal(got, []sink.Outcome{sink.Committed}) {
		t.Fatalf("WriteBatch = %v", got)
	}
	ms := srv.messages(t, q)
	if len(ms) != 1 {
		t.Fatalf("queue holds %d messages, want 1", len(ms))
	}
	d := ms[0]
	if d.DeliveryMode != amqp.Persistent || d.MessageId != "stream-sequence:ORDERS:42" || d.ContentType != "application/json" ||
		d.AppId != "nats-sink" || d.RoutingKey != "orders.created" || !d.Timestamp.Equal(time.Date(2026, 5, 29, 9, 59, 58, 0, time.UTC)) {
		t.Errorf("properties: mode %d id %q type %q app %q key %q ts %v", d.DeliveryMode, d.MessageId, d.ContentType, d.AppId, d.RoutingKey, d.Timestamp)
	}
	if string(d.Body) != `{"a":1,"b":2}` {
		t.Errorf("body %s", d.Body)
	}
	want := amqp.Table{
		"X-Tenant": "acme", "Nats-Time-Stamp": "2026-05-29T09:59:58.5Z",
		"nats-sinks-subject": "orders.created", "nats-sinks-stream": "ORDERS", "nats-sinks-stream-sequence": "42",
		"nats-sinks-idempotency-key": "stream-sequence:ORDERS:42", "Nats-Sinks-Classification": "secret",
	}
	delete(d.Headers, "x-delivery-count") // the quorum queue's own
	if diff := cmp.Diff(want, d.Headers); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
}

// TestRedeliveryCopies: the duplicate model — a redelivered message is a
// second copy with the same message_id.
func TestRedeliveryCopies(t *testing.T) {
	srv := rabbitServer(t)
	ex, q := srv.exchange(t, "copies", true)
	s := open(t, srv.config(ex), sink.Deps{})
	b := batch("copies.a", "CP", 1, 3)
	for range 2 {
		if got := outcomes(s.WriteBatch(t.Context(), b)); !slices.Equal(got, repeat(sink.Committed, 3)) {
			t.Fatalf("WriteBatch = %v", got)
		}
	}
	ids := map[string]int{}
	for _, d := range srv.messages(t, q) {
		ids[d.MessageId]++
	}
	for _, seq := range []string{"1", "2", "3"} {
		if ids["stream-sequence:CP:"+seq] != 2 {
			t.Errorf("message_id stream-sequence:CP:%s seen %d times, want 2: %v", seq, ids["stream-sequence:CP:"+seq], ids)
		}
	}
}

// TestNoBinding: an exchange with no queue bound returns every message:
// Destination, counted, never committed; once a queue is bound the same
// messages are delivered.
func TestNoBinding(t *testing.T) {
	srv := rabbitServer(t)
	ex, q := srv.exchange(t, "unbound", false)
	m := brokertest.NewMetrics()
	s := open(t, srv.config(ex), sink.Deps{Metrics: m})
	b := batch("unbound.a", "NB", 1, 5)
	for i, r := range s.WriteBatch(t.Context(), b) {
		if r.Outcome != sink.Destination || !strings.Contains(r.Err.Error(), `no queue bound for routing key "unbound.a" on exchange "`+ex+`"`) {
			t.Errorf("message %d = %v (%v), want destination no queue bound", i, r.Outcome, r.Err)
		}
	}
	if m.Count("rabbitmq_returns_total") != 5 {
		t.Errorf("rabbitmq_returns_total = %d, want 5", m.Count("rabbitmq_returns_total"))
	}
	srv.queue(t, q, amqp.Table{"x-queue-type": "quorum"})
	srv.bind(t, q, ex)
	if got := outcomes(s.WriteBatch(t.Context(), b)); !slices.Equal(got, repeat(sink.Committed, 5)) {
		t.Errorf("after binding: %v", got)
	}
	if n := len(srv.stored(t, q)); n != 5 {
		t.Errorf("queue holds %d messages, want 5", n)
	}
}

// TestExchangeDeleted: an exchange deleted while the sink runs closes the
// channel with 404: every unconfirmed message is Destination; the health
// check says so; a recreated exchange delivers again.
func TestExchangeDeleted(t *testing.T) {
	srv := rabbitServer(t)
	ex, q := srv.exchange(t, "deleted", true)
	s := open(t, srv.config(ex), sink.Deps{})
	if got := outcomes(s.WriteBatch(t.Context(), batch("del.a", "XD", 1, 2))); !slices.Equal(got, repeat(sink.Committed, 2)) {
		t.Fatalf("WriteBatch = %v", got)
	}
	if err := srv.ch.ExchangeDelete(ex, false, false); err != nil {
		t.Fatal(err)
	}
	for i, r := range s.WriteBatch(t.Context(), batch("del.a", "XD", 3, 3)) {
		if r.Outcome != sink.Destination {
			t.Errorf("message %d after the exchange was deleted = %v (%v), want destination", i, r.Outcome, r.Err)
		}
	}
	err := s.Healthcheck(t.Context())
	if sink.Failed(err).Outcome != sink.Destination || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("Healthcheck = %v, want a destination error naming the missing exchange", err)
	}
	srv.exchange(t, "deleted", false)
	srv.bind(t, q, ex)
	if got := outcomes(s.WriteBatch(t.Context(), batch("del.a", "XD", 3, 3))); !slices.Equal(got, repeat(sink.Committed, 3)) {
		t.Errorf("after recreating the exchange: %v", got)
	}
	if n := len(srv.stored(t, q)); n != 5 {
		t.Errorf("queue holds %d messages, want 5", n)
	}
}

// TestNack: a full queue with x-overflow reject-publish nacks the message:
// Temporary, counted.
func TestNack(t *testing.T) {
	srv := rabbitServer(t)
	ex, _ := srv.exchange(t, "nack", false)
	q := srv.prefix + "-nack-full"
	srv.queue(t, q, amqp.Table{"x-max-length": int32(2), "x-overflow": "reject-publish"})
	srv.bind(t, q, ex)
	m := brokertest.NewMetrics()
	s := open(t, srv.config(ex), sink.Deps{Metrics: m})
	got := outcomes(s.WriteBatch(t.Context(), batch("nack.a", "NK", 1, 4)))
	if want := []sink.Outcome{sink.Committed, sink.Committed, sink.Temporary, sink.Temporary}; !slices.Equal(got, want) {
		t.Errorf("WriteBatch into a queue of two = %v, want %v", got, want)
	}
	if m.Count("rabbitmq_nacks_total") != 2 {
		t.Errorf("rabbitmq_nacks_total = %d, want 2", m.Count("rabbitmq_nacks_total"))
	}
}

// TestConnectionCut: a connection cut by a loopback proxy before the
// confirms arrive makes the unconfirmed messages Temporary; the sink
// reconnects and the redelivery commits every message (at least once).
func TestConnectionCut(t *testing.T) {
	srv := rabbitServer(t)
	ex, q := srv.exchange(t, "cut", true)
	p := tcpproxy.Start(t, srv.addr)
	c := srv.config(ex)
	c.URL = "amqp://" + p.Addr() + "/"
	c.PublishTimeoutMS = 1000
	s := open(t, c, sink.Deps{})
	if got := outcomes(s.WriteBatch(t.Context(), batch("cut.a", "CUT", 1, 5))); !slices.Equal(got, repeat(sink.Committed, 5)) {
		t.Fatalf("WriteBatch = %v", got)
	}
	p.Stall()
	done := make(chan []sink.Result)
	go func() { done <- s.WriteBatch(context.Background(), batch("cut.a", "CUT", 6, 10)) }()
	time.Sleep(100 * time.Millisecond) // let the publishes reach the stalled proxy
	p.Cut()
	for i, r := range <-done {
		if r.Outcome != sink.Temporary {
			t.Errorf("message %d with the connection cut = %v (%v), want temporary", i, r.Outcome, r.Err)
		}
	}
	p.Resume()
	if got := outcomes(s.WriteBatch(t.Context(), batch("cut.a", "CUT", 6, 10))); !slices.Equal(got, repeat(sink.Committed, 10)) {
		t.Fatalf("after reconnecting: %v", got)
	}
	seen := map[uint64]bool{}
	for _, st := range srv.stored(t, q) {
		seen[st.Sequence] = true
	}
	for seq := uint64(1); seq <= 15; seq++ {
		if !seen[seq] {
			t.Errorf("sequence %d missing", seq)
		}
	}

	// A broker that stops answering: the deadline makes the batch
	// Temporary instead of hanging.
	p.Stall()
	start := time.Now()
	for i, r := range s.WriteBatch(t.Context(), batch("cut.a", "CUT", 16, 2)) {
		if r.Outcome != sink.Temporary {
			t.Errorf("message %d against a stalled broker = %v (%v), want temporary", i, r.Outcome, r.Err)
		}
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("stalled write took %v", d)
	}
	p.Cut()
	p.Resume()
}

func TestStartErrors(t *testing.T) {
	srv := rabbitServer(t)
	ex, _ := srv.exchange(t, "start", false)

	c := srv.config(srv.prefix + "-missing")
	_, err := New(t.Context(), c, sink.Deps{})
	ce, ok := errors.AsType[*sink.ConfigError](err)
	if !ok || ce.Problems[0].Path != "exchange" || ce.Problems[0].Message != `exchange "`+srv.prefix+`-missing" does not exist in vhost "/"` {
		t.Errorf("New with a missing exchange = %v, want a configuration error at exchange", err)
	}

	c = srv.config(ex)
	c.Username = ptr("guest")
	c.PasswordEnv = ptr("AMQP_TEST_PW")
	_, err = New(t.Context(), c, sink.Deps{Env: func(string) (string, bool) { return "", false }})
	if ce, ok := errors.AsType[*sink.ConfigError](err); !ok || ce.Problems[0].Path != "password_env" {
		t.Errorf("New with an unset password variable = %v", err)
	}

	_, err = New(t.Context(), c, sink.Deps{Env: func(string) (string, bool) { return "wrong-password", true }})
	if err == nil || errors.Is(err, sink.ErrConfig) || sink.Failed(err).Outcome != sink.Destination {
		t.Errorf("New with a wrong password = %v, want a destination-class start error", err)
	} else if _, isConfig := errors.AsType[*sink.ConfigError](err); isConfig || strings.Contains(err.Error(), "wrong-password") {
		t.Errorf("New with a wrong password = %v", err)
	}

	c = srv.config(ex)
	c.URL = strings.TrimSuffix(srv.url, "/") + "/" + srv.prefix + "-novhost"
	_, err = New(t.Context(), c, sink.Deps{})
	if err == nil || sink.Failed(err).Outcome != sink.Destination {
		t.Errorf("New with a missing vhost = %v, want a destination-class start error", err)
	}

	c = srv.config(ex)
	p := tcpproxy.Start(t, srv.addr)
	p.Block()
	c.URL = "amqp://" + p.Addr() + "/"
	_, err = New(t.Context(), c, sink.Deps{})
	if err == nil || errors.Is(err, sink.ErrConfig) || sink.Failed(err).Outcome == sink.Destination {
		t.Errorf("New against an unreachable broker = %v, want a temporary-class start error", err)
	}
}

// TestPermissionRevoked: a user with only write permission (no configure,
// no read) starts, passes the health check and publishes; with the write
// permission revoked while the sink runs every message is refused (403):
// Destination; restored, the messages are delivered.
func TestPermissionRevoked(t *testing.T) {
	if testing.Short() {
		t.Skip("rabbitmqctl takes seconds per call")
	}
	srv := rabbitServer(t)
	ex, q := srv.exchange(t, "perm", true)
	user, pw := srv.prefix+"-user", "pw-"+srv.prefix
	rabbitmqctl(t, "add_user", user, pw)
	t.Cleanup(func() { rabbitmqctl(t, "delete_user", user) })
	// The least the sink needs (docs/brokers.md): write on the exchange;
	// no configure, no read.
	rabbitmqctl(t, "set_permissions", "-p", "/", user, "^$", ".*", "^$")
	c := srv.config(ex)
	c.Username = &user
	c.PasswordEnv = ptr("AMQP_TEST_PW")
	s := open(t, c, sink.Deps{Env: func(string) (string, bool) { return pw, true }})
	if got := outcomes(s.WriteBatch(t.Context(), batch("perm.a", "PR", 1, 2))); !slices.Equal(got, repeat(sink.Committed, 2)) {
		t.Fatalf("WriteBatch = %v", got)
	}
	if err := s.Healthcheck(t.Context()); err != nil {
		t.Errorf("Healthcheck with write permission only: %v", err)
	}
	rabbitmqctl(t, "set_permissions", "-p", "/", user, "^$", "^$", "^$")
	// RabbitMQ caches the permission checks an open channel has passed, so
	// a revocation reaches an existing connection only once the broker
	// closes it (what an operator does with close_all_user_connections).
	// Then publish one probe at a time until the refusal shows: the
	// reconnect's first batch may fail as Temporary, and probes that got in
	// before the close are counted.
	rabbitmqctl(t, "close_all_user_connections", user, "permissions revoked")
	extra := 0
	next := uint64(3)
	for deadline := time.Now().Add(30 * time.Second); ; next++ {
		r := s.WriteBatch(t.Context(), batch("perm.a", "PR", next, 1))[0]
		if (r.Outcome == sink.Committed || r.Outcome == sink.Temporary) && time.Now().Before(deadline) {
			if r.Outcome == sink.Committed {
				extra++
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if r.Outcome != sink.Destination || !strings.Contains(r.Err.Error(), "403") {
			t.Fatalf("message without write permission = %v (%v), want destination 403", r.Outcome, r.Err)
		}
		break
	}
	for i, r := range s.WriteBatch(t.Context(), batch("perm.a", "PR", next+1, 2)) {
		if r.Outcome != sink.Destination || !strings.Contains(r.Err.Error(), "403") {
			t.Errorf("message %d without write permission = %v (%v), want destination 403", i, r.Outcome, r.Err)
		}
	}
	rabbitmqctl(t, "set_permissions", "-p", "/", user, "^$", ".*", "^$")
	if got := outcomes(s.WriteBatch(t.Context(), batch("perm.a", "PR", next+1, 2))); !slices.Equal(got, repeat(sink.Committed, 2)) {
		t.Errorf("after restoring the permission: %v", got)
	}
	if n := len(srv.stored(t, q)); n != 4+extra {
		t.Errorf("queue holds %d messages, want %d (%d probes got in before the refusal took effect)", n, 4+extra, extra)
	}
}

func TestDefaultExchange(t *testing.T) {
	srv := rabbitServer(t)
	q := srv.prefix + "-direct"
	srv.queue(t, q, amqp.Table{"x-queue-type": "quorum"})
	c := srv.config("")
	c.RoutingKey = q
	s := open(t, c, sink.Deps{})
	if got := outcomes(s.WriteBatch(t.Context(), batch("any.subject", "DX", 1, 3))); !slices.Equal(got, repeat(sink.Committed, 3)) {
		t.Fatalf("WriteBatch = %v", got)
	}
	if n := len(srv.stored(t, q)); n != 3 {
		t.Errorf("queue holds %d messages, want 3", n)
	}
}

func TestPermanentFailures(t *testing.T) {
	srv := rabbitServer(t)
	ex, q := srv.exchange(t, "perm-fail", true)
	c := srv.config(ex)
	c.MaxRecordBytes = 1024
	c.RecordFormat = "raw"
	s := open(t, c, sink.Deps{})
	big := env("a.b", "PF", 1, nil, strings.Repeat("x", 2000))
	longID := env("a.b", "", 0, map[string][]string{"Nats-Msg-Id": {strings.Repeat("i", 300)}}, "x")
	ok := env("a.b", "PF", 3, nil, "ok")
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{big, longID, ok})
	if rs[0].Outcome != sink.Permanent || !strings.Contains(rs[0].Err.Error(), "rabbitmq record exceeds max_record_bytes") {
		t.Errorf("oversized = %+v", rs[0])
	}
	if rs[1].Outcome != sink.Permanent || !strings.Contains(rs[1].Err.Error(), "message_id") {
		t.Errorf("long message id = %+v", rs[1])
	}
	if rs[2].Outcome != sink.Committed {
		t.Errorf("good message = %+v", rs[2])
	}
	if n := len(srv.stored(t, q)); n != 1 {
		t.Errorf("queue holds %d messages, want 1", n)
	}
}

func TestTrace(t *testing.T) {
	srv := rabbitServer(t)
	ex, q := srv.exchange(t, "trace", true)
	tr := &brokertest.Tracer{}
	s := open(t, srv.config(ex), sink.Deps{Tracer: tr})
	e := env("traced.x", "TR", 1, map[string][]string{"traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, "baggage": {"k=v"}}, `{}`)
	if got := outcomes(s.WriteBatch(t.Context(), []*sink.Envelope{e})); got[0] != sink.Committed {
		t.Fatalf("WriteBatch = %v", got)
	}
	spans := tr.Spans()
	if len(spans) != 1 || spans[0].Name != "send "+ex || !spans[0].Producer || !spans[0].Ended ||
		spans[0].Attrs["messaging.rabbitmq.destination.routing_key"] != "traced.x" {
		t.Fatalf("spans = %+v", spans)
	}
	h := srv.messages(t, q)[0].Headers
	if h["traceparent"] != spans[0].Traceparent || h["baggage"] != "k=v" {
		t.Errorf("trace headers %v, want the span's %s", h, spans[0].Traceparent)
	}
}
