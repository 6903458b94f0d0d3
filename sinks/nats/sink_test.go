package natssink

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/natsconfig"
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/telemetry"
)

func TestRepublishRawAndEnvelope(t *testing.T) {
	_, nc, js := serverWithStream(t, "COPY", "copy.>")
	// Its own stream: the same Nats-Msg-Id in COPY would be a duplicate.
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "ENV", Subjects: []string{"env.>"}})
	golden := shapestest.Golden()

	raw := open(t, nc, prefixed("copy"))
	if got := raw.Stream(); got != "COPY" {
		t.Errorf("Stream() = %q, want COPY", got)
	}
	if rs := raw.WriteBatch(t.Context(), []*sink.Envelope{golden}); rs[0].Outcome != sink.Committed {
		t.Fatalf("raw republish = %v (%v), want committed", rs[0].Outcome, rs[0].Err)
	}
	c := literal("env.envelopes")
	c.BodyFormat = "envelope"
	c.ExpectedStream = ptr("ENV")
	envSink := open(t, nc, c)
	if rs := envSink.WriteBatch(t.Context(), []*sink.Envelope{golden}); rs[0].Outcome != sink.Committed {
		t.Fatalf("envelope republish = %v (%v), want committed", rs[0].Outcome, rs[0].Err)
	}

	msgs := append(stored(t, js, "COPY"), stored(t, js, "ENV")...)
	if len(msgs) != 2 {
		t.Fatalf("target streams hold %d messages, want 1 each", len(msgs))
	}
	if got, want := msgs[0].Subject, "copy.orders.created"; got != want {
		t.Errorf("raw subject = %q, want %q", got, want)
	}
	if got, want := string(msgs[0].Data), string(shapestest.GoldenMessage().Data); got != want {
		t.Errorf("raw body = %q, want %q", got, want)
	}
	wantHeaders := nats.Header{
		"Nats-Msg-Id":                  {"stream-sequence:ORDERS:42"},
		"Nats-Sinks-Original-Subject":  {"orders.created"},
		"Nats-Sinks-Original-Stream":   {"ORDERS"},
		"Nats-Sinks-Original-Sequence": {"42"},
		"traceparent":                  {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	}
	if diff := cmp.Diff(wantHeaders, msgs[0].Header); diff != "" {
		t.Errorf("stored raw headers (-want +got):\n%s", diff)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "envelope_golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	if msgs[1].Subject != "env.envelopes" || string(msgs[1].Data) != string(want) {
		t.Errorf("stored envelope = %s %s, want env.envelopes and the golden body", msgs[1].Subject, msgs[1].Data)
	}
	// The stream stores Nats-Expected-Stream like any other header.
	if got := msgs[1].Header.Get(HeaderExpectedStream); got != "ENV" {
		t.Errorf("stored Nats-Expected-Stream = %q, want ENV", got)
	}
}

