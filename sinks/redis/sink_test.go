package redissink

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/broker/brokertest"
	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/tcpproxy"
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sink/sinktest"
)

// headersOnlyPoison is a message without stream metadata, message id or
// payload: no key material exists, so the default key strategy rejects it.
func headersOnlyPoison(stream string, _ uint64) *sink.Envelope {
	return intake.Build(intake.Message{Subject: "sinktest." + stream,
		Header: map[string][]string{"Nats-Msg-Size": {"64"}}}, nil, time.Now())
}

func TestConformance(t *testing.T) {
	for _, tt := range []struct {
		name   string
		modify func(*Config)
	}{
		{"envelope, dedupe window", func(*Config) {}},
		{"raw, stream_sequence key, trimmed", func(c *Config) {
			c.RecordFormat = "raw"
			c.KeyStrategy = "stream_sequence"
			c.MaxLen = ptr(int64(1000))
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := redisServer(t)
			c := srv.config()
			tt.modify(&c)
			sinktest.Run(t, sinktest.Harness{
				Open:       func(t *testing.T) sink.Sink { return open(t, c, sink.Deps{}) },
				ReadBack:   func(t *testing.T) []sinktest.Stored { return srv.stored(t) },
				Idempotent: true,
				Poison:     headersOnlyPoison,
			})
		})
	}
}

// TestEntryShape: fields data, then the metadata set in order, then the
// forwarded headers as one JSON field; the stream key from the template.
func TestEntryShape(t *testing.T) {
	srv := redisServer(t)
	c := srv.config()
	c.StreamKey = srv.prefix + "{stream}:{token:2}"
	c.RecordFormat = "payload"
	s := open(t, c, sink.Deps{})
	e := env("orders.created.eu", "ORDERS", 42, map[string][]string{
		"X-Tenant": {"acme"}, "traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		"Nats-Sinks-Priority": {"high"}, "Nats-Sinks-Labels": {"a;b"},
	}, `{"b":2,"a":1}`)
	if got := outcomes(s.WriteBatch(t.Context(), []*sink.Envelope{e})); !slices.Equal(got, []sink.Outcome{sink.Committed}) {
		t.Fatalf("WriteBatch = %v", got)
	}
	key := srv.prefix + "ORDERS:created"
	msgs := srv.entries(t)[key]
	if len(msgs) != 1 {
		t.Fatalf("stream %s has %d entries, want 1 (streams: %v)", key, len(msgs), srv.entries(t))
	}
	// XRANGE returns a map; the order is checked on the raw reply.
	raw, err := srv.admin.Do(t.Context(), "XRANGE", key, "-", "+").Slice()
	if err != nil {
		t.Fatal(err)
	}
	fieldsOf := raw[0].([]any)[1].([]any)
	var names []string
	values := map[string]string{}
	for i := 0; i < len(fieldsOf); i += 2 {
		names = append(names, fieldsOf[i].(string))
		values[fieldsOf[i].(string)] = fieldsOf[i+1].(string)
	}
	wantNames := []string{"data", "nats-sinks-subject", "nats-sinks-stream", "nats-sinks-stream-sequence",
		"nats-sinks-idempotency-key", "Nats-Sinks-Priority", "Nats-Sinks-Labels", "traceparent", "headers"}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("field order (-want +got):\n%s", diff)
	}
	want := map[string]string{
		"data":                       `{"a":1,"b":2}`,
		"nats-sinks-subject":         "orders.created.eu",
		"nats-sinks-stream":          "ORDERS",
		"nats-sinks-stream-sequence": "42",
		"nats-sinks-idempotency-key": "stream-sequence:ORDERS:42",
		"Nats-Sinks-Priority":        "high",
		"Nats-Sinks-Labels":          "a;b",
		"traceparent":                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"headers":                    `{"X-Tenant":"acme"}`,
	}
	if diff := cmp.Diff(want, values); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
	if ttl := srv.admin.PTTL(t.Context(), c.DedupeKeyPrefix+key+":stream-sequence:ORDERS:42").Val(); ttl <= 0 || ttl > 120*time.Second {
		t.Errorf("dedupe key TTL = %v, want within the 120 s window", ttl)
	}
}

