package oracle

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	goora "github.com/sijms/go-ora/v2"

	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sink/sinktest"
)

func TestDriverParsesOurURL(t *testing.T) {
	// go-ora's own parser accepts what driverURL builds: credentials,
	// every server and the service of the descriptor.
	desc, err := parseDSN("tcps://db.example:2484/svc.example")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := goora.ParseConfig(driverURL("app", "p@ss:w/rd?&", desc, "", ""))
	if err != nil {
		t.Fatalf("go-ora ParseConfig: %v", err)
	}
	type view struct {
		User, Password, Service, Host, Protocol string
		Port                                    int
	}
	got := view{cfg.UserID, cfg.DatabaseInfo.Password, cfg.ServiceName, cfg.Servers[0].Addr, cfg.Servers[0].Protocol, cfg.Servers[0].Port}
	want := view{"app", "p@ss:w/rd?&", "svc.example", "db.example", "tcps", 2484}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parsed config (-want +got):\n%s", diff)
	}
	if cfg.ConnectionData() != desc {
		t.Errorf("connect data = %s, want the descriptor %s", cfg.ConnectionData(), desc)
	}

	// The wallet option reaches the driver: a directory without a wallet
	// fails when go-ora opens it.
	_, err = goora.ParseConfig(driverURL("app", "pw", desc, filepath.Join(t.TempDir(), "nowallet"), "wpw"))
	if err == nil {
		t.Error("go-ora accepted a wallet directory without a wallet")
	}
}

// unreachable returns an Easy Connect string for a local port nothing
// listens on.
func unreachable(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr + "/FREEPDB1"
}

