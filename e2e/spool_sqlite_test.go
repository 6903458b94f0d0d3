package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// TestSpoolKillAndReplaySQLite spools 2,000 messages, then replays the
// spool into a SQLite target one record per commit, killing
// `replay-spool` with SIGKILL three times at random points. After every
// kill each message is in the spool or in the table (none lost); the
// rerun completes, the table holds each message exactly once with its
// payload, and the spool is empty.
func TestSpoolKillAndReplaySQLite(t *testing.T) {
	const n = 2000
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "EDGESQL", Subjects: []string{"edgesql.>"}})
	natstest.PublishN(t, js, "edgesql.events", n, body)
	spoolDir := filepath.Join(t.TempDir(), "spool")
	spoolCfg, _ := spoolConfigs(t, s.ClientURL(), "EDGESQL", "edgesql-spool", "edgesql.>", spoolDir, t.TempDir(), "")
	dbPath := filepath.Join(t.TempDir(), "events.db")
	targetCfg := filepath.Join(t.TempDir(), "target.json")
	doc := fmt.Sprintf(`{"nats": {"url": %q, "stream": "EDGESQL", "consumer": "unused", "subject": "edgesql.>"},
  "sink": {"type": "sqlite", "path": %q}}`, s.ClientURL(), dbPath)
	if err := os.WriteFile(targetCfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("random seed %d", seed)
	ctx := context.Background()

	p := start(t, spoolCfg)
	natstest.WaitFor(t, 2*time.Minute, func() error {
		floor, pending, err := ackState(ctx, js, "EDGESQL", "edgesql-spool")
		if err == nil && (floor != n || pending != 0) {
			err = fmt.Errorf("ack floor %d, ack pending %d; want %d, 0", floor, pending, n)
		}
		return err
	})
	p.stop(t)
	if got := countSpool(t, spoolDir); got != n {
		t.Fatalf("%d spool files after every message was acknowledged, want %d", got, n)
	}

	rowCount := func() int {
		db, err := sql.Open("sqlite", "file:"+dbPath+"?mode=ro&_pragma=busy_timeout(5000)")
		if err != nil {
			return 0
		}
		defer db.Close()
		var rows int
		if db.QueryRowContext(ctx, "select count(*) from nats_sink_events").Scan(&rows) != nil {
			return 0 // not created yet
		}
		return rows
	}
	for round := range 3 {
		before := rowCount()
		rp := replaySpool(t, spoolCfg, targetCfg)
		target := before + 50 + rng.IntN(200)
		deadline := time.Now().Add(time.Minute)
	wait:
		for rowCount() < target && time.Now().Before(deadline) {
			select {
			case <-rp.done:
				break wait
			case <-time.After(10 * time.Millisecond):
			}
		}
		select {
		case <-rp.done:
			t.Fatalf("replay round %d finished before the kill: %s%s", round, rp.stdout.String(), rp.stderr.String())
		default:
		}
		time.Sleep(time.Duration(rng.IntN(50)) * time.Millisecond)
		if err := rp.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-rp.done
		spooled, stored := countSpool(t, spoolDir), rowCount()
		t.Logf("replay round %d: killed with %d files spooled, %d rows stored", round, spooled, stored)
		if spooled+stored < n {
			t.Fatalf("after the kill in round %d: %d spooled + %d stored < %d messages", round, spooled, stored, n)
		}
	}

	remaining := countSpool(t, spoolDir)
	rp := replaySpool(t, spoolCfg, targetCfg)
	if code := rp.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("final replay-spool exit code %d\nstdout:\n%s\nstderr:\n%s", code, rp.stdout.String(), rp.stderr.String())
	}
	want := fmt.Sprintf("Replay complete: scanned=%d replayed=%d deleted=%d failed=0\n", remaining, remaining, remaining)
	if got := rp.stdout.String(); got != want {
		t.Errorf("final replay stdout = %q, want %q", got, want)
	}
	if got := countSpool(t, spoolDir); got != 0 {
		t.Errorf("%d spool files left after the final replay", got)
	}
	db, err := sql.Open("sqlite", "file:"+dbPath+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows, distinct, inRange, badPayload int
	err = db.QueryRowContext(ctx, `select count(*),
		(select count(*) from (select distinct stream_name, stream_sequence from nats_sink_events)),
		count(*) filter (where stream_name = 'EDGESQL' and stream_sequence between 1 and ?1 and subject = 'edgesql.events'),
		count(*) filter (where payload_json is not ('{"n":' || stream_sequence || ',"pad":"' || ?2 || '"}'))
		from nats_sink_events`, n, strings.Repeat("x", 200)).Scan(&rows, &distinct, &inRange, &badPayload)
	if err != nil {
		t.Fatalf("check rows: %v", err)
	}
	if rows != n || distinct != n || inRange != n || badPayload != 0 {
		t.Errorf("rows %d, distinct keys %d, in range %d, wrong payload %d; want %d, %d, %d, 0", rows, distinct, inRange, badPayload, n, n, n)
	}
}
