package e2e

// End-to-end tests of the broker sinks (redis, rabbitmq, mqtt) through the
// real binary against the machine's servers (NATS_SINKS_TEST_REDIS_ADDR,
// NATS_SINKS_TEST_AMQP_URL, NATS_SINKS_TEST_MQTT_URL) and test-owned
// Mosquitto brokers: SIGKILLs mid-run, a broker cut off mid-run by a
// loopback proxy, and a destination that refuses the sink's writes.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"

	"github.com/nats-sinks/nats-sink/internal/broker/mqtttest"
	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/internal/tcpproxy"
)

const (
	brkStream   = "BRK"
	brkConsumer = "brk-sink"
	brkSubject  = "brk.events"
)

// body256 is a 256-byte JSON payload carrying i+1.
func body256(i int) []byte {
	head := fmt.Sprintf(`{"n":%d,"pad":"`, i+1)
	return []byte(head + strings.Repeat("x", 256-len(head)-2) + `"}`)
}

// uniqueName returns a name no other test or run uses.
func uniqueName() string {
	var b [6]byte
	rand.Read(b[:])
	return "nse2e-" + hex.EncodeToString(b[:])
}

// brokerNATS starts an embedded JetStream with the source stream and a DLQ
// stream, and returns it with a JetStream client.
func brokerNATS(t *testing.T) (url string, js jetstream.JetStream) {
	t.Helper()
	s := natstest.RunJetStream(t)
	_, js = natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: brkStream, Subjects: []string{"brk.>"}})
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "BRKDLQ", Subjects: []string{"dlq.brk"}})
	return s.ClientURL(), js
}

// brokerDoc is the run configuration of the broker tests: batch 500 and 4
// batches in flight, a DLQ, and an AckWait long enough that a healthy write
// is never redelivered.
func brokerDoc(natsURL string, sink map[string]any) *runDoc {
	d := newRunDoc([]string{natsURL}, brkStream, brkConsumer, "brk.>", sink)
	d.Consumer = map[string]any{"ack_wait_seconds": 10, "max_ack_pending": 4000}
	// In-progress heartbeats: on a loaded machine a batch can take longer
	// than AckWait, and the redelivery of a message still being written
	// would be a duplicate no kill caused, beyond the kill tests' bound.
	d.Delivery = with(d.Delivery, "batch_size", 500, "max_in_flight_batches", 4,
		"in_progress", map[string]any{"enabled": true, "interval_ms": 2000})
	return d
}

// writeBrokerDoc writes d with the DLQ enabled.
func writeBrokerDoc(t *testing.T, d *runDoc) string {
	t.Helper()
	path := d.write(t)
	replaceInFile(t, path, `"delivery": {`, `"dead_letter": {"enabled": true, "subject": "dlq.brk"},
  "delivery": {`)
	return path
}

