package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// TestFanoutCrashRecovery runs the binary with an active fanout sink over
// three targets — file and SQLite required, PostgreSQL optional — and three
// routes: fan.a goes to all three, fan.b to SQLite and PostgreSQL, fan.c to
// the file sink only. It SIGKILLs the process at random moments, restarts
// it, and checks the end state: every message exactly once in each required
// target it routes to (a missing one would reveal an ACK sent before all of
// them committed), at most once in the optional one, and never in a target
// it does not route to.
func TestFanoutCrashRecovery(t *testing.T) {
	const n = 20000
	dsn := natstest.Service(t, postgresDSNEnv)
	table := pgTable(t, dsn)
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	password := cc.Password
	if password == "" {
		password = "unused"
	}
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "FAN", Subjects: []string{"fan.>"}})
	subjects := []string{"fan.a", "fan.b", "fan.c"}
	routeOf := make([]string, n+1) // stream sequence → subject
	for i := range n {
		subj := subjects[i%3]
		routeOf[i+1] = subj
		if _, err := js.Publish(context.Background(), subj, body(i)); err != nil {
			t.Fatal(err)
		}
	}

	dir := t.TempDir()
	dbPath := filepath.Join(t.TempDir(), "fan.db")
	doc := fmt.Sprintf(`{
  "nats": {"url": %q, "stream": "FAN", "consumer": "fan", "subject": "fan.>"},
  "consumer_management": {"ack_wait_seconds": 5, "max_ack_pending": 4000},
  "delivery": {"batch_size": 250, "max_in_flight_batches": 4, "batch_timeout_ms": 200,
               "retry_backoff_ms": 100, "retry_backoff_max_ms": 1000, "shutdown_timeout_ms": 10000},
  "logging": {"level": "WARNING"},
  "sink": {"type": "fanout",
    "sinks": {
      "archive": {"type": "file", "directory": %q, "fsync": true},
      "db": {"type": "sqlite", "path": %q},
      "pg": {"type": "postgres", "host": %q, "port": %d, "database": %q, "user": %q, "password": %q,
             "sslmode": "disable", "connect_timeout_seconds": 2, "table": %q, "auto_create": true}
    },
    "route_match_mode": "first",
    "routes": [
      {"name": "all_three", "match": {"subject": "fan.a"}, "targets": ["archive", "db", {"sink": "pg", "required": false}]},
      {"name": "db_only", "match": {"subject": "fan.b"}, "targets": ["db", {"sink": "pg", "required": false, "minimum_wait_ms": 0}]},
      {"name": "archive_only", "match": {"subject": "fan.c"}, "targets": "archive"}
    ]}
}`, s.ClientURL(), dir, dbPath, cc.Host, cc.Port, cc.Database, cc.User, password, table)
	cfg := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}

	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("random seed %d", seed)
	ctx := context.Background()
	for round := range 3 {
		p := start(t, cfg)
		// Kill on progress, not after a fixed time: unloaded, the whole run
		// took under 2.5 s once and finished before a timed kill. Progress
		// is the last stream sequence delivered, not the ack floor: after a
		// kill the floor stays put until the killed batches' ACK wait ends,
		// while the rest of the stream flows. Each round waits for a
		// quarter of the stream more, then kills at a random moment soon
		// after.
		natstest.WaitFor(t, 2*time.Minute, func() error {
			info, err := consumerInfo(ctx, js, "FAN", "fan")
			if err != nil {
				return err
			}
			if want := uint64((round + 1) * n / 4); info.Delivered.Stream < want {
				return fmt.Errorf("delivered up to %d, waiting for %d before kill %d", info.Delivered.Stream, want, round+1)
			}
			return nil
		})
		time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
		p.kill(t)
		floor, pending, err := ackState(ctx, js, "FAN", "fan")
		t.Logf("round %d: killed; ack floor %d, ack pending %d (%v)", round, floor, pending, err)
		if floor >= n {
			t.Fatalf("round %d: the run finished before the kill", round)
		}
	}
	p := start(t, cfg)
	waitDone(t, js, "FAN", "fan", n, 5*time.Minute)
	waitFetching(t, js, "FAN", "fan")
	p.stop(t)

	want := func(subjs ...string) map[uint64]bool {
		m := map[uint64]bool{}
		for seq := uint64(1); seq <= n; seq++ {
			for _, s := range subjs {
				if routeOf[seq] == s {
					m[seq] = true
				}
			}
		}
		return m
	}
	// File target: fan.a and fan.c, exactly once each.
	fileSeqs := map[uint64]int{}
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") {
			t.Errorf("debris: %s", path)
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		v, err := jsonx.Parse(data)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			return nil
		}
		var seq uint64
		fmt.Sscan(string(v.(map[string]any)["stream_sequence"].(jsonx.Integer)), &seq)
		fileSeqs[seq]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, "archive (file)", fileSeqs, want("fan.a", "fan.c"))

	db, err := sql.Open("sqlite", "file:"+dbPath+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sqlSeqs := seqCounts(t, func() (*sql.Rows, error) {
		return db.QueryContext(ctx, "select stream_sequence from nats_sink_events")
	})
	exactlyOnce(t, "db (sqlite)", sqlSeqs, want("fan.a", "fan.b"))

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "select stream_sequence from "+table)
	if err != nil {
		t.Fatal(err)
	}
	pgSeqs := map[uint64]int{}
	for rows.Next() {
		var seq int64
		if err := rows.Scan(&seq); err != nil {
			t.Fatal(err)
		}
		pgSeqs[uint64(seq)]++
	}
	rows.Close()
	routed := want("fan.a", "fan.b")
	for seq, c := range pgSeqs {
		if !routed[seq] || c != 1 {
			t.Errorf("pg (optional): sequence %d (%s) present %d times; want at most once and only for fan.a/fan.b", seq, routeOf[seq], c)
		}
	}
	t.Logf("pg (optional) holds %d of %d routed messages", len(pgSeqs), len(routed))
}

func seqCounts(t *testing.T, query func() (*sql.Rows, error)) map[uint64]int {
	t.Helper()
	rows, err := query()
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[uint64]int{}
	for rows.Next() {
		var seq uint64
		if err := rows.Scan(&seq); err != nil {
			t.Fatal(err)
		}
		out[seq]++
	}
	return out
}

// exactlyOnce asserts that got holds every sequence of want once and
// nothing else.
func exactlyOnce(t *testing.T, target string, got map[uint64]int, want map[uint64]bool) {
	t.Helper()
	missing, dup, extra := 0, 0, 0
	for seq := range want {
		switch got[seq] {
		case 0:
			missing++
		case 1:
		default:
			dup++
		}
	}
	for seq := range got {
		if !want[seq] {
			extra++
		}
	}
	if missing+dup+extra > 0 {
		t.Errorf("%s: %d missing, %d duplicated, %d written where the message does not route (of %d)", target, missing, dup, extra, len(want))
	}
}
