package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/internal/pgtest"
)

const postgresDSNEnv = "NATS_SINKS_TEST_POSTGRES_DSN"

// postgresConfig writes a run configuration for a postgres sink writing
// to table on the server at dsn, and returns its path.
func postgresConfig(t *testing.T, natsURL, stream, consumer, subject, dsn, table string) string {
	t.Helper()
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("parse postgres DSN: %v", err)
	}
	password := cc.Password
	if password == "" {
		password = "unused" // the test servers trust local connections
	}
	doc := fmt.Sprintf(`{
  "nats": {"url": %q, "stream": %q, "consumer": %q, "subject": %q},
  "consumer_management": {"ack_wait_seconds": 3, "max_ack_pending": 4000},
  "delivery": {"batch_size": 100, "max_in_flight_batches": 4, "batch_timeout_ms": 200,
               "retry_backoff_ms": 100, "retry_backoff_max_ms": 1000, "shutdown_timeout_ms": 10000},
  "logging": {"level": "WARNING"},
  "sink": {"type": "postgres", "host": %q, "port": %d, "database": %q, "user": %q, "password": %q,
           "sslmode": "disable", "connect_timeout_seconds": 2, "table": %q, "auto_create": true}
}`, natsURL, stream, consumer, subject, cc.Host, cc.Port, cc.Database, cc.User, password, table)
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// pgTable returns a table name unique to this run, dropped when the test
// ends.
func pgTable(t *testing.T, dsn string) string {
	t.Helper()
	b := make([]byte, 4)
	rand.Read(b)
	table := "e2e_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(ctx, dsn); err == nil {
			conn.Exec(ctx, "drop table if exists "+table)
			conn.Close(ctx)
		}
	})
	return table
}

// checkRows asserts that table holds exactly one row per stream sequence
// 1..n of stream, whose payload is what body published and whose metadata
// names the right subject and sequence.
func checkRows(t *testing.T, dsn, table, stream, subject string, n int) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	var rows, distinct, inRange, badPayload, badMeta int
	err = conn.QueryRow(ctx, `select count(*), count(distinct (stream_name, stream_sequence)),
		count(*) filter (where stream_name = $1 and stream_sequence between 1 and $2),
		count(*) filter (where payload_json is distinct from jsonb_build_object('n', stream_sequence, 'pad', repeat('x', 200))),
		count(*) filter (where subject <> $3
			or metadata_json->>'subject' is distinct from subject
			or (metadata_json->'jetstream'->>'stream_sequence')::bigint is distinct from stream_sequence
			or metadata_json->'jetstream'->>'stream' is distinct from stream_name
			or metadata_json->'custody' <> 'null'::jsonb)
		from `+table, stream, n, subject).Scan(&rows, &distinct, &inRange, &badPayload, &badMeta)
	if err != nil {
		t.Fatalf("check rows: %v", err)
	}
	if rows != n || distinct != n || inRange != n || badPayload != 0 || badMeta != 0 {
		t.Errorf("rows %d, distinct keys %d, in range %d, wrong payload %d, wrong metadata %d; want %d, %d, %d, 0, 0",
			rows, distinct, inRange, badPayload, badMeta, n, n, n)
	}
}

// waitDone waits until the consumer acknowledged all n messages.
func waitDone(t *testing.T, js jetstream.JetStream, stream, consumer string, n int, d time.Duration) {
	t.Helper()
	natstest.WaitFor(t, d, func() error {
		floor, pending, err := ackState(context.Background(), js, stream, consumer)
		if err != nil || floor != uint64(n) || pending != 0 {
			return fmt.Errorf("ack floor %d, ack pending %d (%v); want %d, 0", floor, pending, err, n)
		}
		return nil
	})
}

