package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/internal/pgtest"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sink/sinktest"
	"github.com/nats-sinks/nats-sink/sqlconfig"
	"github.com/nats-sinks/nats-sink/telemetry"
)

const dsnEnv = "NATS_SINKS_TEST_POSTGRES_DSN"

var (
	received = time.Date(2026, 5, 29, 10, 0, 0, 250000000, time.UTC)
	stored   = time.Date(2026, 5, 29, 10, 0, 0, 300000000, time.UTC)
)

// env builds an envelope the way the runner does, from a JetStream reply
// subject carrying stream and seq.
func env(subject, stream string, seq uint64, id, body string) *sink.Envelope {
	h := map[string][]string{}
	if id != "" {
		h["Nats-Msg-Id"] = []string{id}
	}
	reply := fmt.Sprintf("$JS.ACK.%s.c.1.%d.%d.1780048800123456000.0", stream, seq, seq)
	return intake.Build(intake.Message{Subject: subject, Reply: reply, Data: []byte(body), Header: h}, nil, received)
}

// baseConfig returns a Config for the server at dsn, writing to a table
// unique to this test that is dropped when the test ends.
func baseConfig(t testing.TB, dsn string) Config {
	t.Helper()
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("parse %s: %v", dsnEnv, err)
	}
	c := Default()
	c.Host, c.Port, c.Database, c.User = cc.Host, int(cc.Port), cc.Database, cc.User
	pw := secret.Value(cc.Password)
	if pw == "" {
		pw = "unused" // the test server trusts local connections
	}
	c.Password = &pw
	c.SSLMode = "disable"
	if cc.TLSConfig != nil {
		c.SSLMode = "prefer"
	}
	c.AutoCreate = true
	c.Table = uniqueTable(t)
	dropAfter(t, dsn, c.Table)
	return c
}

var nonIdent = regexp.MustCompile(`[^a-z0-9_]+`)

func uniqueTable(t testing.TB) string {
	b := make([]byte, 4)
	rand.Read(b)
	name := nonIdent.ReplaceAllString(strings.ToLower(t.Name()), "_")
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	return "t_" + strings.Trim(name, "_") + "_" + hex.EncodeToString(b)
}

// dropAfter drops table when the test ends.
func dropAfter(t testing.TB, dsn, table string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Logf("drop %s: %v", table, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "drop table if exists "+table); err != nil {
			t.Logf("drop %s: %v", table, err)
		}
	})
}

