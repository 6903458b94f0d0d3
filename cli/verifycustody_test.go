package cli_test

import (
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// TestVerifyCustodyPostgres runs the scripts of testdata/postgres against
// the real PostgreSQL server: rows written by the sink into jsonb columns
// (which re-order keys and re-render numbers) verify, and a row edited in
// the database fails naming it. Setup writes cfg.json for a table of this
// run's own ($TABLE); $PGDSN is the server for psql.
func TestVerifyCustodyPostgres(t *testing.T) {
	dsn := natstest.Service(t, "NATS_SINKS_TEST_POSTGRES_DSN")
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("NATS_SINKS_TEST_POSTGRES_DSN: %v", err)
	}
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/postgres",
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			table := fmt.Sprintf("custody_%d_%d", os.Getpid(), time.Now().UnixNano())
			env.Setenv("PGDSN", dsn)
			env.Setenv("TABLE", table)
			cfg := fmt.Sprintf(`{"nats": {"stream": "ORDERS", "consumer": "orders-pg", "subject": "orders.>"},
 "delivery": {"batch_timeout_ms": 100},
 "logging": {"level": "WARNING"},
 "custody": {"enabled": true},
 "sink": {"type": "postgres", "host": %q, "port": %s, "database": %q, "user": %q,
          "sslmode": "disable", "table": %q, "auto_create": true}}`, u.Hostname(), port, u.Path[1:], u.User.Username(), table)
			return os.WriteFile(filepath.Join(env.WorkDir, "cfg.json"), []byte(cfg), 0o600)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"natsserver": cmdNATSServer,
			"publish":    cmdPublish,
			"stream":     cmdStream,
			"exits":      cmdExits,
			"waitacked":  cmdWaitAcked,
		},
	})
}

// TestVerifyCustodyMySQL runs the scripts of testdata/mysql against the
// real MariaDB (or MySQL) server of NATS_SINKS_TEST_MYSQL_DSN: rows the
// mysql sink stored verify, rows edited in the database fail naming
// <table>:<stream>:<seq> (also after MariaDB's JSON_SET re-wrote the
// metadata text), and a mapped-layout table is refused with a
// configuration error that says why. Setup writes cfg.json (audit layout, table $TABLE)
// and mapped.json (mapped layout, table $TABLE_m); the sqlexec command
// runs one SQL statement as the DSN's user. The sink needs a password:
// when the DSN has none, a password-protected user is created for its
// database, as the e2e tests do.
func TestVerifyCustodyMySQL(t *testing.T) {
	dsn := natstest.Service(t, "NATS_SINKS_TEST_MYSQL_DSN")
	dc, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("NATS_SINKS_TEST_MYSQL_DSN: %v", err)
	}
	host, port, err := net.SplitHostPort(dc.Addr)
	if err != nil {
		t.Fatalf("NATS_SINKS_TEST_MYSQL_DSN address %q: %v", dc.Addr, err)
	}
	dc.Logger = &mysql.NopLogger{}
	conn, err := mysql.NewConnector(dc)
	if err != nil {
		t.Fatal(err)
	}
	admin := sql.OpenDB(conn)
	t.Cleanup(func() { admin.Close() })
	user, pw := dc.User, dc.Passwd
	if pw == "" {
		user, pw = "nats_sink_custody", "nats-sink-custody-pw"
		for _, h := range []string{"%", "localhost"} {
			for _, q := range []string{
				fmt.Sprintf("create user if not exists '%s'@'%s' identified by '%s'", user, h, pw),
				fmt.Sprintf("alter user '%s'@'%s' identified by '%s'", user, h, pw),
				fmt.Sprintf("grant all on `%s`.* to '%s'@'%s'", dc.DBName, user, h),
			} {
				if _, err := admin.Exec(q); err != nil {
					t.Fatalf("create test user: %v", err)
				}
			}
		}
	}
	var tables []string
	t.Cleanup(func() {
		for _, tb := range tables {
			admin.Exec("DROP TABLE IF EXISTS `" + tb + "`")
		}
	})
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/mysql",
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			table := fmt.Sprintf("custody_%d_%d", os.Getpid(), time.Now().UnixNano())
			tables = append(tables, table, table+"_m")
			env.Setenv("TABLE", table)
			conn := fmt.Sprintf(`"host": %q, "port": %s, "database": %q, "user": %q, "password": %q`, host, port, dc.DBName, user, pw)
			cfg := fmt.Sprintf(`{"nats": {"stream": "ORDERS", "consumer": "orders-my", "subject": "orders.>"},
 "delivery": {"batch_timeout_ms": 100},
 "logging": {"level": "WARNING"},
 "custody": {"enabled": true, "include_previous_hash": true},
 "sink": {"type": "mysql", %s, "table": %q, "auto_create": true}}`, conn, table)
			mapped := fmt.Sprintf(`{"nats": {"stream": "ORDERS", "consumer": "orders-my", "subject": "orders.>"},
 "custody": {"enabled": true},
 "sink": {"type": "mysql", %s, "table": %q, "auto_create": true, "layout": "mapped",
          "include_columns": ["metadata_json"], "mapping": [{"column": "n", "path": "/n", "type": "bigint"}]}}`, conn, table+"_m")
			if err := os.WriteFile(filepath.Join(env.WorkDir, "mapped.json"), []byte(mapped), 0o600); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(env.WorkDir, "cfg.json"), []byte(cfg), 0o600)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"natsserver": cmdNATSServer,
			"publish":    cmdPublish,
			"stream":     cmdStream,
			"exits":      cmdExits,
			"waitacked":  cmdWaitAcked,
			"sqlexec": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 1 {
					ts.Fatalf("usage: sqlexec STATEMENT")
				}
				res, err := admin.Exec(args[0])
				if err == nil {
					var n int64
					if n, err = res.RowsAffected(); err == nil && n == 0 && strings.HasPrefix(strings.ToUpper(args[0]), "UPDATE") {
						err = fmt.Errorf("no row updated")
					}
				}
				if (err != nil) != neg {
					ts.Fatalf("sqlexec %q: %v", args[0], err)
				}
			},
		},
	})
}
