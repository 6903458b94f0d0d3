package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sink/sinktest"
	"github.com/nats-sinks/nats-sink/sqlconfig"
	"github.com/nats-sinks/nats-sink/telemetry"
)

var received = time.Date(2026, 5, 29, 10, 0, 0, 250000000, time.UTC)

// env builds an envelope the way the runner does, from a JetStream reply
// subject carrying stream ORDERS and sequence seq.
func env(subject string, seq uint64, id, body string) *sink.Envelope {
	h := map[string][]string{}
	if id != "" {
		h["Nats-Msg-Id"] = []string{id}
	}
	reply := fmt.Sprintf("$JS.ACK.ORDERS.c.1.%d.%d.1780048800123456000.0", seq, seq)
	return intake.Build(intake.Message{Subject: subject, Reply: reply, Data: []byte(body), Header: h}, nil, received)
}

func config(t *testing.T) Config {
	t.Helper()
	c := Default()
	c.Path = filepath.Join(t.TempDir(), "db", "events.db")
	return c
}

func open(t *testing.T, c Config) *Sink {
	t.Helper()
	return openWith(t, c, sink.Deps{})
}

// openWith is open with deps.
func openWith(t *testing.T, c Config, deps sink.Deps) *Sink {
	t.Helper()
	s, err := New(t.Context(), c, deps)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	s.w.Now = func() time.Time { return time.Date(2026, 5, 29, 10, 0, 0, 300000000, time.UTC) }
	t.Cleanup(func() { s.Stop(context.Background()) })
	return s
}

// query opens the database read-only through a second handle.
func query(t *testing.T, path, q string) [][]any {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out [][]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, vals)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func outcomes(rs []sink.Result) []sink.Outcome {
	out := make([]sink.Outcome, len(rs))
	for i, r := range rs {
		out[i] = r.Outcome
	}
	return out
}

func count(t *testing.T, path, table string) int64 {
	t.Helper()
	return query(t, path, "select count(*) from "+table)[0][0].(int64)
}

func TestGoldenRow(t *testing.T) {
	c := config(t)
	s := open(t, c)
	e := shapestest.Golden()
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{e})
	if rs[0].Outcome != sink.Committed {
		t.Fatalf("WriteBatch = %+v", rs[0])
	}
	got := query(t, s.Path(), `select stream_name, stream_sequence, subject, message_id, priority, classification, labels,
		message_created_at_epoch_ns, jetstream_timestamp_epoch_ns, received_at_epoch_ns, stored_at_epoch_ns,
		payload_json, headers_json, mission_metadata_json, security_labels_json, received_at is not null from nats_sink_events`)
	want := [][]any{{"ORDERS", int64(42), "orders.created", "O-1001", "high", nil, "billing;eu",
		int64(1780048799500000000), int64(1780048800123456000), int64(1780048800250000000), int64(1780048800300000000),
		`{"amount":42.5,"note":"caf\u00e9","order_id":"O-1001"}`,
		`{"Nats-Msg-Id":"O-1001","Nats-Sinks-Labels":"billing; eu ;billing","Nats-Sinks-Priority":"high","Nats-Time-Stamp":"2026-05-29T09:59:59.5Z","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`,
		"null", "null", int64(1)}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}