// TestPostgresCrashRecovery SIGKILLs the binary twice while it writes
// 5,000 messages into PostgreSQL, restarts it, and checks that the table
// holds each message exactly once with the published payload.
func TestPostgresCrashRecovery(t *testing.T) {
	const n = 5000
	dsn := natstest.Service(t, postgresDSNEnv)
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "PGCRASH", Subjects: []string{"pgcrash.>"}})
	natstest.PublishN(t, js, "pgcrash.events", n, body)
	table := pgTable(t, dsn)
	cfg := postgresConfig(t, s.ClientURL(), "PGCRASH", "pgcrash", "pgcrash.>", dsn, table)
	ctx := context.Background()

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	// Progress is judged by committed rows, not by the ack floor: after a
	// kill, the floor waits for AckWait on the messages the dead process
	// held, while the rows keep coming.
	for round, progress := range []int{800, 2500} {
		p := start(t, cfg)
		natstest.WaitFor(t, time.Minute, func() error {
			var rows int
			if err := conn.QueryRow(ctx, "select count(*) from "+table).Scan(&rows); err != nil || rows < progress {
				return fmt.Errorf("%d rows (%v), waiting for %d", rows, err, progress)
			}
			return nil
		})
		p.kill(t)
		floor, pending, err := ackState(ctx, js, "PGCRASH", "pgcrash")
		t.Logf("round %d: killed; ack floor %d, ack pending %d (%v)", round, floor, pending, err)
		if floor >= n {
			t.Fatalf("round %d: the run finished before the kill; the test no longer crashes mid-run", round)
		}
	}

	p := start(t, cfg)
	waitDone(t, js, "PGCRASH", "pgcrash", n, 3*time.Minute)
	p.stop(t)
	checkRows(t, dsn, table, "PGCRASH", "pgcrash.events", n)
}

// TestPostgresOutage takes the database away for several seconds mid-run
// (a throw-away cluster the test owns): no message may be acknowledged
// while it is down, and after it returns every message is stored exactly
// once.
func TestPostgresOutage(t *testing.T) {
	const n = 4000
	cl := pgtest.Start(t, pgtest.Options{})
	dsn := cl.DSN()
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "PGDOWN", Subjects: []string{"pgdown.>"}})
	natstest.PublishN(t, js, "pgdown.events", n, body)
	table := pgTable(t, dsn)
	cfg := postgresConfig(t, s.ClientURL(), "PGDOWN", "pgdown", "pgdown.>", dsn, table)
	ctx := context.Background()

	p := start(t, cfg)
	natstest.WaitFor(t, time.Minute, func() error {
		floor, _, err := ackState(ctx, js, "PGDOWN", "pgdown")
		if err != nil || floor < 200 {
			return fmt.Errorf("ack floor %d (%v), waiting for progress", floor, err)
		}
		return nil
	})
	cl.Stop()
	stoppedAt := time.Now()
	floorAt := func() uint64 {
		floor, _, err := ackState(ctx, js, "PGDOWN", "pgdown")
		if err != nil {
			t.Fatalf("consumer info: %v", err)
		}
		return floor
	}
	// Acks for batches that committed before the stop may still be on
	// their way; give them a second, then the floor must not move for the
	// rest of the outage (a misclassified failure would be TERMed or
	// acked and move it).
	natstest.WaitFor(t, 10*time.Second, func() error {
		if time.Since(stoppedAt) < time.Second {
			return fmt.Errorf("settling")
		}
		return nil
	})
	down := floorAt()
	if down >= n {
		t.Fatalf("ack floor %d at the outage: the run finished before the database went away", down)
	}
	for time.Since(stoppedAt) < 5*time.Second {
		if f := floorAt(); f != down {
			t.Fatalf("ack floor moved from %d to %d while the database was down", down, f)
		}
		time.Sleep(100 * time.Millisecond) // polling interval, not a timing assertion
	}
	t.Logf("database down for %v; ack floor held at %d", time.Since(stoppedAt).Round(time.Millisecond), down)

	cl.Start()
	waitDone(t, js, "PGDOWN", "pgdown", n, 2*time.Minute)
	p.stop(t)
	checkRows(t, dsn, table, "PGDOWN", "pgdown.events", n)
}
