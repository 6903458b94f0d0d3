package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/internal/spoolfile"
)

// spoolKey is the record key of the spool tests (bytes 0x00..0x1f).
const spoolKey = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

// spoolConfigs writes a `run` configuration with an encrypted spool sink
// (key from a file) and a replay target configuration with a file sink, and
// returns their paths.
func spoolConfigs(t *testing.T, url, stream, consumer, subject, spoolDir, outDir, spoolExtra string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "spool.key")
	if err := os.WriteFile(keyFile, []byte(spoolKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	spool := fmt.Sprintf(`{
  "nats": {"url": %q, "stream": %q, "consumer": %q, "subject": %q},
  "consumer_management": {"ack_wait_seconds": 3, "max_ack_pending": 4000},
  "delivery": {"batch_size": 250, "max_in_flight_batches": 2, "batch_timeout_ms": 200,
               "retry_backoff_ms": 100, "retry_backoff_max_ms": 500, "shutdown_timeout_ms": 10000},
  "logging": {"level": "WARNING"},
  "sink": {"type": "spool", "directory": %q%s,
           "encryption": {"enabled": true, "key_id": "edge-2026", "key_b64_file": %q}}
}`, url, stream, consumer, subject, spoolDir, spoolExtra, keyFile)
	target := fmt.Sprintf(`{
  "nats": {"url": %q, "stream": %q, "consumer": "unused", "subject": %q},
  "sink": {"type": "file", "directory": %q, "fsync": true}
}`, url, stream, subject, outDir)
	sp, tp := filepath.Join(dir, "spool.json"), filepath.Join(dir, "target.json")
	for path, doc := range map[string]string{sp: spool, tp: target} {
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return sp, tp
}

// spoolName is the spool file of stream sequence seq.
func spoolName(stream string, seq int) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "stream-sequence:%s:%d", stream, seq))
	return hex.EncodeToString(sum[:]) + ".spool.json"
}

// countSpool returns the number of spool files in dir (0 before the sink
// created it) and fails on temp files: unnamed temp files leave none.
func countSpool(t *testing.T, dir string) int {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	n := 0
	for _, de := range des {
		switch {
		case strings.HasSuffix(de.Name(), ".spool.json"):
			n++
		case strings.HasPrefix(de.Name(), "."+spoolfile.HealthcheckName+"."),
			strings.HasPrefix(de.Name(), "."+spoolfile.ProbeName+"."):
			// A running sink's health probe, or the O_TMPFILE probe of a
			// process opening the spool (replay-spool started beside run):
			// linked and removed at once, so a scan just then may see it.
		case strings.HasSuffix(de.Name(), ".tmp"):
			t.Errorf("temp file in the spool: %s", de.Name())
		}
	}
	return n
}

// filesBelow returns the number of regular files below dir (0 when it does not exist yet).
func filesBelow(dir string) int {
	n := 0
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}

