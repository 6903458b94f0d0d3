package mysql

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sink/sinktest"
	"github.com/nats-sinks/nats-sink/sqlconfig"
	"github.com/nats-sinks/nats-sink/telemetry"
)

func TestConformance(t *testing.T) {
	srv := testServer(t)
	for _, mode := range []string{"upsert", "insert_ignore"} {
		t.Run(mode, func(t *testing.T) {
			table := srv.table(t)
			c := srv.config(table)
			c.Mode = mode
			sinktest.Run(t, sinktest.Harness{
				Open:          func(t *testing.T) sink.Sink { return open(t, c) },
				Transactional: true,
				Idempotent:    true,
				ReadBack: func(t *testing.T) []sinktest.Stored {
					var out []sinktest.Stored
					for _, r := range srv.query(t, "select STREAM_NAME, STREAM_SEQUENCE from `"+table+"`") {
						out = append(out, sinktest.Stored{Stream: r[0].(string), Sequence: uint64(r[1].(int64))})
					}
					return out
				},
			})
		})
	}
}

// TestGoldenRow writes the docs/formats.md#file-records golden message and compares
// every column with what the shared record code produces.
func TestGoldenRow(t *testing.T) {
	t.Parallel()
	srv := testServer(t)
	table := srv.table(t)
	s := open(t, srv.config(table))
	stored := shapestest.Stored
	s.w.Now = fixedNow(stored)
	e := shapestest.Golden()
	if rs := s.WriteBatch(t.Context(), []*sink.Envelope{e}); rs[0].Outcome != sink.Committed {
		t.Fatalf("WriteBatch = %+v", rs[0])
	}
	p, err := record.NormalisePayload(e, record.JSONOrEnvelope)
	if err != nil {
		t.Fatal(err)
	}
	wantPayload := string(jsonx.Marshal(p.Value, jsonx.ASCII))
	wantHeaders := string(jsonx.Marshal(record.Headers(e), jsonx.ASCII))
	wantMeta := string(jsonx.Marshal(record.Metadata(e, record.Micro(stored), true), jsonx.ASCII))

	got := srv.query(t, "select STREAM_NAME, STREAM_SEQUENCE, SUBJECT, MESSAGE_ID, PRIORITY, CLASSIFICATION, LABELS, "+
		"MESSAGE_CREATED_AT_EPOCH_NS, JETSTREAM_TIMESTAMP_EPOCH_NS, RECEIVED_AT_EPOCH_NS, STORED_AT_EPOCH_NS, "+
		"PAYLOAD_JSON, HEADERS_JSON, METADATA_JSON, MISSION_METADATA_JSON, SECURITY_LABELS_JSON, RECEIVED_AT is not null from `"+table+"`")
	want := [][]any{{"ORDERS", int64(42), "orders.created", "O-1001", "high", nil, "billing;eu",
		int64(1780048799500000000), int64(1780048800123456000), int64(1780048800250000000), int64(1780048800300000000),
		wantPayload, wantHeaders, wantMeta, "null", "null", int64(1)}}
	if diff := cmp.Diff(want, got); diff != "" {
		// MySQL's JSON type normalises the text it stores (MariaDB keeps
		// it); compare the JSON values when only the text differs.
		if !sameJSON(t, want, got) {
			t.Errorf("row (-want +got):\n%s", diff)
		}
	}
	if wantPayload != `{"amount":42.5,"note":"caf\u00e9","order_id":"O-1001"}` {
		t.Errorf("payload text = %s, want the canonical ascii form", wantPayload)
	}
}

func sameJSON(t *testing.T, want, got [][]any) bool {
	t.Helper()
	if len(want) != 1 || len(got) != 1 || len(want[0]) != len(got[0]) {
		return false
	}
	for i := range want[0] {
		w, g := want[0][i], got[0][i]
		ws, wok := w.(string)
		gs, gok := g.(string)
		if wok && gok && strings.HasPrefix(ws, "{") {
			wv, err1 := jsonx.Parse([]byte(ws))
			gv, err2 := jsonx.Parse([]byte(gs))
			if err1 != nil || err2 != nil || !cmp.Equal(wv, gv) {
				return false
			}
			continue
		}
		if !cmp.Equal(w, g) {
			return false
		}
	}
	return true
}

