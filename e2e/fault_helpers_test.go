package e2e

// Helpers of the fault-injection suite (fault_*_test.go): run configurations
// built from maps, a metrics scraper, per-process CPU time from /proc, the
// consumer's delivery counts, and an HTTP endpoint whose behaviour each test
// scripts per request.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// soak reports whether the long variants run (NATS_SINKS_SOAK=1): more
// messages, more fault rounds, longer outages.
func soak() bool { return os.Getenv("NATS_SINKS_SOAK") == "1" }

// scaled is ci messages in the default run and full with NATS_SINKS_SOAK=1:
// the issue-sized runs (100,000 messages and more) keep CI within its time
// budget in their smaller form and run in full on demand.
func scaled(ci, full int) int {
	if soak() {
		return full
	}
	return ci
}

// runDoc is a run configuration under construction: the sections of
// docs/configuration.md as maps, so each test states only what differs.
type runDoc struct {
	NATS     map[string]any
	Consumer map[string]any // consumer_management
	Delivery map[string]any
	Sink     map[string]any
	Metrics  string // metrics.listen; "" disables the endpoint
}

// newRunDoc returns the suite's defaults: short AckWait so lost work comes
// back quickly, a client that reconnects forever once a second, and room
// for every batch in flight.
func newRunDoc(urls []string, stream, consumer, subject string, sink map[string]any) *runDoc {
	return &runDoc{
		NATS: map[string]any{
			"urls": urls, "stream": stream, "consumer": consumer, "subject": subject,
			"reconnect_time_wait_seconds": 1, "max_reconnect_attempts": -1,
			"connect_timeout_seconds": 2,
		},
		Consumer: map[string]any{"ack_wait_seconds": 3, "max_ack_pending": 4000},
		Delivery: map[string]any{
			"batch_size": 100, "max_in_flight_batches": 2, "batch_timeout_ms": 200,
			"retry_backoff_ms": 100, "retry_backoff_max_ms": 1000, "shutdown_timeout_ms": 10000,
		},
		Sink: sink,
	}
}