// TestDedupeWindow: a redelivery within the window is Duplicate with no
// second entry; after the window (or with window 0) it is a second entry
// with the same idempotency key.
func TestDedupeWindow(t *testing.T) {
	srv := redisServer(t)
	c := srv.config()
	c.DedupeWindowMS = 300
	m := brokertest.NewMetrics()
	s := open(t, c, sink.Deps{Metrics: m})
	b := batch("dedupe.a", "D", 1, 1)
	if got := outcomes(s.WriteBatch(t.Context(), b)); !slices.Equal(got, []sink.Outcome{sink.Committed}) {
		t.Fatalf("first write = %v", got)
	}
	if got := outcomes(s.WriteBatch(t.Context(), b)); !slices.Equal(got, []sink.Outcome{sink.Duplicate}) {
		t.Fatalf("redelivery within the window = %v, want duplicate", got)
	}
	if n := len(srv.stored(t)); n != 1 {
		t.Fatalf("%d entries after a redelivery within the window, want 1", n)
	}
	if m.Count("redis_duplicates_total") != 1 {
		t.Errorf("redis_duplicates_total = %d, want 1", m.Count("redis_duplicates_total"))
	}
	dedupe := c.DedupeKeyPrefix + srv.prefix + "dedupe.a:stream-sequence:D:1"
	deadline := time.Now().Add(10 * time.Second)
	for srv.admin.Exists(t.Context(), dedupe).Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("dedupe key did not expire")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := outcomes(s.WriteBatch(t.Context(), b)); !slices.Equal(got, []sink.Outcome{sink.Committed}) {
		t.Fatalf("redelivery after the window = %v, want committed", got)
	}
	if n := len(srv.stored(t)); n != 2 {
		t.Errorf("%d entries after a redelivery past the window, want 2", n)
	}

	c.DedupeWindowMS = 0
	c.StreamKey = srv.prefix + "zero:{subject}"
	s0 := open(t, c, sink.Deps{})
	for range 2 {
		if got := outcomes(s0.WriteBatch(t.Context(), b)); !slices.Equal(got, []sink.Outcome{sink.Committed}) {
			t.Fatalf("window 0 write = %v", got)
		}
	}
	if n := len(srv.entries(t)[srv.prefix+"zero:dedupe.a"]); n != 2 {
		t.Errorf("window 0: %d entries, want 2", n)
	}
	if n := srv.admin.Keys(t.Context(), c.DedupeKeyPrefix+srv.prefix+"zero:*").Val(); len(n) != 0 {
		t.Errorf("window 0 created dedupe keys %v", n)
	}
}

func TestMaxLen(t *testing.T) {
	srv := redisServer(t)
	c := srv.config()
	c.MaxLen = ptr(int64(5))
	c.MaxLenExact = true
	s := open(t, c, sink.Deps{})
	if got := outcomes(s.WriteBatch(t.Context(), batch("trim", "T", 1, 12))); !slices.Equal(got, repeat(sink.Committed, 12)) {
		t.Fatalf("WriteBatch = %v", got)
	}
	got := srv.stored(t)
	var seqs []uint64
	for _, st := range got {
		seqs = append(seqs, st.Sequence)
	}
	if !slices.Equal(seqs, []uint64{8, 9, 10, 11, 12}) {
		t.Errorf("exact MAXLEN 5 kept %v, want the last five", seqs)
	}
}

// TestWrongType: a stream key that holds another type fails every message
// as Destination; nothing is committed.
func TestWrongType(t *testing.T) {
	srv := redisServer(t)
	c := srv.config()
	srv.admin.Set(t.Context(), srv.prefix+"wrong", "a string", 0)
	s := open(t, c, sink.Deps{})
	lit := c
	lit.StreamKey = srv.prefix + "wrong"
	if err := open(t, lit, sink.Deps{}).Healthcheck(t.Context()); sink.Failed(err).Outcome != sink.Destination || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("Healthcheck with a literal stream key holding a string = %v, want destination WRONGTYPE", err)
	}
	if err := s.Healthcheck(t.Context()); err != nil {
		t.Errorf("Healthcheck with a templated stream key: %v (the key of a future message is not checked)", err)
	}
	rs := s.WriteBatch(t.Context(), batch("wrong", "W", 1, 3))
	for i, r := range rs {
		if r.Outcome != sink.Destination || !strings.Contains(r.Err.Error(), "WRONGTYPE") {
			t.Errorf("message %d = %v (%v), want destination WRONGTYPE", i, r.Outcome, r.Err)
		}
	}
	if n := srv.admin.Keys(t.Context(), c.DedupeKeyPrefix+"*").Val(); len(n) != 0 {
		t.Errorf("a failed add left dedupe keys %v", n)
	}
}

