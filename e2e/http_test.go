package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// idempotentServer is an HTTP endpoint that keeps the sink's contract
// (docs/http.md): it stores each request once per Idempotency-Key and answers
// 200 to a repeated key. gate, when non-nil, holds every request until it is
// closed or the client goes away.
type idempotentServer struct {
	srv *httptest.Server

	mu       sync.Mutex
	requests int               // every request received
	waiting  int               // requests held by gate right now
	byKey    map[string]uint64 // key → stream_sequence of the stored body
	payloadN map[string]string // key → payload "n" of the stored body
	bad      []string          // problems found in requests

	gate    chan struct{}
	latency time.Duration
}

func newIdempotentServer(t *testing.T, gate chan struct{}, latency time.Duration) *idempotentServer {
	t.Helper()
	is := &idempotentServer{byKey: map[string]uint64{}, payloadN: map[string]string{}, gate: gate, latency: latency}
	is.srv = httptest.NewServer(http.HandlerFunc(is.serve))
	t.Cleanup(is.srv.Close)
	return is
}

func (is *idempotentServer) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client went away (killed): nothing stored, no answer
	}
	is.mu.Lock()
	is.requests++
	is.mu.Unlock()
	if is.gate != nil {
		is.mu.Lock()
		is.waiting++
		is.mu.Unlock()
		select {
		case <-is.gate:
		case <-r.Context().Done():
		}
		is.mu.Lock()
		is.waiting--
		is.mu.Unlock()
		if r.Context().Err() != nil {
			return
		}
	}
	if is.latency > 0 {
		time.Sleep(is.latency) // simulated endpoint latency
	}
	key := r.Header.Get("Idempotency-Key")
	doc, err := jsonx.Parse(body)
	var seq uint64
	var n string
	if err == nil {
		m, _ := doc.(map[string]any)
		s, _ := m["stream_sequence"].(jsonx.Integer)
		seq, _ = strconv.ParseUint(string(s), 10, 64)
		if p, ok := m["payload"].(map[string]any); ok {
			n = fmt.Sprint(p["n"])
		}
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	switch {
	case err != nil:
		is.bad = append(is.bad, fmt.Sprintf("body is not JSON: %v", err))
	case key != fmt.Sprintf("stream-sequence:HTTPE2E:%d", seq):
		is.bad = append(is.bad, fmt.Sprintf("Idempotency-Key %q for stream_sequence %d", key, seq))
	case r.Header.Get("Content-Type") != "application/json":
		is.bad = append(is.bad, "Content-Type "+r.Header.Get("Content-Type"))
	}
	if _, dup := is.byKey[key]; !dup {
		is.byKey[key], is.payloadN[key] = seq, n
	}
}

func (is *idempotentServer) counts() (requests, waiting, stored int) {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.requests, is.waiting, len(is.byKey)
}

// check asserts that exactly sequences 1..n are stored, once per key, with
// their own payloads.
func (is *idempotentServer) check(t *testing.T, n int) {
	t.Helper()
	is.mu.Lock()
	defer is.mu.Unlock()
	for _, b := range is.bad {
		t.Error(b)
	}
	if len(is.byKey) != n {
		t.Errorf("%d distinct idempotency keys stored, want %d", len(is.byKey), n)
	}
	for seq := 1; seq <= n; seq++ {
		key := fmt.Sprintf("stream-sequence:HTTPE2E:%d", seq)
		got, ok := is.byKey[key]
		if !ok {
			t.Errorf("stream sequence %d never reached the endpoint", seq)
			continue
		}
		if got != uint64(seq) || is.payloadN[key] != strconv.Itoa(seq) {
			t.Errorf("key %s stored stream_sequence %d, payload n %s", key, got, is.payloadN[key])
		}
	}
	t.Logf("%d requests for %d messages (%d redelivered or retried)", is.requests, n, is.requests-len(is.byKey))
}