// db connects to dsn for assertions.
func db(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func open(t testing.TB, c Config) *Sink {
	t.Helper()
	return openWith(t, c, sink.Deps{})
}

// openWith is open with deps.
func openWith(t testing.TB, c Config, deps sink.Deps) *Sink {
	t.Helper()
	s, err := New(t.Context(), c, deps)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	s.w.Now = func() time.Time { return stored }
	t.Cleanup(func() { s.Stop(context.Background()) })
	return s
}

func outcomes(rs []sink.Result) []sink.Outcome {
	out := make([]sink.Outcome, len(rs))
	for i, r := range rs {
		out[i] = r.Outcome
	}
	return out
}

func countRows(t testing.TB, conn *pgx.Conn, table string) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(t.Context(), "select count(*) from "+table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

func TestConformance(t *testing.T) {
	dsn := natstest.Service(t, dsnEnv)
	for _, tt := range []struct {
		name       string
		mode       string
		staging    bool
		idempotent bool
	}{
		{"upsert", "upsert", false, true},
		{"insert_ignore", "insert_ignore", false, true},
		{"insert", "insert", false, false},
		{"staging upsert", "upsert", true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := baseConfig(t, dsn)
			c.Mode, c.Staging.Enabled = tt.mode, tt.staging
			conn := db(t, dsn)
			sinktest.Run(t, sinktest.Harness{
				Open:          func(t *testing.T) sink.Sink { s, err := New(t.Context(), c, sink.Deps{}); must(t, err); return s },
				Transactional: true,
				Idempotent:    tt.idempotent,
				ReadBack: func(t *testing.T) []sinktest.Stored {
					rows, err := conn.Query(t.Context(), "select stream_name, stream_sequence from "+c.Table)
					must(t, err)
					var out []sinktest.Stored
					for rows.Next() {
						var s sinktest.Stored
						var seq int64
						must(t, rows.Scan(&s.Stream, &seq))
						s.Sequence = uint64(seq)
						out = append(out, s)
					}
					must(t, rows.Err())
					return out
				},
			})
		})
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestGoldenRow writes the docs/http.md message into the auto-created (jsonb)
// table and into a user table with text JSON columns, and compares every
// column with what the record and jsonx packages produce: jsonb holds the
// same value, text columns the exact canonical ascii text.
func TestGoldenRow(t *testing.T) {
	dsn := natstest.Service(t, dsnEnv)
	conn := db(t, dsn)
	e := shapestest.Golden()
	wantPayload := `{"amount":42.5,"note":"caf\u00e9","order_id":"O-1001"}`
	wantHeaders := string(jsonx.Marshal(record.Headers(e), jsonx.ASCII))
	wantMeta := string(jsonx.Marshal(record.Metadata(e, stored, true), jsonx.ASCII))
	if !strings.Contains(wantMeta, `"custody":null`) || !strings.Contains(wantHeaders, `"traceparent":"00-4bf9`) {
		t.Fatalf("unexpected reference documents: %s %s", wantHeaders, wantMeta)
	}
	const scalars = `select stream_name, stream_sequence, subject, message_id, priority, classification, labels,
		message_created_at_epoch_ns, jetstream_timestamp_epoch_ns, received_at_epoch_ns, stored_at_epoch_ns, received_at is not null`
	wantScalars := []any{"ORDERS", int64(42), "orders.created", "O-1001", "high", nil, "billing;eu",
		int64(1780048799500000000), int64(1780048800123456000), int64(1780048800250000000), int64(1780048800300000000), true}

	t.Run("jsonb", func(t *testing.T) {
		c := baseConfig(t, dsn)
		s := open(t, c)
		if rs := s.WriteBatch(t.Context(), []*sink.Envelope{e}); rs[0].Outcome != sink.Committed {
			t.Fatalf("WriteBatch = %+v", rs[0])
		}
		rows, err := conn.Query(t.Context(), scalars+` from `+c.Table)
		must(t, err)
		got, err := pgx.CollectOneRow(rows, func(r pgx.CollectableRow) ([]any, error) { return r.Values() })
		must(t, err)
		if diff := cmp.Diff(wantScalars, got); diff != "" {
			t.Errorf("scalar columns (-want +got):\n%s", diff)
		}
		var same []bool
		must(t, conn.QueryRow(t.Context(), `select array[payload_json = $1::jsonb, headers_json = $2::jsonb, metadata_json = $3::jsonb,
			mission_metadata_json = 'null'::jsonb, security_labels_json = 'null'::jsonb] from `+c.Table,
			wantPayload, wantHeaders, wantMeta).Scan(&same))
		if diff := cmp.Diff([]bool{true, true, true, true, true}, same); diff != "" {
			t.Errorf("payload, headers, metadata, mission, security equal to the reference (-want +got):\n%s", diff)
		}
		// The texts were sent in jsonb's key order (the server's sort
		// then has nothing to do); the stored values above are the same.
		for _, f := range []sqlmodel.Field{sqlmodel.Payload, sqlmodel.Headers, sqlmodel.Metadata} {
			if got := s.keyOrder(s.model.Tables[0], f); got != jsonx.JSONBOrder {
				t.Errorf("key order of %s = %v, want JSONBOrder", s.model.Column(f), got)
			}
		}
	})

	t.Run("text columns keep the canonical text", func(t *testing.T) {
		c := baseConfig(t, dsn)
		c.AutoCreate = false
		_, err := conn.Exec(t.Context(), `create table `+c.Table+` (stream_name text, stream_sequence bigint, subject text,
			message_id text, priority text, classification text, labels text, received_at timestamptz default now(),
			message_created_at_epoch_ns bigint, jetstream_timestamp_epoch_ns bigint, received_at_epoch_ns bigint,
			stored_at_epoch_ns bigint, payload_json text, headers_json json, metadata_json text,
			mission_metadata_json text, security_labels_json text, primary key (stream_name, stream_sequence))`)
		must(t, err)
		s := open(t, c)
		if rs := s.WriteBatch(t.Context(), []*sink.Envelope{e}); rs[0].Outcome != sink.Committed {
			t.Fatalf("WriteBatch = %+v", rs[0])
		}
		var p, h, m, mm, sl string
		must(t, conn.QueryRow(t.Context(), `select payload_json, headers_json::text, metadata_json, mission_metadata_json, security_labels_json from `+c.Table).
			Scan(&p, &h, &m, &mm, &sl))
		if diff := cmp.Diff([]string{wantPayload, wantHeaders, wantMeta, "null", "null"}, []string{p, h, m, mm, sl}); diff != "" {
			t.Errorf("JSON column texts (-want +got):\n%s", diff)
		}
	})
}

// TestModes checks every mode's redelivery behaviour against the server:
// results, stored_at (refreshed or not), and duplicates counted.
func TestModes(t *testing.T) {
	dsn := natstest.Service(t, dsnEnv)
	conn := db(t, dsn)
	for _, tt := range []struct {
		name    string
		mode    string
		update  *[]string
		staging bool
		second  sink.Outcome // each message of the redelivered batch
		shared  bool
		dups    uint64 // postgres_duplicates_total after the redelivery
		stored  time.Time
	}{
		{"insert: redelivery is a shared permanent key violation", "insert", nil, false, sink.Permanent, true, 0, stored},
		{"insert_ignore: redelivery is a duplicate", "insert_ignore", nil, false, sink.Duplicate, false, 3, stored},
		{"upsert: redelivery rewrites and refreshes stored_at", "upsert", nil, false, sink.Committed, false, 0, stored.Add(time.Second)},
		{"upsert with []: redelivery is a duplicate", "upsert", &[]string{}, false, sink.Duplicate, false, 3, stored},
		{"upsert with a list: only listed columns change", "upsert", &[]string{"stored_at_epoch_ns"}, false, sink.Committed, false, 0, stored.Add(time.Second)},
		{"staging insert_ignore: duplicate", "insert_ignore", nil, true, sink.Duplicate, false, 3, stored},
		{"staging upsert: rewrites", "upsert", nil, true, sink.Committed, false, 0, stored.Add(time.Second)},
		{"staging insert: permanent", "insert", nil, true, sink.Permanent, true, 0, stored},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := baseConfig(t, dsn)
			c.Mode, c.UpsertUpdateColumns, c.Staging.Enabled = tt.mode, tt.update, tt.staging
			m, err := telemetry.NewMetrics(nil, "nats_sinks")
			must(t, err)
			s := openWith(t, c, sink.Deps{Metrics: m.ForSinks()})
			batch := []*sink.Envelope{env("a.b", "S", 1, "", `{"v":1}`), env("a.b", "S", 2, "", `{"v":2}`), env("a.b", "S", 3, "", `"x"`)}
			if got := outcomes(s.WriteBatch(t.Context(), batch)); !cmp.Equal(got, []sink.Outcome{sink.Committed, sink.Committed, sink.Committed}) {
				t.Fatalf("first write = %v", got)
			}
			s.w.Now = func() time.Time { return stored.Add(time.Second) }
			rs := s.WriteBatch(t.Context(), batch)
			for i, r := range rs {
				if r.Outcome != tt.second || r.Shared != tt.shared {
					t.Errorf("redelivery[%d] = %v shared=%v (%v), want %v shared=%v", i, r.Outcome, r.Shared, r.Err, tt.second, tt.shared)
				}
			}
			if n := countRows(t, conn, c.Table); n != 3 {
				t.Errorf("%d rows, want 3", n)
			}
			var storedNS int64
			must(t, conn.QueryRow(t.Context(), "select max(stored_at_epoch_ns) from "+c.Table).Scan(&storedNS))
			if storedNS != tt.stored.UnixNano() {
				t.Errorf("stored_at_epoch_ns = %d, want %d", storedNS, tt.stored.UnixNano())
			}
			if got := s.dups.(*telemetry.Counter).Value(); got != tt.dups {
				t.Errorf("postgres_duplicates_total = %d, want %d", got, tt.dups)
			}
		})
	}
}

// TestDuplicatesWithinBatch: repeated keys in one batch are reduced
// (upsert keeps the last, insert_ignore the first) and reported Duplicate.
func TestDuplicatesWithinBatch(t *testing.T) {
	dsn := natstest.Service(t, dsnEnv)
	conn := db(t, dsn)
	for _, tt := range []struct {
		mode string
		want []sink.Outcome
		v    string
	}{
		{"upsert", []sink.Outcome{sink.Duplicate, sink.Committed, sink.Committed}, "2"},
		{"insert_ignore", []sink.Outcome{sink.Committed, sink.Duplicate, sink.Committed}, "1"},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			c := baseConfig(t, dsn)
			c.Mode = tt.mode
			s := open(t, c)
			b := []*sink.Envelope{env("a", "S", 1, "", `{"v":1}`), env("a", "S", 1, "", `{"v":2}`), env("a", "S", 2, "", `{}`)}
			if got := outcomes(s.WriteBatch(t.Context(), b)); !cmp.Equal(got, tt.want) {
				t.Errorf("outcomes = %v, want %v", got, tt.want)
			}
			var v string
			must(t, conn.QueryRow(t.Context(), "select payload_json->>'v' from "+c.Table+" where stream_sequence = 1").Scan(&v))
			if v != tt.v {
				t.Errorf("stored v = %s, want %s", v, tt.v)
			}
		})
	}
}

