//go:build linux

package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// TestFanoutShutdownAtDrainTimeout SIGTERMs the binary while one batch
// waits at the gate: fsd.fast messages go to a file target (required,
// commits at once) and an HTTP target that hangs (optional, a window far
// longer than the drain), fsd.slow messages to another HTTP target that
// hangs (required). At the drain timeout the gate releases: the messages
// whose required targets all committed (fsd.fast) are ACKed, the others
// (fsd.slow) are NAKed and never ACKed, and the process exits 0. The ACKs
// and NAKs are observed on the wire.
func TestFanoutShutdownAtDrainTimeout(t *testing.T) {
	const stream, consumer = "FANSD", "fansd"
	var (
		mu       sync.Mutex
		arrived  = map[string]int{}
		release  = make(chan struct{})
		released sync.Once
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrived[r.URL.Path]++
		mu.Unlock()
		select { // hang until the client gives up or the test ends
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { released.Do(func() { close(release) }); srv.Close() })

	s := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: stream, Subjects: []string{"fsd.>"}})
	var (
		wmu    sync.Mutex
		acked  = map[uint64]int{}
		nacked = map[uint64]int{}
	)
	if _, err := nc.Subscribe("$JS.ACK."+stream+"."+consumer+".>", func(m *nats.Msg) {
		seq, ok := ackSeq(m.Subject)
		if !ok {
			return
		}
		wmu.Lock()
		defer wmu.Unlock()
		switch b := string(m.Data); {
		case b == "" || b == "+ACK":
			acked[seq]++
		case strings.HasPrefix(b, "-NAK"):
			nacked[seq]++
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	natstest.PublishN(t, js, "fsd.fast", 5, body) // 1..5
	natstest.PublishN(t, js, "fsd.slow", 5, body) // 6..10

	dir := t.TempDir()
	cfg := fanWriteConfig(t, fmt.Sprintf(`{
  "nats": {"url": %q, "stream": %q, "consumer": %q, "subject": "fsd.>"},
  "consumer_management": {"ack_wait_seconds": 60},
  "delivery": {"batch_size": 10, "max_in_flight_batches": 1, "batch_timeout_ms": 200, "shutdown_timeout_ms": 1500},
  "logging": {"level": "WARNING"},
  "sinks": {
    "archive": {"type": "file", "directory": %q, "partition_by_subject": false},
    "side": {"type": "http", "url": %q, "allow_http_for_local_testing": true, "request_timeout_seconds": 60},
    "hold": {"type": "http", "url": %q, "allow_http_for_local_testing": true, "request_timeout_seconds": 60}
  },
  "routing": {"enabled": true, "routes": [
    {"name": "fast", "match": {"subject": "fsd.fast"}, "targets": ["archive", {"sink": "side", "required": false, "minimum_wait_ms": 60000, "timeout_ms": 60000}]},
    {"name": "slow", "match": {"subject": "fsd.slow"}, "targets": "hold"}
  ]},
  "sink": {"type": "fanout"}
}`, s.ClientURL(), stream, consumer, dir, srv.URL+"/side", srv.URL+"/hold"))
	p := start(t, cfg)
	defer func() {
		if t.Failed() {
			t.Logf("stderr:\n%s", p.stderr.String())
		}
	}()
	// The batch is at the gate: both hanging targets have a request, and
	// the file target holds its five records.
	natstest.WaitFor(t, 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if arrived["/side"] == 0 || arrived["/hold"] == 0 {
			return fmt.Errorf("requests so far: %v", arrived)
		}
		if n := len(fanFileSeqs(t, dir, stream)); n != 5 {
			return fmt.Errorf("file target holds %d records, want 5", n)
		}
		return nil
	})
	wmu.Lock()
	early := len(acked)
	wmu.Unlock()
	if early != 0 {
		t.Fatalf("%d messages ACKed while the gate still waits", early)
	}
	p.stop(t)
	natstest.WaitFor(t, 10*time.Second, func() error {
		wmu.Lock()
		defer wmu.Unlock()
		if len(acked) < 5 || len(nacked) < 5 {
			return fmt.Errorf("ACKed %v, NAKed %v", acked, nacked)
		}
		return nil
	})
	wmu.Lock()
	defer wmu.Unlock()
	for seq := uint64(1); seq <= 5; seq++ {
		if acked[seq] != 1 || nacked[seq] != 0 {
			t.Errorf("fsd.fast message %d: ACKed %d, NAKed %d; want ACKed once (its required target committed)", seq, acked[seq], nacked[seq])
		}
	}
	for seq := uint64(6); seq <= 10; seq++ {
		if acked[seq] != 0 || nacked[seq] != 1 {
			t.Errorf("fsd.slow message %d: ACKed %d, NAKed %d; want NAKed once and never ACKed", seq, acked[seq], nacked[seq])
		}
	}
}
