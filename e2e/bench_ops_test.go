package e2e

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// TestBenchRedrive measures `dlq redrive --all` (docs/performance.md):
// 10,000 dead-lettered entries of ~300-byte payloads (times
// NATS_SINKS_BENCH_SCALE) on an embedded server, redriven to the original
// subject, then redriven again with --purge (every entry a duplicate, then
// deleted). It logs the wall time and entries per second of each, and
// checks the summaries: every entry redriven once, then purged.
func TestBenchRedrive(t *testing.T) {
	n := int(10000 * benchSkip(t))
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "ORDERS_DLQ", Subjects: []string{"dlq.orders"}})
	natstest.PublishN(t, js, "orders.poison", n, func(i int) []byte {
		return fmt.Appendf(nil, "not json %06d %0290d", i, 0)
	})
	cfg := writeConfig(t, fmt.Sprintf(`{
  "nats": {"url": %q, "stream": "ORDERS", "consumer": "orders-file", "subject": "orders.poison"},
  "delivery": {"batch_size": 500, "batch_timeout_ms": 100},
  "dead_letter": {"enabled": true, "subject": "dlq.orders"},
  "logging": {"level": "WARNING"},
  "sink": {"type": "file", "directory": %q, "payload_mode": "json_only"}
}`, s.ClientURL(), t.TempDir()))
	p := start(t, cfg)
	natstest.WaitFor(t, 5*time.Minute, func() error {
		if got, _ := streamState(t, js, "ORDERS_DLQ", "dlq.orders"); got != uint64(n) {
			return fmt.Errorf("DLQ holds %d entries, want %d", got, n)
		}
		return nil
	})
	p.stop(t)

	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"redrive --all", []string{"--all"}, fmt.Sprintf("Redrive complete: selected=%d redriven=%d duplicate=0 blocked=0 refused=0 failed=0 purged=0", n, n)},
		{"redrive --all --purge (all duplicates)", []string{"--all", "--purge"}, fmt.Sprintf("Redrive complete: selected=%d redriven=0 duplicate=%d blocked=0 refused=0 failed=0 purged=%d", n, n, n)},
	} {
		start := time.Now()
		r := runNatsSink(t, cmdEnv(), append([]string{"dlq", "redrive", cfg}, tt.args...)...)
		d := time.Since(start)
		summary := regexp.MustCompile(`(?m)^Redrive (complete|incomplete):.*$`).FindString(r.stdout)
		if r.code != 0 || summary != tt.want {
			t.Fatalf("%s: exit %d, summary %q, want %q\nstderr:\n%s", tt.name, r.code, summary, tt.want, r.stderr)
		}
		t.Logf("%s: %d entries in %.1f s = %.0f entries/s", tt.name, n, d.Seconds(), float64(n)/d.Seconds())
	}
	if got, _ := streamState(t, js, "ORDERS_DLQ", "dlq.orders"); got != 0 {
		t.Errorf("DLQ holds %d entries after --purge, want 0", got)
	}
	if got, _ := streamState(t, js, "ORDERS", "orders.poison"); got != uint64(2*n) {
		t.Errorf("orders.poison holds %d messages, want %d (originals and one copy each)", got, 2*n)
	}
}