// write stores the configuration in a temp file and returns its path. Each
// process of a fleet needs its own file when metrics are on (one port each).
func (d *runDoc) write(t *testing.T) string {
	t.Helper()
	doc := map[string]any{
		"nats":                d.NATS,
		"consumer_management": d.Consumer,
		"delivery":            d.Delivery,
		"logging":             map[string]any{"level": "WARNING"},
		"sink":                d.Sink,
	}
	if d.Metrics != "" {
		doc["metrics"] = map[string]any{"enabled": true, "listen": d.Metrics}
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// with returns a copy of m with the given keys set.
func with(m map[string]any, kv ...any) map[string]any {
	c := maps.Clone(m)
	for i := 0; i+1 < len(kv); i += 2 {
		c[kv[i].(string)] = kv[i+1]
	}
	return c
}

// fileSink is the file sink writing one fsynced file per message into dir.
func fileSink(dir string) map[string]any {
	return map[string]any{"type": "file", "directory": dir, "fsync": true}
}

// member is one `nats-sink run` of a test, with its metrics endpoint.
type member struct {
	*process
	addr string
	last map[string]float64 // last successful scrape: what a killed process had counted
}

// startMember writes d with a fresh metrics address, starts the process and
// waits until /readyz reports the consumer bound: the fetch loop runs
// (docs/delivery.md#start-up step 9). It does not wait for "ready" as a whole: against a
// failing destination the sink check turns unhealthy right after the first
// batch, and a poll could miss the moment in between.
func startMember(t *testing.T, d *runDoc) *member {
	t.Helper()
	dd := *d
	dd.Metrics = freeAddr(t)
	m := &member{process: start(t, dd.write(t)), addr: dd.Metrics}
	poll(t, 30*time.Second, func() error {
		select {
		case <-m.done:
			t.Fatalf("nats-sink exited with %d during start-up\nstderr:\n%s", m.cmd.ProcessState.ExitCode(), m.stderr.String())
		default:
		}
		resp, err := http.Get("http://" + m.addr + "/readyz")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var rd struct {
			Checks struct{ Consumer string } `json:"checks"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&rd); err != nil {
			return fmt.Errorf("/readyz: %s: %v", resp.Status, err)
		}
		if rd.Checks.Consumer != "ok" {
			return fmt.Errorf("/readyz: %s, consumer %q", resp.Status, rd.Checks.Consumer)
		}
		return nil
	})
	return m
}

// scrape reads the member's unlabelled metrics (without the nats_sinks_
// prefix) and remembers them, so a later kill does not lose the counts.
func (m *member) scrape() (map[string]float64, error) {
	got, err := getMetrics(m.addr)
	if err != nil {
		return m.last, err
	}
	m.last = got
	return got, nil
}

// counts is what a test logs and reports for one fault: how much the
// connector had to repeat.
type counts struct {
	fetched, acked, nacked, failed, reconnects float64
}

func (m *member) counts(t *testing.T) counts {
	t.Helper()
	v, err := m.scrape()
	if err != nil && v == nil {
		t.Fatalf("scrape %s: %v", m.addr, err)
	}
	return countsOf(v)
}

// settle waits until every message the member fetched was acknowledged or
// went down a failure path, so the counts it reports next are final for
// the run. (The ack floor can reach the end while a batch holding
// redelivered copies is still writing; the in-flight gauge does not help,
// as an idle fetch loop holds a slot while it waits.)
func (m *member) settle(t *testing.T) {
	t.Helper()
	poll(t, time.Minute, func() error {
		v, err := m.scrape()
		if err != nil {
			return err
		}
		c := countsOf(v)
		if c.acked+c.failed != c.fetched {
			return fmt.Errorf("%s: some fetched messages are still being written", c)
		}
		return nil
	})
}

func countsOf(v map[string]float64) counts {
	return counts{v["messages_fetched_total"], v["messages_acked_total"], v["messages_nacked_total"],
		v["messages_failed_total"], v["nats_connection_reconnected_total"]}
}

func (c counts) String() string {
	return fmt.Sprintf("fetched %.0f, acked %.0f, NAKed %.0f, failed %.0f, reconnects %.0f",
		c.fetched, c.acked, c.nacked, c.failed, c.reconnects)
}

// deliveries returns how often the consumer delivered messages in total
// (its consumer sequence counts every delivery, redeliveries included), and
// its ack floor and ack-pending count. deliveries − n is the number of
// redeliveries of an n-message run.
func deliveries(ctx context.Context, js jetstream.JetStream, stream, consumer string) (delivered, floor uint64, pending int, err error) {
	info, err := consumerInfo(ctx, js, stream, consumer)
	if err != nil {
		return 0, 0, 0, err
	}
	return info.Delivered.Consumer, info.AckFloor.Stream, info.NumAckPending, nil
}

// waitAllAcked waits until the consumer's ack floor is n with nothing
// pending.
func waitAllAcked(t *testing.T, js jetstream.JetStream, stream, consumer string, n int, d time.Duration) {
	t.Helper()
	natstest.WaitFor(t, d, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, floor, pending, err := deliveries(ctx, js, stream, consumer)
		if err != nil || floor != uint64(n) || pending != 0 {
			return fmt.Errorf("ack floor %d, ack pending %d (%v); want %d, 0", floor, pending, err, n)
		}
		return nil
	})
}

// redeliveries returns how many deliveries of an n-message run were
// redeliveries. Call it after the members settled.
func redeliveries(t *testing.T, js jetstream.JetStream, stream, consumer string, n int) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	delivered, _, _, err := deliveries(ctx, js, stream, consumer)
	if err != nil {
		t.Fatalf("consumer info: %v", err)
	}
	return delivered - uint64(n)
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// cpuTime returns the user + system CPU time the process has used so far.
func cpuTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// fields are counted from the last ')'.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseUint(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q, stime %q", pid, f[11], f[12])
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// reply is what the scripted endpoint does with one request.
type reply struct {
	status int           // 0 means 200
	delay  time.Duration // before answering
}

// endpoint is a real HTTP peer for the http sink that stores each message
// once per Idempotency-Key (docs/http.md) and records every request's time,
// so tests can count redeliveries per message and check their spacing.
// script decides each request's reply from its key and attempt number
// (1 for the first request with that key). It runs under the endpoint's
// lock, one request at a time, and must not call the endpoint's methods.
type endpoint struct {
	srv    *httptest.Server
	stream string
	script func(key string, attempt int) reply

	mu     sync.Mutex
	times  map[string][]arrival // key → every request, in order
	stored map[string]uint64    // key → stream_sequence, once a 2xx was answered
	bad    []string
}

// arrival is one request as the endpoint saw it.
type arrival struct {
	at       time.Time // when the request arrived
	received time.Time // the body's metadata.timestamps.received_at_epoch_ns; zero when absent
	status   int       // the status the script chose (0 = 200)
}

// delivered is when the connector received this delivery from the server:
// the record's received_at when the body carries it, else the request's
// arrival. Gaps between deliveries are measured on it, because the
// server's redelivery clock runs from the delivery, while a request can
// trail its delivery by however long its batch queued in the connector.
func (a arrival) delivered() time.Time {
	if !a.received.IsZero() {
		return a.received
	}
	return a.at
}

// receivedAt reads metadata.timestamps.received_at_epoch_ns from an
// envelope body (zero when doc lacks it).
func receivedAt(doc any) time.Time {
	m, _ := doc.(map[string]any)
	md, _ := m["metadata"].(map[string]any)
	ts, _ := md["timestamps"].(map[string]any)
	ns, _ := ts["received_at_epoch_ns"].(jsonx.Integer)
	n, err := strconv.ParseInt(string(ns), 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

func newEndpoint(t *testing.T, stream string, script func(key string, attempt int) reply) *endpoint {
	t.Helper()
	ep := &endpoint{stream: stream, script: script, times: map[string][]arrival{}, stored: map[string]uint64{}}
	ep.srv = httptest.NewServer(http.HandlerFunc(ep.serve))
	t.Cleanup(ep.srv.Close)
	return ep
}

func (ep *endpoint) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client went away: nothing stored, no answer
	}
	key := r.Header.Get("Idempotency-Key")
	doc, err := jsonx.Parse(body)
	now := time.Now()
	ep.mu.Lock()
	attempt := len(ep.times[key]) + 1
	rp := ep.script(key, attempt)
	ep.times[key] = append(ep.times[key], arrival{at: now, received: receivedAt(doc), status: rp.status})
	ep.mu.Unlock()

	if rp.delay > 0 {
		select {
		case <-time.After(rp.delay):
		case <-r.Context().Done():
			return // client gave up: not stored
		}
	}
	if rp.status != 0 && rp.status != http.StatusOK {
		w.WriteHeader(rp.status)
		return
	}
	var seq uint64
	if err == nil {
		m, _ := doc.(map[string]any)
		s, _ := m["stream_sequence"].(jsonx.Integer)
		seq, _ = strconv.ParseUint(string(s), 10, 64)
	}
	ep.mu.Lock()
	defer ep.mu.Unlock()
	switch {
	case err != nil:
		ep.bad = append(ep.bad, fmt.Sprintf("body is not JSON: %v", err))
	case key != fmt.Sprintf("stream-sequence:%s:%d", ep.stream, seq):
		ep.bad = append(ep.bad, fmt.Sprintf("Idempotency-Key %q for stream_sequence %d", key, seq))
	}
	if _, dup := ep.stored[key]; !dup {
		ep.stored[key] = seq
	}
}

// key returns the idempotency key of stream sequence seq.
func (ep *endpoint) key(seq int) string { return fmt.Sprintf("stream-sequence:%s:%d", ep.stream, seq) }

// requests returns the number of requests received and keys stored.
func (ep *endpoint) requests() (requests, stored int) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	for _, ts := range ep.times {
		requests += len(ts)
	}
	return requests, len(ep.stored)
}

// arrivals returns a copy of the requests with key, in arrival order.
func (ep *endpoint) arrivals(key string) []arrival {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return append([]arrival(nil), ep.times[key]...)
}

// check asserts that exactly sequences 1..n are stored, each once.
func (ep *endpoint) check(t *testing.T, n int) {
	t.Helper()
	ep.mu.Lock()
	defer ep.mu.Unlock()
	for _, b := range ep.bad {
		t.Error(b)
	}
	if len(ep.stored) != n {
		t.Errorf("%d distinct idempotency keys stored, want %d", len(ep.stored), n)
	}
	for seq := 1; seq <= n; seq++ {
		if got, ok := ep.stored[ep.key(seq)]; !ok || got != uint64(seq) {
			t.Errorf("stream sequence %d: stored %v (sequence %d)", seq, ok, got)
		}
	}
}

// httpSink is the http sink posting to ep with concurrency parallel
// requests per batch and no retries of its own: every attempt the endpoint
// sees is a delivery by JetStream.
func httpSink(ep *endpoint, concurrency int) map[string]any {
	return map[string]any{
		"type": "http", "url": ep.srv.URL + "/ingest", "allow_http_for_local_testing": true,
		"request_timeout_seconds": 30, "concurrency": concurrency,
		"retry": map[string]any{"max_retries": 0},
	}
}

// poll is natstest.WaitFor at a coarser 50 ms step, for conditions read
// from a connector's /metrics: scraping every 10 ms would cost the process
// under test a noticeable share of its CPU.
func poll(t *testing.T, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after %v: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// getMetrics reads addr's /metrics page's unlabelled samples (see
// parseMetrics).
func getMetrics(addr string) (map[string]float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return parseMetrics(resp.Body)
}

// parseMetrics reads a /metrics page's unlabelled samples, keyed by name
// without the nats_sinks_ prefix.
func parseMetrics(r io.Reader) (map[string]float64, error) {
	got := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, value, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			got[strings.TrimPrefix(name, "nats_sinks_")] = v
		}
	}
	return got, sc.Err()
}