func TestModes(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mode   string
		update *[]string
		second []sink.Outcome // redelivery of the same two messages
		stored string         // stored_at after redelivery: "first" or "second"
	}{
		{"insert: redelivery is a shared permanent key violation", "insert", nil, []sink.Outcome{sink.Permanent, sink.Permanent}, "first"},
		{"insert_ignore: redelivery is a duplicate", "insert_ignore", nil, []sink.Outcome{sink.Duplicate, sink.Duplicate}, "first"},
		{"upsert: redelivery rewrites", "upsert", nil, []sink.Outcome{sink.Committed, sink.Committed}, "second"},
		{"upsert with no update columns: duplicate", "upsert", &[]string{}, []sink.Outcome{sink.Duplicate, sink.Duplicate}, "first"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := config(t)
			c.Mode = tt.mode
			c.UpsertUpdateColumns = tt.update
			s := open(t, c)
			batch := []*sink.Envelope{env("a", 1, "", `{"n":1}`), env("a", 2, "", `{"n":2}`)}
			if diff := cmp.Diff([]sink.Outcome{sink.Committed, sink.Committed}, outcomes(s.WriteBatch(t.Context(), batch))); diff != "" {
				t.Fatalf("first write (-want +got):\n%s", diff)
			}
			s.w.Now = func() time.Time { return time.Date(2026, 5, 29, 11, 0, 0, 0, time.UTC) }
			rs := s.WriteBatch(t.Context(), batch)
			if diff := cmp.Diff(tt.second, outcomes(rs)); diff != "" {
				t.Fatalf("redelivery (-want +got):\n%s", diff)
			}
			if tt.mode == "insert" && (!rs[0].Shared || rs[0].ErrorType != sink.PermanentSinkError) {
				t.Errorf("insert redelivery = %+v, want Shared PermanentSinkError", rs[0])
			}
			if n := count(t, s.Path(), "nats_sink_events"); n != 2 {
				t.Errorf("rows = %d, want 2", n)
			}
			want := int64(1780052400000000000)
			if tt.stored == "first" {
				want = 1780048800300000000
			}
			got := query(t, s.Path(), "select distinct stored_at_epoch_ns from nats_sink_events")
			if diff := cmp.Diff([][]any{{want}}, got); diff != "" {
				t.Errorf("stored_at (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUnbuildableRowIsolated(t *testing.T) {
	c := config(t)
	c.PayloadMode = "json_only"
	s := open(t, c)
	noStream := env("a", 3, "", `{}`)
	noStream.Stream = ""
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", 1, "", `{}`), env("a", 2, "", `not json`), noStream, env("a", 4, "", `[]`)})
	want := []sink.Outcome{sink.Committed, sink.Permanent, sink.Permanent, sink.Committed}
	if diff := cmp.Diff(want, outcomes(rs)); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
	if rs[1].ErrorType != sink.SerializationError || rs[2].ErrorType != sink.ValidationError || rs[1].Shared || rs[2].Shared {
		t.Errorf("failures = %+v, %+v; want unshared SerializationError, ValidationError", rs[1], rs[2])
	}
	if got := query(t, s.Path(), "select stream_sequence from nats_sink_events order by 1"); !cmp.Equal(got, [][]any{{int64(1)}, {int64(4)}}) {
		t.Errorf("stored sequences = %v, want 1, 4", got)
	}
}

func TestConstraintViolationIsSharedPermanent(t *testing.T) {
	c := config(t)
	c.AutoCreate = false
	s := open(t, c)
	// A CHECK constraint rejects one row's content: the whole transaction
	// fails, nothing is stored, and every row shares the permanent result.
	db, err := sql.Open("sqlite", "file:"+s.Path())
	if err != nil {
		t.Fatal(err)
	}
	m, _ := sqlmodel.Compile(&c.Shared, sqlmodel.SQLite, c.options())
	ddl := m.DDL(m.Tables[0])
	ddl = ddl[:len(ddl)-2] + ",\n    check (subject <> 'bad')\n)"
	if _, err := db.Exec(ddl); err != nil {
		t.Fatal(err)
	}
	db.Close()
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{env("good", 1, "", `{}`), env("bad", 2, "", `{}`)})
	for i, r := range rs {
		if r.Outcome != sink.Permanent || !r.Shared {
			t.Errorf("result %d = %+v, want Shared Permanent", i, r)
		}
	}
	if n := count(t, s.Path(), "nats_sink_events"); n != 0 {
		t.Errorf("rows = %d after a failed transaction, want 0", n)
	}
}

func TestCancelledContextCommitsNothing(t *testing.T) {
	s := open(t, config(t))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	rs := s.WriteBatch(ctx, []*sink.Envelope{env("a", 1, "", `{}`), env("a", 2, "", `{}`)})
	if diff := cmp.Diff([]sink.Outcome{sink.Temporary, sink.Temporary}, outcomes(rs)); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
	if n := count(t, s.Path(), "nats_sink_events"); n != 0 {
		t.Errorf("rows = %d, want 0", n)
	}
	// The connection is still usable afterwards.
	if got := outcomes(s.WriteBatch(t.Context(), []*sink.Envelope{env("a", 1, "", `{}`)})); got[0] != sink.Committed {
		t.Errorf("write after cancellation = %v", got)
	}
}

func TestCancelDuringExecRollsBack(t *testing.T) {
	s := open(t, config(t))
	ctx, cancel := context.WithCancel(t.Context())
	// Cancel once the rows are executed but before COMMIT: the Writer must
	// roll back instead of committing.
	s.w.Begin = func(ctx context.Context) (sqlmodel.Tx, error) {
		tx, err := s.begin(ctx)
		return cancelAfterExec{tx, cancel}, err
	}
	rs := s.WriteBatch(ctx, []*sink.Envelope{env("a", 1, "", `{}`), env("a", 2, "", `{}`)})
	if diff := cmp.Diff([]sink.Outcome{sink.Temporary, sink.Temporary}, outcomes(rs)); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
	if n := count(t, s.Path(), "nats_sink_events"); n != 0 {
		t.Errorf("rows = %d, want 0 (rolled back)", n)
	}
}

type cancelAfterExec struct {
	sqlmodel.Tx
	cancel func()
}

func (c cancelAfterExec) Exec(ctx context.Context, g sqlmodel.Group) (int64, error) {
	n, err := c.Tx.Exec(ctx, g)
	c.cancel()
	return n, err
}

func TestMissingTableIsDestination(t *testing.T) {
	c := config(t)
	c.AutoCreate = false
	s := open(t, c)
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", 1, "", `{}`)})
	if rs[0].Outcome != sink.Destination || !rs[0].Shared {
		t.Errorf("WriteBatch = %+v, want Shared Destination", rs[0])
	}
	if err := s.Healthcheck(t.Context()); err == nil || sink.Failed(err).Outcome != sink.Destination {
		t.Errorf("Healthcheck = %v, want a missing-table Destination error", err)
	}
}

// remountReadOnly makes dir a read-only bind mount of itself until the test
// ends: chmod does not stop root, EROFS stops everyone.
func remountReadOnly(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for a read-only bind mount (non-root tests run as the owner, whom chmod does not stop reliably either)")
	}
	if out, err := exec.Command("mount", "--bind", dir, dir).CombinedOutput(); err != nil {
		t.Skipf("cannot bind-mount (%v: %s)", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	if out, err := exec.Command("mount", "-o", "remount,ro,bind", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot remount read-only (%v: %s)", err, out)
	}
}

func TestReadOnlyDatabaseIsDestination(t *testing.T) {
	t.Run("at start", func(t *testing.T) {
		c := config(t)
		c.JournalMode = "delete"
		s0 := open(t, c)
		s0.Stop(t.Context())
		remountReadOnly(t, filepath.Dir(c.Path))
		s, err := New(t.Context(), c, sink.Deps{})
		if err == nil {
			s.Stop(t.Context()) // let the read-only mount go
		}
		if r := sink.Failed(err); err == nil || r.Outcome != sink.Destination {
			t.Fatalf("New on a read-only database = %v (class %v), want a Destination error", err, r.Outcome)
		}
	})
	t.Run("while running", func(t *testing.T) {
		c := config(t)
		c.JournalMode = "delete" // the write needs a new -journal file
		s := open(t, c)
		remountReadOnly(t, filepath.Dir(c.Path))
		rs := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", 1, "", `{}`), env("a", 2, "", `{}`)})
		for i, r := range rs {
			if r.Outcome != sink.Destination || !r.Shared {
				t.Errorf("WriteBatch result %d = %+v, want Shared Destination", i, r)
			}
		}
		if err := s.Healthcheck(t.Context()); sink.Failed(err).Outcome != sink.Destination {
			t.Errorf("Healthcheck = %v, want a Destination error", err)
		}
	})
}

func TestConcurrentWriteBatch(t *testing.T) {
	s := open(t, config(t))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for b := range 5 {
				var batch []*sink.Envelope
				for i := range 10 {
					batch = append(batch, env("a", uint64(g*1000+b*10+i+1), "", `{}`))
				}
				for i, r := range s.WriteBatch(t.Context(), batch) {
					if r.Outcome != sink.Committed {
						t.Errorf("goroutine %d batch %d row %d: %+v", g, b, i, r)
					}
				}
			}
		})
	}
	wg.Wait()
	if n := count(t, s.Path(), "nats_sink_events"); n != 200 {
		t.Errorf("rows = %d, want 200", n)
	}
}