// aclUser creates a Redis ACL user with the given rules and deletes it when
// the test ends.
func aclUser(t *testing.T, srv *server, rules ...string) (user, password string) {
	t.Helper()
	user = strings.ReplaceAll(strings.TrimSuffix(srv.prefix, ":"), ":", "-") + "-" + strings.ReplaceAll(t.Name(), "/", "-")
	password = "pw-" + user
	args := append([]any{"ACL", "SETUSER", user, "reset", "on", ">" + password}, toAny(rules)...)
	if err := srv.admin.Do(t.Context(), args...).Err(); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	t.Cleanup(func() { srv.admin.Do(context.Background(), "ACL", "DELUSER", user) })
	return user, password
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// TestPermissions: an ACL user that may not run EVALSHA, or whose script
// may not run XADD, fails every message as Destination; nothing is added.
func TestPermissions(t *testing.T) {
	for _, tt := range []struct {
		name  string
		rules []string
	}{
		{"no evalsha", []string{"~*", "+@all", "-evalsha"}},
		{"no xadd", []string{"~*", "+@all", "-xadd"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := redisServer(t)
			user, pw := aclUser(t, srv, tt.rules...)
			c := srv.config()
			c.Username = &user
			c.PasswordEnv = ptr("REDIS_TEST_PW")
			s := open(t, c, sink.Deps{Env: func(string) (string, bool) { return pw, true }})
			for i, r := range s.WriteBatch(t.Context(), batch("perm", "P", 1, 2)) {
				if r.Outcome != sink.Destination {
					t.Errorf("message %d = %v (%v), want destination", i, r.Outcome, r.Err)
				}
			}
			if n := len(srv.stored(t)); n != 0 {
				t.Errorf("%d entries added without permission", n)
			}
			// The health check's probe sees it too (the key is known for
			// a stream_key without placeholders).
			lit := c
			lit.StreamKey = srv.prefix + "literal"
			hs := open(t, lit, sink.Deps{Env: func(string) (string, bool) { return pw, true }})
			if err := hs.Healthcheck(t.Context()); sink.Failed(err).Outcome != sink.Destination {
				t.Errorf("Healthcheck = %v, want a destination error", err)
			}
		})
	}
}

// TestLeastPrivilege: the ACL docs/brokers.md gives the sink's user is
// enough to start, write, de-duplicate and pass the health check.
func TestLeastPrivilege(t *testing.T) {
	srv := redisServer(t)
	c := srv.config()
	c.StreamKey = srv.prefix + "orders"
	user, pw := aclUser(t, srv, "~"+srv.prefix+"*", "resetchannels", "-@all",
		"+ping", "+info", "+evalsha", "+script|load", "+script|exists", "+xadd", "+get", "+set", "+type")
	c.Username = &user
	c.PasswordEnv = ptr("REDIS_TEST_PW")
	s := open(t, c, sink.Deps{Env: func(string) (string, bool) { return pw, true }})
	b := batch("lp", "LP", 1, 3)
	if got := outcomes(s.WriteBatch(t.Context(), b)); !slices.Equal(got, repeat(sink.Committed, 3)) {
		t.Fatalf("WriteBatch = %v (%v)", got, s.WriteBatch(t.Context(), b)[0].Err)
	}
	if got := outcomes(s.WriteBatch(t.Context(), b)); !slices.Equal(got, repeat(sink.Duplicate, 3)) {
		t.Errorf("redelivery = %v, want duplicates", got)
	}
	if err := s.Healthcheck(t.Context()); err != nil {
		t.Errorf("Healthcheck: %v", err)
	}
}

// TestCredentials: a wrong password fails the start (exit 1, not a
// configuration error), and a revoked permission mid-run is Destination.
func TestCredentials(t *testing.T) {
	srv := redisServer(t)
	user, pw := aclUser(t, srv, "~*", "+@all")
	c := srv.config()
	c.Username = &user
	wrong := "not-" + pw
	c.Password = (*secret.Value)(&wrong)
	_, err := New(t.Context(), c, sink.Deps{})
	if err == nil || errors.Is(err, sink.ErrConfig) || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("New with a wrong password = %v, want a WRONGPASS start error that is not a configuration error", err)
	}
	if _, ok := errors.AsType[*sink.ConfigError](err); ok {
		t.Fatalf("New with a wrong password = configuration error %v", err)
	}
	if strings.Contains(err.Error(), wrong) {
		t.Errorf("error %q carries the password", err)
	}
	if sink.Failed(err).Outcome != sink.Destination {
		t.Errorf("wrong password classified %v, want destination", sink.Failed(err).Outcome)
	}

	c.Password = (*secret.Value)(&pw)
	s := open(t, c, sink.Deps{})
	if got := outcomes(s.WriteBatch(t.Context(), batch("cred", "C", 1, 2))); !slices.Equal(got, repeat(sink.Committed, 2)) {
		t.Fatalf("WriteBatch = %v", got)
	}
	srv.admin.Do(t.Context(), "ACL", "SETUSER", user, "-evalsha")
	if got := outcomes(s.WriteBatch(t.Context(), batch("cred", "C", 3, 2))); !slices.Equal(got, repeat(sink.Destination, 2)) {
		t.Errorf("after revoking evalsha: %v, want destination", got)
	}
	if err := s.Healthcheck(t.Context()); sink.Failed(err).Outcome != sink.Destination {
		t.Errorf("Healthcheck after revoking evalsha = %v, want a destination error", err)
	}
	srv.admin.Do(t.Context(), "ACL", "SETUSER", user, "+evalsha")
	if err := s.Healthcheck(t.Context()); err != nil {
		t.Errorf("Healthcheck after restoring evalsha: %v", err)
	}
	if got := outcomes(s.WriteBatch(t.Context(), batch("cred", "C", 3, 2))); !slices.Equal(got, repeat(sink.Committed, 2)) {
		t.Errorf("after restoring evalsha: %v, want committed", got)
	}
	if n := len(srv.stored(t)); n != 4 {
		t.Errorf("%d entries, want 4", n)
	}
}