func TestRedeliveryIsDuplicate(t *testing.T) {
	_, nc, js := serverWithStream(t, "COPY", "copy.>")
	m, err := telemetry.NewMetrics(prometheus.NewRegistry(), "nats_sinks")
	if err != nil {
		t.Fatal(err)
	}
	c := prefixed("copy")
	s, err := New(t.Context(), c, sink.Deps{Source: sink.Source{Conn: source(nc)}, Metrics: m.ForSinks()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	b := batch("orders.new", "ORDERS", 1, 5)
	if diff := cmp.Diff(repeat(sink.Committed, 5), outcomes(s.WriteBatch(t.Context(), b))); diff != "" {
		t.Fatalf("first delivery (-want +got):\n%s", diff)
	}
	// A redelivery of three of them, mixed with two new messages.
	again := append(b[1:4:4], batch("orders.new", "ORDERS", 6, 2)...)
	want := []sink.Outcome{sink.Duplicate, sink.Duplicate, sink.Duplicate, sink.Committed, sink.Committed}
	if diff := cmp.Diff(want, outcomes(s.WriteBatch(t.Context(), again))); diff != "" {
		t.Errorf("redelivery (-want +got):\n%s", diff)
	}
	// A restarted process has no state of its own: the stream dedupes.
	s2 := open(t, nc, prefixed("copy"))
	if diff := cmp.Diff(repeat(sink.Duplicate, 5), outcomes(s2.WriteBatch(t.Context(), b))); diff != "" {
		t.Errorf("redelivery after restart (-want +got):\n%s", diff)
	}
	if n := len(stored(t, js, "COPY")); n != 7 {
		t.Errorf("target stream holds %d messages, want 7", n)
	}
	if got := s.dups.(*telemetry.Counter).Value(); got != 3 {
		t.Errorf("nats_republish_duplicates_total = %d, want 3", got)
	}
	if got := s.seconds.(*telemetry.Histogram).Summary().Count; got != 10 {
		t.Errorf("nats_republish_seconds count = %v, want 10 (one per PubAck)", got)
	}
}

func TestDestinationErrors(t *testing.T) {
	t.Run("expected_stream mismatch", func(t *testing.T) {
		_, nc, js := serverWithStream(t, "COPY", "copy.>")
		c := literal("copy.x")
		c.ExpectedStream = ptr("COPY")
		s := open(t, nc, c)
		// The stream is replaced after start: another stream now stores
		// the subject.
		if err := js.DeleteStream(t.Context(), "COPY"); err != nil {
			t.Fatal(err)
		}
		// Creating a stream right after deleting one can fail on a busy
		// machine with "error creating store for stream" (seen once in CI
		// under -race): retry that server-side hiccup, nothing else.
		natstest.WaitFor(t, 10*time.Second, func() error {
			_, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"copy.>"}})
			if err != nil && !strings.Contains(err.Error(), "error creating store") {
				t.Fatalf("create stream OTHER: %v", err)
			}
			return err
		})
		rs := s.WriteBatch(t.Context(), batch("a.b", "S", 1, 2))
		for i, r := range rs {
			if r.Outcome != sink.Destination || !strings.Contains(r.Err.Error(), "expected stream does not match") {
				t.Errorf("message %d = %v (%v), want destination: expected stream does not match", i, r.Outcome, r.Err)
			}
		}
		if n := len(stored(t, js, "OTHER")); n != 0 {
			t.Errorf("OTHER stores %d messages, want 0", n)
		}
		if err := s.Healthcheck(t.Context()); !errors.Is(err, sink.ErrConfig) {
			t.Errorf("Healthcheck = %v, want a configuration error (OTHER is not expected_stream)", err)
		}
	})

	t.Run("no stream answers", func(t *testing.T) {
		_, nc, js := serverWithStream(t, "COPY", "copy.>")
		c := literal("copy.x")
		s := open(t, nc, c)
		if err := js.DeleteStream(t.Context(), "COPY"); err != nil {
			t.Fatal(err)
		}
		rs := s.WriteBatch(t.Context(), batch("a.b", "S", 1, 2))
		for i, r := range rs {
			if r.Outcome != sink.Destination || !errors.Is(r.Err, jetstream.ErrNoStreamResponse) {
				t.Errorf("message %d = %v (%v), want destination (no responders)", i, r.Outcome, r.Err)
			}
		}
		if err := s.Healthcheck(t.Context()); !errors.Is(err, sink.ErrConfig) {
			t.Errorf("Healthcheck = %v, want a configuration error (no stream)", err)
		}
	})

	t.Run("permission violation", func(t *testing.T) {
		s := startServer(t, &server.Options{
			Users: []*server.User{{Username: "u", Password: "p", Permissions: &server.Permissions{
				Publish: &server.SubjectPermission{Deny: []string{"denied.>"}},
			}}},
		})
		admin, js := natstest.Connect(t, s, nats.UserInfo("u", "p"))
		natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "DENIED", Subjects: []string{"denied.>"}})
		c := literal("denied.x")
		c.Connection = &natsconfig.Connection{}
		c.Connection.SetDefaults()
		c.Connection.URL = admin.ConnectedUrl()
		c.Connection.User, c.Connection.Password = ptr("u"), ptr(secret.Value("p"))
		c.PublishTimeoutMS = 300
		sk := open(t, nil, c)
		rs := sk.WriteBatch(t.Context(), batch("a.b", "S", 1, 2))
		for i, r := range rs {
			if r.Outcome != sink.Destination || !errors.Is(r.Err, nats.ErrPermissionViolation) {
				t.Errorf("message %d = %v (%v), want destination (permissions violation)", i, r.Outcome, r.Err)
			}
		}
	})
}