// TestMetricsShared: a second sink given the same Metrics starts (it used
// to fail on the taken metric names); every SQL sink now treats a taken
// name alike (sqlmodel.Counter).
func TestMetricsShared(t *testing.T) {
	t.Parallel()
	srv := testServer(t)
	tm, err := telemetry.NewMetrics(nil, "nats_sinks")
	if err != nil {
		t.Fatal(err)
	}
	c := srv.config(srv.table(t))
	first := openWith(t, c, sink.Deps{Metrics: tm.ForSinks()})
	second := openWith(t, c, sink.Deps{Metrics: tm.ForSinks()})
	if rs := second.WriteBatch(t.Context(), []*sink.Envelope{env("orders.a", "ORDERS", 1, "", `{}`)}); rs[0].Outcome != sink.Committed {
		t.Fatalf("second sink WriteBatch = %+v", rs[0])
	}
	if rs := first.WriteBatch(t.Context(), []*sink.Envelope{env("orders.a", "ORDERS", 2, "", `{}`)}); rs[0].Outcome != sink.Committed {
		t.Fatalf("first sink WriteBatch = %+v", rs[0])
	}
	if got := first.m.Commit.(*telemetry.Histogram).Summary().Count; got < 1 {
		t.Errorf("mysql_commit_seconds count = %v, want the first sink's commit counted", got)
	}
}

// TestModes checks every mode's behaviour on redelivery against the server:
// the results, whether the stored row was refreshed, and the duplicate
// metrics.
func TestModes(t *testing.T) {
	t.Parallel()
	srv := testServer(t)
	empty, payload := []string{}, []string{"PAYLOAD_JSON"}
	for _, tt := range []struct {
		name     string
		mode     string
		update   *[]string
		idem     string // strategy; "" = stream_sequence
		second   sink.Outcome
		refresh  bool   // stored_at rewritten by the redelivery
		counters string // duplicates, ignored, noop, upsert rows, unknown after both writes
	}{
		{"insert: redelivery is a shared permanent key violation", "insert", nil, "", sink.Permanent, false, "0 0 0 0 0"},
		{"append: as insert", "append", nil, "", sink.Permanent, false, "0 0 0 0 0"},
		{"insert_ignore: redelivery is a duplicate, row unchanged", "insert_ignore", nil, "", sink.Duplicate, false, "2 2 0 0 0"},
		{"insert_ignore by message id (auto-created _idem key)", "insert_ignore", nil, "message_id", sink.Duplicate, false, "2 2 0 0 0"},
		{"upsert all columns: redelivery refreshes the row", "upsert", nil, "", sink.Duplicate, true, "2 0 0 4 0"},
		{"upsert []: redelivery is a no-op", "upsert", &empty, "", sink.Duplicate, false, "2 0 2 4 0"},
		// The first write's affected count (2 for 2 rows) cannot tell two inserts
		// from an update plus an unchanged row: without stored_at among the
		// update columns, both rows count as outcome unknown.
		{"upsert [PAYLOAD_JSON]: equal payload leaves the row unchanged", "upsert", &payload, "", sink.Duplicate, false, "2 0 0 4 2"},
		{"upsert by message id refreshes through the _idem key", "upsert", nil, "message_id", sink.Duplicate, true, "2 0 0 4 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			table := srv.table(t)
			c := srv.config(table)
			c.Mode = tt.mode
			c.UpsertUpdateColumns = tt.update
			if tt.idem != "" {
				c.Idempotency.Strategy = tt.idem
			}
			tm, err := telemetry.NewMetrics(nil, "nats_sinks")
			if err != nil {
				t.Fatal(err)
			}
			s := openWith(t, c, sink.Deps{Metrics: tm.ForSinks()})
			first := time.Date(2026, 5, 29, 10, 0, 1, 0, time.UTC)
			second := first.Add(time.Hour)
			b := []*sink.Envelope{env("orders.a", "ORDERS", 1, "id-1", `{"n":1}`), env("orders.a", "ORDERS", 2, "id-2", `{"n":2}`)}
			if tt.idem == "message_id" {
				// The same message ids at new sequences: a publisher's
				// retry, which only the message-id key recognises.
				s.w.Now = fixedNow(first)
				if got := outcomes(s.WriteBatch(t.Context(), b)); !cmp.Equal(got, []sink.Outcome{sink.Committed, sink.Committed}) {
					t.Fatalf("first write = %v", got)
				}
				b = []*sink.Envelope{env("orders.a", "ORDERS", 11, "id-1", `{"n":1}`), env("orders.a", "ORDERS", 12, "id-2", `{"n":2}`)}
			} else {
				s.w.Now = fixedNow(first)
				if got := outcomes(s.WriteBatch(t.Context(), b)); !cmp.Equal(got, []sink.Outcome{sink.Committed, sink.Committed}) {
					t.Fatalf("first write = %v", got)
				}
			}
			s.w.Now = fixedNow(second)
			rs := s.WriteBatch(t.Context(), b)
			for i, r := range rs {
				if r.Outcome != tt.second {
					t.Errorf("redelivery %d = %v (%v), want %v", i, r.Outcome, r.Err, tt.second)
				}
				if r.Outcome == sink.Permanent && (!r.Shared || r.ErrorType != sink.PermanentSinkError) {
					t.Errorf("redelivery %d = %+v, want Shared PermanentSinkError", i, r)
				}
			}
			if tt.second == sink.Permanent && strings.Contains(rs[0].Err.Error(), "ORDERS-1") {
				t.Errorf("error text quotes the key values: %v", rs[0].Err)
			}
			if n := srv.count(t, table); n != 2 {
				t.Errorf("rows = %d, want 2", n)
			}
			want := record.EpochNS(first)
			if tt.refresh {
				want = record.EpochNS(second)
			}
			for _, r := range srv.query(t, "select STORED_AT_EPOCH_NS from `"+table+"`") {
				if r[0] != want {
					t.Errorf("stored_at = %v, want %v (refresh %v)", r[0], want, tt.refresh)
				}
			}
			m := &s.m
			got := fmt.Sprintf("%d %d %d %d %d", m.Duplicates.(*telemetry.Counter).Value(), m.Ignored.(*telemetry.Counter).Value(), m.Noop.(*telemetry.Counter).Value(), m.Rows.(*telemetry.Counter).Value(), m.Unknown.(*telemetry.Counter).Value())
			if got != tt.counters {
				t.Errorf("duplicates, ignored, noop, upsert rows, unknown = %s, want %s", got, tt.counters)
			}
			if tt.second == sink.Permanent && m.Conflicts.(*telemetry.Counter).Value() != 1 {
				t.Errorf("conflicts = %d, want 1", m.Conflicts.(*telemetry.Counter).Value())
			}
		})
	}
}