func httpConfig(t *testing.T, url, endpoint string, ackWait, concurrency int) string {
	t.Helper()
	doc := fmt.Sprintf(`{
  "nats": {"url": %q, "stream": "HTTPE2E", "consumer": "http-e2e", "subject": "httpe2e.>"},
  "consumer_management": {"ack_wait_seconds": %d, "max_ack_pending": 4000},
  "delivery": {"batch_size": 100, "max_in_flight_batches": 4, "batch_timeout_ms": 200,
               "retry_backoff_ms": 100, "shutdown_timeout_ms": 10000},
  "logging": {"level": "WARNING"},
  "sink": {"type": "http", "url": %q, "allow_http_for_local_testing": true,
           "request_timeout_seconds": 60, "concurrency": %d,
           "retry": {"max_retries": 2, "backoff_ms": 50}}
}`, url, ackWait, endpoint+"/ingest", concurrency)
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestHTTPCrashRedelivery kills the binary with SIGKILL while 2,000 messages
// flow to an HTTP endpoint, restarts it, and checks that every message
// reached the endpoint at least once and is stored exactly once per
// Idempotency-Key, and that the consumer acknowledged all of them.
func TestHTTPCrashRedelivery(t *testing.T) {
	const n = 2000
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "HTTPE2E", Subjects: []string{"httpe2e.>"}})
	natstest.PublishN(t, js, "httpe2e.events", n, body)

	is := newIdempotentServer(t, nil, 2*time.Millisecond)
	cfg := httpConfig(t, s.ClientURL(), is.srv.URL, 3, 4)
	ctx := context.Background()

	p := start(t, cfg)
	natstest.WaitFor(t, time.Minute, func() error {
		if got, _, _ := is.counts(); got < n/4 {
			return fmt.Errorf("%d requests received, waiting for %d before the kill", got, n/4)
		}
		return nil
	})
	p.kill(t)
	got, _, stored := is.counts()
	floor, pending, err := ackState(ctx, js, "HTTPE2E", "http-e2e")
	t.Logf("killed after %d requests (%d keys stored); ack floor %d, ack pending %d (%v)", got, stored, floor, pending, err)
	if stored >= n {
		t.Logf("the kill came after the endpoint had everything; redelivery is still checked below")
	}

	p = start(t, cfg)
	natstest.WaitFor(t, 2*time.Minute, func() error {
		floor, pending, err := ackState(ctx, js, "HTTPE2E", "http-e2e")
		if err != nil {
			return err
		}
		if floor != n || pending != 0 {
			return fmt.Errorf("ack floor %d, ack pending %d; want %d, 0", floor, pending, n)
		}
		return nil
	})
	p.stop(t)
	is.check(t, n)
}

// TestHTTPStallHoldsAcks blocks the endpoint: while no response has come
// back, nothing may be acknowledged. After the endpoint is released every
// message is acknowledged.
func TestHTTPStallHoldsAcks(t *testing.T) {
	const n = 300
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "HTTPE2E", Subjects: []string{"httpe2e.>"}})
	natstest.PublishN(t, js, "httpe2e.events", n, body)

	gate := make(chan struct{})
	is := newIdempotentServer(t, gate, 0)
	cfg := httpConfig(t, s.ClientURL(), is.srv.URL, 30, 8)
	ctx := context.Background()

	p := start(t, cfg)
	// Wait until the sink has filled its concurrency on every in-flight batch
	// it started: requests are arriving and all are held.
	natstest.WaitFor(t, time.Minute, func() error {
		if _, waiting, _ := is.counts(); waiting < 8 {
			return fmt.Errorf("%d requests held, waiting for 8", waiting)
		}
		return nil
	})
	// While the endpoint holds every request, the ack floor must stay at 0
	// however often we look.
	holdsNoAcks(t, js, "HTTPE2E", "http-e2e", 10, "the endpoint holds every request")
	if _, _, stored := is.counts(); stored != 0 {
		t.Fatalf("%d keys stored while the gate was closed", stored)
	}
	close(gate)
	natstest.WaitFor(t, time.Minute, func() error {
		floor, pending, err := ackState(ctx, js, "HTTPE2E", "http-e2e")
		if err != nil {
			return err
		}
		if floor != n || pending != 0 {
			return fmt.Errorf("ack floor %d, ack pending %d; want %d, 0", floor, pending, n)
		}
		return nil
	})
	p.stop(t)
	is.check(t, n)
}
