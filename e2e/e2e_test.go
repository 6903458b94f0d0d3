// Package e2e runs the real nats-sink binary as a subprocess against real
// NATS servers and checks the product's promise from the outside: after
// crashes (SIGKILL), graceful stops (SIGTERM) and restarts, every message is
// written exactly once and acknowledged, and nothing is acknowledged that was
// not written.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
)

// binary is the nats-sink executable built once for the package.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nats-sink-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "nats-sink")
	build := exec.Command("go", "build", "-o", binary, "../cmd/nats-sink")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: go build:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// process is one running `nats-sink run`.
type process struct {
	cmd            *exec.Cmd
	stdout, stderr syncBuffer
	done           chan struct{} // closed when the process has exited
}

// syncBuffer is a bytes.Buffer that the process's output goroutines write
// while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// start runs `nats-sink run configPath` and returns once the process has
// printed its "Active sink:" line, which it does after taking over SIGINT
// and SIGTERM: a test that signals it from then on tests the graceful stop,
// not the default termination of a process still starting.
func start(t *testing.T, configPath string) *process {
	t.Helper()
	p := &process{done: make(chan struct{})}
	p.cmd = exec.Command(binary, "run", configPath)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start nats-sink: %v", err)
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
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(p.stdout.String(), "Active sink:") {
		if time.Now().After(deadline) {
			t.Fatalf("nats-sink printed no \"Active sink:\" line within 30s\nstderr:\n%s", p.stderr.String())
		}
		select {
		case <-p.done:
			return p // exited early (a configuration-error test): the caller checks
		default:
		}
		time.Sleep(5 * time.Millisecond)
	}
	return p
}

// wait waits for the process to exit within d and returns its exit code.
func (p *process) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(d):
		p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("nats-sink did not exit within %v\nstdout:\n%s\nstderr:\n%s", d, p.stdout.String(), p.stderr.String())
		return -1
	}
}

// stop sends SIGTERM and expects a graceful exit (code 0) within 20 s.
func (p *process) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0\nstderr:\n%s", code, p.stderr.String())
	}
}

func (p *process) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	<-p.done
}

// fileConfig writes a run configuration for a file sink and returns its path.
func fileConfig(t *testing.T, url, stream, consumer, subject, dir string, extra string) string {
	t.Helper()
	doc := fmt.Sprintf(`{
  "nats": {"url": %q, "stream": %q, "consumer": %q, "subject": %q},
  "consumer_management": {"ack_wait_seconds": 3, "max_ack_pending": 4000},
  "delivery": {"batch_size": 250, "max_in_flight_batches": 4, "batch_timeout_ms": 200,
               "retry_backoff_ms": 100, "shutdown_timeout_ms": 10000},
  "logging": {"level": "WARNING"}%s,
  "sink": {"type": "file", "directory": %q, "fsync": true}
}`, url, stream, consumer, subject, extra, dir)
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// consumerInfo returns the consumer's current state in one request: the
// lookup itself fetches the info, so CachedInfo is fresh.
func consumerInfo(ctx context.Context, js jetstream.JetStream, stream, consumer string) (*jetstream.ConsumerInfo, error) {
	c, err := js.Consumer(ctx, stream, consumer)
	if err != nil {
		return nil, err
	}
	return c.CachedInfo(), nil
}

// ackState returns the consumer's ack floor (stream sequence) and number of
// ack-pending messages.
func ackState(ctx context.Context, js jetstream.JetStream, stream, consumer string) (uint64, int, error) {
	info, err := consumerInfo(ctx, js, stream, consumer)
	if err != nil {
		return 0, 0, err
	}
	return info.AckFloor.Stream, info.NumAckPending, nil
}

// holdsNoAcks looks at the consumer looks times, 100 ms apart, while the
// destination is stalled (why says how), and fails if anything was
// acknowledged or if nothing is pending: a stall must hold every ACK.
func holdsNoAcks(t *testing.T, js jetstream.JetStream, stream, consumer string, looks int, why string) {
	t.Helper()
	for i := range looks {
		floor, pending, err := ackState(context.Background(), js, stream, consumer)
		if err != nil {
			t.Fatal(err)
		}
		if floor != 0 {
			t.Fatalf("look %d: ack floor %d while %s, want 0", i, floor, why)
		}
		if pending == 0 {
			t.Fatalf("look %d: no messages ack-pending while %s", i, why)
		}
		time.Sleep(100 * time.Millisecond) // spread the looks over the stall
	}
}

// waitFetching waits until the consumer has a waiting pull request: the
// process under test has started and its runner is fetching.
func waitFetching(t *testing.T, js jetstream.JetStream, stream, consumer string) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := js.Consumer(ctx, stream, consumer)
		if err == nil {
			if info, err := c.Info(ctx); err == nil && info.NumWaiting > 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer %s/%s: no pull request within 30s", stream, consumer)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkFiles asserts that dir holds exactly one record file per stream
// sequence 1..n of stream, each with the right sequence and payload, and no
// temp files or other debris.
func checkFiles(t *testing.T, dir, stream string, n int) {
	t.Helper()
	seen := make(map[int64]string, n)
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		name := d.Name()
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			t.Errorf("debris in the output directory: %s", path)
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		v, err := jsonx.Parse(data)
		if err != nil {
			t.Errorf("%s: not valid JSON: %v", path, err)
			return nil
		}
		rec := v.(map[string]any)
		seq, _ := rec["stream_sequence"].(jsonx.Integer)
		var s int64
		fmt.Sscan(string(seq), &s)
		if want := fmt.Sprintf("%s-%020d.json", stream, s); name != want {
			t.Errorf("%s: holds stream sequence %d, want file name %s", path, s, want)
		}
		payload, _ := rec["payload"].(map[string]any)
		if got := fmt.Sprint(payload["n"]); got != fmt.Sprint(s) {
			t.Errorf("%s: payload n = %s, want %d", path, got, s)
		}
		if prev, dup := seen[s]; dup {
			t.Errorf("stream sequence %d written twice: %s and %s", s, prev, path)
		}
		seen[s] = path
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != n {
		missing := 0
		for s := int64(1); s <= int64(n); s++ {
			if _, ok := seen[s]; !ok {
				missing++
			}
		}
		t.Errorf("%d record files, want %d (%d sequences missing)", len(seen), n, missing)
	}
}

func body(i int) []byte {
	return fmt.Appendf(nil, `{"n":%d,"pad":"%s"}`, i+1, strings.Repeat("x", 200))
}

func init() {
	// The subprocess and the embedded server share two cores: keep the
	// test's own goroutines from starving them.
	runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0)))
}

func replaceInFile(t *testing.T, path, old, new string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(old)) {
		t.Fatalf("%s does not contain %q", path, old)
	}
	if err := os.WriteFile(path, bytes.ReplaceAll(data, []byte(old), []byte(new)), 0o644); err != nil {
		t.Fatal(err)
	}
}