// TestBadRow: a value the column cannot hold fails the whole transaction
// as Shared Permanent (so the runner's bisection can isolate it), in every
// mode, including insert_ignore where the server only warns; alone, the
// good rows commit and the bad one stays Permanent.
func TestBadRow(t *testing.T) {
	t.Parallel()
	srv := testServer(t)
	for _, mode := range []string{"insert", "insert_ignore", "upsert", "append"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			table := srv.table(t)
			c := srv.config(table)
			c.Mode = mode
			s := open(t, c)
			long := strings.Repeat("m", 600) // MESSAGE_ID is varchar(512)
			b := []*sink.Envelope{env("a", "S", 1, "ok-1", `{}`), env("a", "S", 2, long, `{}`), env("a", "S", 3, "ok-3", `{}`)}
			for i, r := range s.WriteBatch(t.Context(), b) {
				if r.Outcome != sink.Permanent || !r.Shared || r.ErrorType != sink.PermanentSinkError {
					t.Errorf("message %d = %+v, want Shared Permanent", i, r)
				}
				if r.Err != nil && strings.Contains(r.Err.Error(), long[:100]) {
					t.Errorf("message %d error quotes the message id", i)
				}
			}
			if n := srv.count(t, table); n != 0 {
				t.Fatalf("rows after the failed batch = %d, want 0", n)
			}
			// What the runner's bisection ends with.
			if got := outcomes(s.WriteBatch(t.Context(), []*sink.Envelope{b[0], b[2]})); !cmp.Equal(got, []sink.Outcome{sink.Committed, sink.Committed}) {
				t.Errorf("good rows alone = %v", got)
			}
			if r := s.WriteBatch(t.Context(), b[1:2])[0]; r.Outcome != sink.Permanent {
				t.Errorf("bad row alone = %+v, want Permanent", r)
			}
			if n := srv.count(t, table); n != 2 {
				t.Errorf("rows = %d, want 2", n)
			}
		})
	}
}