// TestRoutesAndMessageIDKey writes through a route whose table is keyed
// by message_id (the "_idem" constraint of auto_create) with renamed
// columns; a redelivery under a new stream sequence is a Duplicate.
func TestRoutesAndMessageIDKey(t *testing.T) {
	for _, staging := range []bool{false, true} {
		t.Run(fmt.Sprintf("staging=%v", staging), func(t *testing.T) { testRoutes(t, staging) })
	}
}

func testRoutes(t *testing.T, staging bool) {
	dsn := natstest.Service(t, dsnEnv)
	conn := db(t, dsn)
	c := baseConfig(t, dsn)
	c.Staging.Enabled = staging
	route := uniqueTable(t) + "_r"
	dropAfter(t, dsn, route)
	c.Mode = "insert_ignore"
	c.Columns.Payload = "Body"
	c.TableRoutes = append(c.TableRoutes, routeTo("audit.>", route, "message_id"))
	s := open(t, c)
	b := []*sink.Envelope{env("audit.x", "S", 1, "id-1", `{"a":1}`), env("orders.x", "S", 2, "", `{}`), env("audit.y", "S", 3, "id-2", `{}`)}
	if got := outcomes(s.WriteBatch(t.Context(), b)); !cmp.Equal(got, []sink.Outcome{sink.Committed, sink.Committed, sink.Committed}) {
		t.Fatalf("first write = %v", got)
	}
	again := []*sink.Envelope{env("audit.x", "S", 9, "id-1", `{"a":1}`), env("audit.z", "S", 10, "id-3", `{}`)}
	if got := outcomes(s.WriteBatch(t.Context(), again)); !cmp.Equal(got, []sink.Outcome{sink.Duplicate, sink.Committed}) {
		t.Errorf("redelivery under new sequence = %v, want [duplicate committed]", got)
	}
	if n := countRows(t, conn, route); n != 3 {
		t.Errorf("route table rows = %d, want 3", n)
	}
	if n := countRows(t, conn, c.Table); n != 1 {
		t.Errorf("default table rows = %d, want 1", n)
	}
	var body string
	must(t, conn.QueryRow(t.Context(), "select body::text from "+route+" where message_id = 'id-1'").Scan(&body))
	if body != `{"a": 1}` {
		t.Errorf("body = %s", body)
	}
	// A message without the message id cannot be keyed: unshared Permanent.
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{env("audit.q", "S", 11, "", `{}`)})
	if rs[0].Outcome != sink.Permanent || rs[0].Shared || rs[0].ErrorType != sink.ValidationError {
		t.Errorf("no message id = %+v, want unshared Permanent ValidationError", rs[0])
	}
}

