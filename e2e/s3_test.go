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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/natstest"
)

const s3Bucket = "nats-e2e"

// s3Server is an S3 store inside the test process: gofakes3 with its
// in-memory backend behind httptest. gate, when non-nil, holds every PUT
// (after reading its body) until it is closed or the client goes away;
// latency delays every request, as a remote store would.
type s3Server struct {
	backend *s3mem.Backend
	srv     *httptest.Server

	mu      sync.Mutex
	puts    int // PUT requests received
	exists  int // conditional PUTs answered 412 (redeliveries)
	waiting int // PUTs held by gate right now
	gate    chan struct{}
	latency time.Duration
	// For refuseFor from the first upload on, every PUT and POST (uploads,
	// multipart steps) is answered 503 SlowDown, counted in refused: a
	// store that is briefly unavailable. The window opens at the first
	// upload, not at a fixed time, so a slow start cannot miss it.
	refuseFor   time.Duration
	refuseUntil time.Time
	refused     int
}

// outage makes the store answer uploads 503 for d from the next upload on.
func (s *s3Server) outage(d time.Duration) {
	s.mu.Lock()
	s.refuseFor, s.refuseUntil = d, time.Time{}
	s.mu.Unlock()
}

// refusing reports (and counts) whether r is refused with a 503 now.
func (s *s3Server) refusing(r *http.Request) bool {
	if r.Method != http.MethodPut && r.Method != http.MethodPost {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refuseFor > 0 && s.refuseUntil.IsZero() {
		s.refuseUntil = time.Now().Add(s.refuseFor)
	}
	if time.Now().Before(s.refuseUntil) {
		s.refused++
		return true
	}
	return false
}

func newS3Server(t *testing.T, gate chan struct{}, latency time.Duration) *s3Server {
	t.Helper()
	s := &s3Server{backend: s3mem.New(), gate: gate, latency: latency}
	fake := gofakes3.New(s.backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.refusing(r) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
			return
		}
		if r.Method != http.MethodPut {
			fake.ServeHTTP(w, r)
			return
		}
		s.mu.Lock()
		s.puts++
		s.mu.Unlock()
		if s.gate != nil {
			// Read the body first, so that the server notices a client
			// that hangs up (killed) while the request is held.
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			s.mu.Lock()
			s.waiting++
			s.mu.Unlock()
			select {
			case <-s.gate:
			case <-r.Context().Done():
			}
			s.mu.Lock()
			s.waiting--
			s.mu.Unlock()
			if r.Context().Err() != nil {
				return
			}
		}
		if s.latency > 0 {
			time.Sleep(s.latency) // simulated store latency
		}
		rec := &statusRecorder{ResponseWriter: w}
		fake.ServeHTTP(rec, r)
		if rec.status == http.StatusPreconditionFailed {
			s.mu.Lock()
			s.exists++
			s.mu.Unlock()
		}
	}))
	t.Cleanup(s.srv.Close)
	if err := s.backend.CreateBucket(s3Bucket); err != nil {
		t.Fatal(err)
	}
	return s
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (s *s3Server) counts() (puts, exists, waiting int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.puts, s.exists, s.waiting
}

// objectKeys lists the bucket.
func (s *s3Server) objectKeys(t *testing.T) []string {
	t.Helper()
	list, err := s.backend.ListBucket(s3Bucket, nil, gofakes3.ListBucketPage{})
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(list.Contents))
	for _, c := range list.Contents {
		keys = append(keys, c.Key)
	}
	return keys
}

// check asserts that the bucket holds exactly one object per stream
// sequence 1..n of stream, under the key of the idempotency_key strategy,
// each holding its own message.
func (s *s3Server) check(t *testing.T, stream string, n int) {
	t.Helper()
	keys := s.objectKeys(t)
	seen := make(map[uint64]bool, n)
	for _, key := range keys {
		name, ok := strings.CutPrefix(key, "e2e/idempotency-key/stream-sequence_"+stream+"_")
		seq, err := strconv.ParseUint(strings.TrimSuffix(name, ".json"), 10, 64)
		if !ok || err != nil || !strings.HasSuffix(name, ".json") {
			t.Errorf("unexpected object key %q", key)
			continue
		}
		if seen[seq] {
			t.Errorf("stream sequence %d stored twice", seq)
		}
		seen[seq] = true
		o, err := s.backend.GetObject(s3Bucket, key, nil)
		if err != nil {
			t.Fatalf("get %s: %v", key, err)
		}
		data, err := io.ReadAll(o.Contents)
		o.Contents.Close()
		if err != nil {
			t.Fatal(err)
		}
		v, err := jsonx.Parse(data)
		if err != nil {
			t.Errorf("%s: not JSON: %v", key, err)
			continue
		}
		doc := v.(map[string]any)
		payload, _ := doc["payload"].(map[string]any)
		if got, p := fmt.Sprint(doc["stream_sequence"]), fmt.Sprint(payload["n"]); got != fmt.Sprint(seq) || p != fmt.Sprint(seq) ||
			doc["schema"] != "nats_sinks.s3.object.v1" {
			t.Errorf("%s holds stream_sequence %s, payload n %s, schema %v", key, got, p, doc["schema"])
		}
	}
	if len(seen) != n {
		t.Errorf("%d objects for %d messages (%d keys in the bucket)", len(seen), n, len(keys))
	}
}

