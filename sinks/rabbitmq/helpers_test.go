package rabbitmq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sink/sinktest"
)

var fixedNow = time.Date(2026, 5, 29, 10, 0, 0, 300000000, time.UTC)

// server is the test's RabbitMQ: the sink URL (no credentials), an admin
// connection as guest, and a name prefix no other test or run uses.
type server struct {
	url, addr  string
	user, pass string
	admin      *amqp.Connection
	ch         *amqp.Channel
	prefix     string

	mu       sync.Mutex
	consumed map[string][]amqp.Delivery // by queue
}

func rabbitServer(t testing.TB) *server {
	t.Helper()
	raw := natstest.Service(t, "NATS_SINKS_TEST_AMQP_URL")
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("NATS_SINKS_TEST_AMQP_URL: %v", err)
	}
	s := &server{user: "guest", pass: "guest", addr: u.Host, consumed: map[string][]amqp.Delivery{}}
	if u.User != nil {
		s.user = u.User.Username()
		s.pass, _ = u.User.Password()
		u.User = nil
	}
	s.url = u.String()
	admin, err := amqp.Dial(fmt.Sprintf("%s://%s:%s@%s%s", u.Scheme, url.QueryEscape(s.user), url.QueryEscape(s.pass), u.Host, u.Path))
	if err != nil {
		t.Fatalf("rabbitmq at %s: %v", raw, err)
	}
	s.admin = admin
	if s.ch, err = admin.Channel(); err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	rand.Read(b[:])
	s.prefix = "nstest-" + hex.EncodeToString(b[:])
	t.Cleanup(func() { admin.Close() })
	return s
}

// exchange declares a durable topic exchange and, unless unbound, a
// durable quorum queue bound to it with "#"; both are deleted when the
// test ends. It returns the names.
func (s *server) exchange(t testing.TB, suffix string, bound bool) (exchange, queue string) {
	t.Helper()
	exchange, queue = s.prefix+"-"+suffix, s.prefix+"-"+suffix+"-q"
	if err := s.ch.ExchangeDeclare(exchange, "topic", true, false, false, false, nil); err != nil {
		t.Fatalf("declare exchange: %v", err)
	}
	t.Cleanup(func() {
		ch, err := s.admin.Channel()
		if err == nil {
			ch.ExchangeDelete(exchange, false, false)
			ch.QueueDelete(queue, false, false, false)
			ch.Close()
		}
	})
	if bound {
		s.queue(t, queue, amqp.Table{"x-queue-type": "quorum"})
		s.bind(t, queue, exchange)
	}
	return exchange, queue
}

func (s *server) queue(t testing.TB, name string, args amqp.Table) {
	t.Helper()
	if _, err := s.ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		t.Fatalf("declare queue %s: %v", name, err)
	}
	t.Cleanup(func() {
		if ch, err := s.admin.Channel(); err == nil {
			ch.QueueDelete(name, false, false, false)
			ch.Close()
		}
	})
}

func (s *server) bind(t testing.TB, queue, exchange string) {
	t.Helper()
	if err := s.ch.QueueBind(queue, "#", exchange, false, nil); err != nil {
		t.Fatalf("bind: %v", err)
	}
}

// messages returns every message the queue has held so far: it takes what
// is there now (a confirm means the message is in the queue) and keeps
// what it took for later calls.
func (s *server) messages(t testing.TB, queue string) []amqp.Delivery {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		d, ok, err := s.ch.Get(queue, true)
		if err != nil {
			t.Fatalf("basic.get %s: %v", queue, err)
		}
		if !ok {
			break
		}
		s.consumed[queue] = append(s.consumed[queue], d)
	}
	return s.consumed[queue]
}

// stored returns the origin of every message the queue has held.
func (s *server) stored(t testing.TB, queue string) []sinktest.Stored {
	t.Helper()
	var out []sinktest.Stored
	for _, d := range s.messages(t, queue) {
		seq, _ := strconv.ParseUint(fmt.Sprint(d.Headers["nats-sinks-stream-sequence"]), 10, 64)
		out = append(out, sinktest.Stored{Stream: fmt.Sprint(d.Headers["nats-sinks-stream"]), Sequence: seq})
	}
	return out
}

// config returns the default configuration publishing to exchange.
func (s *server) config(exchange string) Config {
	c := Default()
	c.URL = s.url
	c.Exchange = exchange
	if s.user != "guest" || s.pass != "guest" {
		c.Username = &s.user
		pw := secret.Value(s.pass)
		c.Password = &pw
	}
	return c
}

func open(t testing.TB, c Config, deps sink.Deps) *Sink {
	t.Helper()
	s, err := New(context.Background(), c, deps)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	s.now = func() time.Time { return fixedNow }
	t.Cleanup(func() { s.Stop(context.Background()) })
	return s
}

// rabbitmqctl runs the broker's control tool, skipping the test when it is
// not there (a broker on another host).
func rabbitmqctl(t *testing.T, args ...string) {
	t.Helper()
	path, err := exec.LookPath("rabbitmqctl")
	if err != nil {
		t.Skip("rabbitmqctl not found: this test manages users on the local broker")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, path, args...).CombinedOutput(); err != nil {
		t.Fatalf("rabbitmqctl %v: %v\n%s", args, err, out)
	}
}

func env(subject, stream string, seq uint64, header map[string][]string, body string) *sink.Envelope {
	var reply string
	if seq != 0 {
		reply = fmt.Sprintf("$JS.ACK.%s.c.1.%d.%d.1780048800123456000.0", stream, seq, seq)
	}
	return intake.Build(intake.Message{Subject: subject, Reply: reply, Data: []byte(body), Header: header}, nil, fixedNow)
}

func batch(subject, stream string, from, n uint64) []*sink.Envelope {
	var b []*sink.Envelope
	for seq := from; seq < from+n; seq++ {
		b = append(b, env(subject, stream, seq, nil, fmt.Sprintf(`{"seq":%d}`, seq)))
	}
	return b
}

func outcomes(rs []sink.Result) []sink.Outcome {
	out := make([]sink.Outcome, len(rs))
	for i, r := range rs {
		out[i] = r.Outcome
	}
	return out
}

func repeat(o sink.Outcome, n int) []sink.Outcome {
	out := make([]sink.Outcome, n)
	for i := range out {
		out[i] = o
	}
	return out
}

func ptr[T any](v T) *T { return &v }