func TestDurabilitySettings(t *testing.T) {
	for _, tt := range []struct{ journal, sync, wantJournal, wantSync string }{
		{"wal", "full", "wal", "2"},
		{"delete", "extra", "delete", "3"},
	} {
		t.Run(tt.journal+"_"+tt.sync, func(t *testing.T) {
			c := config(t)
			c.JournalMode, c.Synchronous, c.BusyTimeoutMS = tt.journal, tt.sync, 1234
			s := open(t, c)
			var jm string
			var sync, busy int
			s.conn.QueryRowContext(t.Context(), "pragma journal_mode").Scan(&jm)
			s.conn.QueryRowContext(t.Context(), "pragma synchronous").Scan(&sync)
			s.conn.QueryRowContext(t.Context(), "pragma busy_timeout").Scan(&busy)
			if got := []string{jm, strconv.Itoa(sync), strconv.Itoa(busy)}; !cmp.Equal(got, []string{tt.wantJournal, tt.wantSync, "1234"}) {
				t.Errorf("pragmas = %v, want %s %s 1234", got, tt.wantJournal, tt.wantSync)
			}
		})
	}
}

// TestPageSize: a database the sink creates gets 16 KB pages (in WAL and
// rollback-journal mode alike); an existing database keeps its own page
// size and is written as before.
func TestPageSize(t *testing.T) {
	for _, journal := range []string{"wal", "delete"} {
		t.Run("new "+journal, func(t *testing.T) {
			c := config(t)
			c.JournalMode = journal
			s := open(t, c)
			if rs := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", 1, "", `{}`)}); rs[0].Outcome != sink.Committed {
				t.Fatalf("WriteBatch = %+v", rs[0])
			}
			if got := query(t, s.Path(), "pragma page_size"); len(got) != 1 || got[0][0] != int64(pageSize) {
				t.Errorf("page_size = %v, want %d", got, pageSize)
			}
		})
	}
	t.Run("existing", func(t *testing.T) {
		c := config(t)
		if err := os.MkdirAll(filepath.Dir(c.Path), 0o755); err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open("sqlite", "file:"+c.Path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec("pragma page_size = 4096; create table other (x)"); err != nil {
			t.Fatal(err)
		}
		db.Close()
		s := open(t, c)
		if rs := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", 1, "", `{}`)}); rs[0].Outcome != sink.Committed {
			t.Fatalf("WriteBatch = %+v", rs[0])
		}
		if got := query(t, s.Path(), "pragma page_size"); len(got) != 1 || got[0][0] != int64(4096) {
			t.Errorf("page_size = %v, want 4096 (kept)", got)
		}
	})
}