func TestMissingTableIsDestination(t *testing.T) {
	t.Parallel()
	srv := testServer(t)
	c := srv.config(srv.table(t))
	c.AutoCreate = false
	s := open(t, c)
	for i, r := range s.WriteBatch(t.Context(), []*sink.Envelope{env("a", "S", 1, "", `{}`), env("a", "S", 2, "", `{}`)}) {
		if r.Outcome != sink.Destination || !r.Shared {
			t.Errorf("message %d = %+v, want Shared Destination", i, r)
		}
	}
	err := s.Healthcheck(t.Context())
	if r := sink.Failed(err); err == nil || r.Outcome != sink.Destination {
		t.Errorf("Healthcheck = %v, want a destination error", err)
	}
}

func TestMissingColumnIsDestination(t *testing.T) {
	t.Parallel()
	srv := testServer(t)
	table := srv.table(t)
	c := srv.config(table)
	open(t, c) // creates the table
	c.Columns.Priority = "NO_SUCH_COLUMN"
	c.AutoCreate = false
	s := open(t, c)
	if r := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", "S", 1, "", `{}`)})[0]; r.Outcome != sink.Destination {
		t.Errorf("WriteBatch = %+v, want Destination", r)
	}
	if err := s.Healthcheck(t.Context()); sink.Failed(err).Outcome != sink.Destination {
		t.Errorf("Healthcheck = %v, want a destination error", err)
	}
}

func TestAuthenticationIsDestination(t *testing.T) {
	t.Parallel()
	srv := testServer(t)
	for _, tt := range []struct{ name, user, password string }{
		{"wrong password", srv.user, "wrong-password"},
		{"unknown user", "no_such_user_x", "whatever"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := srv.config(srv.table(t))
			c.AutoCreate = false
			c.User = tt.user
			pw := secret.Value(tt.password)
			c.Password = &pw
			s := open(t, c)
			r := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", "S", 1, "", `{}`)})[0]
			if r.Outcome != sink.Destination {
				t.Errorf("WriteBatch = %+v, want Destination", r)
			}
			if r.Err != nil && strings.Contains(r.Err.Error(), tt.password) {
				t.Errorf("error text contains the password: %v", r.Err)
			}
			if err := s.Healthcheck(t.Context()); sink.Failed(err).Outcome != sink.Destination {
				t.Errorf("Healthcheck = %v, want a destination error", err)
			}
			// With auto_create, New needs the server and reports it too.
			c.AutoCreate = true
			if _, err := New(t.Context(), c, sink.Deps{}); sink.Failed(err).Outcome != sink.Destination {
				t.Errorf("New with auto_create = %v, want a destination error", err)
			}
		})
	}
}

func TestUnreachableIsTemporary(t *testing.T) {
	t.Parallel()
	c := Default()
	c.Port = freePort(t)
	c.Database, c.User = "db", "u"
	pw := secret.Value("pw")
	c.Password = &pw
	c.ConnectionTimeout = 1
	s := open(t, c)
	for i, r := range s.WriteBatch(t.Context(), []*sink.Envelope{env("a", "S", 1, "", `{}`), env("a", "S", 2, "", `{}`)}) {
		if r.Outcome != sink.Temporary || !r.Shared {
			t.Errorf("message %d = %+v, want Shared Temporary", i, r)
		}
	}
	if err := s.Healthcheck(t.Context()); err == nil || sink.Failed(err).Outcome != sink.Temporary {
		t.Errorf("Healthcheck = %v, want a temporary error", err)
	}
}