// killRun publishes n messages at about 5,000 a second while the binary
// runs (so that a fast sink is still busy when it is killed), SIGKILLs it
// twice at random points (when the consumer has delivered past a random
// share of n: the ack floor would not move until the messages the previous
// kill left unacknowledged come back after AckWait), restarts it and drains. It returns the sum over the kills of the
// messages fetched but not acknowledged at the moment of each kill: the
// most a redelivery can write again.
//
// Unless a process reported a temporary failure: a batch refused for a
// while (a publish confirm later than publish_timeout_ms on a loaded
// machine) is redelivered without any kill and may have reached the broker
// already, an at-least-once duplicate no kill caused. Then the bound is
// every redelivery the consumer made (its delivery count beyond n), which
// still fails a sink that writes a message twice in one delivery.
func killRun(t *testing.T, natsURL string, js jetstream.JetStream, cfg string, n int) (bound int) {
	t.Helper()
	published := publishPaced(js, n, 5000)
	t.Cleanup(func() { <-published })
	seed := time.Now().UnixNano()
	rng := mrand.New(mrand.NewPCG(uint64(seed), 0))
	t.Logf("random seed %d", seed)
	ctx := context.Background()
	pendingAtKills := 0
	var procs []*process
	for round, share := range []float64{0.05 + 0.35*rng.Float64(), 0.5 + 0.4*rng.Float64()} {
		p := start(t, cfg)
		procs = append(procs, p)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("round %d stderr:\n%s", round, p.stderr.String())
			}
		})
		target := uint64(share * float64(n))
		deadline := time.Now().Add(2 * time.Minute)
		for {
			delivered, err := deliveredStream(ctx, js)
			if err == nil && delivered >= target {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: deliveries did not pass %d (at %d)\nstderr:\n%s", round, target, delivered, p.stderr.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
		p.kill(t)
		floor, pending, err := ackState(ctx, js, brkStream, brkConsumer)
		if err != nil {
			t.Fatal(err)
		}
		pendingAtKills += pending
		t.Logf("round %d: killed past %d; ack floor %d, fetched but not acknowledged %d", round, target, floor, pending)
	}
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	p := start(t, cfg)
	procs = append(procs, p)
	waitAllAcked(t, js, brkStream, brkConsumer, n, 3*time.Minute)
	waitFetching(t, js, brkStream, brkConsumer)
	p.stop(t)
	temporary := 0
	for _, p := range procs {
		temporary += strings.Count(p.stderr.String(), `"msg":"temporary failure; batch will be redelivered"`)
	}
	c, err := js.Consumer(ctx, brkStream, brkConsumer)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	redelivered := int(info.Delivered.Consumer) - n
	if temporary == 0 {
		t.Logf("no temporary failure logged; %d redeliveries in all", redelivered)
		return pendingAtKills
	}
	t.Logf("%d temporary-failure records logged: duplicates bounded by all %d redeliveries, not by the %d in flight at the kills",
		temporary, redelivered, pendingAtKills)
	return max(pendingAtKills, redelivered)
}

// deliveredStream returns the highest stream sequence the consumer has
// delivered.
func deliveredStream(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	info, err := consumerInfo(ctx, js, brkStream, brkConsumer)
	if err != nil {
		return 0, err
	}
	return info.Delivered.Stream, nil
}

// publishPaced publishes n body256 messages to brkSubject, 500 at a time
// awaiting their PubAcks, at about rate a second. The channel receives the
// outcome once, then is closed.
func publishPaced(js jetstream.JetStream, n, rate int) <-chan error {
	done := make(chan error, 1)
	go func() {
		defer close(done)
		const chunk = 500
		start := time.Now()
		for first := 0; first < n; first += chunk {
			var futures []jetstream.PubAckFuture
			for i := first; i < min(first+chunk, n); i++ {
				f, err := js.PublishAsync(brkSubject, body256(i))
				if err != nil {
					done <- fmt.Errorf("publish %d: %w", i, err)
					return
				}
				futures = append(futures, f)
			}
			for _, f := range futures {
				select {
				case <-f.Ok():
				case err := <-f.Err():
					done <- fmt.Errorf("publish: %w", err)
					return
				case <-time.After(30 * time.Second):
					done <- fmt.Errorf("no PubAck within 30s")
					return
				}
			}
			if ahead := time.Duration(first+chunk)*time.Second/time.Duration(rate) - time.Since(start); ahead > 0 {
				time.Sleep(ahead)
			}
		}
		done <- nil
	}()
	return done
}

// checkCopies checks that copies (stream sequence → number of records)
// holds every sequence 1..n, and that the copies beyond one are at most
// bound; it returns the number of duplicates.
func checkCopies(t *testing.T, copies map[uint64]int, n, bound int) int {
	t.Helper()
	dups := 0
	for seq := uint64(1); seq <= uint64(n); seq++ {
		switch c := copies[seq]; {
		case c == 0:
			t.Errorf("stream sequence %d is missing at the destination", seq)
		case c > 1:
			dups += c - 1
		}
	}
	if len(copies) != n {
		t.Errorf("%d distinct sequences at the destination, want %d", len(copies), n)
	}
	if dups > bound {
		t.Errorf("%d duplicates, more than the %d redeliveries the kills (and any temporary failure) explain", dups, bound)
	}
	return dups
}

