package deploy_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// binary is a static nats-sink (CGO_ENABLED=0, -trimpath), built once for
// every test of the package: the systemd tests run it, the container image
// copies it.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nats-sink-deploy-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "nats-sink")
	build := exec.Command("go", "build", "-trimpath", "-o", binary, "../cmd/nats-sink")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "deploy: go build:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// requireTool returns the path of a command the test needs. Missing, the
// test is skipped with the reason, or fails when NATS_SINKS_REQUIRE_SERVICES=1
// (CI installs it).
func requireTool(t *testing.T, name, why string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	reason := fmt.Sprintf("%s not installed (%s)", name, why)
	if os.Getenv("NATS_SINKS_REQUIRE_SERVICES") == "1" {
		t.Fatalf("%s; NATS_SINKS_REQUIRE_SERVICES=1 makes this a failure", reason)
	}
	t.Skip(reason)
	return ""
}

// syncBuffer is a bytes.Buffer written by a process's output goroutine
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

// run runs a command and returns its combined output, failing the test on
// a non-zero exit.
func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// waitFor polls f every 20 ms until it returns nil or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
