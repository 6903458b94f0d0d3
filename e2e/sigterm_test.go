package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// TestSIGTERMDrain stops the binary with SIGTERM mid-run: it must exit 0
// within the drain bound (shutdown_timeout_ms + 5 s) and print
// "Shutdown requested.". A restarted process then finishes the stream, and
// the files show that nothing was lost — so nothing was acknowledged without
// being written, or that message would never have come back.
func TestSIGTERMDrain(t *testing.T) {
	const n = 8000
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "TERM", Subjects: []string{"term.>"}})
	natstest.PublishN(t, js, "term.events", n, body)
	out := t.TempDir()
	cfg := fileConfig(t, s.ClientURL(), "TERM", "term-file", "term.>", out, "")
	ctx := context.Background()

	p := start(t, cfg)
	natstest.WaitFor(t, time.Minute, func() error {
		floor, _, err := ackState(ctx, js, "TERM", "term-file")
		if err != nil || floor < 500 {
			return fmt.Errorf("ack floor %d (%v), waiting for progress", floor, err)
		}
		return nil
	})
	stopAt := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code := p.wait(t, 20*time.Second)
	took := time.Since(stopAt)
	if code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0\nstderr:\n%s", code, p.stderr.String())
	}
	if !strings.Contains(p.stdout.String(), "Shutdown requested.") {
		t.Errorf("stdout lacks %q:\n%s", "Shutdown requested.", p.stdout.String())
	}
	if took > 15*time.Second { // shutdown_timeout_ms 10 s + 5 s margin
		t.Errorf("graceful shutdown took %v, beyond the 15 s bound", took)
	}
	floor, pending, _ := ackState(ctx, js, "TERM", "term-file")
	t.Logf("stopped after %v: ack floor %d, ack pending %d", took, floor, pending)
	// Every message at or below the ack floor must be on disk already.
	for seq := uint64(1); seq <= floor; seq++ {
		if _, err := os.Stat(fmt.Sprintf("%s/term.events/TERM-%020d.json", out, seq)); err != nil {
			t.Fatalf("stream sequence %d is acknowledged (ack floor %d) but not written: %v", seq, floor, err)
		}
	}

	p = start(t, cfg)
	natstest.WaitFor(t, 2*time.Minute, func() error {
		floor, pending, err := ackState(ctx, js, "TERM", "term-file")
		if err != nil || floor != n || pending != 0 {
			return fmt.Errorf("ack floor %d, ack pending %d (%v); want %d, 0", floor, pending, err, n)
		}
		return nil
	})
	p.stop(t)
	checkFiles(t, out, "TERM", n)
}