func TestRoutesAndHealthcheck(t *testing.T) {
	c := config(t)
	c.TableRoutes = []sqlconfig.UpsertRoute{{Subject: "audit.>", Table: "audit_events"}}
	s := open(t, c)
	if err := s.Healthcheck(t.Context()); err != nil {
		t.Fatalf("Healthcheck: %v", err)
	}
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{env("audit.login", 1, "", `{}`), env("orders.new", 2, "", `{}`), env("audit.logout", 3, "", `{}`)})
	if diff := cmp.Diff([]sink.Outcome{sink.Committed, sink.Committed, sink.Committed}, outcomes(rs)); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
	if a, d := count(t, s.Path(), "audit_events"), count(t, s.Path(), "nats_sink_events"); a != 2 || d != 1 {
		t.Errorf("audit_events %d, nats_sink_events %d; want 2, 1", a, d)
	}
}

func TestMessageIDStrategyRedelivery(t *testing.T) {
	c := config(t)
	c.Mode = "insert_ignore"
	c.Idempotency.Strategy = sqlconfig.StrategyMessageID
	s := open(t, c)
	// The same message id under two stream sequences (a producer retry)
	// is stored once.
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", 1, "id-1", `{}`), env("a", 2, "id-1", `{}`)})
	if diff := cmp.Diff([]sink.Outcome{sink.Committed, sink.Duplicate}, outcomes(rs)); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
	if n := count(t, s.Path(), "nats_sink_events"); n != 1 {
		t.Errorf("rows = %d, want 1", n)
	}
}