// s3Config writes a run configuration for the s3 sink. The credentials come
// from environment variables the test sets for the subprocess.
func s3Config(t *testing.T, url, endpoint string, ackWait, concurrency int) string {
	t.Helper()
	t.Setenv("E2E_S3_KEY_ID", "AKIDE2E")
	t.Setenv("E2E_S3_SECRET", "e2e-secret")
	doc := fmt.Sprintf(`{
  "nats": {"url": %q, "stream": "S3E2E", "consumer": "s3-e2e", "subject": "s3e2e.>"},
  "consumer_management": {"ack_wait_seconds": %d, "max_ack_pending": 4000},
  "delivery": {"batch_size": 100, "max_in_flight_batches": 4, "batch_timeout_ms": 200,
               "retry_backoff_ms": 100, "shutdown_timeout_ms": 10000},
  "logging": {"level": "WARNING"},
  "sink": {"type": "s3", "bucket": %q, "prefix": "e2e", "endpoint_url": %q,
           "allow_http_for_local_testing": true, "region_name": "us-east-1",
           "credential_mode": "environment", "aws_access_key_id_env": "E2E_S3_KEY_ID",
           "aws_secret_access_key_env": "E2E_S3_SECRET",
           "request_timeout_seconds": 60, "concurrency": %d, "max_retries": 2, "retry_backoff_ms": 50}
}`, url, ackWait, s3Bucket, endpoint, concurrency)
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestS3CrashRedelivery kills the binary with SIGKILL while 3,000 messages
// flow into an S3 bucket, restarts it, and checks that the bucket holds
// exactly one object per message, and that the consumer acknowledged all of
// them: messages written but not acknowledged before the kill come back and
// are absorbed by the conditional PUT (412 → Duplicate).
func TestS3CrashRedelivery(t *testing.T) {
	const n = 3000
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "S3E2E", Subjects: []string{"s3e2e.>"}})
	natstest.PublishN(t, js, "s3e2e.events", n, body)

	store := newS3Server(t, nil, time.Millisecond)
	cfg := s3Config(t, s.ClientURL(), store.srv.URL, 3, 4)
	ctx := context.Background()

	p := start(t, cfg)
	natstest.WaitFor(t, time.Minute, func() error {
		if got := len(store.objectKeys(t)); got < n/4 {
			return fmt.Errorf("%d objects stored, waiting for %d before the kill", got, n/4)
		}
		return nil
	})
	p.kill(t)
	floor, pending, err := ackState(ctx, js, "S3E2E", "s3-e2e")
	t.Logf("killed with %d objects stored; ack floor %d, ack pending %d (%v)", len(store.objectKeys(t)), floor, pending, err)

	p = start(t, cfg)
	natstest.WaitFor(t, 2*time.Minute, func() error {
		floor, pending, err := ackState(ctx, js, "S3E2E", "s3-e2e")
		if err != nil {
			return err
		}
		if floor != n || pending != 0 {
			return fmt.Errorf("ack floor %d, ack pending %d; want %d, 0", floor, pending, n)
		}
		return nil
	})
	p.stop(t)
	store.check(t, "S3E2E", n)
	puts, exists, _ := store.counts()
	t.Logf("%d PUTs for %d messages, %d answered 412 (redelivered after the kill)", puts, n, exists)
}

// TestS3StallHoldsAcks holds every PUT: while the store has answered
// nothing, nothing may be acknowledged and nothing is stored. After the
// store is released every message is stored once and acknowledged.
func TestS3StallHoldsAcks(t *testing.T) {
	const n = 300
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "S3E2E", Subjects: []string{"s3e2e.>"}})
	natstest.PublishN(t, js, "s3e2e.events", n, body)

	gate := make(chan struct{})
	store := newS3Server(t, gate, 0)
	cfg := s3Config(t, s.ClientURL(), store.srv.URL, 30, 4)
	ctx := context.Background()

	p := start(t, cfg)
	// Wait until the sink has filled its concurrency: PUTs are arriving
	// and all are held.
	natstest.WaitFor(t, time.Minute, func() error {
		if _, _, waiting := store.counts(); waiting < 4 {
			return fmt.Errorf("%d PUTs held, waiting for 4", waiting)
		}
		return nil
	})
	holdsNoAcks(t, js, "S3E2E", "s3-e2e", 10, "the store holds every PUT")
	if got := len(store.objectKeys(t)); got != 0 {
		t.Fatalf("%d objects stored while every PUT was held", got)
	}
	close(gate)
	natstest.WaitFor(t, time.Minute, func() error {
		floor, pending, err := ackState(ctx, js, "S3E2E", "s3-e2e")
		if err != nil {
			return err
		}
		if floor != n || pending != 0 {
			return fmt.Errorf("ack floor %d, ack pending %d; want %d, 0", floor, pending, n)
		}
		return nil
	})
	p.stop(t)
	store.check(t, "S3E2E", n)
}