// TestBadRowIsSharedPermanent: a row the database rejects fails the whole
// transaction with Shared Permanent results (the runner bisects), and
// nothing of the batch is stored.
func TestBadRowIsSharedPermanent(t *testing.T) {
	dsn := natstest.Service(t, dsnEnv)
	conn := db(t, dsn)
	for _, tt := range []struct {
		name string
		bad  *sink.Envelope
		code string
	}{
		{"message id longer than varchar(512)", env("a", "S", 2, strings.Repeat("m", 600), `{}`), "22001"},
		{"NUL escape in JSON", env("a", "S", 2, "", `{"a":"x\u0000y"}`), "22P05"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := baseConfig(t, dsn)
			s := open(t, c)
			rs := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", "S", 1, "", `{}`), tt.bad, env("a", "S", 3, "", `{}`)})
			for i, r := range rs {
				if r.Outcome != sink.Permanent || !r.Shared || r.ErrorType != sink.PermanentSinkError {
					t.Errorf("result[%d] = %+v, want Shared Permanent", i, r)
				}
				if r.Err == nil || !strings.Contains(r.Err.Error(), tt.code) {
					t.Errorf("result[%d] error %v does not name SQLSTATE %s", i, r.Err, tt.code)
				}
				if r.Err != nil && strings.Contains(r.Err.Error(), "mmmmmmmm") {
					t.Errorf("error text carries the header value: %v", r.Err)
				}
			}
			if n := countRows(t, conn, c.Table); n != 0 {
				t.Errorf("%d rows stored, want 0", n)
			}
			// Alone, the good messages commit (what bisection does).
			if got := outcomes(s.WriteBatch(t.Context(), []*sink.Envelope{env("a", "S", 1, "", `{}`)})); got[0] != sink.Committed {
				t.Errorf("good message alone = %v", got)
			}
		})
	}
}