func TestConformance(t *testing.T) {
	for _, mode := range []string{"upsert", "insert_ignore"} {
		t.Run(mode, func(t *testing.T) {
			c := config(t)
			c.Mode = mode
			sinktest.Run(t, sinktest.Harness{
				Open: func(t *testing.T) sink.Sink {
					s, err := New(t.Context(), c, sink.Deps{})
					if err != nil {
						t.Fatalf("New: %v", err)
					}
					return s
				},
				ReadBack: func(t *testing.T) []sinktest.Stored {
					var out []sinktest.Stored
					for _, r := range query(t, c.Path, "select stream_name, stream_sequence from nats_sink_events") {
						out = append(out, sinktest.Stored{Stream: r[0].(string), Sequence: uint64(r[1].(int64))})
					}
					return out
				},
				Transactional: true,
				Idempotent:    true,
			})
		})
	}
}

// BenchmarkWriteBatch writes fresh batches of 256-byte JSON payloads into a
// database in the temp dir (WAL, synchronous FULL, upsert: the defaults) and
// reports msgs/s.
func BenchmarkWriteBatch(b *testing.B) {
	body := make([]byte, 0, 256)
	body = append(body, `{"data":"`...)
	for len(body) < 254 {
		body = append(body, 'x')
	}
	body = append(body, `"}`...)
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			c := Default()
			c.Path = filepath.Join(b.TempDir(), "bench.db")
			s, err := New(b.Context(), c, sink.Deps{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Stop(context.Background())
			seq := uint64(0)
			for b.Loop() {
				b.StopTimer() // envelopes come from the runner; measure the sink
				batch := make([]*sink.Envelope, n)
				for i := range batch {
					seq++
					batch[i] = env("bench", seq, "", string(body))
				}
				b.StartTimer()
				for _, r := range s.WriteBatch(b.Context(), batch) {
					if r.Outcome != sink.Committed {
						b.Fatal(r)
					}
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

func TestBusyDatabaseIsTemporary(t *testing.T) {
	c := config(t)
	c.BusyTimeoutMS = 0
	s := open(t, c)
	other, err := sql.Open("sqlite", "file:"+s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "begin immediate"); err != nil {
		t.Fatal(err)
	}
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", 1, "", `{}`)})
	if rs[0].Outcome != sink.Temporary || !rs[0].Shared {
		t.Errorf("WriteBatch while another writer holds the lock = %+v, want Shared Temporary", rs[0])
	}
	if err := s.Healthcheck(t.Context()); err == nil || sink.Failed(err).Outcome != sink.Temporary {
		t.Errorf("Healthcheck while locked = %v, want a temporary error", err)
	}
	conn.ExecContext(t.Context(), "rollback")
	if rs := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", 1, "", `{}`)}); rs[0].Outcome != sink.Committed {
		t.Errorf("WriteBatch after the lock was released = %+v", rs[0])
	}
}

func TestUpsertKeyWithoutUniqueIndexIsDestination(t *testing.T) {
	c := config(t)
	s0 := open(t, c) // creates the table with the default key only
	s0.Stop(t.Context())
	c.Idempotency.Strategy = sqlconfig.StrategyMessageID
	c.AutoCreate = false
	s := open(t, c)
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", 1, "m1", `{}`)})
	if rs[0].Outcome != sink.Destination {
		t.Errorf("upsert on a key without a unique index = %+v, want Destination", rs[0])
	}
}

func TestSchemaAndEffective(t *testing.T) {
	props := fields.Schema(Default())["properties"].(map[string]any)
	for _, k := range []string{"path", "mode", "upsert_update_columns", "auto_create", "table", "table_routes", "columns", "idempotency"} {
		if _, ok := props[k]; !ok {
			t.Errorf("schema lacks %q", k)
		}
	}
	eff := fields.Effective(Default())
	if eff["table"] != "nats_sink_events" || eff["upsert_update_columns"] != nil || eff["synchronous"] != "full" {
		t.Errorf("Effective = %v", eff)
	}
}

func TestMetrics(t *testing.T) {
	m, err := telemetry.NewMetrics(nil, "nats_sinks")
	if err != nil {
		t.Fatal(err)
	}
	c := config(t)
	c.Mode = "insert_ignore"
	s := openWith(t, c, sink.Deps{Metrics: m.ForSinks()})
	batch := []*sink.Envelope{env("a", 1, "", `{}`), env("a", 2, "", `{}`)}
	s.WriteBatch(t.Context(), batch)
	s.WriteBatch(t.Context(), batch)
	if got := s.dups.(*telemetry.Counter).Value(); got != 2 {
		t.Errorf("sqlite_duplicates_total = %d, want 2", got)
	}
	if got := s.commit.(*telemetry.Histogram).Summary().Count; got != 2 {
		t.Errorf("sqlite_commit_seconds count = %v, want 2", got)
	}
	snap := string(m.Snapshot(time.Now()))
	for _, name := range []string{`"sqlite_duplicates_total":2`, `"sqlite_commit_seconds":{"count":2.0`} {
		if !strings.Contains(snap, name) {
			t.Errorf("snapshot lacks %s: %s", name, snap)
		}
	}
}

// TestMetricsShared: two sinks given one Metrics both start (every SQL
// sink treats a name the Metrics already holds alike, see
// sqlmodel.Counter), and the first one's writes are still counted.
func TestMetricsShared(t *testing.T) {
	m, err := telemetry.NewMetrics(nil, "nats_sinks")
	if err != nil {
		t.Fatal(err)
	}
	c1, c2 := config(t), config(t)
	s1 := openWith(t, c1, sink.Deps{Metrics: m.ForSinks()})
	s2 := openWith(t, c2, sink.Deps{Metrics: m.ForSinks()})
	for _, s := range []*Sink{s1, s2} {
		if rs := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", 1, "", `{}`)}); rs[0].Outcome != sink.Committed {
			t.Fatalf("WriteBatch = %+v", rs[0])
		}
	}
	if got := s1.commit.(*telemetry.Histogram).Summary().Count; got < 1 {
		t.Errorf("sqlite_commit_seconds count = %v, want the first sink's commit counted", got)
	}
}

// TestReceivedAt: with the recommended DDL the sink binds received_at
// itself, in the text the column's default would produce, and an upsert
// keeps the first value as the default would; a column with another
// default is left to the database.
func TestReceivedAt(t *testing.T) {
	stamp := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)
	for _, tt := range []struct {
		name  string
		ddl   string // "" = auto_create
		bound bool
	}{
		{"recommended default is bound", "", true},
		{"other default is left to the database", `create table nats_sink_events (stream_name text, stream_sequence integer,
			subject text, message_id text, priority text, classification text, labels text,
			received_at text not null default 'db', message_created_at_epoch_ns integer, jetstream_timestamp_epoch_ns integer,
			received_at_epoch_ns integer, stored_at_epoch_ns integer, payload_json text, headers_json text, metadata_json text,
			mission_metadata_json text, security_labels_json text, primary key (stream_name, stream_sequence))`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := config(t)
			if tt.ddl != "" {
				if err := os.MkdirAll(filepath.Dir(c.Path), 0o750); err != nil {
					t.Fatal(err)
				}
				db, err := sql.Open("sqlite", "file:"+c.Path)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := db.Exec(tt.ddl); err != nil {
					t.Fatal(err)
				}
				db.Close()
				c.AutoCreate = false
			}
			s := open(t, c)
			before := time.Now().UTC().Format(receivedAtLayout)
			if rs := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", 1, "", `{}`)}); rs[0].Outcome != sink.Committed {
				t.Fatalf("WriteBatch = %+v", rs[0])
			}
			after := time.Now().UTC().Format(receivedAtLayout)
			if got := s.stmts[s.model.Tables[0]].receivedAt; got != tt.bound {
				t.Errorf("statement binds received_at = %v, want %v", got, tt.bound)
			}
			first := query(t, s.Path(), "select received_at from nats_sink_events")[0][0].(string)
			if tt.bound && (!stamp.MatchString(first) || first < before || first > after) {
				t.Errorf("received_at = %q, want a %s stamp between %s and %s", first, receivedAtLayout, before, after)
			}
			if !tt.bound && first != "db" {
				t.Errorf("received_at = %q, want the column default %q", first, "db")
			}
			// Redelivery updates the row, not received_at.
			if rs := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", 1, "", `{"v":2}`)}); rs[0].Outcome != sink.Committed {
				t.Fatalf("second WriteBatch = %+v", rs[0])
			}
			if got := query(t, s.Path(), "select received_at from nats_sink_events")[0][0].(string); got != first {
				t.Errorf("received_at after upsert = %q, want %q kept", got, first)
			}
		})
	}
}