func TestMessageTooLarge(t *testing.T) {
	_, nc, js := serverWithStream(t, "COPY", "copy.>")
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "SMALL", Subjects: []string{"small.>"}, MaxMsgSize: 1000})
	over := strings.Repeat("x", int(nc.MaxPayload())+1)
	for _, tt := range []struct {
		name    string
		subject string
		big     string
	}{
		{"over the server's max_payload", "copy.x", over},
		{"over the stream's max_msg_size", "small.x", strings.Repeat("y", 2000)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t, nc, literal(tt.subject))
			b := batch("a.b", "S", 1, 3)
			b[1] = env("a.b", "S", 2, nil, tt.big)
			rs := s.WriteBatch(t.Context(), b)
			want := []sink.Outcome{sink.Committed, sink.Permanent, sink.Committed}
			if diff := cmp.Diff(want, outcomes(rs)); diff != "" {
				t.Fatalf("outcomes (-want +got):\n%s\nerror: %v", diff, rs[1].Err)
			}
			if rs[1].ErrorType != sink.PermanentSinkError || rs[1].Shared {
				t.Errorf("too large = %+v, want unshared PermanentSinkError", rs[1])
			}
			if strings.Contains(rs[1].Err.Error(), "xxxx") || strings.Contains(rs[1].Err.Error(), "yyyy") {
				t.Errorf("error text carries payload bytes: %.200s", rs[1].Err)
			}
		})
	}
}

// TestTargetServerStopped stops the target server (reached through
// "connection", a second server) after the tenth publish of a batch: the
// messages not acknowledged are Temporary, none is lost or misclassified,
// and every Committed one is in the stream after the server returns.
func TestTargetServerStopped(t *testing.T) {
	for _, reconnect := range []bool{true, false} {
		t.Run(fmt.Sprintf("allow_reconnect=%v", reconnect), func(t *testing.T) {
			_, source, _ := serverWithStream(t, "SOURCE", "orders.>")
			target, tnc, _ := serverWithStream(t, "COPY", "copy.>")
			c := literal("copy.x")
			c.Connection = &natsconfig.Connection{}
			c.Connection.SetDefaults()
			c.Connection.URL = tnc.ConnectedUrl()
			c.Connection.AllowReconnect = reconnect
			c.Connection.ReconnectTimeWaitSeconds = 0
			c.PublishTimeoutMS = 500
			s := open(t, source, c)
			port, dir := natstest.Port(target), target.StoreDir()
			s.afterPublish = func(i int) {
				if i == 9 {
					target.Shutdown()
					target.WaitForShutdown()
				}
			}
			const n = 200
			rs := s.WriteBatch(t.Context(), batch("orders.new", "SOURCE", 1, n))
			var committed []uint64
			temporary := 0
			for i, r := range rs {
				switch r.Outcome {
				case sink.Committed:
					committed = append(committed, uint64(i+1))
				case sink.Temporary:
					temporary++
				default:
					t.Errorf("message %d = %v (%v), want committed or temporary", i, r.Outcome, r.Err)
				}
				if i >= 10 && r.Outcome != sink.Temporary {
					t.Errorf("message %d published after the stop = %v, want temporary", i, r.Outcome)
				}
			}
			if temporary < n-10 {
				t.Errorf("%d temporary results, want at least %d", temporary, n-10)
			}
			// The old listener may linger for a moment: retry the bind.
			var restarted *server.Server
			natstest.WaitFor(t, 10*time.Second, func() (err error) {
				restarted, err = natstest.StartOn(dir, port)
				return err
			})
			t.Cleanup(restarted.Shutdown)
			t.Logf("%d committed before the stop, %d temporary", len(committed), temporary)
			_, js := natstest.Connect(t, restarted)
			have := map[string]bool{}
			for _, m := range stored(t, js, "COPY") {
				have[m.Header.Get(HeaderOriginalSequence)] = true
			}
			for _, seq := range committed {
				if !have[fmt.Sprint(seq)] {
					t.Errorf("message with source seq %d was reported committed but is not in the target stream", seq)
				}
			}
		})
	}
}