func TestMissingTableIsDestination(t *testing.T) {
	dsn := natstest.Service(t, dsnEnv)
	c := baseConfig(t, dsn)
	c.AutoCreate = false
	s := open(t, c)
	for i, r := range s.WriteBatch(t.Context(), []*sink.Envelope{env("a", "S", 1, "", `{}`), env("a", "S", 2, "", `{}`)}) {
		if r.Outcome != sink.Destination || !r.Shared {
			t.Errorf("result[%d] = %+v, want Shared Destination", i, r)
		}
	}
	if res := sink.Failed(s.Healthcheck(t.Context())); res.Outcome != sink.Destination {
		t.Errorf("Healthcheck = %v (%v), want a destination error", res.Outcome, res.Err)
	}
	// Missing column: also Destination, not Permanent.
	conn := db(t, dsn)
	_, err := conn.Exec(t.Context(), "create table "+c.Table+" (stream_name text, stream_sequence bigint)")
	must(t, err)
	if r := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", "S", 1, "", `{}`)})[0]; r.Outcome != sink.Destination {
		t.Errorf("missing columns = %+v, want Destination", r)
	}
}

func TestWrongUserIsDestination(t *testing.T) {
	dsn := natstest.Service(t, dsnEnv)
	c := baseConfig(t, dsn)
	c.User = "no_such_user_nats_sink"
	_, err := New(t.Context(), c, sink.Deps{})
	if res := sink.Failed(err); res.Outcome != sink.Destination {
		t.Errorf("New with unknown user = %v (%v), want destination", res.Outcome, err)
	}
	c = baseConfig(t, dsn)
	c.Database = "no_such_database_nats_sink"
	_, err = New(t.Context(), c, sink.Deps{})
	if res := sink.Failed(err); res.Outcome != sink.Destination {
		t.Errorf("New with unknown database = %v (%v), want destination", res.Outcome, err)
	}
}

// TestPassword uses a throw-away cluster with scram-sha-256 (the shared
// server trusts local connections): a wrong password is Destination, the
// right one from password_env or password_file works.
func TestPassword(t *testing.T) {
	natstest.Service(t, dsnEnv)
	cl := pgtest.Start(t, pgtest.Options{Password: "s3cret-pw"})
	c := baseConfig(t, cl.DSN())
	wrong := secret.Value("wrong-password")
	c.Password = &wrong
	_, err := New(t.Context(), c, sink.Deps{})
	if res := sink.Failed(err); res.Outcome != sink.Destination {
		t.Errorf("New with wrong password = %v (%v), want destination", res.Outcome, err)
	}
	if err != nil && strings.Contains(err.Error(), "wrong-password") {
		t.Errorf("error text carries the password: %v", err)
	}

	c.Password, c.PasswordEnv = nil, ptr("PG_TEST_PW")
	pwEnv := func(name string) (string, bool) {
		return map[string]string{"PG_TEST_PW": "s3cret-pw"}[name], name == "PG_TEST_PW"
	}
	s := openWith(t, c, sink.Deps{Env: pwEnv})
	if r := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", "S", 1, "", `{}`)})[0]; r.Outcome != sink.Committed {
		t.Errorf("write with password_env = %+v", r)
	}

	unset := func(string) (string, bool) { return "", false }
	_, err = New(t.Context(), c, sink.Deps{Env: unset})
	if ce, ok := err.(*sink.ConfigError); !ok || ce.Problems[0].Path != "password_env" {
		t.Errorf("New with unset password_env = %v, want a configuration error at password_env", err)
	}
}

// TestNoPassword: a server that authenticates without a password is
// reachable with no password source, over a Unix socket (trusted) and
// over TCP with a client certificate (pg_hba "cert", verify-full).
func TestNoPassword(t *testing.T) {
	natstest.Service(t, dsnEnv)
	cl := pgtest.Start(t, pgtest.Options{Socket: true, ClientCerts: true})
	c := Default()
	c.Database, c.User, c.AutoCreate = "postgres", "postgres", true
	c.Table = uniqueTable(t)

	sock := c
	sock.Host, sock.Port = cl.SocketDir, cl.Port
	if err := sock.Validate(); err != nil {
		t.Fatalf("Validate with a socket directory and no password: %v", err)
	}
	s := openWith(t, sock, sink.Deps{})
	if r := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", "S", 1, "", `{}`)})[0]; r.Outcome != sink.Committed {
		t.Errorf("write over the Unix socket = %+v", r)
	}

	cert := c
	cert.Host, cert.Port, cert.SSLMode = "127.0.0.1", cl.Port, "verify-full"
	cert.SSLRootCert, cert.SSLCert, cert.SSLKey = &cl.CA, &cl.ClientCert, &cl.ClientKey
	s = openWith(t, cert, sink.Deps{})
	if r := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", "S", 2, "", `{}`)})[0]; r.Outcome != sink.Committed {
		t.Errorf("write with a client certificate = %+v", r)
	}

	// Without the certificate the server refuses the connection: the
	// cluster really demands it.
	bare := cert
	bare.SSLCert, bare.SSLKey = nil, nil
	if _, err := New(t.Context(), bare, sink.Deps{}); sink.Failed(err).Outcome != sink.Destination {
		t.Errorf("New without the client certificate = %v, want a destination failure", err)
	}
	conn := db(t, "postgres:///postgres?host="+cl.SocketDir+"&port="+strconv.Itoa(cl.Port)+"&user=postgres")
	var n int
	must(t, conn.QueryRow(t.Context(), "select count(*) from "+c.Table).Scan(&n))
	if n != 2 {
		t.Errorf("rows = %d, want 2", n)
	}
}

