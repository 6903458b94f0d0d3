package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// openPTY returns the two ends of a new pseudo-terminal.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pty: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

// TestStatusWatchTerminal runs `status --watch` with a terminal as stdout:
// each refresh after the first moves the cursor back to the block's first
// line and clears below it (a redraw in place, no blank separator), and
// SIGINT ends it with the exit code of the last refresh.
func TestStatusWatchTerminal(t *testing.T) {
	srv := natstest.RunJetStream(t)
	master, tty := openPTY(t)
	cfg := filepath.Join(t.TempDir(), "cfg.json")
	doc := fmt.Sprintf(`{"nats": {"url": %q, "stream": "NOPE", "consumer": "c", "subject": "s.>"},
 "sink": {"type": "file", "directory": %q}}`, srv.ClientURL(), t.TempDir())
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var out bytes.Buffer
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			mu.Lock()
			out.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr bytes.Buffer
	env := &Env{Stdout: tty, Stderr: &stderr, Getenv: func(string) (string, bool) { return "", false },
		Signals: func(parent context.Context) (context.Context, context.CancelFunc) {
			c, stop := context.WithCancel(parent)
			go func() { <-ctx.Done(); stop() }()
			return c, stop
		}}
	done := make(chan int, 1)
	go func() { done <- Run([]string{"status", cfg, "--watch", "--interval", "1", "--skip-sink"}, env) }()

	redraw := regexp.MustCompile(`\x1b\[(\d+)F\x1b\[J`)
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		got := out.String()
		mu.Unlock()
		if m := redraw.FindStringSubmatchIndex(got); m != nil && bytes.Count([]byte(got[m[1]:]), []byte("status: unhealthy (consumer)")) >= 1 {
			first := got[:m[0]]
			lines := bytes.Count([]byte(first), []byte("\n"))
			if want := fmt.Sprintf("\x1b[%dF\x1b[J", lines); got[m[0]:m[1]] != want {
				t.Errorf("redraw sequence %q after a block of %d lines, want %q", got[m[0]:m[1]], lines, want)
			}
			if bytes.Contains([]byte(first), []byte("\n\n")) {
				t.Errorf("blank line between refreshes on a terminal:\n%q", first)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no redraw in place after 20 s; output so far:\n%q\nstderr:\n%s", got, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	select {
	case code := <-done:
		if code != exitRuntime {
			t.Errorf("exit code %d after SIGINT, want %d (the last refresh was unhealthy)", code, exitRuntime)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("status --watch did not end after SIGINT")
	}
}