// ---- Redis ----

type redisDest struct {
	addr   string
	admin  *redis.Client
	prefix string
}

func newRedisDest(t *testing.T) *redisDest {
	t.Helper()
	addr := natstest.Service(t, "NATS_SINKS_TEST_REDIS_ADDR")
	d := &redisDest{addr: addr, admin: redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, DisableIdentity: true}), prefix: uniqueName()}
	t.Cleanup(func() {
		ctx := context.Background()
		iter := d.admin.Scan(ctx, 0, d.prefix+":*", 5000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		for len(keys) > 0 {
			k := keys[:min(len(keys), 1000)]
			d.admin.Unlink(ctx, k...)
			keys = keys[len(k):]
		}
		d.admin.Close()
	})
	return d
}

func (d *redisDest) sink(window int) map[string]any {
	return map[string]any{"type": "redis", "address": d.addr, "stream_key": d.prefix + ":{stream}",
		"dedupe_key_prefix": d.prefix + ":dd:", "dedupe_window_ms": window, "publish_timeout_ms": 2000}
}

// entries returns the number of entries in all streams under the prefix.
func (d *redisDest) entries(t *testing.T) int {
	t.Helper()
	ctx := context.Background()
	n := 0
	iter := d.admin.Scan(ctx, 0, d.prefix+":*", 5000).Iterator()
	for iter.Next(ctx) {
		if typ, _ := d.admin.Type(ctx, iter.Val()).Result(); typ == "stream" {
			n += int(d.admin.XLen(ctx, iter.Val()).Val())
		}
	}
	return n
}