func ptr[T any](v T) *T { return &v }

func TestUnreachableIsTemporary(t *testing.T) {
	dsn := natstest.Service(t, dsnEnv)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	c := baseConfig(t, dsn)
	c.Host, c.Port, c.ConnectTimeoutSeconds = "127.0.0.1", port, 2
	_, err = New(t.Context(), c, sink.Deps{})
	if err == nil {
		t.Fatal("New against a closed port succeeded")
	}
	if res := sink.Failed(err); res.Outcome != sink.Temporary {
		t.Errorf("New against a closed port = %v (%v), want temporary", res.Outcome, err)
	}
}

// TestOutage stops a throw-away server under an open sink: writes are
// Temporary (never Committed) while it is down, and succeed again once it
// is back, on fresh connections.
func TestOutage(t *testing.T) {
	natstest.Service(t, dsnEnv)
	cl := pgtest.Start(t, pgtest.Options{})
	c := baseConfig(t, cl.DSN())
	c.ConnectTimeoutSeconds = 2
	s := open(t, c)
	if r := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", "S", 1, "", `{}`)})[0]; r.Outcome != sink.Committed {
		t.Fatalf("first write = %+v", r)
	}
	cl.Stop()
	for i, r := range s.WriteBatch(t.Context(), []*sink.Envelope{env("a", "S", 2, "", `{}`), env("a", "S", 3, "", `{}`)}) {
		if r.Outcome != sink.Temporary || !r.Shared {
			t.Errorf("write while down [%d] = %+v, want Shared Temporary", i, r)
		}
	}
	if err := s.Healthcheck(t.Context()); err == nil {
		t.Error("Healthcheck while down = nil")
	}
	cl.Start()
	if got := outcomes(s.WriteBatch(t.Context(), []*sink.Envelope{env("a", "S", 2, "", `{}`), env("a", "S", 3, "", `{}`)})); !cmp.Equal(got, []sink.Outcome{sink.Committed, sink.Committed}) {
		t.Errorf("write after restart = %v", got)
	}
	// A restart between batches leaves a dead idle connection in the
	// pool: the next batch must not fail because of it.
	cl.Stop()
	cl.Start()
	if r := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", "S", 4, "", `{}`)})[0]; r.Outcome != sink.Committed {
		t.Errorf("first write after a restart between batches = %+v, want committed", r)
	}
	conn := db(t, cl.DSN())
	if n := countRows(t, conn, c.Table); n != 4 {
		t.Errorf("%d rows, want 4", n)
	}
}

// TestCancelMidTransaction blocks the insert on a table lock held by
// another session, cancels the batch's ctx while the statement waits, and
// checks that the batch is Temporary and nothing was stored.
func TestCancelMidTransaction(t *testing.T) {
	dsn := natstest.Service(t, dsnEnv)
	c := baseConfig(t, dsn)
	s := open(t, c)
	locker := db(t, dsn)
	tx, err := locker.Begin(t.Context())
	must(t, err)
	_, err = tx.Exec(t.Context(), "lock table "+c.Table+" in access exclusive mode")
	must(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan []sink.Result, 1)
	go func() {
		done <- s.WriteBatch(ctx, []*sink.Envelope{env("a", "S", 1, "", `{}`), env("a", "S", 2, "", `{}`)})
	}()
	watcher := db(t, dsn)
	natstest.WaitFor(t, 10*time.Second, func() error {
		var waiting int
		if err := watcher.QueryRow(t.Context(), "select count(*) from pg_locks where relation = $1::regclass and not granted", c.Table).Scan(&waiting); err != nil {
			return err
		}
		if waiting == 0 {
			return fmt.Errorf("the insert is not waiting for the lock yet")
		}
		return nil
	})
	cancel()
	rs := <-done
	for i, r := range rs {
		if r.Outcome != sink.Temporary || !r.Shared {
			t.Errorf("cancelled write [%d] = %+v, want Shared Temporary", i, r)
		}
	}
	must(t, tx.Rollback(t.Context()))
	if n := countRows(t, watcher, c.Table); n != 0 {
		t.Errorf("%d rows after cancellation, want 0", n)
	}
	// The sink still works afterwards.
	if r := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", "S", 1, "", `{}`)})[0]; r.Outcome != sink.Committed {
		t.Errorf("write after cancellation = %+v", r)
	}
}

