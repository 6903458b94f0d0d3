package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// TestNATSRepublishCrash republishes 3,000 messages from one stream into a
// second one with the real binary, kills it with SIGKILL mid-run, restarts
// it, and checks that the target stream holds exactly 3,000 messages, one
// per source sequence: the messages published but not acknowledged before
// the kill are redelivered and absorbed by the target stream's duplicate
// window through Nats-Msg-Id.
func TestNATSRepublishCrash(t *testing.T) {
	const n = 3000
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "REPSRC", Subjects: []string{"repsrc.>"}})
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "REPDST", Subjects: []string{"repdst.>"}})
	natstest.PublishN(t, js, "repsrc.events", n, body)

	// Small batches keep the first run busy long enough to be killed
	// while publishes and acknowledgements are in flight.
	doc := fmt.Sprintf(`{
  "nats": {"url": %q, "stream": "REPSRC", "consumer": "republisher", "subject": "repsrc.>"},
  "consumer_management": {"ack_wait_seconds": 2, "max_ack_pending": 4000},
  "delivery": {"batch_size": 20, "max_in_flight_batches": 2, "batch_timeout_ms": 200,
               "retry_backoff_ms": 100, "shutdown_timeout_ms": 10000},
  "logging": {"level": "WARNING"},
  "sink": {"type": "nats", "subject_prefix": "repdst", "expected_stream": "REPDST"}
}`, s.ClientURL())
	cfg := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(cfg, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	target, err := js.Stream(ctx, "REPDST")
	if err != nil {
		t.Fatal(err)
	}
	count := func() uint64 {
		info, err := target.Info(ctx)
		if err != nil {
			t.Fatalf("target stream info: %v", err)
		}
		return info.State.Msgs
	}

	p := start(t, cfg)
	natstest.WaitFor(t, 30*time.Second, func() error {
		if count() == 0 {
			// p.stderr is still being written: do not read it here.
			return fmt.Errorf("nothing republished yet")
		}
		return nil
	})
	p.kill(t)
	floor, pending, _ := ackState(ctx, js, "REPSRC", "republisher")
	t.Logf("killed with %d messages in the target stream; ack floor %d, ack pending %d", count(), floor, pending)

	p = start(t, cfg)
	natstest.WaitFor(t, 2*time.Minute, func() error {
		floor, pending, err := ackState(ctx, js, "REPSRC", "republisher")
		if err != nil {
			return err
		}
		if floor != n || pending != 0 {
			return fmt.Errorf("ack floor %d, ack pending %d; want %d, 0", floor, pending, n)
		}
		return nil
	})
	p.stop(t)

	if got := count(); got != n {
		t.Errorf("target stream holds %d messages, want exactly %d", got, n)
	}
	seen := make(map[uint64]bool, n)
	info, err := target.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := target.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("target seq %d: %v", seq, err)
		}
		orig, err := strconv.ParseUint(m.Header.Get("Nats-Sinks-Original-Sequence"), 10, 64)
		if err != nil {
			t.Fatalf("target seq %d: Nats-Sinks-Original-Sequence: %v", seq, err)
		}
		if want := fmt.Sprintf("stream-sequence:REPSRC:%d", orig); m.Header.Get("Nats-Msg-Id") != want {
			t.Errorf("target seq %d: Nats-Msg-Id = %q, want %q", seq, m.Header.Get("Nats-Msg-Id"), want)
		}
		if m.Subject != "repdst.repsrc.events" || string(m.Data) != string(body(int(orig)-1)) {
			t.Errorf("target seq %d: subject %s, body %.40q; want repdst.repsrc.events and source message %d", seq, m.Subject, m.Data, orig)
		}
		if seen[orig] {
			t.Errorf("source seq %d republished twice", orig)
		}
		seen[orig] = true
	}
	if len(seen) != n {
		t.Errorf("%d distinct source sequences in the target, want %d", len(seen), n)
	}
}

// TestNATSRepublishLoopRefused checks the loop rule through the binary: a
// target the source consumer would read again is a configuration error,
// exit 2, before any message moves.
func TestNATSRepublishLoopRefused(t *testing.T) {
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "LOOP", Subjects: []string{"loop.>"}})
	doc := fmt.Sprintf(`{
  "nats": {"url": %q, "stream": "LOOP", "consumer": "looper", "subject": "loop.>"},
  "logging": {"level": "WARNING"},
  "sink": {"type": "nats", "subject": "loop.copy"}
}`, s.ClientURL())
	cfg := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(cfg, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	p := start(t, cfg)
	if code := p.wait(t, 30*time.Second); code != 2 {
		t.Fatalf("exit code = %d, want 2 (configuration error)\nstderr:\n%s", code, p.stderr.String())
	}
}