// copies reads the whole stream in pages and counts entries per stream
// sequence, checking that each carries its own idempotency key.
func (d *redisDest) copies(t *testing.T) map[uint64]int {
	t.Helper()
	ctx := context.Background()
	out := map[uint64]int{}
	start := "-"
	for {
		msgs, err := d.admin.XRangeN(ctx, d.prefix+":"+brkStream, start, "+", 2000).Result()
		if err != nil {
			t.Fatalf("XRANGE: %v", err)
		}
		for _, m := range msgs {
			seq, _ := strconv.ParseUint(fmt.Sprint(m.Values["nats-sinks-stream-sequence"]), 10, 64)
			if key := fmt.Sprint(m.Values["nats-sinks-idempotency-key"]); key != fmt.Sprintf("stream-sequence:%s:%d", brkStream, seq) {
				t.Errorf("entry %s: sequence %d with idempotency key %q", m.ID, seq, key)
			}
			out[seq]++
		}
		if len(msgs) < 2000 {
			return out
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}

// TestRedisKill: 20,000 messages, two SIGKILLs: with the 120 s dedupe
// window every message is one entry; with window 0 the redeliveries add
// entries, at most the messages in flight at the kills, sharing the key.
func TestRedisKill(t *testing.T) {
	for _, tt := range []struct {
		name   string
		window int
	}{{"window 120s", 120000}, {"window 0", 0}} {
		t.Run(tt.name, func(t *testing.T) {
			const n = 20000
			dest := newRedisDest(t)
			natsURL, js := brokerNATS(t)
			cfg := writeBrokerDoc(t, brokerDoc(natsURL, dest.sink(tt.window)))
			bound := killRun(t, natsURL, js, cfg, n)
			if tt.window > 0 {
				bound = 0
			}
			dups := checkCopies(t, dest.copies(t), n, bound)
			t.Logf("%d duplicates (bound %d)", dups, bound)
		})
	}
}

// TestRedisDown: with the server cut off by a loopback proxy nothing is
// acknowledged; once it is back, every message is written once.
func TestRedisDown(t *testing.T) {
	dest := newRedisDest(t)
	p := tcpproxy.Start(t, dest.addr)
	sinkCfg := dest.sink(120000)
	sinkCfg["address"] = p.Addr()
	sinkCfg["publish_timeout_ms"] = 500
	log := brokerDownRun(t, sinkCfg, p, func() map[uint64]int { return dest.copies(t) })
	// The machine's Redis runs without AOF (as CI starts it).
	if aof, _ := dest.admin.ConfigGet(context.Background(), "appendonly").Result(); aof["appendonly"] == "no" &&
		!strings.Contains(log, "redis server has AOF disabled; committed entries do not survive a server restart") {
		t.Errorf("no AOF warning in the log:\n%s", log)
	}
}

// TestRedisPermissionRevoked: the sink's ACL user loses EVALSHA mid-run:
// Destination (nothing acknowledged, nothing dead-lettered, the sink
// unhealthy, the error logged); restored, every message is written.
func TestRedisPermissionRevoked(t *testing.T) {
	dest := newRedisDest(t)
	user, pw := dest.prefix+"-user", "pw-"+dest.prefix
	ctx := context.Background()
	if err := dest.admin.Do(ctx, "ACL", "SETUSER", user, "reset", "on", ">"+pw, "~*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dest.admin.Do(context.Background(), "ACL", "DELUSER", user) })
	t.Setenv("BRK_REDIS_PASSWORD", pw)
	sinkCfg := dest.sink(120000)
	sinkCfg["username"], sinkCfg["password_env"] = user, "BRK_REDIS_PASSWORD"
	destinationRun(t, sinkCfg,
		func() { dest.admin.Do(ctx, "ACL", "SETUSER", user, "-evalsha") },
		func() { dest.admin.Do(ctx, "ACL", "SETUSER", user, "+evalsha") },
		"NOPERM", "redis_pipeline_seconds_count", func() map[uint64]int { return dest.copies(t) })
}

// TestRedisWrongPassword: a refused password fails the start: exit 1 with
// the server's answer, never the password.
func TestRedisWrongPassword(t *testing.T) {
	dest := newRedisDest(t)
	user := dest.prefix + "-user"
	if err := dest.admin.Do(context.Background(), "ACL", "SETUSER", user, "reset", "on", ">right", "~*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dest.admin.Do(context.Background(), "ACL", "DELUSER", user) })
	t.Setenv("BRK_REDIS_PASSWORD", "wrong-secret")
	sinkCfg := dest.sink(120000)
	sinkCfg["username"], sinkCfg["password_env"] = user, "BRK_REDIS_PASSWORD"
	startFails(t, sinkCfg, 1, "WRONGPASS", "wrong-secret")
}

// ---- RabbitMQ ----

type rabbitDest struct {
	url, addr string
	admin     *amqp.Connection
	exchange  string
	queue     string
}

func newRabbitDest(t *testing.T) *rabbitDest {
	t.Helper()
	raw := natstest.Service(t, "NATS_SINKS_TEST_AMQP_URL")
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	user, pass := "guest", "guest"
	if u.User != nil {
		user = u.User.Username()
		pass, _ = u.User.Password()
		u.User = nil
	}
	admin, err := amqp.Dial(fmt.Sprintf("%s://%s:%s@%s%s", u.Scheme, url.QueryEscape(user), url.QueryEscape(pass), u.Host, u.Path))
	if err != nil {
		t.Fatalf("rabbitmq at %s: %v", raw, err)
	}
	d := &rabbitDest{url: u.String(), addr: u.Host, admin: admin, exchange: uniqueName()}
	d.queue = d.exchange + "-q"
	ch, err := admin.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.ExchangeDeclare(d.exchange, "topic", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(d.queue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(d.queue, "#", d.exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if ch, err := admin.Channel(); err == nil {
			ch.QueueDelete(d.queue, false, false, false)
			ch.ExchangeDelete(d.exchange, false, false)
		}
		admin.Close()
	})
	return d
}

func (d *rabbitDest) sink() map[string]any {
	return map[string]any{"type": "rabbitmq", "url": d.url, "exchange": d.exchange, "publish_timeout_ms": 2000}
}

// copies drains the queue and counts messages per stream sequence,
// checking that each is persistent, carries the metadata headers and has
// its idempotency key as message_id.
func (d *rabbitDest) copies(t *testing.T) map[uint64]int {
	t.Helper()
	ch, err := d.admin.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Qos(2000, 0, false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume(d.queue, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]int{}
	for {
		select {
		case m := <-deliveries:
			seq, _ := strconv.ParseUint(fmt.Sprint(m.Headers["nats-sinks-stream-sequence"]), 10, 64)
			want := fmt.Sprintf("stream-sequence:%s:%d", brkStream, seq)
			if m.DeliveryMode != amqp.Persistent || m.MessageId != want || m.Headers["nats-sinks-idempotency-key"] != want ||
				m.Headers["nats-sinks-subject"] != brkSubject || m.Headers["nats-sinks-stream"] != brkStream {
				t.Errorf("message of sequence %d: delivery mode %d, message_id %q, headers %v", seq, m.DeliveryMode, m.MessageId, m.Headers)
			}
			out[seq]++
		case <-time.After(2 * time.Second):
			// The queue held every confirmed message before the drain
			// began; two quiet seconds mean it is empty.
			return out
		}
	}
}

// TestRabbitMQKill: 20,000 messages into a durable quorum queue, two
// SIGKILLs: every message present, duplicates (same message_id) at most the
// messages in flight at the kills.
func TestRabbitMQKill(t *testing.T) {
	const n = 20000
	dest := newRabbitDest(t)
	natsURL, js := brokerNATS(t)
	cfg := writeBrokerDoc(t, brokerDoc(natsURL, dest.sink()))
	bound := killRun(t, natsURL, js, cfg, n)
	dups := checkCopies(t, dest.copies(t), n, bound)
	t.Logf("%d duplicates (bound %d)", dups, bound)
}

// TestRabbitMQDown: the broker cut off by a loopback proxy: nothing
// acknowledged; reconnected, everything delivered.
func TestRabbitMQDown(t *testing.T) {
	dest := newRabbitDest(t)
	p := tcpproxy.Start(t, dest.addr)
	sinkCfg := dest.sink()
	sinkCfg["url"] = "amqp://" + p.Addr() + "/"
	sinkCfg["publish_timeout_ms"] = 1000
	brokerDownRun(t, sinkCfg, p, func() map[uint64]int { return dest.copies(t) })
}

// TestRabbitMQPermissionRevoked: the sink's user loses write permission
// mid-run (403 ACCESS_REFUSED): Destination, no DLQ, unhealthy; restored,
// every message delivered.
func TestRabbitMQPermissionRevoked(t *testing.T) {
	ctl, err := exec.LookPath("rabbitmqctl")
	if err != nil {
		t.Skip("rabbitmqctl not found: this test manages a user on the local broker")
	}
	dest := newRabbitDest(t)
	run := func(args ...string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, ctl, args...).CombinedOutput(); err != nil {
			t.Fatalf("rabbitmqctl %v: %v\n%s", args, err, out)
		}
	}
	user, pw := dest.exchange+"-user", "pw-"+dest.exchange
	run("add_user", user, pw)
	t.Cleanup(func() { run("delete_user", user) })
	run("set_permissions", "-p", "/", user, "^$", ".*", "^$") // write only
	t.Setenv("BRK_AMQP_PASSWORD", pw)
	sinkCfg := dest.sink()
	sinkCfg["username"], sinkCfg["password_env"] = user, "BRK_AMQP_PASSWORD"
	destinationRun(t, sinkCfg,
		func() { run("set_permissions", "-p", "/", user, "^$", "^$", "^$") },
		func() { run("set_permissions", "-p", "/", user, "^$", ".*", "^$") },
		"403", "rabbitmq_confirm_seconds_count", func() map[uint64]int { return dest.copies(t) })
}

// TestRabbitMQStartErrors: a wrong password is exit 1; a missing exchange
// is a configuration error, exit 2, naming the key.
func TestRabbitMQStartErrors(t *testing.T) {
	dest := newRabbitDest(t)
	t.Setenv("BRK_AMQP_PASSWORD", "wrong-secret")
	sinkCfg := dest.sink()
	sinkCfg["username"], sinkCfg["password_env"] = "guest", "BRK_AMQP_PASSWORD"
	startFails(t, sinkCfg, 1, `(403) Reason: "username or password not allowed"`, "wrong-secret")

	missing := dest.sink()
	missing["exchange"] = dest.exchange + "-missing"
	startFails(t, missing, 2, fmt.Sprintf(`sink.exchange: exchange "%s-missing" does not exist in vhost "/"`, dest.exchange), "")
}

// ---- MQTT ----

type mqttDest struct {
	broker *mqtttest.Broker
	prefix string
	sub    *mqtttest.Subscriber
}

// newMQTTDest starts a Mosquitto of the test's own (the machine's drops
// messages beyond 1,000 queued per client) with a subscriber that keeps
// its QoS 2 session throughout.
func newMQTTDest(t *testing.T, o mqtttest.Options, subUser, subPassword string) *mqttDest {
	t.Helper()
	natstest.Service(t, "NATS_SINKS_TEST_MQTT_URL") // the suite's switch for MQTT
	d := &mqttDest{broker: mqtttest.StartMosquitto(t, o), prefix: uniqueName()}
	d.sub = mqtttest.Subscribe(t, d.broker.URL, d.prefix+"-sub", d.prefix+"/#", subUser, subPassword)
	return d
}

func (d *mqttDest) sink(qos int) map[string]any {
	return map[string]any{"type": "mqtt", "url": d.broker.URL, "topic": d.prefix + "/{subject}", "qos": qos,
		"publish_timeout_ms": 5000, "max_inflight": 100}
}

// copies waits until the subscriber saw at least n distinct sequences and
// no new message for a second, then counts copies per sequence, checking
// that each copy carries its idempotency-key property.
func (d *mqttDest) copies(t *testing.T, n int) map[uint64]int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	last := -1
	for {
		ms := d.sub.Messages()
		distinct := map[string]bool{}
		for _, m := range ms {
			distinct[m.Properties["nats-sinks-stream-sequence"]] = true
		}
		if (len(distinct) >= n && len(ms) == last) || time.Now().After(deadline) {
			out := map[uint64]int{}
			for _, m := range ms {
				seq, _ := strconv.ParseUint(m.Properties["nats-sinks-stream-sequence"], 10, 64)
				if key := m.Properties["nats-sinks-idempotency-key"]; key != fmt.Sprintf("stream-sequence:%s:%d", brkStream, seq) {
					t.Errorf("copy of sequence %d carries idempotency key %q", seq, key)
				}
				out[seq]++
			}
			return out
		}
		last = len(ms)
		time.Sleep(time.Second)
	}
}

// TestMQTTKill: 20,000 messages at QoS 1 and QoS 2 to a subscriber that
// keeps its session, two SIGKILLs: every message arrives; copies beyond one
// are at most the messages in flight at the kills (each new process starts
// a new session, so no retransmission of the old one's flows adds more).
func TestMQTTKill(t *testing.T) {
	for _, qos := range []int{1, 2} {
		t.Run(fmt.Sprintf("qos %d", qos), func(t *testing.T) {
			const n = 20000
			dest := newMQTTDest(t, mqtttest.Options{}, "", "")
			natsURL, js := brokerNATS(t)
			cfg := writeBrokerDoc(t, brokerDoc(natsURL, dest.sink(qos)))
			bound := killRun(t, natsURL, js, cfg, n)
			dups := checkCopies(t, dest.copies(t, n), n, bound)
			t.Logf("%d duplicates (bound %d)", dups, bound)
		})
	}
}

// TestMQTTDown: the broker cut off by a loopback proxy: nothing
// acknowledged; reconnected, everything delivered.
func TestMQTTDown(t *testing.T) {
	dest := newMQTTDest(t, mqtttest.Options{}, "", "")
	p := tcpproxy.Start(t, fmt.Sprintf("127.0.0.1:%d", dest.broker.Port))
	sinkCfg := dest.sink(1)
	sinkCfg["url"] = "mqtt://" + p.Addr()
	sinkCfg["publish_timeout_ms"] = 1000
	brokerDownRun(t, sinkCfg, p, func() map[uint64]int { return dest.copies(t, 300) })
}

// TestMQTTNotAuthorized: the broker's ACL denies the sink's topic (0x87):
// Destination, no DLQ, unhealthy; once the ACL allows it (reloaded with
// SIGHUP), every message is delivered.
func TestMQTTNotAuthorized(t *testing.T) {
	deny := "user writer\ntopic write other/#\n\nuser reader\ntopic read #\n"
	dest := newMQTTDest(t, mqtttest.Options{Users: map[string]string{"writer": "wpw", "reader": "rpw"}, ACL: deny}, "reader", "rpw")
	t.Setenv("BRK_MQTT_PASSWORD", "wpw")
	sinkCfg := dest.sink(1)
	sinkCfg["username"], sinkCfg["password_env"] = "writer", "BRK_MQTT_PASSWORD"
	allow := "user writer\ntopic write " + dest.prefix + "/#\n\nuser reader\ntopic read #\n"
	destinationRun(t, sinkCfg, func() {}, func() { dest.broker.SetACL(t, allow) },
		"0x87", "mqtt_publish_seconds_count", func() map[uint64]int { return dest.copies(t, 300) })
}

// TestMQTTWrongPassword: refused credentials fail the start, exit 1.
func TestMQTTWrongPassword(t *testing.T) {
	dest := newMQTTDest(t, mqtttest.Options{Users: map[string]string{"writer": "wpw", "reader": "rpw"}}, "reader", "rpw")
	t.Setenv("BRK_MQTT_PASSWORD", "wrong-secret")
	sinkCfg := dest.sink(1)
	sinkCfg["username"], sinkCfg["password_env"] = "writer", "BRK_MQTT_PASSWORD"
	startFails(t, sinkCfg, 1, "broker refused the connection", "wrong-secret")
}

// ---- shared scenarios ----

// brokerDownRun starts the binary with its broker behind p, blocks p
// (every connection cut, new ones refused), publishes 300 messages and
// checks for three seconds that none is acknowledged; then resumes p and
// checks that all are acknowledged and each is at the destination. It
// returns the process's log.
func brokerDownRun(t *testing.T, sinkCfg map[string]any, p *tcpproxy.Proxy, copies func() map[uint64]int) (stderr string) {
	t.Helper()
	const n = 300
	natsURL, js := brokerNATS(t)
	d := brokerDoc(natsURL, sinkCfg)
	d.Delivery = with(d.Delivery, "batch_size", 50)
	proc := start(t, writeBrokerDoc(t, d))
	waitFetching(t, js, brkStream, brkConsumer)
	p.Block()
	natstest.PublishN(t, js, brkSubject, n, body256)
	holdsNoAcks(t, js, brkStream, brkConsumer, 30, "the broker is cut off")
	p.Resume()
	waitAllAcked(t, js, brkStream, brkConsumer, n, 2*time.Minute)
	proc.stop(t)
	got := copies()
	for seq := uint64(1); seq <= n; seq++ {
		if got[seq] == 0 {
			t.Errorf("sequence %d missing after the broker came back", seq)
		}
	}
	return proc.stderr.String()
}

// destinationRun starts the binary with metrics on, breaks the destination
// (breakIt), publishes 300 messages and checks that nothing is
// acknowledged or dead-lettered, that /readyz reports the sink unhealthy,
// that sink_destination_errors_total counts and that the log names the
// error (wantLog); then repairs it (fixIt) and checks that every message
// is acknowledged and at the destination, and that the sink's own metric
// (sinkMetric, without the namespace) reached /metrics.
func destinationRun(t *testing.T, sinkCfg map[string]any, breakIt, fixIt func(), wantLog, sinkMetric string, copies func() map[uint64]int) {
	t.Helper()
	const n = 300
	natsURL, js := brokerNATS(t)
	d := brokerDoc(natsURL, sinkCfg)
	d.Delivery = with(d.Delivery, "batch_size", 50)
	d.Metrics = freeAddr(t)
	m := &member{process: start(t, writeBrokerDoc(t, d)), addr: d.Metrics}
	waitFetching(t, js, brkStream, brkConsumer)
	breakIt()
	natstest.PublishN(t, js, brkSubject, n, body256)
	poll(t, time.Minute, func() error {
		resp, err := http.Get("http://" + m.addr + "/readyz")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if !strings.Contains(string(body), `"sink":"unhealthy"`) {
			return fmt.Errorf("/readyz %s %s", resp.Status, body)
		}
		return nil
	})
	holdsNoAcks(t, js, brkStream, brkConsumer, 20, "the destination refuses the sink")
	v, err := m.scrape()
	if err != nil {
		t.Fatal(err)
	}
	if v["sink_destination_errors_total"] == 0 {
		t.Errorf("sink_destination_errors_total = 0 while the destination refuses the sink")
	}
	if !strings.Contains(m.stderr.String(), wantLog) {
		t.Errorf("log does not name the refusal (%q):\n%s", wantLog, m.stderr.String())
	}
	fixIt()
	waitAllAcked(t, js, brkStream, brkConsumer, n, 2*time.Minute)
	if v, err := m.scrape(); err != nil || v[sinkMetric] == 0 {
		t.Errorf("%s = %v (%v), want > 0 after the writes", sinkMetric, v[sinkMetric], err)
	}
	dlq, err := js.Stream(context.Background(), "BRKDLQ")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := dlq.Info(context.Background()); err != nil || info.State.Msgs != 0 {
		t.Errorf("DLQ holds %v messages (%v), want 0: a destination failure is never dead-lettered", info.State.Msgs, err)
	}
	m.stop(t)
	got := copies()
	for seq := uint64(1); seq <= n; seq++ {
		if got[seq] == 0 {
			t.Errorf("sequence %d missing after the destination was repaired", seq)
		}
	}
}

// startFails starts the binary with sinkCfg and expects it to exit with
// code, naming want on stderr and never secret.
func startFails(t *testing.T, sinkCfg map[string]any, code int, want, secret string) {
	t.Helper()
	natsURL, _ := brokerNATS(t)
	p := start(t, writeBrokerDoc(t, brokerDoc(natsURL, sinkCfg)))
	if got := p.wait(t, time.Minute); got != code {
		t.Fatalf("exit code %d, want %d\nstderr:\n%s", got, code, p.stderr.String())
	}
	out := p.stdout.String() + p.stderr.String()
	if !strings.Contains(out, want) {
		t.Errorf("output does not contain %q:\n%s", want, out)
	}
	if secret != "" && strings.Contains(out, secret) {
		t.Errorf("output contains the secret")
	}
}