// TestConcurrentWriteBatch: more concurrent batches than pool
// connections, disjoint and overlapping keys; every record once.
func TestConcurrentWriteBatch(t *testing.T) {
	dsn := natstest.Service(t, dsnEnv)
	c := baseConfig(t, dsn)
	c.PoolSize = 3
	s := open(t, c)
	const workers, per = 8, 100
	var wg sync.WaitGroup
	errs := make(chan string, workers*per*2)
	for w := range workers {
		wg.Go(func() {
			var b []*sink.Envelope
			for i := range per {
				b = append(b, env("a", "S", uint64(w*per+i+1), "", `{}`))
			}
			// Every worker also writes the first worker's batch: the
			// same keys from several transactions at once.
			for _, batch := range [][]*sink.Envelope{b, b[:0:0]} {
				if len(batch) == 0 {
					for i := range per {
						batch = append(batch, env("a", "S", uint64(i+1), "", `{}`))
					}
				}
				for i, r := range s.WriteBatch(t.Context(), batch) {
					if !r.Outcome.Acked() {
						errs <- fmt.Sprintf("worker %d message %d: %v (%v)", w, i, r.Outcome, r.Err)
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	// pool_size bounds the open connections.
	if st := s.pool.Stat(); st.MaxConns() != 3 || st.TotalConns() > 3 {
		t.Errorf("pool: max %d, open %d; want max 3", st.MaxConns(), st.TotalConns())
	}
	conn := db(t, dsn)
	var n, distinct int
	must(t, conn.QueryRow(t.Context(), "select count(*), count(distinct stream_sequence) from "+c.Table).Scan(&n, &distinct))
	if n != workers*per || distinct != workers*per {
		t.Errorf("rows %d, distinct %d; want %d", n, distinct, workers*per)
	}
}

func TestHealthcheckAndStop(t *testing.T) {
	dsn := natstest.Service(t, dsnEnv)
	c := baseConfig(t, dsn)
	s, err := New(t.Context(), c, sink.Deps{})
	must(t, err)
	if err := s.Healthcheck(t.Context()); err != nil {
		t.Errorf("Healthcheck = %v", err)
	}
	if s.Type() != "postgres" {
		t.Errorf("Type = %q", s.Type())
	}
	must(t, s.Stop(t.Context()))
	must(t, s.Stop(t.Context())) // idempotent
	if r := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", "S", 1, "", `{}`)})[0]; r.Outcome != sink.Temporary {
		t.Errorf("write after Stop = %+v, want temporary", r)
	}
}

func routeTo(subject, table, strategy string) sqlconfig.UpsertRoute {
	return sqlconfig.UpsertRoute{Subject: subject, Table: table,
		Idempotency: &sqlconfig.Idempotency{Strategy: strategy, Columns: []string{"MESSAGE_ID"}}}
}

// TestStatementFitsColumnTypes: JSON values are cast to jsonb only for
// jsonb columns (json and text columns keep the json cast and so the
// canonical text); a table missing at start is looked up again at the
// next batch once it exists.
func TestStatementFitsColumnTypes(t *testing.T) {
	dsn := natstest.Service(t, dsnEnv)
	conn := db(t, dsn)
	c := baseConfig(t, dsn)
	c.AutoCreate = false
	s := open(t, c)
	casts := func() []string {
		s.mu.Lock()
		defer s.mu.Unlock()
		return regexp.MustCompile(`"[a-z_]+_json"::jsonb?`).FindAllString(s.sql[s.model.Tables[0]].insert, -1)
	}
	allJSON := []string{`"payload_json"::json`, `"headers_json"::json`, `"metadata_json"::json`, `"mission_metadata_json"::json`, `"security_labels_json"::json`}
	if diff := cmp.Diff(allJSON, casts()); diff != "" {
		t.Errorf("casts before the table exists (-want +got):\n%s", diff)
	}
	if rs := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", "S", 1, "", `{}`)}); rs[0].Outcome != sink.Destination {
		t.Fatalf("WriteBatch without the table = %+v, want Destination", rs[0])
	}
	_, err := conn.Exec(t.Context(), `create table `+c.Table+` (stream_name text, stream_sequence bigint, subject text,
		message_id text, priority text, classification text, labels text,
		message_created_at_epoch_ns bigint, jetstream_timestamp_epoch_ns bigint, received_at_epoch_ns bigint,
		stored_at_epoch_ns bigint, payload_json jsonb, headers_json json, metadata_json text,
		mission_metadata_json jsonb, security_labels_json jsonb, primary key (stream_name, stream_sequence))`)
	must(t, err)
	if rs := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", "S", 1, "", `{"b":1,"a":2}`)}); rs[0].Outcome != sink.Committed {
		t.Fatalf("WriteBatch = %+v", rs[0])
	}
	want := []string{`"payload_json"::jsonb`, `"headers_json"::json`, `"metadata_json"::json`, `"mission_metadata_json"::jsonb`, `"security_labels_json"::jsonb`}
	if diff := cmp.Diff(want, casts()); diff != "" {
		t.Errorf("casts once the table exists (-want +got):\n%s", diff)
	}
	var p, h, m string
	must(t, conn.QueryRow(t.Context(), `select payload_json::text, headers_json::text, metadata_json from `+c.Table).Scan(&p, &h, &m))
	if p != `{"a": 2, "b": 1}` || h != `{}` {
		t.Errorf("payload, headers = %s, %s", p, h)
	}
	// The jsonb payload column was sent jsonb's key order; the text
	// column next to it must still hold the canonical text.
	if m == "" || !strings.HasPrefix(m, `{"custody":null,"freshness":{"event_age_at_receive_seconds":`) {
		t.Errorf("metadata_json text is not the canonical document: %.120s", m)
	}
}

// TestCompression: when the server supports lz4 and nobody chose a
// default_toast_compression, the sink's sessions compress large values
// with lz4; a default chosen for the database is left alone.
func TestCompression(t *testing.T) {
	natstest.Service(t, dsnEnv)
	cl := pgtest.Start(t, pgtest.Options{})
	admin := db(t, cl.DSN())
	var lz4 bool
	must(t, admin.QueryRow(t.Context(), `select 'lz4' = any(enumvals) from pg_settings where name = 'default_toast_compression'`).Scan(&lz4))
	if !lz4 {
		t.Skip("server built without lz4")
	}
	// A payload large enough to be compressed (rows over ~2 KB are).
	big := `{"pad":"` + strings.Repeat("abcdefgh", 1000) + `"}`
	method := func(c Config) string {
		t.Helper()
		s := open(t, c)
		if r := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", "S", 1, "", big)})[0]; r.Outcome != sink.Committed {
			t.Fatalf("write = %+v", r)
		}
		var m string
		must(t, admin.QueryRow(t.Context(), "select pg_column_compression(payload_json) from "+c.Table).Scan(&m))
		return m
	}
	if got := method(baseConfig(t, cl.DSN())); got != "lz4" {
		t.Errorf("server default untouched: payload compressed with %q, want lz4", got)
	}
	var database string
	must(t, admin.QueryRow(t.Context(), "select current_database()").Scan(&database))
	_, err := admin.Exec(t.Context(), "alter database "+pgx.Identifier{database}.Sanitize()+" set default_toast_compression = pglz")
	must(t, err)
	if got := method(baseConfig(t, cl.DSN())); got != "pglz" {
		t.Errorf("database default pglz: payload compressed with %q, want pglz", got)
	}
}

// TestStagingTableEmptiedAtCommit: the COPY path's temporary table lives
// as long as its connection and is empty after every commit, so the next
// batch on that connection inserts only its own rows.
func TestStagingTableEmptiedAtCommit(t *testing.T) {
	dsn := natstest.Service(t, dsnEnv)
	c := baseConfig(t, dsn)
	c.Staging.Enabled, c.PoolSize = true, 1
	s := open(t, c)
	for batch := range 3 {
		var in []*sink.Envelope
		for i := range 3 {
			in = append(in, env("a", "S", uint64(batch*3+i+1), "", `{}`))
		}
		if got := outcomes(s.WriteBatch(t.Context(), in)); !cmp.Equal(got, []sink.Outcome{sink.Committed, sink.Committed, sink.Committed}) {
			t.Fatalf("batch %d = %v", batch, got)
		}
		pc, err := s.pool.Acquire(t.Context()) // the only connection: the one that wrote
		must(t, err)
		var staged int
		err = pc.QueryRow(t.Context(), "select count(*) from "+stageTable+"_0").Scan(&staged)
		pc.Release()
		must(t, err)
		if staged != 0 {
			t.Errorf("after batch %d the staging table holds %d rows, want 0", batch, staged)
		}
	}
	if n := countRows(t, db(t, dsn), c.Table); n != 9 {
		t.Errorf("%d rows, want 9", n)
	}
}