func TestCancelledContext(t *testing.T) {
	_, nc, js := serverWithStream(t, "COPY", "copy.>")
	s := open(t, nc, literal("copy.x"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for i, r := range s.WriteBatch(ctx, batch("a.b", "S", 1, 3)) {
		if r.Outcome != sink.Temporary || !errors.Is(r.Err, context.Canceled) {
			t.Errorf("message %d = %v (%v), want temporary (cancelled)", i, r.Outcome, r.Err)
		}
	}
	if n := len(stored(t, js, "COPY")); n != 0 {
		t.Errorf("target stream holds %d messages after a cancelled write, want 0", n)
	}
}

func TestPipelineBound(t *testing.T) {
	_, nc, js := serverWithStream(t, "COPY", "copy.>")
	c := prefixed("copy")
	c.MaxConcurrentPublishes = 3
	s := open(t, nc, c)
	peak := 0
	s.afterPublish = func(int) { peak = max(peak, len(s.slots)) }
	rs := s.WriteBatch(t.Context(), batch("orders.new", "ORDERS", 1, 50))
	if diff := cmp.Diff(repeat(sink.Committed, 50), outcomes(rs)); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
	if peak > 3 || peak < 1 {
		t.Errorf("peak outstanding publishes = %d, want 1..3", peak)
	}
	// Pipelining keeps batch order on the wire.
	for i, m := range stored(t, js, "COPY") {
		if got, want := m.Header.Get(HeaderOriginalSequence), fmt.Sprint(i+1); got != want {
			t.Fatalf("stored message %d has source seq %s, want %s", i, got, want)
		}
	}
}

func TestStopLeavesSourceOpen(t *testing.T) {
	_, nc, _ := serverWithStream(t, "COPY", "copy.>")
	s, err := New(t.Context(), literal("copy.x"), deps(nc))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(t.Context()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := s.Stop(t.Context()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if nc.IsClosed() {
		t.Error("Stop closed the source connection it does not own")
	}
}

func TestOwnConnectionClosedByStop(t *testing.T) {
	_, source, _ := serverWithStream(t, "SOURCE", "orders.>")
	_, tnc, _ := serverWithStream(t, "COPY", "copy.>")
	c := literal("copy.x")
	c.Connection = &natsconfig.Connection{}
	c.Connection.SetDefaults()
	c.Connection.URL = tnc.ConnectedUrl()
	c.Connection.Name = ptr("republisher")
	s, err := New(t.Context(), c, deps(source))
	if err != nil {
		t.Fatal(err)
	}
	if s.nc == source {
		t.Fatal("sink reused the source connection although connection is set")
	}
	if rs := s.WriteBatch(t.Context(), batch("orders.new", "SOURCE", 1, 1)); rs[0].Outcome != sink.Committed {
		t.Fatalf("write = %v (%v)", rs[0].Outcome, rs[0].Err)
	}
	if err := s.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !s.nc.IsClosed() || source.IsClosed() {
		t.Errorf("after Stop: own connection closed = %v, source closed = %v; want true, false", s.nc.IsClosed(), source.IsClosed())
	}
}

// startServer starts a JetStream server with extra options (authorization).
func startServer(t *testing.T, o *server.Options) *server.Server {
	t.Helper()
	o.Host, o.Port, o.JetStream, o.StoreDir, o.NoLog, o.NoSigs = "127.0.0.1", -1, true, t.TempDir(), true, true
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	t.Cleanup(s.Shutdown)
	return s
}