// replaySpool is one running `nats-sink replay-spool`.
func replaySpool(t *testing.T, args ...string) *process {
	t.Helper()
	p := &process{done: make(chan struct{})}
	p.cmd = exec.Command(binary, append([]string{"replay-spool"}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start replay-spool: %v", err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// TestSpoolKillAndReplay spools 3,000 messages through the real binary,
// killing `run` with SIGKILL twice on the way, then replays the spool into a
// file sink, killing `replay-spool` with SIGKILL mid-run several times. After
// every kill each message is in the spool or in the target (none lost);
// the final rerun completes, the target holds exactly one correct record
// per message, and the spool is empty.
func TestSpoolKillAndReplay(t *testing.T) {
	const n = 3000
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "EDGE", Subjects: []string{"edge.>"}})
	natstest.PublishN(t, js, "edge.events", n, body)
	spoolDir, out := filepath.Join(t.TempDir(), "spool"), filepath.Join(t.TempDir(), "out")
	spoolCfg, targetCfg := spoolConfigs(t, s.ClientURL(), "EDGE", "edge-spool", "edge.>", spoolDir, out, "")
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("random seed %d", seed)
	ctx := context.Background()

	// Spool, with two kills while writing.
	for round := range 2 {
		p := start(t, spoolCfg)
		time.Sleep(time.Duration(300+rng.IntN(1200)) * time.Millisecond)
		p.kill(t)
		floor, pending, err := ackState(ctx, js, "EDGE", "edge-spool")
		t.Logf("run round %d: killed; ack floor %d, ack pending %d (%v)", round, floor, pending, err)
	}
	p := start(t, spoolCfg)
	natstest.WaitFor(t, 2*time.Minute, func() error {
		floor, pending, err := ackState(ctx, js, "EDGE", "edge-spool")
		if err == nil && (floor != n || pending != 0) {
			err = fmt.Errorf("ack floor %d, ack pending %d; want %d, 0", floor, pending, n)
		}
		return err
	})
	waitFetching(t, js, "EDGE", "edge-spool")
	p.stop(t)
	if got := countSpool(t, spoolDir); got != n {
		t.Fatalf("%d spool files after every message was acknowledged, want %d", got, n)
	}

	// Replay, killed mid-run: wait until the target grew, then SIGKILL.
	for round := range 3 {
		before := filesBelow(out)
		rp := replaySpool(t, spoolCfg, targetCfg)
		deadline := time.Now().Add(time.Minute)
		for filesBelow(out) < before+100+rng.IntN(300) && time.Now().Before(deadline) {
			select {
			case <-rp.done:
				t.Fatalf("replay round %d finished before the kill: %s%s", round, rp.stdout.String(), rp.stderr.String())
			case <-time.After(5 * time.Millisecond):
			}
		}
		if err := rp.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-rp.done
		spooled, delivered := countSpool(t, spoolDir), filesBelow(out)
		t.Logf("replay round %d: killed with %d files spooled, %d delivered", round, spooled, delivered)
		lost := 0
		for seq := 1; seq <= n; seq++ {
			_, inSpool := os.Stat(filepath.Join(spoolDir, spoolName("EDGE", seq)))
			_, inTarget := os.Stat(filepath.Join(out, "edge.events", fmt.Sprintf("EDGE-%020d.json", seq)))
			if inSpool != nil && inTarget != nil {
				lost++
			}
		}
		if lost > 0 {
			t.Fatalf("after the kill in round %d, %d messages are neither in the spool nor in the target", round, lost)
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
	checkFiles(t, out, "EDGE", n)
}

// TestSpoolFullAndDrain fills a spool limited to 400 records with 1,000
// messages: `run` acknowledges what fits and holds the rest unacknowledged
// (nothing dead-lettered), and resumes by itself as `replay-spool`, run
// alongside it, makes room. In the end every message is in the target once.
func TestSpoolFullAndDrain(t *testing.T) {
	const n, limit = 1000, 400
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "FULL", Subjects: []string{"full.>"}})
	natstest.PublishN(t, js, "full.events", n, body)
	spoolDir, out := filepath.Join(t.TempDir(), "spool"), filepath.Join(t.TempDir(), "out")
	spoolCfg, targetCfg := spoolConfigs(t, s.ClientURL(), "FULL", "full-spool", "full.>", spoolDir, out,
		fmt.Sprintf(`, "max_records": %d, "fsync": false`, limit))
	p := start(t, spoolCfg)
	ctx := context.Background()

	natstest.WaitFor(t, time.Minute, func() error {
		if got := countSpool(t, spoolDir); got != limit {
			return fmt.Errorf("%d spool files, want the limit %d", got, limit)
		}
		return nil
	})
	floor, pending, err := ackState(ctx, js, "FULL", "full-spool")
	if err != nil || floor > limit || floor == n {
		t.Fatalf("while full: ack floor %d, pending %d (%v); want at most %d acknowledged", floor, pending, err, limit)
	}
	// Hold: the spool stays at its limit while nothing drains it.
	for range 5 {
		time.Sleep(100 * time.Millisecond)
		if got := countSpool(t, spoolDir); got != limit {
			t.Fatalf("%d spool files while full, want %d", got, limit)
		}
	}

	for round := 0; ; round++ {
		rp := replaySpool(t, spoolCfg, targetCfg)
		if code := rp.wait(t, time.Minute); code != 0 {
			t.Fatalf("replay round %d exit code %d\nstdout:\n%s\nstderr:\n%s", round, code, rp.stdout.String(), rp.stderr.String())
		}
		floor, pending, err := ackState(ctx, js, "FULL", "full-spool")
		if err != nil {
			t.Fatal(err)
		}
		if floor == n && pending == 0 && countSpool(t, spoolDir) == 0 {
			t.Logf("drained after %d replays", round+1)
			break
		}
		if round == 50 {
			t.Fatalf("not drained after 50 replays: ack floor %d, pending %d, %d spooled", floor, pending, countSpool(t, spoolDir))
		}
		time.Sleep(200 * time.Millisecond)
	}
	p.stop(t)
	// Every message reached the target: none was acknowledged without
	// being spooled (a dead-lettered or dropped one would be missing).
	checkFiles(t, out, "FULL", n)
}
