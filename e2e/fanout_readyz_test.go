//go:build linux

package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sys/unix"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// fanReady is one /readyz answer.
type fanReady struct {
	code   int
	status string
	checks map[string]string
}

func (r fanReady) String() string {
	return fmt.Sprintf("%d %s %v", r.code, r.status, r.checks)
}

func fanGetReady(addr string) (fanReady, error) {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return fanReady{}, err
	}
	defer resp.Body.Close()
	var body struct {
		Checks map[string]string `json:"checks"`
		Status string            `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fanReady{}, err
	}
	return fanReady{resp.StatusCode, body.Status, body.Checks}, nil
}

// fanWaitReady waits until /readyz answers what ok accepts and returns that
// answer.
func fanWaitReady(t *testing.T, addr string, d time.Duration, ok func(fanReady) error) fanReady {
	t.Helper()
	var last fanReady
	natstest.WaitFor(t, d, func() error {
		r, err := fanGetReady(addr)
		if err != nil {
			return err
		}
		last = r
		if err := ok(r); err != nil {
			return fmt.Errorf("/readyz = %v: %w", r, err)
		}
		return nil
	})
	return last
}

// fanScrape returns the unlabelled series of /metrics without the
// nats_sinks_ prefix.
func fanScrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	out, err := getMetrics(addr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fanBreakableDir is a file target's root that the test can make refuse new
// files (EACCES/EPERM, a destination failure of the file sink) and heal
// again. A non-root user loses write permission; root ignores permissions,
// so for root the directory gets the immutable attribute (FS_IOC_SETFLAGS,
// which needs CAP_LINUX_IMMUTABLE and a file system that supports it).
type fanBreakableDir struct {
	path string
	root bool
}

const fanImmutableFL = 0x00000010 // FS_IMMUTABLE_FL

func fanNewBreakableDir(t *testing.T) *fanBreakableDir {
	t.Helper()
	d := &fanBreakableDir{path: t.TempDir(), root: os.Geteuid() == 0}
	d.set(t, true)
	probe := filepath.Join(d.path, "probe")
	err := os.WriteFile(probe, nil, 0o644)
	d.set(t, false)
	if err == nil {
		os.Remove(probe)
		reason := "cannot make a directory refuse new files here (root without an immutable attribute)"
		if os.Getenv(natstest.RequireServicesEnv) == "1" {
			t.Fatalf("%s; %s=1 makes this a failure", reason, natstest.RequireServicesEnv)
		}
		t.Skip(reason)
	}
	t.Cleanup(func() { d.set(t, false) }) // TempDir removal needs it writable
	return d
}

func (d *fanBreakableDir) set(t *testing.T, broken bool) {
	t.Helper()
	if !d.root {
		mode := os.FileMode(0o755)
		if broken {
			mode = 0o555
		}
		if err := os.Chmod(d.path, mode); err != nil {
			t.Fatal(err)
		}
		return
	}
	fd, err := unix.Open(d.path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	flags, err := unix.IoctlGetInt(fd, unix.FS_IOC_GETFLAGS)
	if err != nil {
		t.Skipf("file system attributes unavailable: %v", err)
	}
	if broken {
		flags |= fanImmutableFL
	} else {
		flags &^= fanImmutableFL
	}
	if err := unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, flags); err != nil && broken {
		t.Logf("set immutable attribute: %v", err) // fanNewBreakableDir's probe decides
	}
}

// fanFileSeqs returns how often each stream sequence of stream has a record
// file in dir (filename_strategy stream_sequence, no subject partitions).
func fanFileSeqs(t *testing.T, dir, stream string) map[uint64]int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]int{}
	for _, e := range ents {
		var seq uint64
		if _, err := fmt.Sscanf(e.Name(), stream+"-%020d.json", &seq); err != nil {
			t.Errorf("unexpected entry %s in %s", e.Name(), dir)
			continue
		}
		out[seq]++
	}
	return out
}

func fanSQLiteSeqs(t *testing.T, path string) map[uint64]int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	return seqCounts(t, func() (*sql.Rows, error) {
		return db.Query("select stream_sequence from nats_sink_events")
	})
}

func fanSeqRange(from, to uint64) map[uint64]bool {
	m := map[uint64]bool{}
	for s := from; s <= to; s++ {
		m[s] = true
	}
	return m
}

func fanWriteConfig(t *testing.T, doc string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func fanConsumerInfo(t *testing.T, js jetstream.JetStream, stream, consumer string) *jetstream.ConsumerInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := js.Consumer(ctx, stream, consumer)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// TestFanoutRequiredTargetOutage runs the binary with two required
// targets, a file sink and SQLite, and breaks the file target's directory
// while the process is idle. The next batch fails with a destination error
// in that target, and then: fetching pauses (no pull request, nothing more
// delivered although messages wait), /readyz answers 503 with
// target:archive unhealthy and sink unhealthy for as long as the target's
// health check (the probe) fails, and the SQLite target stays ok. Once the
// directory is healed the probe passes, /readyz is 200 again, fetching
// resumes and every message is in both targets exactly once. The write
// counters count target calls: each committed target operation is one
// call of sink_batches_written_total.
func TestFanoutRequiredTargetOutage(t *testing.T) {
	const stream, consumer = "FANRQ", "fanrq"
	archive := fanNewBreakableDir(t)
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: stream, Subjects: []string{"fanrq.>"}})
	dbPath := filepath.Join(t.TempDir(), "fan.db")
	addr := freeAddr(t)
	cfg := fanWriteConfig(t, fmt.Sprintf(`{
  "nats": {"url": %q, "stream": %q, "consumer": %q, "subject": "fanrq.>"},
  "consumer_management": {"ack_wait_seconds": 30, "max_ack_pending": 1000},
  "delivery": {"batch_size": 50, "max_in_flight_batches": 2, "batch_timeout_ms": 50,
               "retry_backoff_ms": 100, "retry_backoff_max_ms": 400},
  "logging": {"level": "WARNING"},
  "metrics": {"enabled": true, "listen": %q},
  "sinks": {
    "archive": {"type": "file", "directory": %q, "partition_by_subject": false, "fsync": true},
    "db": {"type": "sqlite", "path": %q}
  },
  "routing": {"enabled": true, "routes": [{"name": "all", "match": {"subject": "fanrq.>"}, "targets": ["archive", "db"]}]},
  "sink": {"type": "fanout"}
}`, s.ClientURL(), stream, consumer, addr, archive.path, dbPath))
	p := start(t, cfg)
	defer func() {
		if t.Failed() {
			t.Logf("stderr:\n%s", p.stderr.String())
		}
	}()
	healthy := func(r fanReady) error {
		if r.code != 200 || r.status != "ready" || r.checks["sink"] != "ok" || r.checks["target:archive"] != "ok" || r.checks["target:db"] != "ok" {
			return fmt.Errorf("want 200 ready with sink, target:archive and target:db ok")
		}
		return nil
	}

	// Phase 1: healthy.
	natstest.PublishN(t, js, "fanrq.events", 100, body)
	natstest.WaitAckState(t, js, stream, consumer, 100, 0, 30*time.Second)
	fanWaitReady(t, addr, 10*time.Second, healthy)

	// Phase 2: the file target refuses new files; 300 messages wait.
	archive.set(t, true)
	natstest.PublishN(t, js, "fanrq.events", 300, body)
	fanWaitReady(t, addr, 10*time.Second, func(r fanReady) error {
		if r.code != 503 || r.status != "not_ready" || r.checks["sink"] != "unhealthy" || r.checks["target:archive"] != "unhealthy" {
			return fmt.Errorf("want 503 not_ready with sink and target:archive unhealthy")
		}
		if r.checks["target:db"] != "ok" {
			return fmt.Errorf("target:db is not ok")
		}
		return nil
	})
	// Let the batches fetched before the circuit opened settle, then watch
	// the pause: no pull request, nothing delivered, still 503, while
	// messages are pending and the probe keeps failing.
	time.Sleep(500 * time.Millisecond)
	before := fanConsumerInfo(t, js, stream, consumer)
	for look := range 10 {
		time.Sleep(150 * time.Millisecond)
		info := fanConsumerInfo(t, js, stream, consumer)
		if info.Delivered.Consumer != before.Delivered.Consumer || info.NumWaiting != 0 {
			t.Fatalf("look %d: delivered %d → %d, %d pull requests waiting; want fetching paused",
				look, before.Delivered.Consumer, info.Delivered.Consumer, info.NumWaiting)
		}
		if info.NumPending+uint64(info.NumAckPending)+uint64(info.NumRedelivered) == 0 {
			t.Fatalf("look %d: nothing left to deliver; the outage test has no work held back", look)
		}
		if info.AckFloor.Stream >= 400 {
			t.Fatalf("look %d: ack floor %d: messages were acknowledged without the file target", look, info.AckFloor.Stream)
		}
		if r, err := fanGetReady(addr); err != nil || r.code != 503 || r.checks["target:archive"] != "unhealthy" {
			t.Fatalf("look %d: /readyz = %v (%v), want 503 with target:archive unhealthy while the probe fails", look, r, err)
		}
	}
	m := fanScrape(t, addr)
	if m["sink_circuit_open"] != 1 || m["fanout_targets_unhealthy"] != 1 {
		t.Errorf("while paused: sink_circuit_open %v, fanout_targets_unhealthy %v; want 1, 1", m["sink_circuit_open"], m["fanout_targets_unhealthy"])
	}
	if n := fanFileSeqs(t, archive.path, stream); len(n) != 100 {
		t.Errorf("file target holds %d records during the outage, want the 100 of phase 1", len(n))
	}

	// Phase 3: healed. The probe passes, fetching resumes, all is written.
	archive.set(t, false)
	fanWaitReady(t, addr, 15*time.Second, healthy)
	natstest.WaitAckState(t, js, stream, consumer, 400, 0, 30*time.Second)
	exactlyOnce(t, "archive (file)", fanFileSeqs(t, archive.path, stream), fanSeqRange(1, 400))
	exactlyOnce(t, "db (sqlite)", fanSQLiteSeqs(t, dbPath), fanSeqRange(1, 400))
	m = fanScrape(t, addr)
	if m["sink_circuit_open"] != 0 || m["fanout_targets_unhealthy"] != 0 {
		t.Errorf("after healing: sink_circuit_open %v, fanout_targets_unhealthy %v; want 0, 0", m["sink_circuit_open"], m["fanout_targets_unhealthy"])
	}
	// No target call committed only part of its messages (the break and the
	// heal happened while nothing was written), so every call that
	// committed something is one committed required operation.
	if got, want := m["sink_batches_written_total"], m["fanout_required_child_success_total"]+m["fanout_optional_child_success_total"]; got != want || got == 0 {
		t.Errorf("sink_batches_written_total = %v, want %v (committed target operations)", got, want)
	}
	if m["fanout_required_child_failure_total"] == 0 {
		t.Errorf("fanout_required_child_failure_total = 0, want the failed archive operations counted")
	}
	p.stop(t)
}

// fanToggleEndpoint is an HTTP destination that answers 401 (a destination
// failure of the HTTP sink) while broken and 200 otherwise, and counts the
// requests it received in each state.
type fanToggleEndpoint struct {
	mu      sync.Mutex
	broken  bool
	refused int            // requests answered 401
	stored  map[uint64]int // stream sequence → 200 answers
}

func (e *fanToggleEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	var doc struct {
		StreamSequence uint64 `json:"stream_sequence"`
	}
	json.Unmarshal(data, &doc)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.broken {
		e.refused++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	e.stored[doc.StreamSequence]++
	w.WriteHeader(http.StatusOK)
}

func (e *fanToggleEndpoint) set(broken bool) { e.mu.Lock(); e.broken = broken; e.mu.Unlock() }

func (e *fanToggleEndpoint) snapshot() (refused int, stored map[uint64]int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	stored = make(map[uint64]int, len(e.stored))
	for k, v := range e.stored {
		stored[k] = v
	}
	return e.refused, stored
}

// TestFanoutOptionalTargetOutage runs the binary with SQLite required and
// an HTTP endpoint optional everywhere, and makes the endpoint answer 401
// (a destination failure). Fetching continues: every message is
// acknowledged and in SQLite, and /readyz stays 200 throughout with sink
// ok and target:web unhealthy. The target is skipped while its circuit is
// open: the endpoint sees exactly one refused request (the first batch;
// one batch in flight, one request at a time) although 200 messages pass.
// It is probed with the retry back-off; the HTTP sink has no health check,
// so the probe is the next real write, which commits once the endpoint is
// healed: target:web is ok again and later messages reach it.
func TestFanoutOptionalTargetOutage(t *testing.T) {
	const stream, consumer = "FANOPT", "fanopt"
	ep := &fanToggleEndpoint{stored: map[uint64]int{}}
	srv := httptest.NewServer(ep)
	t.Cleanup(srv.Close)
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: stream, Subjects: []string{"fanopt.>"}})
	dbPath := filepath.Join(t.TempDir(), "fan.db")
	addr := freeAddr(t)
	// The retry back-off (also the optional target's probe back-off) is
	// longer than phase 2 takes, so no probe falls inside it.
	cfg := fanWriteConfig(t, fmt.Sprintf(`{
  "nats": {"url": %q, "stream": %q, "consumer": %q, "subject": "fanopt.>"},
  "consumer_management": {"ack_wait_seconds": 30, "max_ack_pending": 1000},
  "delivery": {"batch_size": 20, "max_in_flight_batches": 1, "batch_timeout_ms": 50,
               "retry_backoff_ms": 6000, "retry_backoff_max_ms": 6000, "retry_jitter": "none"},
  "logging": {"level": "WARNING"},
  "metrics": {"enabled": true, "listen": %q},
  "sinks": {
    "db": {"type": "sqlite", "path": %q},
    "web": {"type": "http", "url": %q, "allow_http_for_local_testing": true, "concurrency": 1, "request_timeout_seconds": 5}
  },
  "routing": {"enabled": true, "routes": [{"name": "all", "match": {"subject": "fanopt.>"},
    "targets": ["db", {"sink": "web", "required": false, "minimum_wait_ms": 5000, "timeout_ms": 5000}]}]},
  "sink": {"type": "fanout"}
}`, s.ClientURL(), stream, consumer, addr, dbPath, srv.URL))
	p := start(t, cfg)
	defer func() {
		if t.Failed() {
			t.Logf("stderr:\n%s", p.stderr.String())
		}
	}()
	ready := func(webState string) func(fanReady) error {
		return func(r fanReady) error {
			if r.code != 200 || r.status != "ready" || r.checks["sink"] != "ok" || r.checks["target:db"] != "ok" || r.checks["target:web"] != webState {
				return fmt.Errorf("want 200 ready, sink and target:db ok, target:web %s", webState)
			}
			return nil
		}
	}

	// Phase 1: healthy; every message reaches both targets.
	natstest.PublishN(t, js, "fanopt.events", 40, body)
	natstest.WaitAckState(t, js, stream, consumer, 40, 0, 30*time.Second)
	fanWaitReady(t, addr, 10*time.Second, ready("ok"))
	if _, stored := ep.snapshot(); len(stored) != 40 {
		t.Fatalf("endpoint stored %d messages in phase 1, want 40", len(stored))
	}

	// Phase 2: the endpoint refuses; 200 messages pass while /readyz is
	// watched.
	ep.set(true)
	var (
		watchMu  sync.Mutex
		notReady []string
		sawDown  bool
	)
	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(20 * time.Millisecond):
			}
			r, err := fanGetReady(addr)
			watchMu.Lock()
			switch {
			case err != nil:
				notReady = append(notReady, err.Error())
			case r.code != 200 || r.checks["sink"] != "ok":
				notReady = append(notReady, r.String())
			case r.checks["target:web"] == "unhealthy":
				sawDown = true
			}
			watchMu.Unlock()
		}
	}()
	natstest.PublishN(t, js, "fanopt.events", 200, body)
	natstest.WaitAckState(t, js, stream, consumer, 240, 0, 30*time.Second)
	fanWaitReady(t, addr, 5*time.Second, ready("unhealthy"))
	close(stopWatch)
	<-watched
	refused, stored := ep.snapshot()
	watchMu.Lock()
	if len(notReady) > 0 {
		t.Errorf("/readyz not ready during the optional target's outage: %v", notReady)
	}
	if !sawDown {
		t.Errorf("/readyz never showed target:web unhealthy while it was down")
	}
	watchMu.Unlock()
	if refused != 1 {
		t.Errorf("endpoint refused %d requests during the outage, want 1 (the target is skipped while its circuit is open)", refused)
	}
	if len(stored) != 40 {
		t.Errorf("endpoint stored %d messages, want the 40 of phase 1", len(stored))
	}
	exactlyOnce(t, "db (sqlite)", fanSQLiteSeqs(t, dbPath), fanSeqRange(1, 240))
	if m := fanScrape(t, addr); m["fanout_targets_unhealthy"] != 1 || m["sink_circuit_open"] != 0 {
		t.Errorf("during the outage: fanout_targets_unhealthy %v, sink_circuit_open %v; want 1, 0", m["fanout_targets_unhealthy"], m["sink_circuit_open"])
	}

	// Phase 3: healed. After the back-off the next write is the probe; it
	// commits, the circuit closes, and later messages reach the endpoint.
	ep.set(false)
	deadline := time.Now().Add(20 * time.Second)
	next := 241
	for {
		natstest.PublishN(t, js, "fanopt.events", 1, body)
		natstest.WaitAckState(t, js, stream, consumer, uint64(next), 0, 10*time.Second)
		if r, err := fanGetReady(addr); err == nil && ready("ok")(r) == nil {
			break
		}
		if time.Now().After(deadline) {
			r, err := fanGetReady(addr)
			t.Fatalf("target:web not ok 20 s after the endpoint healed: /readyz = %v (%v)", r, err)
		}
		next++
		time.Sleep(250 * time.Millisecond)
	}
	natstest.PublishN(t, js, "fanopt.events", 20, body)
	last := uint64(next + 20)
	natstest.WaitAckState(t, js, stream, consumer, last, 0, 30*time.Second)
	_, stored = ep.snapshot()
	for seq := uint64(next + 1); seq <= last; seq++ {
		if stored[seq] != 1 {
			t.Errorf("message %d after the recovery reached the endpoint %d times, want 1", seq, stored[seq])
		}
	}
	for seq := uint64(41); seq <= 240; seq++ {
		if stored[seq] != 0 {
			t.Errorf("message %d of the outage reached the endpoint later; an optional copy is never retried", seq)
		}
	}
	exactlyOnce(t, "db (sqlite)", fanSQLiteSeqs(t, dbPath), fanSeqRange(1, last))
	p.stop(t)
}

// TestFanoutRequiredTargetWithoutHealthcheck: a required HTTP target (the
// HTTP sink has no health check) answers 401. The process pauses and
// /readyz answers 503 with target:web unhealthy on every look while the
// endpoint refuses: the probe is a real batch (half-open), so the process
// never reports ready before a write to the target succeeded, and the
// back-off between probe batches grows. Once healed, a probe batch
// commits, /readyz is 200 and every message is in both targets.
func TestFanoutRequiredTargetWithoutHealthcheck(t *testing.T) {
	const stream, consumer = "FANNOHC", "fannohc"
	ep := &fanToggleEndpoint{stored: map[uint64]int{}}
	srv := httptest.NewServer(ep)
	t.Cleanup(srv.Close)
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: stream, Subjects: []string{"fannohc.>"}})
	dbPath := filepath.Join(t.TempDir(), "fan.db")
	addr := freeAddr(t)
	cfg := fanWriteConfig(t, fmt.Sprintf(`{
  "nats": {"url": %q, "stream": %q, "consumer": %q, "subject": "fannohc.>"},
  "consumer_management": {"ack_wait_seconds": 30},
  "delivery": {"batch_size": 10, "max_in_flight_batches": 1, "batch_timeout_ms": 50,
               "retry_backoff_ms": 200, "retry_backoff_max_ms": 5000, "retry_jitter": "none"},
  "logging": {"level": "WARNING"},
  "metrics": {"enabled": true, "listen": %q},
  "sinks": {
    "db": {"type": "sqlite", "path": %q},
    "web": {"type": "http", "url": %q, "allow_http_for_local_testing": true, "concurrency": 1, "request_timeout_seconds": 5}
  },
  "routing": {"enabled": true, "routes": [{"name": "all", "match": {"subject": "fannohc.>"}, "targets": ["db", "web"]}]},
  "sink": {"type": "fanout"}
}`, s.ClientURL(), stream, consumer, addr, dbPath, srv.URL))
	p := start(t, cfg)
	defer func() {
		if t.Failed() {
			t.Logf("stderr:\n%s", p.stderr.String())
		}
	}()
	ep.set(true)
	natstest.PublishN(t, js, "fannohc.events", 30, body)
	fanWaitReady(t, addr, 10*time.Second, func(r fanReady) error {
		if r.code != 503 || r.checks["target:web"] != "unhealthy" {
			return fmt.Errorf("want 503 with target:web unhealthy")
		}
		return nil
	})
	// About 3 s of looks: back-offs of 0.2, 0.4, 0.8, 1.6 s give at most
	// five probe batches, each sending one refused request.
	refusedBefore, _ := ep.snapshot()
	for look := range 60 {
		time.Sleep(50 * time.Millisecond)
		if r, err := fanGetReady(addr); err != nil || r.code != 503 || r.checks["target:web"] != "unhealthy" {
			t.Fatalf("look %d: /readyz = %v (%v), want 503 with target:web unhealthy while the endpoint refuses", look, r, err)
		}
	}
	refused, _ := ep.snapshot()
	if n := refused - refusedBefore; n > 5 {
		t.Errorf("%d refused requests in 3 s of outage, want at most 5 (probe batches at a growing back-off)", n)
	}
	ep.set(false)
	fanWaitReady(t, addr, 15*time.Second, func(r fanReady) error {
		if r.code != 200 || r.checks["target:web"] != "ok" || r.checks["sink"] != "ok" {
			return fmt.Errorf("want 200 with sink and target:web ok")
		}
		return nil
	})
	natstest.WaitAckState(t, js, stream, consumer, 30, 0, 30*time.Second)
	_, stored := ep.snapshot()
	for seq := uint64(1); seq <= 30; seq++ {
		if stored[seq] < 1 {
			t.Errorf("message %d never reached the endpoint", seq)
		}
	}
	exactlyOnce(t, "db (sqlite)", fanSQLiteSeqs(t, dbPath), fanSeqRange(1, 30))
	p.stop(t)
}
