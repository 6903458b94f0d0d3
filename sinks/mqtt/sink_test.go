package mqtt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/broker"
	"github.com/nats-sinks/nats-sink/internal/broker/brokertest"
	"github.com/nats-sinks/nats-sink/internal/broker/mqtttest"
	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/internal/tcpproxy"
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sink/sinktest"
)

var fixedNow = time.Date(2026, 5, 29, 10, 0, 0, 300000000, time.UTC)

// uniq returns a topic level no other test or run uses.
func uniq() string {
	var b [6]byte
	rand.Read(b[:])
	return "nstest-" + hex.EncodeToString(b[:])
}

// machineBroker returns the machine's Mosquitto (NATS_SINKS_TEST_MQTT_URL).
func machineBroker(t *testing.T) string {
	return natstest.Service(t, "NATS_SINKS_TEST_MQTT_URL")
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

func config(url, prefix string) Config {
	c := Default()
	c.URL = url
	c.Topic = prefix + "/{subject}"
	return c
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

// storedOf returns the origin of every message a subscriber received.
func storedOf(ms []mqtttest.Message) []sinktest.Stored {
	var out []sinktest.Stored
	for _, m := range ms {
		seq, _ := strconv.ParseUint(m.Properties["nats-sinks-stream-sequence"], 10, 64)
		out = append(out, sinktest.Stored{Stream: m.Properties["nats-sinks-stream"], Sequence: seq})
	}
	return out
}

func headersOnlyPoison(stream string, _ uint64) *sink.Envelope {
	return intake.Build(intake.Message{Subject: "sinktest." + stream,
		Header: map[string][]string{"Nats-Msg-Size": {"64"}}}, nil, time.Now())
}

// TestConformance runs the contract suite on the machine's Mosquitto with
// a QoS 2 subscriber. MQTT has no de-duplication: the redelivery check is
// skipped (a redelivery is a second copy, TestRedeliveryCopies).
func TestConformance(t *testing.T) {
	for _, qos := range []int{1, 2} {
		t.Run(fmt.Sprintf("qos %d", qos), func(t *testing.T) {
			url := machineBroker(t)
			prefix := uniq()
			sub := mqtttest.Subscribe(t, url, prefix+"-sub", prefix+"/#", "", "")
			c := config(url, prefix)
			c.QoS = qos
			sinktest.Run(t, sinktest.Harness{
				Open: func(t *testing.T) sink.Sink { return open(t, c, sink.Deps{}) },
				// A QoS 2 subscription delivers a broker-acknowledged
				// message soon, not at once: poll a little.
				ReadBack: func(t *testing.T) []sinktest.Stored {
					return storedOf(settle(sub))
				},
				Poison: headersOnlyPoison,
			})
		})
	}
}

// settle returns the subscriber's messages once no new one arrived for
// 200 ms (at most 5 s).
func settle(sub *mqtttest.Subscriber) []mqtttest.Message {
	deadline := time.Now().Add(5 * time.Second)
	last := -1
	for {
		ms := sub.Messages()
		if len(ms) == last || time.Now().After(deadline) {
			return ms
		}
		last = len(ms)
		time.Sleep(200 * time.Millisecond)
	}
}

// TestMessageShape: topic from the escaped subject, payload, format
// indicator and content type for JSON, user properties = forwarded headers
// then the metadata set, in order.
func TestMessageShape(t *testing.T) {
	url := machineBroker(t)
	prefix := uniq()
	sub := mqtttest.Subscribe(t, url, prefix+"-sub", prefix+"/#", "", "")
	c := config(url, prefix)
	c.RecordFormat = "payload"
	c.QoS = 2
	s := open(t, c, sink.Deps{})
	e := env("site.eu/west.temp+max", "SENSORS", 7, map[string][]string{
		"X-B": {"2"}, "X-A": {"1"}, "Nats-Sinks-Labels": {"x;y"}, "traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	}, `{"t":21.5}`)
	if got := outcomes(s.WriteBatch(t.Context(), []*sink.Envelope{e})); !slices.Equal(got, []sink.Outcome{sink.Committed}) {
		t.Fatalf("WriteBatch = %v", got)
	}
	ms := sub.WaitFor(1, 5*time.Second)
	if len(ms) != 1 {
		t.Fatalf("subscriber got %d messages", len(ms))
	}
	m := ms[0]
	if m.Topic != prefix+"/site/eu%2Fwest/temp%2Bmax" || string(m.Payload) != `{"t":21.5}` || m.Format == nil || *m.Format != 1 || m.Content != "application/json" {
		t.Errorf("topic %q payload %s format %v content %q", m.Topic, m.Payload, m.Format, m.Content)
	}
	wantOrder := []string{"X-A", "X-B", "nats-sinks-subject", "nats-sinks-stream", "nats-sinks-stream-sequence",
		"nats-sinks-idempotency-key", "Nats-Sinks-Labels", "traceparent"}
	if diff := cmp.Diff(wantOrder, m.UserOrder); diff != "" {
		t.Errorf("user property order (-want +got):\n%s", diff)
	}
	if m.Properties["nats-sinks-idempotency-key"] != "stream-sequence:SENSORS:7" || m.Properties["nats-sinks-subject"] != "site.eu/west.temp+max" {
		t.Errorf("properties %v", m.Properties)
	}
	back, err := broker.UnescapeTopic(strings.TrimPrefix(m.Topic, prefix+"/"))
	if err != nil || back != e.Subject {
		t.Errorf("topic %q reverses to %q, %v", m.Topic, back, err)
	}
}

// TestHostileSubjects: subjects with "/", "+", "#", "%" and a leading "$"
// reach a subscriber on the escaped topic and reverse to the subject.
func TestHostileSubjects(t *testing.T) {
	url := machineBroker(t)
	prefix := uniq()
	sub := mqtttest.Subscribe(t, url, prefix+"-sub", "#", "", "")
	c := config(url, prefix)
	c.Topic = "{subject}"
	s := open(t, c, sink.Deps{})
	subjects := []string{prefix + ".a/b", prefix + ".c+d", prefix + ".e#f", prefix + ".100%", "$" + prefix + ".x"}
	var b []*sink.Envelope
	for i, subj := range subjects {
		b = append(b, env(subj, "H", uint64(i+1), nil, "x"))
	}
	if got := outcomes(s.WriteBatch(t.Context(), b)); !slices.Equal(got, repeat(sink.Committed, len(b))) {
		t.Fatalf("WriteBatch = %v", got)
	}
	got := map[string]bool{}
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < len(subjects) && time.Now().Before(deadline) {
		for _, m := range sub.Messages() {
			if subj, err := broker.UnescapeTopic(m.Topic); err == nil && strings.Contains(subj, prefix) {
				got[subj] = true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, subj := range subjects {
		if !got[subj] {
			t.Errorf("subject %q did not arrive (got %v)", subj, got)
		}
	}
}

// TestNoSubscribers: reason 0x10 is Destination with require_subscribers,
// Committed without. Mosquitto reports 0x10 only in a QoS 1 PUBACK (its QoS
// 2 PUBREC says 0x00 either way); TestPubrecNoSubscribers covers QoS 2.
func TestNoSubscribers(t *testing.T) {
	// A broker of its own: on a shared one, another client's "#"
	// subscription would match.
	url := mqtttest.StartMosquitto(t, mqtttest.Options{}).URL
	for _, require := range []bool{true, false} {
		t.Run(fmt.Sprintf("require %v", require), func(t *testing.T) {
			c := config(url, uniq())
			c.RequireSubscribers = require
			m := brokertest.NewMetrics()
			s := open(t, c, sink.Deps{Metrics: m})
			want := sink.Destination
			if !require {
				want = sink.Committed
			}
			rs := s.WriteBatch(t.Context(), batch("nosub.a", "NS", 1, 2))
			if got := outcomes(rs); !slices.Equal(got, repeat(want, 2)) {
				t.Errorf("WriteBatch = %v (%v), want %v", got, rs[0].Err, want)
			}
			if require && !strings.Contains(rs[0].Err.Error(), "no subscription matches topic") {
				t.Errorf("error %v", rs[0].Err)
			}
			if m.Count("mqtt_no_subscribers_total") != 2 {
				t.Errorf("mqtt_no_subscribers_total = %d, want 2", m.Count("mqtt_no_subscribers_total"))
			}
		})
	}
}

// TestPubrecNoSubscribers: a QoS 2 PUBREC with reason 0x10 marks its
// publish, although the flow then ends in a PUBCOMP 0x00; a lost session
// ends every flight.
func TestPubrecNoSubscribers(t *testing.T) {
	s := newSession()
	connect := &packets.Connect{ProtocolVersion: 5}
	if err := s.ConAckReceived(io.Discard, connect, &packets.Connack{}); err != nil {
		t.Fatal(err)
	}
	f := &flight{cancel: func() {}}
	pb := &packets.Publish{QoS: 2, Topic: "a"}
	if err := s.AddToSession(withFlight(t.Context(), f), pb, make(chan packets.ControlPacket, 1)); err != nil {
		t.Fatal(err)
	}
	rec := packets.NewControlPacket(packets.PUBREC)
	rec.Content.(*packets.Pubrec).PacketID = pb.PacketID
	rec.Content.(*packets.Pubrec).ReasonCode = packets.PubrecNoMatchingSubscribers
	if err := s.PacketReceived(rec, nil); err != nil {
		t.Fatal(err)
	}
	if !f.noSubscribers.Load() {
		t.Error("PUBREC 0x10 did not mark the flight")
	}

	lost := &flight{}
	cancelled := false
	lost.cancel = func() { cancelled = true }
	pb2 := &packets.Publish{QoS: 1, Topic: "b"}
	if err := s.AddToSession(withFlight(t.Context(), lost), pb2, make(chan packets.ControlPacket, 1)); err != nil {
		t.Fatal(err)
	}
	s.ConnectionLost(nil)
	if err := s.ConAckReceived(io.Discard, connect, &packets.Connack{SessionPresent: false}); err != nil {
		t.Fatal(err)
	}
	if !lost.sessionLost.Load() || !cancelled {
		t.Error("a CONNACK without the session did not end the flight")
	}
}

func TestRedeliveryCopies(t *testing.T) {
	url := machineBroker(t)
	prefix := uniq()
	sub := mqtttest.Subscribe(t, url, prefix+"-sub", prefix+"/#", "", "")
	s := open(t, config(url, prefix), sink.Deps{})
	b := batch("copies", "CP", 1, 3)
	for range 2 {
		if got := outcomes(s.WriteBatch(t.Context(), b)); !slices.Equal(got, repeat(sink.Committed, 3)) {
			t.Fatalf("WriteBatch = %v", got)
		}
	}
	keys := map[string]int{}
	for _, m := range sub.WaitFor(6, 5*time.Second) {
		keys[m.Properties["nats-sinks-idempotency-key"]]++
	}
	for seq := 1; seq <= 3; seq++ {
		if k := fmt.Sprintf("stream-sequence:CP:%d", seq); keys[k] != 2 {
			t.Errorf("%s arrived %d times, want 2 (%v)", k, keys[k], keys)
		}
	}
}

// TestACLDenied: a topic the broker's ACL denies is answered 0x87:
// Destination, nothing delivered.
func TestACLDenied(t *testing.T) {
	b := mqtttest.StartMosquitto(t, mqtttest.Options{
		Users: map[string]string{"writer": "wpw", "reader": "rpw"},
		ACL:   "user writer\ntopic write allowed/#\n\nuser reader\ntopic read #\n",
	})
	sub := mqtttest.Subscribe(t, b.URL, "reader-1", "#", "reader", "rpw")
	c := config(b.URL, "denied")
	c.Username = ptr("writer")
	c.Password = ptr(secret.Value("wpw"))
	s := open(t, c, sink.Deps{})
	for i, r := range s.WriteBatch(t.Context(), batch("x", "ACL", 1, 2)) {
		if r.Outcome != sink.Destination || !strings.Contains(r.Err.Error(), "0x87") {
			t.Errorf("message %d on a denied topic = %v (%v), want destination 0x87", i, r.Outcome, r.Err)
		}
	}
	c.Topic = "allowed/{subject}"
	s2 := open(t, c, sink.Deps{})
	if got := outcomes(s2.WriteBatch(t.Context(), batch("x", "ACL", 3, 2))); !slices.Equal(got, repeat(sink.Committed, 2)) {
		t.Errorf("allowed topic: %v", got)
	}
	for _, m := range sub.WaitFor(2, 5*time.Second) {
		if strings.HasPrefix(m.Topic, "denied/") {
			t.Errorf("denied message delivered on %s", m.Topic)
		}
	}
}

// TestCredentials: wrong credentials fail the start (Destination class,
// not a configuration error); an unset password variable is one.
func TestCredentials(t *testing.T) {
	b := mqtttest.StartMosquitto(t, mqtttest.Options{Users: map[string]string{"writer": "wpw"}})
	c := config(b.URL, "cred")
	c.Username = ptr("writer")
	c.PasswordEnv = ptr("MQTT_TEST_PW")
	_, err := New(t.Context(), c, sink.Deps{Env: func(string) (string, bool) { return "", false }})
	if ce, ok := errors.AsType[*sink.ConfigError](err); !ok || ce.Problems[0].Path != "password_env" {
		t.Errorf("New with an unset password variable = %v", err)
	}
	_, err = New(t.Context(), c, sink.Deps{Env: func(string) (string, bool) { return "wrong", true }})
	if err == nil || sink.Failed(err).Outcome != sink.Destination || errors.Is(err, sink.ErrConfig) {
		t.Errorf("New with a wrong password = %v, want a destination-class start error", err)
	} else if !strings.Contains(err.Error(), "(CONNACK reason 0x86)") && !strings.Contains(err.Error(), "(CONNACK reason 0x87)") {
		// Mosquitto answers a wrong password with 0x87 (not authorized).
		t.Errorf("error %q does not name CONNACK reason 0x86 or 0x87", err)
	}
	s := open(t, c, sink.Deps{Env: func(string) (string, bool) { return "wpw", true }})
	if err := s.Healthcheck(t.Context()); err != nil {
		t.Errorf("Healthcheck: %v", err)
	}
}

// TestConnectionCut: publishes cut by a loopback proxy before their
// acknowledgement are completed after the reconnect, on the resumed
// session: every message Committed and delivered, some as DUP
// retransmissions.
func TestConnectionCut(t *testing.T) {
	for _, qos := range []int{1, 2} {
		t.Run(fmt.Sprintf("qos %d", qos), func(t *testing.T) {
			b := mqtttest.StartMosquitto(t, mqtttest.Options{})
			prefix := uniq()
			sub := mqtttest.Subscribe(t, b.URL, prefix+"-sub", prefix+"/#", "", "")
			p := tcpproxy.Start(t, fmt.Sprintf("127.0.0.1:%d", b.Port))
			c := config("mqtt://"+p.Addr(), prefix)
			c.QoS = qos
			c.PublishTimeoutMS = 10000
			m := brokertest.NewMetrics()
			s := open(t, c, sink.Deps{Metrics: m})
			p.Stall()
			done := make(chan []sink.Result)
			go func() { done <- s.WriteBatch(context.Background(), batch("cut", "CUT", 1, 20)) }()
			time.Sleep(200 * time.Millisecond) // let the publishes reach the stalled proxy
			p.Cut()
			p.Resume()
			rs := <-done
			if got := outcomes(rs); !slices.Equal(got, repeat(sink.Committed, 20)) {
				t.Fatalf("WriteBatch across the cut = %v (first error %v)", got, firstErr(rs))
			}
			if m.Count("mqtt_reconnects_total") < 1 {
				t.Errorf("mqtt_reconnects_total = %d, want at least 1", m.Count("mqtt_reconnects_total"))
			}
			got := map[uint64]int{}
			for _, st := range storedOf(sub.WaitFor(20, 10*time.Second)) {
				got[st.Sequence]++
			}
			for seq := uint64(1); seq <= 20; seq++ {
				if got[seq] == 0 {
					t.Errorf("sequence %d not delivered", seq)
				}
				if qos == 2 && got[seq] > 1 {
					t.Errorf("QoS 2: sequence %d delivered %d times", seq, got[seq])
				}
			}
		})
	}
}

func firstErr(rs []sink.Result) error {
	for _, r := range rs {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// TestBrokerDown: with the broker unreachable nothing is Committed and each
// write returns within publish_timeout_ms; when it is back, the messages are
// delivered.
func TestBrokerDown(t *testing.T) {
	b := mqtttest.StartMosquitto(t, mqtttest.Options{})
	prefix := uniq()
	sub := mqtttest.Subscribe(t, b.URL, prefix+"-sub", prefix+"/#", "", "")
	p := tcpproxy.Start(t, fmt.Sprintf("127.0.0.1:%d", b.Port))
	c := config("mqtt://"+p.Addr(), prefix)
	c.PublishTimeoutMS = 500
	s := open(t, c, sink.Deps{})
	p.Block()
	for i, r := range s.WriteBatch(t.Context(), batch("down", "DN", 1, 3)) {
		if r.Outcome != sink.Temporary {
			t.Errorf("message %d with the broker down = %v (%v), want temporary", i, r.Outcome, r.Err)
		}
	}
	if err := s.Healthcheck(t.Context()); err == nil {
		t.Error("Healthcheck passes with the broker unreachable")
	}
	p.Resume()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rs := s.WriteBatch(t.Context(), batch("down", "DN", 1, 3))
		if slices.Equal(outcomes(rs), repeat(sink.Committed, 3)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the broker came back: %v", outcomes(rs))
		}
	}
	if n := len(sub.WaitFor(3, 5*time.Second)); n < 3 {
		t.Errorf("subscriber got %d messages, want 3", n)
	}
}

// TestSessionLost: a broker that lost the session (restarted without
// persistence) makes the interrupted publishes Temporary at once.
func TestSessionLost(t *testing.T) {
	b := mqtttest.StartMosquitto(t, mqtttest.Options{})
	p := tcpproxy.Start(t, fmt.Sprintf("127.0.0.1:%d", b.Port))
	c := config("mqtt://"+p.Addr(), uniq())
	c.RequireSubscribers = false
	c.PublishTimeoutMS = 20000
	s := open(t, c, sink.Deps{})
	p.Stall()
	done := make(chan []sink.Result)
	start := time.Now()
	go func() { done <- s.WriteBatch(context.Background(), batch("lost", "SL", 1, 5)) }()
	time.Sleep(200 * time.Millisecond)
	b.Restart(t)
	p.Cut()
	p.Resume()
	rs := <-done
	for i, r := range rs {
		if r.Outcome != sink.Temporary || !strings.Contains(r.Err.Error(), "did not keep the session") {
			t.Errorf("message %d = %v (%v), want temporary session lost", i, r.Outcome, r.Err)
		}
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("took %v: the session loss was not reported before publish_timeout_ms", d)
	}
}

func TestPermanentFailures(t *testing.T) {
	url := machineBroker(t)
	c := config(url, uniq())
	c.Topic = c.Topic[:strings.Index(c.Topic, "/")] + "/{token:3}"
	c.MaxRecordBytes = 1024
	c.RequireSubscribers = false
	s := open(t, c, sink.Deps{})
	big := env("a.b.c", "PF", 1, nil, strings.Repeat("x", 2000))
	short := env("a.b", "PF", 2, nil, "x")
	nul := env("a.b.c", "PF", 3, map[string][]string{"X-Bad": {"a\x00b"}}, "x")
	ok := env("a.b.c", "PF", 4, nil, "x")
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{big, short, nul, ok})
	if rs[0].Outcome != sink.Permanent || !strings.Contains(rs[0].Err.Error(), "mqtt record exceeds max_record_bytes") {
		t.Errorf("oversized = %+v", rs[0])
	}
	if rs[1].Outcome != sink.Permanent || rs[1].ErrorType != sink.ValidationError {
		t.Errorf("missing token = %+v", rs[1])
	}
	if rs[2].Outcome != sink.Permanent || !strings.Contains(rs[2].Err.Error(), "U+0000") {
		t.Errorf("NUL header = %+v", rs[2])
	}
	if rs[3].Outcome != sink.Committed {
		t.Errorf("good message = %+v", rs[3])
	}
}

func TestTrace(t *testing.T) {
	url := machineBroker(t)
	prefix := uniq()
	sub := mqtttest.Subscribe(t, url, prefix+"-sub", prefix+"/#", "", "")
	tr := &brokertest.Tracer{}
	s := open(t, config(url, prefix), sink.Deps{Tracer: tr})
	e := env("traced", "TR", 1, map[string][]string{"traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}, `{}`)
	if got := outcomes(s.WriteBatch(t.Context(), []*sink.Envelope{e})); got[0] != sink.Committed {
		t.Fatalf("WriteBatch = %v", got)
	}
	spans := tr.Spans()
	if len(spans) != 1 || spans[0].Name != "send "+prefix+"/traced" || !spans[0].Ended || spans[0].Attrs["messaging.system"] != "mqtt" {
		t.Fatalf("spans = %+v", spans)
	}
	ms := sub.WaitFor(1, 5*time.Second)
	if len(ms) != 1 || ms[0].Properties["traceparent"] != spans[0].Traceparent {
		t.Errorf("messages %+v, want traceparent %s", ms, spans[0].Traceparent)
	}
}

// TestTLS: mqtts with the broker verified against ca_file and a client
// certificate presented when the broker requires one; an untrusted broker
// is a destination-class start failure.
func TestTLS(t *testing.T) {
	certs := brokertest.NewCerts(t)
	b := mqtttest.StartMosquitto(t, mqtttest.Options{CAFile: certs.CA, CertFile: certs.ServerCert, KeyFile: certs.ServerKey, RequireCertificate: true})
	c := config(b.URL, uniq())
	c.RequireSubscribers = false
	c.TLS.CAFile, c.TLS.CertFile, c.TLS.KeyFile = &certs.CA, &certs.ClientCert, &certs.ClientKey
	s := open(t, c, sink.Deps{})
	if got := outcomes(s.WriteBatch(t.Context(), batch("tls", "TLS", 1, 3))); !slices.Equal(got, repeat(sink.Committed, 3)) {
		t.Errorf("WriteBatch over TLS = %v", got)
	}
	c.TLS.CAFile = nil // system roots: the test CA is not among them
	_, err := New(t.Context(), c, sink.Deps{})
	if err == nil || sink.Failed(err).Outcome != sink.Destination || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("New against an untrusted broker = %v, want a destination-class certificate error", err)
	}
}

// TestCredentialsRevoked: the broker stops accepting the sink's password
// while it runs; after the next connection loss every reconnect is refused,
// and the publishes that wait for one fail as Destination (the CONNACK's
// reason), not as a plain outage. Restored, they commit.
func TestCredentialsRevoked(t *testing.T) {
	b := mqtttest.StartMosquitto(t, mqtttest.Options{Users: map[string]string{"writer": "wpw"}})
	p := tcpproxy.Start(t, fmt.Sprintf("127.0.0.1:%d", b.Port))
	c := config("mqtt://"+p.Addr(), uniq())
	c.RequireSubscribers = false
	c.PublishTimeoutMS = 1000
	c.Username, c.Password = ptr("writer"), ptr(secret.Value("wpw"))
	s := open(t, c, sink.Deps{})
	if got := outcomes(s.WriteBatch(t.Context(), batch("rev", "RV", 1, 2))); !slices.Equal(got, repeat(sink.Committed, 2)) {
		t.Fatalf("WriteBatch = %v", got)
	}
	b.SetPasswords(t, map[string]string{"writer": "changed"})
	p.Cut() // the connection drops; reconnects now meet the new password
	deadline := time.Now().Add(10 * time.Second)
	for {
		rs := s.WriteBatch(t.Context(), batch("rev", "RV", 3, 2))
		if rs[0].Outcome == sink.Destination {
			if !strings.Contains(rs[0].Err.Error(), "CONNACK reason 0x8") {
				t.Errorf("destination error %v does not name the CONNACK refusal", rs[0].Err)
			}
			break
		}
		if rs[0].Outcome.Acked() || time.Now().After(deadline) {
			t.Fatalf("after the password changed: %v (%v), want destination", outcomes(rs), rs[0].Err)
		}
	}
	if err := s.Healthcheck(t.Context()); sink.Failed(err).Outcome != sink.Destination {
		t.Errorf("Healthcheck = %v, want a destination error", err)
	}
	b.SetPasswords(t, map[string]string{"writer": "wpw"})
	deadline = time.Now().Add(15 * time.Second)
	for {
		rs := s.WriteBatch(t.Context(), batch("rev", "RV", 3, 2))
		if slices.Equal(outcomes(rs), repeat(sink.Committed, 2)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the password was restored: %v (%v)", outcomes(rs), rs[0].Err)
		}
	}
}