func TestStartErrors(t *testing.T) {
	srv := redisServer(t)
	c := srv.config()
	c.PasswordEnv = ptr("REDIS_TEST_UNSET")
	_, err := New(t.Context(), c, sink.Deps{Env: func(string) (string, bool) { return "", false }})
	if ce, ok := errors.AsType[*sink.ConfigError](err); !ok || ce.Problems[0].Path != "password_env" {
		t.Errorf("New with an unset password variable = %v, want a configuration error at password_env", err)
	}

	c = srv.config()
	c.DB = 1024
	_, err = New(t.Context(), c, sink.Deps{})
	if !errors.Is(err, sink.ErrConfig) {
		t.Errorf("New with db 1024 = %v, want a configuration error (SELECT refused)", err)
	}

	c = srv.config()
	p := tcpproxy.Start(t, srv.addr)
	p.Block()
	c.Address = p.Addr()
	c.DialTimeoutMS = 500
	_, err = New(t.Context(), c, sink.Deps{})
	if err == nil || errors.Is(err, sink.ErrConfig) {
		t.Errorf("New against an unreachable server = %v, want a start error that is not a configuration error", err)
	}
}

// TestWaitShortfall: wait_replicas 1 on a server without replicas makes
// every message Temporary after wait_timeout_ms; its redelivery meets the
// dedupe key, so no second entry is added.
func TestWaitShortfall(t *testing.T) {
	srv := redisServer(t)
	c := srv.config()
	c.WaitReplicas = 1
	c.WaitTimeoutMS = 200
	m := brokertest.NewMetrics()
	s := open(t, c, sink.Deps{Metrics: m})
	b := batch("wait", "WT", 1, 3)
	for range 2 {
		for i, r := range s.WriteBatch(t.Context(), b) {
			if r.Outcome != sink.Temporary || !strings.Contains(r.Err.Error(), "WAIT counted 0 of 1") {
				t.Errorf("message %d = %v (%v), want temporary WAIT shortfall", i, r.Outcome, r.Err)
			}
		}
	}
	if got := m.Count("redis_wait_shortfall_total"); got != 2 {
		t.Errorf("redis_wait_shortfall_total = %d, want 2", got)
	}
	if n := len(srv.stored(t)); n != 3 {
		t.Errorf("%d entries after two attempts, want 3 (the dedupe key absorbs the second)", n)
	}
}

func TestAOFWarning(t *testing.T) {
	srv := redisServer(t)
	if aof, _ := srv.admin.ConfigGet(t.Context(), "appendonly").Result(); aof["appendonly"] != "no" {
		t.Skipf("the test server has AOF enabled (%v)", aof)
	}
	var logs brokertest.Logs
	open(t, srv.config(), sink.Deps{Logger: logs.Logger()})
	if !strings.Contains(logs.String(), "redis server has AOF disabled; committed entries do not survive a server restart") {
		t.Errorf("no AOF warning; logs:\n%s", logs.String())
	}
}