// TestChunkedWritesMatchRowByRow writes the same batches through the sink
// (full chunks of rows go through one multi-row statement) and through a
// sink that runs the one-row statement per row (the spec's model), and
// requires the same results and the same table contents. The batches cross
// chunk boundaries, repeat keys inside a chunk (the last row's update
// columns must win, the first row's other columns stay), and redeliver rows
// that are already stored.
func TestChunkedWritesMatchRowByRow(t *testing.T) {
	partial := []string{"payload_json"}
	for _, tt := range []struct {
		name   string
		mode   string
		update *[]string
	}{
		{"upsert", "upsert", nil},
		{"upsert of payload only", "upsert", &partial},
		{"insert", "insert", nil},
		{"insert_ignore (row by row in both)", "insert_ignore", nil},
		{"upsert without update columns (row by row in both)", "upsert", &[]string{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sinks := make([]*Sink, 2)
			for i := range sinks {
				c := config(t)
				c.Mode, c.UpsertUpdateColumns = tt.mode, tt.update
				sinks[i] = open(t, c)
			}
			rowByRow := sinks[1]
			rowByRow.chunk = 1
			batches := [][]*sink.Envelope{
				seqRange(1, 200, "first"), // 3 full chunks and a tail of 8
				append(seqRange(150, 100, "again"), // 50 stored rows, 50 new
					env("a", 170, "", `{"v":"repeated inside the chunk"}`)),
				seqRange(300, chunkRows, "exactly one chunk"),
			}
			// A key repeated inside one chunk: the second row updates the first.
			batches[2][10] = env("a", 300, "", `{"v":"same key as row 0"}`)
			for i, b := range batches {
				var got [2][]sink.Result
				for j, s := range sinks {
					s.w.Now = func() time.Time { return time.Date(2026, 5, 29, 10, 0, i, 0, time.UTC) }
					got[j] = s.WriteBatch(t.Context(), b)
				}
				if diff := cmp.Diff(outcomes(got[1]), outcomes(got[0])); diff != "" {
					t.Errorf("batch %d: outcomes differ from row-by-row (-row by row +chunked):\n%s", i, diff)
				}
			}
			const all = `select stream_name, stream_sequence, subject, message_id, payload_json, headers_json,
				metadata_json, stored_at_epoch_ns, received_at is not null from nats_sink_events order by stream_sequence`
			want, got := query(t, rowByRow.Path(), all), query(t, sinks[0].Path(), all)
			if len(want) == 0 && tt.mode != "insert" {
				t.Fatal("row-by-row sink stored nothing: the comparison would prove nothing")
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("table contents differ from row-by-row (-row by row +chunked):\n%s", diff)
			}
		})
	}
}

