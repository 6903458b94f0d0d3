package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, to read the sink's file

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// sqliteConfig writes a run configuration for a sqlite sink writing to
// path and returns the configuration's path. Small batches, one at a time,
// make the run last long enough (hundreds of fsynced commits) to be killed
// in the middle.
func sqliteConfig(t *testing.T, natsURL, stream, consumer, subject, path string) string {
	t.Helper()
	doc := fmt.Sprintf(`{
  "nats": {"url": %q, "stream": %q, "consumer": %q, "subject": %q},
  "consumer_management": {"ack_wait_seconds": 3, "max_ack_pending": 4000},
  "delivery": {"batch_size": 10, "max_in_flight_batches": 1, "batch_timeout_ms": 200,
               "retry_backoff_ms": 100, "retry_backoff_max_ms": 1000, "shutdown_timeout_ms": 10000},
  "logging": {"level": "WARNING"},
  "sink": {"type": "sqlite", "path": %q}
}`, natsURL, stream, consumer, subject, path)
	cfg := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestSQLiteCrashRecovery SIGKILLs the binary twice while it writes 5,000
// messages into a SQLite file, restarts it, and checks that the table
// holds each message exactly once with the published payload and the
// right metadata: a batch is acknowledged only after its COMMIT, and a
// redelivered one is absorbed by the upsert on (stream, sequence).
func TestSQLiteCrashRecovery(t *testing.T) {
	const n = 5000
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "SQLCRASH", Subjects: []string{"sqlcrash.>"}})
	natstest.PublishN(t, js, "sqlcrash.events", n, body)
	path := filepath.Join(t.TempDir(), "events.db")
	cfg := sqliteConfig(t, s.ClientURL(), "SQLCRASH", "sqlcrash", "sqlcrash.>", path)
	ctx := context.Background()

	// A second handle reads while the binary writes: WAL readers do not
	// block the writer, and a killed writer leaves the WAL for the next
	// one to recover.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rowCount := func() (int, error) {
		var rows int
		err := db.QueryRowContext(ctx, "select count(*) from nats_sink_events").Scan(&rows)
		return rows, err
	}
	for round, progress := range []int{800, 2500} {
		p := start(t, cfg)
		natstest.WaitFor(t, time.Minute, func() error {
			if rows, err := rowCount(); err != nil || rows < progress {
				return fmt.Errorf("%d rows (%v), waiting for %d", rows, err, progress)
			}
			return nil
		})
		p.kill(t)
		floor, pending, err := ackState(ctx, js, "SQLCRASH", "sqlcrash")
		rows, _ := rowCount()
		t.Logf("round %d: killed at %d rows; ack floor %d, ack pending %d (%v)", round, rows, floor, pending, err)
		if floor >= n || rows >= n {
			t.Fatalf("round %d: the run finished before the kill; the test no longer crashes mid-run", round)
		}
	}

	p := start(t, cfg)
	waitDone(t, js, "SQLCRASH", "sqlcrash", n, 3*time.Minute)
	p.stop(t)

	var rows, distinct, inRange, badPayload, badMeta int
	err = db.QueryRowContext(ctx, `select count(*),
		(select count(*) from (select distinct stream_name, stream_sequence from nats_sink_events)),
		count(*) filter (where stream_name = 'SQLCRASH' and stream_sequence between 1 and ?1),
		-- body(i) published {"n":i+1,"pad":"x…"} as sequence i+1
		count(*) filter (where payload_json is not ('{"n":' || stream_sequence || ',"pad":"' || ?2 || '"}')),
		count(*) filter (where subject <> 'sqlcrash.events'
			or json_extract(metadata_json, '$.subject') is not subject
			or json_extract(metadata_json, '$.jetstream.stream_sequence') is not stream_sequence
			or json_extract(metadata_json, '$.jetstream.stream') is not stream_name
			or json_type(metadata_json, '$.custody') is not 'null'
			or headers_json is not '{}'
			or mission_metadata_json is not 'null')
		from nats_sink_events`, n, strings.Repeat("x", 200)).Scan(&rows, &distinct, &inRange, &badPayload, &badMeta)
	if err != nil {
		t.Fatalf("check rows: %v", err)
	}
	if rows != n || distinct != n || inRange != n || badPayload != 0 || badMeta != 0 {
		t.Errorf("rows %d, distinct keys %d, in range %d, wrong payload %d, wrong metadata %d; want %d, %d, %d, 0, 0",
			rows, distinct, inRange, badPayload, badMeta, n, n, n)
	}
}