// TestScriptReload: after SCRIPT FLUSH (a restarted server) the sink loads
// the script again and the write succeeds.
func TestScriptReload(t *testing.T) {
	srv := redisServer(t)
	s := open(t, srv.config(), sink.Deps{})
	if err := srv.admin.ScriptFlush(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	if got := outcomes(s.WriteBatch(t.Context(), batch("reload", "RL", 1, 3))); !slices.Equal(got, repeat(sink.Committed, 3)) {
		t.Fatalf("WriteBatch after SCRIPT FLUSH = %v", got)
	}
	srv.admin.ScriptFlush(t.Context())
	if err := s.Healthcheck(t.Context()); err != nil {
		t.Fatalf("Healthcheck: %v", err)
	}
	if ok := srv.admin.ScriptExists(t.Context(), s.sha).Val(); len(ok) != 1 || !ok[0] {
		t.Errorf("Healthcheck did not load the script")
	}
}

// TestConnectionCut: a connection cut while the pipeline is in flight makes
// the unanswered messages Temporary; once the connection is back the
// redelivery commits each message once.
func TestConnectionCut(t *testing.T) {
	srv := redisServer(t)
	p := tcpproxy.Start(t, srv.addr)
	c := srv.config()
	c.Address = p.Addr()
	c.PublishTimeoutMS = 500
	s := open(t, c, sink.Deps{})
	b := batch("cut", "CUT", 1, 20)

	p.Stall()
	done := make(chan []sink.Result)
	go func() { done <- s.WriteBatch(context.Background(), b) }()
	for p.Connections() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	p.Cut()
	rs := <-done
	for i, r := range rs {
		if r.Outcome != sink.Temporary {
			t.Errorf("message %d with the connection cut = %v (%v), want temporary", i, r.Outcome, r.Err)
		}
	}
	p.Resume()
	for i, r := range s.WriteBatch(t.Context(), b) {
		if !r.Outcome.Acked() {
			t.Errorf("message %d after the cut = %v (%v)", i, r.Outcome, r.Err)
		}
	}
	got := srv.stored(t)
	if len(got) != 20 {
		t.Errorf("%d entries after the cut and the redelivery, want 20", len(got))
	}

	// A server that stops answering: the deadline makes the batch
	// Temporary instead of hanging.
	p.Stall()
	start := time.Now()
	for i, r := range s.WriteBatch(t.Context(), batch("cut", "CUT", 21, 2)) {
		if r.Outcome != sink.Temporary {
			t.Errorf("message %d against a stalled server = %v (%v), want temporary", i, r.Outcome, r.Err)
		}
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("stalled write took %v", d)
	}
	p.Resume()
}

func TestOversizedAndUnroutable(t *testing.T) {
	srv := redisServer(t)
	c := srv.config()
	c.MaxRecordBytes = 1024
	c.RecordFormat = "raw"
	c.StreamKey = srv.prefix + "{token:3}"
	s := open(t, c, sink.Deps{})
	big := env("a.b.c", "O", 1, nil, `"`+strings.Repeat("x", 2000)+`"`)
	short := env("a.b", "O", 2, nil, `{}`)
	ok := env("a.b.c", "O", 3, nil, `{}`)
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{big, short, ok})
	if rs[0].Outcome != sink.Permanent || rs[0].ErrorType != sink.PermanentSinkError || !strings.Contains(rs[0].Err.Error(), "redis record exceeds max_record_bytes") {
		t.Errorf("oversized = %+v", rs[0])
	}
	if rs[1].Outcome != sink.Permanent || rs[1].ErrorType != sink.ValidationError || !strings.Contains(rs[1].Err.Error(), `subject "a.b" has no token 3`) {
		t.Errorf("missing token = %+v", rs[1])
	}
	if rs[2].Outcome != sink.Committed {
		t.Errorf("good message = %+v", rs[2])
	}
}

func TestTrace(t *testing.T) {
	srv := redisServer(t)
	tr := &brokertest.Tracer{}
	s := open(t, srv.config(), sink.Deps{Tracer: tr})
	e := env("traced", "TR", 1, map[string][]string{"traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, "tracestate": {"k=v"}}, `{}`)
	if got := outcomes(s.WriteBatch(t.Context(), []*sink.Envelope{e})); got[0] != sink.Committed {
		t.Fatalf("WriteBatch = %v", got)
	}
	spans := tr.Spans()
	if len(spans) != 1 || spans[0].Name != "send "+srv.prefix+"traced" || !spans[0].Producer || !spans[0].Ended || spans[0].FailedAs != "" {
		t.Fatalf("spans = %+v", spans)
	}
	if spans[0].Attrs["messaging.system"] != "redis" {
		t.Errorf("span attributes %v", spans[0].Attrs)
	}
	m := srv.entries(t)[srv.prefix+"traced"][0].Values
	if m["traceparent"] != spans[0].Traceparent || m["tracestate"] != "k=v" {
		t.Errorf("entry trace fields %v %v, want the span's %s", m["traceparent"], m["tracestate"], spans[0].Traceparent)
	}
}
