package natssink_test

// Cross-account and leaf-node proofs (issue 6, "Real components"): the sink
// is configured from JSON exactly as the CLI configures it, against real
// embedded servers whose accounts, users, permissions, JetStream domains and
// leaf-node links come from nats-server configuration text.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/pipeline"
	"github.com/nats-sinks/nats-sink/sink"
	natssink "github.com/nats-sinks/nats-sink/sinks/nats"
)

// TestCrossAccount republishes from a stream in account SRC to a stream in
// account DST of the same server. Both accounts have a stream on audit.>:
// only DST's may receive anything, which shows the sink publishes over its
// own connection (the DST user) and not over the source connection.
func TestCrossAccount(t *testing.T) {
	const n = 20
	srv := startConf(t, fmt.Sprintf(`
listen: "127.0.0.1:-1"
jetstream { store_dir: %q }
accounts {
  SRC: { jetstream: enabled, users: [ { user: src, password: srcpw } ], imports: [
    # DST's JetStream API under a prefix, and its shared.> subjects.
    { service: { account: DST, subject: "$JS.API.>" }, to: "JS.dst.API.>" }
    { service: { account: DST, subject: "shared.>" } }
  ] }
  DST: { jetstream: enabled, exports: [ { service: "$JS.API.>" }, { service: "shared.>" } ], users: [
    { user: dst, password: dstpw }
    # Everything the sink needs except publishing to its target subjects.
    { user: nopub, password: nopubpw, permissions: {
        publish: { allow: ["$JS.API.>"] }, subscribe: { allow: ["_INBOX.>"] } } }
  ] }
}`, t.TempDir()))
	url := srv.ClientURL()
	_, srcJS := natstest.Connect(t, srv, nats.UserInfo("src", "srcpw"))
	_, dstJS := natstest.Connect(t, srv, nats.UserInfo("dst", "dstpw"))
	natstest.CreateStream(t, srcJS, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	natstest.CreateStream(t, srcJS, jetstream.StreamConfig{Name: "DECOY", Subjects: []string{"audit.>"}})
	natstest.CreateStream(t, dstJS, jetstream.StreamConfig{Name: "AUDIT", Subjects: []string{"audit.>"}})
	natstest.CreateStream(t, dstJS, jetstream.StreamConfig{Name: "SHARED", Subjects: []string{"shared.>"}})
	natstest.PublishN(t, srcJS, "orders.created", n, func(i int) []byte { return fmt.Appendf(nil, `{"order":%d}`, i) })
	t.Setenv("SRC_PASS", "srcpw")
	t.Setenv("DST_PASS", "dstpw")
	t.Setenv("NOPUB_PASS", "nopubpw")

	sinkJSON := func(user, passEnv string) string {
		return fmt.Sprintf(`{"type": "nats", "subject_prefix": "audit", "expected_stream": "AUDIT",
  "publish_timeout_ms": 500,
  "connection": {"url": %q, "user": %q, "password_env": %q, "name": "audit-republisher"}}`, url, user, passEnv)
	}

	// A commit whose ACK was lost: the first five messages are already in
	// AUDIT (written through the same configuration) but were never
	// acknowledged on the pipeline's consumer, so it delivers them again.
	pre := openJSON(t, sinkJSON("dst", "DST_PASS"), nil)
	first := fetch(t, srcJS, "ORDERS", "precrash", 5)
	if diff := cmp.Diff(repeat(sink.Committed, 5), outcomes(pre.WriteBatch(t.Context(), first))); diff != "" {
		t.Fatalf("write before the crash (-want +got):\n%s", diff)
	}

	t.Run("pipeline delivers exactly once", func(t *testing.T) {
		cfg, err := config.Parse(fmt.Appendf(nil, `{
  "nats": {"url": %q, "user": "src", "password_env": "SRC_PASS",
           "stream": "ORDERS", "consumer": "audit-copy", "subject": "orders.>"},
  "metrics": {"enabled": true},
  "sink": %s}`, url, sinkJSON("dst", "DST_PASS")), "accounts.json", registry(), nil)
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		p, err := pipeline.Start(t.Context(), cfg, pipeline.Options{Registerer: reg})
		if err != nil {
			t.Fatalf("pipeline.Start: %v", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		natstest.WaitFor(t, 10*time.Second, func() error {
			if got := p.Metrics().MessagesAcked.Value(); got < n {
				return fmt.Errorf("%d of %d messages acknowledged", got, n)
			}
			return nil
		})
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
		p.Close(5 * time.Second)

		if got := counter(t, reg, "nats_sinks_nats_republish_duplicates_total"); got != 5 {
			t.Errorf("nats_republish_duplicates_total = %v, want 5 (the redelivered, already stored messages)", got)
		}
		// messages_acked_total counts ACKs sent; plain ACKs are
		// fire-and-forget, so the server may still be applying them.
		natstest.WaitAckState(t, srcJS, "ORDERS", "audit-copy", n, 0, 10*time.Second)
		checkExactlyOnce(t, dstJS, "AUDIT", "ORDERS", n)
		if got := len(storedMsgs(t, dstJS, "AUDIT")); got != n {
			t.Errorf("AUDIT holds %d messages, want %d", got, n)
		}
		if got := len(storedMsgs(t, srcJS, "DECOY")); got != 0 {
			t.Errorf("SRC account's audit stream holds %d messages, want 0", got)
		}
	})

	t.Run("no publish permission is a destination failure", func(t *testing.T) {
		s := openJSON(t, sinkJSON("nopub", "NOPUB_PASS"), nil)
		b := fetch(t, srcJS, "ORDERS", "denied", 3)
		for i, r := range s.WriteBatch(t.Context(), b) {
			// Destination: retried (NAK) and the sink reported unhealthy,
			// never dead-lettered as Permanent would be.
			if r.Outcome != sink.Destination || !errors.Is(r.Err, nats.ErrPermissionViolation) {
				t.Errorf("message %d = %v (%v), want destination (permissions violation)", i, r.Outcome, r.Err)
			}
		}
		if got := len(storedMsgs(t, dstJS, "AUDIT")); got != n {
			t.Errorf("AUDIT holds %d messages after refused publishes, want %d", got, n)
		}
	})

	t.Run("api_prefix through service imports", func(t *testing.T) {
		// The SRC user publishes into DST's stream through DST's exports;
		// the stream lookup takes DST's API imported under JS.dst.API.
		raw := func(prefix string) string {
			return fmt.Sprintf(`{"type": "nats", "subject_prefix": "shared", "expected_stream": "SHARED",
  "connection": {"url": %q, "user": "src", "password_env": "SRC_PASS"%s}}`, url, prefix)
		}
		if _, err := openJSONErr(t, raw(""), nil); !errors.Is(err, sink.ErrConfig) {
			t.Fatalf("Open without api_prefix = %v, want a configuration error (SRC has no stream on shared.>)", err)
		}
		s := openJSON(t, raw(`, "api_prefix": "JS.dst.API"`), nil)
		b := fetch(t, srcJS, "ORDERS", "imported", 5)
		if diff := cmp.Diff(repeat(sink.Committed, 5), outcomes(s.WriteBatch(t.Context(), b))); diff != "" {
			t.Errorf("first delivery (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(repeat(sink.Duplicate, 5), outcomes(s.WriteBatch(t.Context(), b))); diff != "" {
			t.Errorf("redelivery (-want +got):\n%s", diff)
		}
		checkExactlyOnce(t, dstJS, "SHARED", "ORDERS", 5)
		if err := s.(sink.HealthChecker).Healthcheck(t.Context()); err != nil {
			t.Errorf("Healthcheck = %v", err)
		}
	})

	t.Run("source connection reaches the source account's stream", func(t *testing.T) {
		// connection null reuses the source connection, i.e. account SRC:
		// the target is then stored by DECOY, which expected_stream refuses.
		src, _ := natstest.Connect(t, srv, nats.UserInfo("src", "srcpw"))
		_, err := openJSONErr(t, `{"type": "nats", "subject_prefix": "audit", "expected_stream": "AUDIT"}`,
			func(d *sink.Deps) { d.Source.Conn = func() (any, error) { return src, nil } })
		if !errors.Is(err, sink.ErrConfig) || !strings.Contains(err.Error(), "stored by stream DECOY") {
			t.Errorf("Open with the source connection = %v, want a configuration error naming DECOY", err)
		}
	})
}

// TestLeafNode republishes over a leaf node to a stream that lives on the
// hub: the sink connects to the leaf, whose own JetStream (domain "leaf")
// has no such stream, and reaches the hub's through "domain": "hub". The
// hub is then stopped: every publish during the outage fails retryably and
// none is reported committed; once the hub is back, a redelivery of the
// whole batch stores each message exactly once.
func TestLeafNode(t *testing.T) {
	hubPort, leafPort := freePort(t), freePort(t)
	hubConf := fmt.Sprintf(`
server_name: hub
listen: "127.0.0.1:%d"
jetstream { store_dir: %q, domain: hub }
accounts {
  HUB: { jetstream: enabled, users: [ { user: admin, password: adminpw }, { user: leaf, password: leafpw } ] }
}
leafnodes { listen: "127.0.0.1:%d" }`, hubPort, t.TempDir(), leafPort)
	hub := startConf(t, hubConf)
	leaf := startConf(t, fmt.Sprintf(`
server_name: leaf
listen: "127.0.0.1:-1"
jetstream { store_dir: %q, domain: leaf }
accounts { EDGE: { jetstream: enabled, users: [ { user: edge, password: edgepw } ] } }
leafnodes {
  reconnect: "100ms"
  remotes: [ { url: "nats-leaf://leaf:leafpw@127.0.0.1:%d", account: EDGE } ]
}`, t.TempDir(), leafPort))
	waitLeaf(t, hub, leaf, true)
	_, hubJS := natstest.Connect(t, hub, nats.UserInfo("admin", "adminpw"))
	natstest.CreateStream(t, hubJS, jetstream.StreamConfig{Name: "CENTRAL", Subjects: []string{"central.>"}})
	t.Setenv("EDGE_PASS", "edgepw")
	sinkJSON := func(domain string) string {
		return fmt.Sprintf(`{"type": "nats", "subject_prefix": "central", "expected_stream": "CENTRAL",
  "publish_timeout_ms": 500, "max_concurrent_publishes": 8,
  "connection": {"url": %q, "user": "edge", "password_env": "EDGE_PASS", "reconnect_time_wait_seconds": 0%s}}`,
			leaf.ClientURL(), domain)
	}

	// Without the domain the stream API is the leaf's own JetStream, which
	// stores nothing on central.>: a configuration error at start.
	if _, err := openJSONErr(t, sinkJSON(""), nil); !errors.Is(err, sink.ErrConfig) {
		t.Fatalf("Open without domain = %v, want a configuration error (no stream on the leaf)", err)
	}
	var s sink.Sink
	// Interest in the hub's domain API crosses the leaf link shortly after
	// the link is up.
	natstest.WaitFor(t, 5*time.Second, func() (err error) {
		s, err = openJSONErr(t, sinkJSON(`, "domain": "hub"`), nil)
		return err
	})
	hc := s.(sink.HealthChecker)

	// connection null: the sink reuses the source connection (to the leaf)
	// and its JetStream context, here the nats section's domain "hub".
	edge, _ := natstest.Connect(t, leaf, nats.UserInfo("edge", "edgepw"))
	reuse := openJSON(t, `{"type": "nats", "subject": "central.reused", "expected_stream": "CENTRAL"}`,
		func(d *sink.Deps) { d.Source.Conn, d.Source.Domain = func() (any, error) { return edge, nil }, "hub" })
	// Its own stream sequences: Nats-Msg-Id must not collide with b's.
	if rs := reuse.WriteBatch(t.Context(), envelopes("edge.other", "OTHER", 1, 1)); rs[0].Outcome != sink.Committed {
		t.Errorf("write over the reused source connection = %v (%v), want committed", rs[0].Outcome, rs[0].Err)
	}
	reuse.Stop(t.Context())

	const n = 30
	b := envelopes("edge.readings", "READINGS", 1, n)
	if diff := cmp.Diff(repeat(sink.Committed, 10), outcomes(s.WriteBatch(t.Context(), b[:10]))); diff != "" {
		t.Fatalf("before the outage (-want +got):\n%s", diff)
	}

	// Leaf-link outage: the hub stops, the leaf and the sink's connection
	// to it stay up.
	hub.Shutdown()
	hub.WaitForShutdown()
	waitLeaf(t, nil, leaf, false)
	start := time.Now()
	during := s.WriteBatch(t.Context(), b)
	t.Logf("write of %d during the outage returned after %v", n, time.Since(start))
	for i, r := range during {
		// No responder for central.> on the leaf: Destination (no stream
		// answers, docs/nats-sink.md); a PubAck lost with the link: Temporary.
		// Both are retried and never dead-lettered.
		if r.Outcome != sink.Destination && r.Outcome != sink.Temporary {
			t.Errorf("message %d during the outage = %v (%v), want destination or temporary", i, r.Outcome, r.Err)
		} else if i == 0 {
			t.Logf("during the outage: %v: %v", r.Outcome, r.Err)
		}
	}
	if err := hc.Healthcheck(t.Context()); err == nil {
		t.Error("Healthcheck during the outage = nil, want an error")
	}

	// The hub returns on the same ports and store; the leaf reconnects.
	var restarted *server.Server
	natstest.WaitFor(t, 10*time.Second, func() (err error) {
		restarted, err = tryStartConf(hubConf)
		return err
	})
	t.Cleanup(restarted.Shutdown)
	waitLeaf(t, restarted, leaf, true)
	natstest.WaitFor(t, 10*time.Second, func() error { return hc.Healthcheck(t.Context()) })

	// The runner redelivers the whole batch: the ten stored before the
	// outage are duplicates, the rest are committed now.
	want := append(repeat(sink.Duplicate, 10), repeat(sink.Committed, n-10)...)
	if diff := cmp.Diff(want, outcomes(s.WriteBatch(t.Context(), b))); diff != "" {
		t.Errorf("after the outage (-want +got):\n%s", diff)
	}
	_, js := natstest.Connect(t, restarted, nats.UserInfo("admin", "adminpw"))
	checkExactlyOnce(t, js, "CENTRAL", "READINGS", n)
	if got := len(storedMsgs(t, js, "CENTRAL")); got != n+1 {
		t.Errorf("CENTRAL holds %d messages, want %d (%d readings and the one over the reused connection)", got, n+1, n)
	}
}

func ptr[T any](v T) *T { return &v }

// startConf starts a server from nats-server configuration text and shuts
// it down when the test ends.
func startConf(t *testing.T, conf string) *server.Server {
	t.Helper()
	s, err := tryStartConf(conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

func tryStartConf(conf string) (*server.Server, error) {
	o := &server.Options{}
	if err := o.ProcessConfigString(conf); err != nil {
		return nil, fmt.Errorf("server configuration: %w", err)
	}
	o.NoLog, o.NoSigs = true, true
	s, err := server.NewServer(o)
	if err != nil {
		return nil, err
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, errors.New("server not ready")
	}
	return s, nil
}

// freePort returns a TCP port that was free a moment ago; the hub needs
// fixed ports to come back where the leaf reconnects.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitLeaf waits until the leaf link is up (or down) on both sides; hub may
// be nil when it is stopped.
func waitLeaf(t *testing.T, hub, leaf *server.Server, up bool) {
	t.Helper()
	natstest.WaitFor(t, 10*time.Second, func() error {
		for _, s := range []*server.Server{hub, leaf} {
			if s != nil && (s.NumLeafNodes() == 1) != up {
				return fmt.Errorf("%s has %d leaf connections, want up=%v", s.Name(), s.NumLeafNodes(), up)
			}
		}
		return nil
	})
}

// registry holds only the nats sink: what builtin.Registry registers for
// "nats", without linking every other driver into this test.
func registry() *sink.Registry {
	r := sink.NewRegistry()
	r.Register("nats", natssink.Decode)
	return r
}

// openJSON decodes and opens a sink object as the CLI does, and stops the
// sink when the test ends. edit, when not nil, sets what the pipeline hands
// the sink from other sections (the source connection, its domain).
func openJSON(t *testing.T, raw string, edit func(*sink.Deps)) sink.Sink {
	t.Helper()
	s, err := openJSONErr(t, raw, edit)
	if err != nil {
		t.Fatalf("open %s: %v", raw, err)
	}
	return s
}

func openJSONErr(t *testing.T, raw string, edit func(*sink.Deps)) (sink.Sink, error) {
	t.Helper()
	op, err := natssink.Decode(json.RawMessage(raw))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	var deps sink.Deps
	if edit != nil {
		edit(&deps)
	}
	s, err := op.Open(t.Context(), deps)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	return s, nil
}

// fetch pulls n messages from stream with a new durable consumer and
// returns them as the runner's envelopes, without acknowledging them.
func fetch(t *testing.T, js jetstream.JetStream, stream, durable string, n int) []*sink.Envelope {
	t.Helper()
	c, err := js.CreateOrUpdateConsumer(t.Context(), stream, jetstream.ConsumerConfig{Durable: durable, AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := c.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var out []*sink.Envelope
	for m := range msgs.Messages() {
		out = append(out, intake.Build(intake.Message{Subject: m.Subject(), Reply: m.Reply(), Data: m.Data(), Header: m.Headers()}, nil, time.Now()))
	}
	if err := msgs.Error(); err != nil || len(out) != n {
		t.Fatalf("fetched %d of %d messages: %v", len(out), n, err)
	}
	return out
}

// envelopes returns n envelopes as delivered from stream, sequences from..
func envelopes(subject, stream string, from, n uint64) []*sink.Envelope {
	var out []*sink.Envelope
	for seq := from; seq < from+n; seq++ {
		reply := fmt.Sprintf("$JS.ACK.%s.c.1.%d.%d.1780048800123456000.0", stream, seq, seq)
		out = append(out, intake.Build(intake.Message{Subject: subject, Reply: reply, Data: fmt.Appendf(nil, `{"seq":%d}`, seq)}, nil, time.Now()))
	}
	return out
}

// checkExactlyOnce checks that stream holds exactly one copy of source
// sequences 1..n of origin, identified by the headers the sink adds.
// Messages from other origins are ignored.
func checkExactlyOnce(t *testing.T, js jetstream.JetStream, stream, origin string, n int) {
	t.Helper()
	var got []string
	for _, m := range storedMsgs(t, js, stream) {
		if o := m.Header.Get(natssink.HeaderOriginalStream); o == origin {
			got = append(got, o+":"+m.Header.Get(natssink.HeaderOriginalSequence))
		}
	}
	var want []string
	for seq := 1; seq <= n; seq++ {
		want = append(want, fmt.Sprintf("%s:%d", origin, seq))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s contents by original stream:sequence (-want +got):\n%s", stream, diff)
	}
}

// storedMsgs returns every message of stream, in sequence order.
func storedMsgs(t *testing.T, js jetstream.JetStream, stream string) []*jetstream.RawStreamMsg {
	t.Helper()
	st, err := js.Stream(t.Context(), stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatalf("stream %s info: %v", stream, err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatalf("stream %s seq %d: %v", stream, seq, err)
		}
		out = append(out, m)
	}
	return out
}

// counter returns the value of the counter name in reg (0 when absent).
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			var sum float64
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			return sum
		}
	}
	return 0
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