// seqRange returns n envelopes on subject "a" with stream sequences from
// first, each with a payload naming tag and its sequence.
func seqRange(first uint64, n int, tag string) []*sink.Envelope {
	out := make([]*sink.Envelope, n)
	for i := range out {
		seq := first + uint64(i)
		out[i] = env("a", seq, "", fmt.Sprintf(`{"v":%q,"seq":%d}`, tag, seq))
	}
	return out
}

// TestFileModes: a database the sink creates is 0600, and so are the -wal
// and -shm files next to it; a directory it creates is 0750. Rows hold
// payloads, so group and others get nothing (whatever the umask allows).
func TestFileModes(t *testing.T) {
	c := config(t)
	c.CreateDirectory = true
	s := open(t, c)
	if r := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", 1, "", `{}`)})[0]; r.Outcome != sink.Committed {
		t.Fatalf("write = %+v", r)
	}
	for _, f := range []struct {
		path string
		want os.FileMode
	}{
		{filepath.Dir(c.Path), os.ModeDir | 0o750},
		{c.Path, 0o600},
		{c.Path + "-wal", 0o600},
		{c.Path + "-shm", 0o600},
	} {
		st, err := os.Stat(f.path)
		if err != nil {
			t.Errorf("stat: %v", err)
			continue
		}
		if st.Mode() != f.want {
			t.Errorf("mode of %s = %v, want %v", filepath.Base(f.path), st.Mode(), f.want)
		}
	}
}