// TestCancelMidTransaction cancels a batch after its first table's INSERT
// succeeded, while the second table's INSERT waits for a row lock held by
// another transaction: the result is Temporary and nothing is stored.
func TestCancelMidTransaction(t *testing.T) {
	t.Parallel()
	srv := testServer(t)
	a, b := srv.table(t), srv.table(t)
	c := srv.config(a)
	c.TableRoutes = []sqlconfig.UpsertRoute{{Subject: "b.>", Table: b}}
	c.Mode = "insert"
	s := open(t, c)

	// Hold a lock on the key the second INSERT needs.
	ctx := context.Background()
	lock, err := srv.admin.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback()
	if _, err := lock.ExecContext(ctx, "insert into `"+b+"` (STREAM_NAME, STREAM_SEQUENCE, SUBJECT, RECEIVED_AT_EPOCH_NS, STORED_AT_EPOCH_NS) values ('S', 2, 'b.x', 0, 0)"); err != nil {
		t.Fatal(err)
	}

	wctx, cancel := context.WithCancel(t.Context())
	done := make(chan []sink.Result, 1)
	go func() {
		done <- s.WriteBatch(wctx, []*sink.Envelope{env("a.x", "S", 1, "", `{}`), env("b.x", "S", 2, "", `{}`)})
	}()
	// Wait until the sink's INSERT into b runs: the row lock keeps it
	// from finishing, and the INSERT into a is done by then.
	natstest.WaitFor(t, 20*time.Second, func() error {
		select {
		case rs := <-done:
			t.Fatalf("WriteBatch returned before blocking: %+v", rs)
		default:
		}
		var n int
		err := srv.admin.QueryRowContext(ctx, "select count(*) from information_schema.processlist where info like ?", "insert into `"+b+"`%").Scan(&n)
		if err == nil && n == 0 {
			err = fmt.Errorf("the INSERT into %s is not running yet", b)
		}
		return err
	})
	cancel()
	rs := <-done
	for i, r := range rs {
		if r.Outcome != sink.Temporary {
			t.Errorf("message %d = %+v, want Temporary", i, r)
		}
	}
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := srv.count(t, a); n != 0 {
		t.Errorf("rows in %s after cancellation = %d, want 0 (rolled back)", a, n)
	}
	// The pool recovers: the same sink writes the batch afterwards.
	if got := outcomes(s.WriteBatch(t.Context(), []*sink.Envelope{env("a.x", "S", 1, "", `{}`), env("b.x", "S", 2, "", `{}`)})); !cmp.Equal(got, []sink.Outcome{sink.Committed, sink.Committed}) {
		t.Errorf("retry = %v", got)
	}
}

func TestConcurrentWriteBatch(t *testing.T) {
	t.Parallel()
	srv := testServer(t)
	table := srv.table(t)
	c := srv.config(table)
	c.PoolSize = 3
	s := open(t, c)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for round := range 5 {
				var b []*sink.Envelope
				for i := range 20 {
					b = append(b, env("c", fmt.Sprintf("G%d", g), uint64(round*20+i+1), "", `{}`))
				}
				// Every goroutine also redelivers the previous round.
				if round > 0 {
					b = append(b, env("c", fmt.Sprintf("G%d", g), uint64(round*20), "", `{}`))
				}
				for i, r := range s.WriteBatch(t.Context(), b) {
					if !r.Outcome.Acked() {
						t.Errorf("goroutine %d round %d message %d = %v (%v)", g, round, i, r.Outcome, r.Err)
					}
				}
			}
		})
	}
	wg.Wait()
	got := srv.query(t, "select count(*), count(distinct STREAM_NAME, STREAM_SEQUENCE) from `"+table+"`")
	if diff := cmp.Diff([][]any{{int64(800), int64(800)}}, got); diff != "" {
		t.Errorf("rows, distinct keys (-want +got):\n%s", diff)
	}
}

