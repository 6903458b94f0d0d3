package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// TestLargeMessages runs the binary over 1 MB messages at the default
// batch size (100) and in-flight count (1). One unbounded fetch would be
// 100 MB, beyond what the server lets a client have pending (64 MiB): the
// server would drop the connection as a slow consumer. With every fetch
// bounded by delivery.max_batch_bytes (default 16 MiB) the connection
// stays up, every message is written once, and the process's peak RSS
// stays far below what a 100 MB batch would need.
func TestLargeMessages(t *testing.T) {
	const n, size = 200, 1_000_000
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "BIG", Subjects: []string{"big.>"}})
	pad := strings.Repeat("x", size)
	natstest.PublishN(t, js, "big.events", n, func(i int) []byte {
		b := fmt.Appendf(nil, `{"n":%d,"pad":"`, i+1)
		b = append(b, pad[:size-len(b)-2]...)
		return append(b, `"}`...)
	})

	out := t.TempDir()
	addr := freeAddr(t)
	doc := fmt.Sprintf(`{
  "nats": {"url": %q, "stream": "BIG", "consumer": "big-file", "subject": "big.>"},
  "consumer_management": {"ack_wait_seconds": 60},
  "logging": {"level": "WARNING"},
  "metrics": {"enabled": true, "listen": %q},
  "sink": {"type": "file", "directory": %q, "fsync": false}
}`, s.ClientURL(), addr, out)
	cfg := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(cfg, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	p := start(t, cfg)
	ctx := context.Background()
	natstest.WaitFor(t, 3*time.Minute, func() error {
		floor, pending, err := ackState(ctx, js, "BIG", "big-file")
		if err != nil || floor != n || pending != 0 {
			return fmt.Errorf("ack floor %d, ack pending %d (%v); want %d, 0\nstderr:\n%s", floor, pending, err, n, p.stderr.String())
		}
		return nil
	})
	peak := vmHWM(t, p.cmd.Process.Pid)
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	p.stop(t)

	for _, name := range []string{"nats_sinks_nats_connection_disconnected_total", "nats_sinks_nats_async_errors_total"} {
		m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(metrics)
		if m == nil || string(m[1]) != "0" {
			t.Errorf("%s = %q, want 0", name, m)
		}
	}
	if e := p.stderr.String(); strings.Contains(e, "slow consumer") || strings.Contains(e, "nats disconnected") {
		t.Errorf("stderr reports a disconnect:\n%s", e)
	}
	checkFiles(t, out, "BIG", n)
	t.Logf("peak RSS (VmHWM) of nats-sink: %d MiB", peak>>20)
	// 100 MB batches need far more; 16 MiB batches, their records and the
	// client's buffers stay well below this.
	if peak > 200<<20 {
		t.Errorf("peak RSS %d MiB, want below 200 MiB", peak>>20)
	}
}

// vmHWM returns the peak resident set size of process pid in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc status for the process: %v", err)
	}
	m := regexp.MustCompile(`(?m)^VmHWM:\s+(\d+) kB$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no VmHWM in /proc/%d/status", pid)
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}