func TestUnreachableServer(t *testing.T) {
	// Open does no I/O without auto_create; writes and the healthcheck
	// then fail Temporary (not Destination: an outage is not a
	// misconfiguration), after retry_count connection retries.
	c := decode(t, `"retry_count":1,"retry_delay":0,"tcp_connect_timeout":2`)
	c.DSN = unreachable(t)
	s, err := New(t.Context(), c, sink.Deps{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer s.Stop(t.Context())
	if s.Type() != "oracle" {
		t.Errorf("Type() = %q", s.Type())
	}
	err = s.Healthcheck(t.Context())
	if err == nil {
		t.Fatal("Healthcheck succeeded against a closed port")
	}
	if got := sink.Failed(err).Outcome; got != sink.Temporary {
		t.Errorf("Healthcheck error class = %v (%v), want temporary", got, err)
	}
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{env("o", 1), env("o", 2)})
	if o := outcomes(rs); o != "temporary(shared) temporary(shared)" {
		t.Errorf("outcomes = %s", o)
	}
	if err := s.Stop(t.Context()); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if err := s.Stop(t.Context()); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestNewSecretErrorsAreConfigErrors(t *testing.T) {
	c := decodeDoc(t, `"type":"oracle","dsn":"h/s","user":"u","password_env":"NATS_SINKS_TEST_UNSET_PW"`)
	_, err := New(t.Context(), c, sink.Deps{Env: func(string) (string, bool) { return "", false }})
	if _, ok := errors.AsType[*sink.ConfigError](err); !ok || !strings.Contains(err.Error(), "password_env: environment variable NATS_SINKS_TEST_UNSET_PW is not set") {
		t.Errorf("New error = %v, want a *sink.ConfigError naming password_env", err)
	}
}

// ---- Live tests against a real Oracle server ----

// liveEnv names the variable holding an Oracle URL
// (oracle://user:password@host:port/service) for the live tests.
const liveEnv = "NATS_SINKS_TEST_ORACLE_DSN"

type live struct {
	admin *sql.DB
	cfg   Config
}

// liveServer skips unless NATS_SINKS_TEST_ORACLE_DSN is set. Unlike the
// PostgreSQL and MariaDB tests it skips even with
// NATS_SINKS_REQUIRE_SERVICES=1: no Oracle server can run on the CI
// machines, so these tests are run by hand against a real server.
func liveServer(t *testing.T) *live {
	t.Helper()
	raw := os.Getenv(liveEnv)
	if raw == "" {
		t.Skipf("%s not set: no Oracle server runs on this machine (not required in CI, even with NATS_SINKS_REQUIRE_SERVICES=1); set it to oracle://user:password@host:port/service to run the live tests", liveEnv)
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%s: %v", liveEnv, err)
	}
	pw, _ := u.User.Password()
	c := Default()
	c.DSN = u.Host + u.Path
	c.User = u.User.Username()
	secret := secret.Value(pw)
	c.Password = &secret
	c.AutoCreate = true
	desc, err := parseDSN(c.DSN)
	if err != nil {
		t.Fatalf("%s: %v", liveEnv, err)
	}
	admin := sql.OpenDB(goora.NewConnector(driverURL(c.User, pw, desc, "", "")))
	t.Cleanup(func() { admin.Close() })
	return &live{admin: admin, cfg: c}
}

// table returns a unique table name, dropped when the test ends.
func (l *live) table(t *testing.T) string {
	t.Helper()
	b := make([]byte, 5)
	rand.Read(b)
	name := "NST_" + strings.ToUpper(hex.EncodeToString(b))
	t.Cleanup(func() { l.admin.ExecContext(context.Background(), "drop table "+name+" purge") })
	return name
}

func (l *live) open(t *testing.T, c Config) *Sink {
	t.Helper()
	s, err := New(t.Context(), c, sink.Deps{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	return s
}

func (l *live) stored(t *testing.T, table string) []sinktest.Stored {
	t.Helper()
	rows, err := l.admin.QueryContext(t.Context(), "select stream_name, stream_sequence from "+table+" order by stream_sequence")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []sinktest.Stored
	for rows.Next() {
		var s sinktest.Stored
		var seq int64
		if err := rows.Scan(&s.Stream, &seq); err != nil {
			t.Fatal(err)
		}
		s.Sequence = uint64(seq)
		out = append(out, s)
	}
	return out
}

func TestLiveConformance(t *testing.T) {
	l := liveServer(t)
	for _, mode := range []string{"merge", "insert_ignore"} {
		for _, staging := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s staging=%v", mode, staging), func(t *testing.T) {
				table := l.table(t)
				c := l.cfg
				c.Table, c.Mode = table, mode
				if staging {
					st := l.table(t)
					c.Staging = Staging{Enabled: true, Table: &st, BatchIDColumn: "NATS_SINKS_BATCH_ID", Cleanup: CleanupDeleteOnSuccess}
				}
				sinktest.Run(t, sinktest.Harness{
					Open:          func(t *testing.T) sink.Sink { return l.open(t, c) },
					Transactional: true,
					Idempotent:    true,
					ReadBack:      func(t *testing.T) []sinktest.Stored { return l.stored(t, table) },
				})
			})
		}
	}
}

func TestLiveRedelivery(t *testing.T) {
	l := liveServer(t)
	for _, tt := range []struct {
		mode, update string
		want         string // outcomes of the redelivery
	}{
		{"insert", "", "permanent(shared)/PermanentSinkError"},
		{"append", "", "permanent(shared)/PermanentSinkError"},
		{"insert_ignore", "", "duplicate"},
		{"merge", "null", "committed"},
		{"merge", "[]", "duplicate"},
	} {
		t.Run(tt.mode+" "+tt.update, func(t *testing.T) {
			table := l.table(t)
			c := l.cfg
			c.Table, c.Mode = table, tt.mode
			if tt.update == "[]" {
				c.MergeUpdateColumns = &[]string{}
			}
			s := l.open(t, c)
			if err := s.Healthcheck(t.Context()); err != nil {
				t.Fatalf("Healthcheck: %v", err)
			}
			first := s.WriteBatch(t.Context(), []*sink.Envelope{env("o", 1)})
			if o := outcomes(first); o != "committed" {
				t.Fatalf("first delivery = %s", o)
			}
			again := s.WriteBatch(t.Context(), []*sink.Envelope{env("o", 1)})
			if o := outcomes(again); o != tt.want {
				t.Errorf("redelivery = %s, want %s (%v)", o, tt.want, again[0].Err)
			}
			if got := l.stored(t, table); len(got) != 1 {
				t.Errorf("stored %d rows, want 1", len(got))
			}
		})
	}
}

func TestLiveMissingTableIsDestination(t *testing.T) {
	l := liveServer(t)
	c := l.cfg
	c.AutoCreate = false
	c.Table = "NST_DOES_NOT_EXIST"
	s := l.open(t, c)
	err := s.Healthcheck(t.Context())
	if got := sink.Failed(err).Outcome; got != sink.Destination {
		t.Errorf("Healthcheck on a missing table = %v (%v), want destination", got, err)
	}
}
