package cli_test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

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
