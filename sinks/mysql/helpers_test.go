package mysql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
)

// testUser is created (with testPassword) when the test DSN has no
// password, because the sink requires one.
const (
	testUser     = "nats_sink_test"
	testPassword = "nats-sink-test-pw"
)

var received = time.Date(2026, 5, 29, 10, 0, 0, 250000000, time.UTC)

// server is the test database: an admin handle for set-up and read-back,
// and the connection keys a sink config needs.
type server struct {
	admin          *sql.DB
	host           string
	port           int
	database, user string
	password       string
}

// testServer connects to NATS_SINKS_TEST_MYSQL_DSN (go-sql-driver DSN, e.g.
// root@tcp(127.0.0.1:3306)/test); it skips locally when unset and fails in
// CI (NATS_SINKS_REQUIRE_SERVICES=1).
func testServer(t testing.TB) *server {
	t.Helper()
	dsn := natstest.Service(t, "NATS_SINKS_TEST_MYSQL_DSN")
	dc, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("NATS_SINKS_TEST_MYSQL_DSN: %v", err)
	}
	host, portText, err := net.SplitHostPort(dc.Addr)
	if err != nil {
		t.Fatalf("NATS_SINKS_TEST_MYSQL_DSN address %q: %v", dc.Addr, err)
	}
	port, _ := strconv.Atoi(portText)
	dc.Logger = &mysql.NopLogger{}
	conn, err := mysql.NewConnector(dc)
	if err != nil {
		t.Fatal(err)
	}
	admin := sql.OpenDB(conn)
	t.Cleanup(func() { admin.Close() })
	srv := &server{admin: admin, host: host, port: port, database: dc.DBName, user: dc.User, password: dc.Passwd}
	if srv.password == "" {
		srv.user, srv.password = testUser, testPassword
		tc := dc.Clone()
		tc.User, tc.Passwd = testUser, testPassword
		if tconn, err := mysql.NewConnector(tc); err == nil {
			db := sql.OpenDB(tconn)
			err = db.PingContext(context.Background())
			db.Close()
			if err == nil {
				return srv // created by an earlier test
			}
		}
		for _, h := range []string{"%", "localhost"} {
			for _, q := range []string{
				fmt.Sprintf("create user if not exists '%s'@'%s' identified by '%s'", testUser, h, testPassword),
				fmt.Sprintf("alter user '%s'@'%s' identified by '%s'", testUser, h, testPassword),
				fmt.Sprintf("grant all on `%s`.* to '%s'@'%s'", dc.DBName, testUser, h),
			} {
				if _, err := admin.ExecContext(context.Background(), q); err != nil {
					t.Fatalf("create test user: %v", err)
				}
			}
		}
	}
	return srv
}

// table returns a unique table name, dropped when the test ends.
func (srv *server) table(t testing.TB) string {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	name := "nst_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		srv.admin.ExecContext(context.Background(), "drop table if exists `"+name+"`")
	})
	return name
}

// config returns a sink configuration for table on the test server, with
// auto_create on.
func (srv *server) config(table string) Config {
	c := Default()
	c.Host, c.Port, c.Database, c.User = srv.host, srv.port, srv.database, srv.user
	pw := secret.Value(srv.password)
	c.Password = &pw
	c.Table = table
	c.AutoCreate = true
	return c
}

func open(t testing.TB, c Config) *Sink {
	t.Helper()
	return openWith(t, c, sink.Deps{})
}

// openWith is open with deps.
func openWith(t testing.TB, c Config, deps sink.Deps) *Sink {
	t.Helper()
	s, err := New(context.Background(), c, deps)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	return s
}

// query returns every row of q, with []byte values as strings.
func (srv *server) query(t testing.TB, q string, args ...any) [][]any {
	t.Helper()
	rows, err := srv.admin.QueryContext(context.Background(), q, args...)
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
		for i, v := range vals {
			if b, ok := v.([]byte); ok {
				vals[i] = string(b)
			}
		}
		out = append(out, vals)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func (srv *server) count(t testing.TB, table string) int64 {
	t.Helper()
	var n int64
	if err := srv.admin.QueryRowContext(context.Background(), "select count(*) from `"+table+"`").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// env builds an envelope the way the runner does, from a JetStream reply
// subject carrying stream and sequence seq.
func env(subject, stream string, seq uint64, id, body string) *sink.Envelope {
	h := map[string][]string{}
	if id != "" {
		h["Nats-Msg-Id"] = []string{id}
	}
	reply := fmt.Sprintf("$JS.ACK.%s.c.1.%d.%d.1780048800123456000.0", stream, seq, seq)
	return intake.Build(intake.Message{Subject: subject, Reply: reply, Data: []byte(body), Header: h}, nil, received)
}

func outcomes(rs []sink.Result) []sink.Outcome {
	out := make([]sink.Outcome, len(rs))
	for i, r := range rs {
		out[i] = r.Outcome
	}
	return out
}

func fixedNow(t time.Time) func() time.Time { return func() time.Time { return t } }

// freePort returns a TCP port nothing listens on.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}