// TestRoutes writes one batch to two tables in one transaction, with a
// route that uses a message-id key.
func TestRoutes(t *testing.T) {
	t.Parallel()
	srv := testServer(t)
	a, b := srv.table(t), srv.table(t)
	c := srv.config(a)
	c.Mode = "insert_ignore"
	c.TableRoutes = []sqlconfig.UpsertRoute{{Subject: "audit.>", Table: b, Idempotency: &sqlconfig.Idempotency{Strategy: "message_id", Columns: sqlconfig.DefaultKeyColumns()}}}
	s := open(t, c)
	batch := []*sink.Envelope{
		env("orders.1", "S", 1, "", `{}`),
		env("audit.1", "S", 2, "m-1", `{}`),
		env("audit.1", "S", 3, "m-1", `{}`), // same message id: reduced to a duplicate
		env("orders.2", "S", 4, "", `{}`),
	}
	want := []sink.Outcome{sink.Committed, sink.Committed, sink.Duplicate, sink.Committed}
	if got := outcomes(s.WriteBatch(t.Context(), batch)); !cmp.Equal(got, want) {
		t.Errorf("outcomes = %v, want %v", got, want)
	}
	if got := srv.query(t, "select STREAM_SEQUENCE from `"+a+"` order by 1"); !cmp.Equal(got, [][]any{{int64(1)}, {int64(4)}}) {
		t.Errorf("%s sequences = %v", a, got)
	}
	if got := srv.query(t, "select STREAM_SEQUENCE, MESSAGE_ID from `"+b+"`"); !cmp.Equal(got, [][]any{{int64(2), "m-1"}}) {
		t.Errorf("%s rows = %v", b, got)
	}
	// The auto-created route table has the _idem unique key.
	var create string
	var name string
	if err := srv.admin.QueryRowContext(t.Context(), "show create table `"+b+"`").Scan(&name, &create); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(create, "UNIQUE KEY `"+b+"_idem` (`MESSAGE_ID`)") {
		t.Errorf("route table DDL lacks the _idem key:\n%s", create)
	}
}

// TestLargeBatchSplits writes a batch of many statements' worth of rows.
func TestLargeBatchSplits(t *testing.T) {
	t.Parallel()
	srv := testServer(t)
	table := srv.table(t)
	s := open(t, srv.config(table))
	pad := strings.Repeat("x", 3000)
	var b []*sink.Envelope
	for i := range 1000 { // 3 MB of values, ten full chunks
		b = append(b, env("big", "S", uint64(i+1), "", `{"pad":"`+pad+`"}`))
	}
	if n := len(chunks(rowsOf(t, s, b))); n < 2 {
		t.Fatalf("chunks = %d, want the batch split", n)
	}
	for i, r := range s.WriteBatch(t.Context(), b) {
		if r.Outcome != sink.Committed {
			t.Fatalf("message %d = %+v", i, r)
		}
	}
	if n := srv.count(t, table); n != 1000 {
		t.Errorf("rows = %d, want 1000", n)
	}
}

func rowsOf(t *testing.T, s *Sink, b []*sink.Envelope) []*sqlmodel.Row {
	t.Helper()
	var rows []*sqlmodel.Row
	for _, e := range b {
		r, err := s.model.BuildRow(e, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	return rows
}

func TestHealthcheck(t *testing.T) {
	t.Parallel()
	srv := testServer(t)
	s := open(t, srv.config(srv.table(t)))
	if err := s.Healthcheck(t.Context()); err != nil {
		t.Errorf("Healthcheck = %v", err)
	}
	if err := s.Stop(t.Context()); err != nil {
		t.Errorf("Stop = %v", err)
	}
	if err := s.Stop(t.Context()); err != nil {
		t.Errorf("second Stop = %v", err)
	}
}

func TestPoolNameAttribute(t *testing.T) {
	t.Parallel()
	srv := testServer(t)
	c := srv.config(srv.table(t))
	name := "nats-sink.test:" + strings.TrimPrefix(c.Table, "nst_")
	c.PoolName = &name
	s := open(t, c)
	if err := s.Healthcheck(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The server shows connection attributes only with performance_schema
	// on (off by default in MariaDB); check them when it is.
	var n int
	err := srv.admin.QueryRowContext(t.Context(), "select count(*) from performance_schema.session_connect_attrs where attr_name = 'program_name' and attr_value = ?", name).Scan(&n)
	switch {
	case err != nil:
		t.Logf("performance_schema unavailable (%v): connecting with the attribute set is all this test checks", err)
	case n == 0:
		var on string
		srv.admin.QueryRowContext(t.Context(), "select @@performance_schema").Scan(&on)
		if on == "1" || on == "ON" {
			t.Errorf("no session with program_name = %q", name)
		}
	}
}
