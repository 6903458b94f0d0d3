//go:build linux

package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// TestFanoutGateHoldsAcks runs the binary with two required targets, a
// file sink that commits at once and an HTTP endpoint the test holds
// inside its write. While the endpoint holds, the consumer's ACK floor does
// not move and nothing is ACKed on the wire, although the file target
// already holds every record; once the endpoint answers, every message of
// the batch is ACKed, once each, in delivery order.
func TestFanoutGateHoldsAcks(t *testing.T) {
	const stream, consumer, n = "FANGATE", "fangate", 20
	hold := make(chan struct{})
	var once sync.Once
	var (
		mu       sync.Mutex
		requests int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests++
		mu.Unlock()
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(func() { once.Do(func() { close(hold) }); srv.Close() })

	s := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: stream, Subjects: []string{"fangate.>"}})
	var (
		wmu   sync.Mutex
		order []uint64
	)
	if _, err := nc.Subscribe("$JS.ACK."+stream+"."+consumer+".>", func(m *nats.Msg) {
		if b := string(m.Data); b != "" && b != "+ACK" {
			return
		}
		if seq, ok := ackSeq(m.Subject); ok {
			wmu.Lock()
			order = append(order, seq)
			wmu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	natstest.PublishN(t, js, "fangate.events", n, body)
	dir := t.TempDir()
	cfg := fanWriteConfig(t, fmt.Sprintf(`{
  "nats": {"url": %q, "stream": %q, "consumer": %q, "subject": "fangate.>"},
  "consumer_management": {"ack_wait_seconds": 60},
  "delivery": {"batch_size": %d, "max_in_flight_batches": 1, "batch_timeout_ms": 200},
  "logging": {"level": "WARNING"},
  "sinks": {
    "archive": {"type": "file", "directory": %q, "partition_by_subject": false},
    "web": {"type": "http", "url": %q, "allow_http_for_local_testing": true, "concurrency": 4, "request_timeout_seconds": 60}
  },
  "routing": {"enabled": true, "routes": [{"name": "all", "match": {"subject": "fangate.>"}, "targets": ["archive", "web"]}]},
  "sink": {"type": "fanout"}
}`, s.ClientURL(), stream, consumer, n, dir, srv.URL))
	p := start(t, cfg)
	defer func() {
		if t.Failed() {
			t.Logf("stderr:\n%s", p.stderr.String())
		}
	}()
	natstest.WaitFor(t, 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if requests == 0 {
			return fmt.Errorf("no request yet")
		}
		if got := len(fanFileSeqs(t, dir, stream)); got != n {
			return fmt.Errorf("file target holds %d records, want %d", got, n)
		}
		return nil
	})
	holdsNoAcks(t, js, stream, consumer, 10, "the HTTP target is held inside its write")
	wmu.Lock()
	if len(order) != 0 {
		t.Fatalf("ACKs on the wire while a required target is still writing: %v", order)
	}
	wmu.Unlock()

	once.Do(func() { close(hold) })
	natstest.WaitAckState(t, js, stream, consumer, n, 0, 30*time.Second)
	natstest.WaitFor(t, 10*time.Second, func() error {
		wmu.Lock()
		defer wmu.Unlock()
		if len(order) < n {
			return fmt.Errorf("%d ACKs seen", len(order))
		}
		return nil
	})
	p.stop(t)
	wmu.Lock()
	defer wmu.Unlock()
	for i, seq := range order {
		if seq != uint64(i+1) {
			t.Fatalf("ACK order %v, want 1..%d in delivery order, each once", order, n)
		}
	}
	if len(order) != n {
		t.Errorf("%d ACKs, want %d", len(order), n)
	}
}
