package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/internal/seal"
)

// The tests in this file run the operator commands (dlq, replay, status)
// of the real binary against embedded servers and PostgreSQL, and check
// what they did on the server and in the destination.

// startCmd runs nats-sink with args in the background; the cleanup kills
// it if the test did not wait for it.
func startCmd(t *testing.T, env []string, args ...string) *process {
	t.Helper()
	p := &process{done: make(chan struct{})}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Env = env
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
	return p
}

// fastDir is a directory on tmpfs when the machine has one: these tests
// check what is written, not how fast the disk creates files.
func fastDir(t *testing.T) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		dir, err := os.MkdirTemp("/dev/shm", "nats-sink-e2e-")
		if err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

// filesIn counts the regular files under dir, ignoring walk errors (files
// come and go while a sink writes).
func filesIn(dir string) int {
	n := 0
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

// streamState returns the number of messages on subject in stream and the
// stream's number of consumers.
func streamState(t *testing.T, js jetstream.JetStream, stream, subject string) (msgs uint64, consumers int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range info.State.Subjects {
		msgs += n
	}
	return msgs, info.State.Consumers
}

var replaySummary = regexp.MustCompile(`Stream replay (complete|incomplete): stream=\S+ first_seq=(\d+) end_seq=(\d+) messages=(\d+) written=(\d+) duplicates=(\d+) dead_lettered=(\d+) failed=(\d+) elapsed=\S+`)

// TestReplayFile replays 20,000 messages (50,000 with NATS_SINKS_SOAK=1) into the file sink on a named
// consumer, interrupts the first replay with SIGINT, resumes it, and checks
// that the directory holds exactly one record per message and that no
// replay consumer remains.
func TestReplayFile(t *testing.T) {
	n := scaled(20000, 50000)
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "REPLAY", Subjects: []string{"replay.>"}})
	natstest.PublishN(t, js, "replay.events", n, body)
	dir := fastDir(t)
	cfg := writeConfig(t, fmt.Sprintf(`{
  "nats": {"url": %q, "stream": "REPLAY", "consumer": "replay-run", "subject": "replay.>"},
  "consumer_management": {"max_ack_pending": 4000},
  "delivery": {"batch_size": 500, "max_in_flight_batches": 4, "batch_timeout_ms": 200},
  "logging": {"level": "WARNING"},
  "sink": {"type": "file", "directory": %q}
}`, s.ClientURL(), dir))

	p := startCmd(t, cmdEnv(), "replay", cfg, "--from-seq", "1", "--consumer", "backfill", "--no-progress")
	natstest.WaitFor(t, time.Minute, func() error {
		if got := filesIn(dir); got < 5000 {
			return fmt.Errorf("%d files, waiting for 5000", got)
		}
		return nil
	})
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	code := p.wait(t, 30*time.Second)
	m := replaySummary.FindStringSubmatch(p.stdout.String())
	if m == nil || m[1] != "incomplete" || code != 1 {
		t.Fatalf("interrupted replay: exit %d, stdout %q, want exit 1 and an incomplete summary\nstderr:\n%s", code, p.stdout.String(), p.stderr.String())
	}
	if _, consumers := streamState(t, js, "REPLAY", "replay.>"); consumers != 1 {
		t.Errorf("%d consumers after the interrupted replay, want 1 (the named consumer is kept)", consumers)
	}
	t.Logf("interrupted: %s", m[0])

	r := runNatsSink(t, cmdEnv(), "replay", cfg, "--from-seq", "1", "--consumer", "backfill", "--delete-consumer", "--no-progress")
	m = replaySummary.FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil || m[1] != "complete" || m[3] != fmt.Sprint(n) || m[8] != "0" {
		t.Fatalf("resumed replay: %v", r)
	}
	t.Logf("resumed: %s", m[0])
	checkFiles(t, dir, "REPLAY", n)
	if _, consumers := streamState(t, js, "REPLAY", "replay.>"); consumers != 0 {
		t.Errorf("%d consumers after --delete-consumer, want 0", consumers)
	}
}

// TestReplayPostgres replays 20,000 messages (50,000 with NATS_SINKS_SOAK=1) into PostgreSQL twice: the
// table holds exactly one row per message, the second replay included (the
// default upsert rewrites the same rows; insert_ignore reports them as
// duplicates).
func TestReplayPostgres(t *testing.T) {
	n := scaled(20000, 50000)
	dsn := natstest.Service(t, postgresDSNEnv)
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "PGREPLAY", Subjects: []string{"pgreplay.>"}})
	natstest.PublishN(t, js, "pgreplay.events", n, body)
	table := pgTable(t, dsn)
	cfg := postgresConfig(t, s.ClientURL(), "PGREPLAY", "pgreplay-run", "pgreplay.>", dsn, table)
	replaceInFile(t, cfg, `"batch_size": 100`, `"batch_size": 500`)
	ignore := postgresConfig(t, s.ClientURL(), "PGREPLAY", "pgreplay-run", "pgreplay.>", dsn, table)
	replaceInFile(t, ignore, `"auto_create": true`, `"auto_create": true, "mode": "insert_ignore"`)

	for round, tt := range []struct {
		cfg, written, duplicates string
	}{{cfg, fmt.Sprint(n), "0"}, {cfg, fmt.Sprint(n), "0"}, {ignore, "0", fmt.Sprint(n)}} {
		r := runNatsSink(t, cmdEnv(), "replay", tt.cfg, "--from-seq", "1", "--no-progress")
		m := replaySummary.FindStringSubmatch(r.stdout)
		if r.code != 0 || m == nil || m[1] != "complete" || m[5] != tt.written || m[6] != tt.duplicates {
			t.Fatalf("replay %d: want written=%s duplicates=%s; got %v", round+1, tt.written, tt.duplicates, r)
		}
		t.Logf("replay %d: %s", round+1, m[0])
		checkRows(t, dsn, table, "PGREPLAY", "pgreplay.events", n)
	}
	if _, consumers := streamState(t, js, "PGREPLAY", "pgreplay.>"); consumers != 0 {
		t.Errorf("%d consumers after three ephemeral replays, want 0", consumers)
	}
}

// deadLetter runs `nats-sink run cfg` until the DLQ stream holds want
// entries, then stops it.
func deadLetter(t *testing.T, js jetstream.JetStream, cfg string, want uint64) {
	t.Helper()
	p := start(t, cfg)
	natstest.WaitFor(t, 30*time.Second, func() error {
		if got, _ := streamState(t, js, "ORDERS_DLQ", "dlq.orders"); got != want {
			return fmt.Errorf("DLQ holds %d entries, want %d", got, want)
		}
		return nil
	})
	p.stop(t)
}

// TestRedrive dead-letters messages, redrives them twice (one copy on the
// original subject, the producer's bytes and headers, the DLQ's own
// headers removed), purges after a redrive whose delete never happened
// (what a kill between the PubAck and the delete leaves), and refuses the
// entries of a consumer that did not include the payload.
func TestRedrive(t *testing.T) {
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "ORDERS_DLQ", Subjects: []string{"dlq.orders"}})
	natstest.Publish(t, js, "orders.poison", []byte("not json 1"), nats.Header{"X-Tenant": {"acme"}})
	natstest.Publish(t, js, "orders.poison", []byte("not json 2"), nil)
	base := func(consumer, dl string) string {
		return writeConfig(t, fmt.Sprintf(`{
  "nats": {"url": %q, "stream": "ORDERS", "consumer": %q, "subject": "orders.poison"},
  "delivery": {"batch_size": 1, "batch_timeout_ms": 100},
  "dead_letter": %s,
  "logging": {"level": "WARNING"},
  "sink": {"type": "file", "directory": %q, "payload_mode": "json_only"}
}`, s.ClientURL(), consumer, dl, t.TempDir()))
	}
	cfg := base("orders-file", `{"enabled": true, "subject": "dlq.orders"}`)
	deadLetter(t, js, cfg, 2)
	deadLetter(t, js, base("orders-lean", `{"enabled": true, "subject": "dlq.orders", "include_payload": false}`), 4)

	redrive := func(want int, args ...string) result {
		t.Helper()
		r := runNatsSink(t, cmdEnv(), append([]string{"dlq", "redrive", cfg}, args...)...)
		if r.code != want {
			t.Fatalf("dlq redrive %v: exit %d, want %d\n%v", args, r.code, want, r)
		}
		return r
	}
	r := redrive(0, "1")
	if !strings.Contains(r.stdout, "redriven 1 orders.poison seq=3\n") {
		t.Errorf("first redrive:\n%s", r.stdout)
	}
	r = redrive(0, "1")
	if !strings.Contains(r.stdout, "duplicate 1 orders.poison seq=3\n") {
		t.Errorf("second redrive:\n%s", r.stdout)
	}
	if got, _ := streamState(t, js, "ORDERS", "orders.poison"); got != 3 {
		t.Errorf("orders.poison holds %d messages after two redrives, want 3 (two originals, one copy)", got)
	}
	st, err := js.Stream(context.Background(), "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	redriven, err := st.GetMsg(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if string(redriven.Data) != "not json 1" {
		t.Errorf("redriven payload %q, want the producer's bytes", redriven.Data)
	}
	wantHeaders := nats.Header{"X-Tenant": {"acme"}, "Nats-Msg-Id": {"nats-sinks-redrive:ORDERS:1"},
		"Nats-Sinks-Redrive-Source": {"ORDERS_DLQ:1"}, "Nats-Expected-Stream": {"ORDERS"}}
	if fmt.Sprint(redriven.Header) != fmt.Sprint(wantHeaders) {
		t.Errorf("redriven headers %v, want %v (no DLQ headers)", redriven.Header, wantHeaders)
	}

	// Entry 2 republished, its delete never made: the rerun with --purge
	// finds the copy, reports a duplicate and deletes the entry.
	redrive(0, "2")
	r = redrive(0, "2", "--purge")
	if !strings.Contains(r.stdout, "duplicate 2 orders.poison seq=4\n") ||
		!strings.Contains(r.stdout, "Redrive complete: selected=1 redriven=0 duplicate=1 blocked=0 refused=0 failed=0 purged=1\n") {
		t.Errorf("redrive --purge after an unpurged redrive:\n%s", r.stdout)
	}
	if got, _ := streamState(t, js, "ORDERS", "orders.poison"); got != 4 {
		t.Errorf("orders.poison holds %d messages, want 4", got)
	}
	if got, _ := streamState(t, js, "ORDERS_DLQ", "dlq.orders"); got != 3 {
		t.Errorf("DLQ holds %d entries after one purge, want 3", got)
	}

	// include_payload false: refused, nothing published, nothing deleted.
	r = redrive(1, "--all", "--consumer", "orders-lean", "--purge")
	if strings.Count(r.stdout, ": payload not included\n") != 2 ||
		!strings.Contains(r.stdout, "Redrive incomplete: selected=2 redriven=0 duplicate=0 blocked=0 refused=2 failed=0 purged=0\n") {
		t.Errorf("redrive of entries without payload:\n%s", r.stdout)
	}
	if got, _ := streamState(t, js, "ORDERS", "orders.poison"); got != 4 {
		t.Errorf("orders.poison holds %d messages after refusals, want 4", got)
	}
	if got, _ := streamState(t, js, "ORDERS_DLQ", "dlq.orders"); got != 3 {
		t.Errorf("DLQ holds %d entries after refusals, want 3", got)
	}
}

// TestRedriveEncrypted dead-letters a message on an encrypted subject and
// redrives it: the stream gets the producer's bytes, not the envelope, and
// the sink's new record holds one encryption envelope that decrypts to them.
func TestRedriveEncrypted(t *testing.T) {
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "ORDERS_DLQ", Subjects: []string{"dlq.orders"}})
	produced := []byte(`{"report":"classified"}`)
	natstest.Publish(t, js, "orders.secure", produced, nil) // no Nats-Msg-Id: the message_id file name fails
	key := make([]byte, 32)
	rand.Read(key)
	env := cmdEnv("REPORT_KEY_B64=" + base64.StdEncoding.EncodeToString(key))
	dir := t.TempDir()
	cfg := writeConfig(t, fmt.Sprintf(`{
  "nats": {"url": %q, "stream": "ORDERS", "consumer": "orders-file", "subject": "orders.>"},
  "delivery": {"batch_timeout_ms": 100},
  "dead_letter": {"enabled": true, "subject": "dlq.orders"},
  "encryption": {"rules": [{"subject": "orders.secure", "key_id": "reports", "key_b64_env": "REPORT_KEY_B64"}]},
  "logging": {"level": "WARNING"},
  "sink": {"type": "file", "directory": %q, "filename_strategy": "message_id"}
}`, s.ClientURL(), dir))
	p := startWithEnv(t, env, cfg)
	natstest.WaitFor(t, 30*time.Second, func() error {
		if got, _ := streamState(t, js, "ORDERS_DLQ", "dlq.orders"); got != 1 {
			return fmt.Errorf("DLQ holds %d entries, want 1", got)
		}
		return nil
	})
	p.stop(t)

	// Without the key the entry is refused; with it the plaintext goes out.
	r := runNatsSink(t, cmdEnv(), "dlq", "redrive", cfg, "1")
	if r.code != 1 || !strings.Contains(r.stdout, `refused 1 orders.secure: key "reports" not available`) {
		t.Fatalf("redrive without the key: %v", r)
	}
	r = runNatsSink(t, env, "dlq", "redrive", cfg, "1")
	if r.code != 0 || !strings.Contains(r.stdout, "redriven 1 orders.secure seq=2\n") {
		t.Fatalf("redrive: %v", r)
	}
	st, _ := js.Stream(context.Background(), "ORDERS")
	m, err := st.GetMsg(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.Data, produced) {
		t.Fatalf("redriven payload %q, want the producer's bytes %q", m.Data, produced)
	}

	// The redriven message (now with a Nats-Msg-Id) is written; its record
	// holds one envelope that decrypts to the producer's bytes.
	p = startWithEnv(t, env, cfg)
	waitDone(t, js, "ORDERS", "orders-file", 2, 30*time.Second)
	p.stop(t)
	var records []string
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			records = append(records, path)
		}
		return nil
	})
	if len(records) != 1 {
		t.Fatalf("%d records, want 1: %v", len(records), records)
	}
	data, err := os.ReadFile(records[0])
	if err != nil {
		t.Fatal(err)
	}
	envelope, err := seal.Locate(data)
	if err != nil {
		t.Fatalf("record holds no encryption envelope: %v", err)
	}
	if inner, err := seal.Locate(envelope); err == nil && !bytes.Equal(inner, envelope) {
		t.Fatal("the envelope wraps another envelope: the payload was encrypted twice")
	}
	var secret [32]byte
	copy(secret[:], key)
	plain, err := seal.Decrypt(envelope, seal.FixedKeyRing(seal.Key{Secret: secret}))
	if err != nil || !bytes.Equal(plain, produced) {
		t.Errorf("record decrypts to %q (%v), want %q", plain, err, produced)
	}
}

// TestStatusBacklog checks status against a consumer whose backlog is
// known: everything acknowledged by a running process (ready at
// metrics.listen), then messages published after it stopped and messages
// fetched but not acknowledged.
func TestStatusBacklog(t *testing.T) {
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "ORDERS_DLQ", Subjects: []string{"dlq.orders"}})
	natstest.PublishN(t, js, "orders.created", 100, body)
	addr := freeAddr(t)
	cfg := writeConfig(t, fmt.Sprintf(`{
  "nats": {"url": %q, "stream": "ORDERS", "consumer": "orders-file", "subject": "orders.>"},
  "consumer_management": {"ack_wait_seconds": 60},
  "delivery": {"batch_timeout_ms": 100},
  "dead_letter": {"enabled": true, "subject": "dlq.orders"},
  "metrics": {"listen": %q},
  "logging": {"level": "WARNING"},
  "sink": {"type": "file", "directory": %q}
}`, s.ClientURL(), addr, t.TempDir()))
	type status struct {
		Healthy  bool `json:"healthy"`
		Consumer struct {
			NumPending    int `json:"num_pending"`
			NumAckPending int `json:"num_ack_pending"`
		} `json:"consumer"`
		AckFloor struct {
			StreamSeq uint64 `json:"stream_seq"`
		} `json:"ack_floor"`
		Lag struct {
			State    string   `json:"state"`
			Messages int      `json:"messages"`
			Seconds  *float64 `json:"seconds"`
		} `json:"lag"`
		DLQ struct {
			Entries *int `json:"entries"`
		} `json:"dlq"`
		Process struct {
			State, Readiness string
		} `json:"process"`
	}
	read := func(args ...string) (status, result) {
		t.Helper()
		r := runNatsSink(t, cmdEnv(), append([]string{"status", cfg, "--json"}, args...)...)
		var st status
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			t.Fatalf("status --json: %v\n%v", err, r)
		}
		return st, r
	}

	p := start(t, cfg)
	// ACKs are fire-and-forget: poll until status sees them all.
	natstest.WaitFor(t, 30*time.Second, func() error {
		st, r := read()
		if !st.Healthy || st.AckFloor.StreamSeq != 100 || st.Lag.Messages != 0 || st.Process.Readiness != "ready" || r.code != 0 {
			return fmt.Errorf("status %+v, exit %d", st, r.code)
		}
		if st.Lag.Seconds == nil || *st.Lag.Seconds != 0 {
			return fmt.Errorf("lag seconds %v with nothing outstanding, want 0", st.Lag.Seconds)
		}
		return nil
	})
	p.stop(t)

	// 25 published after the process stopped, 5 of them fetched by
	// another client and not acknowledged.
	natstest.PublishN(t, js, "orders.created", 25, body)
	c, err := js.CreateOrUpdateConsumer(context.Background(), "ORDERS", jetstream.ConsumerConfig{Durable: "orders-file"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Fetch(5, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	fetched := 0
	for range b.Messages() {
		fetched++
	}
	if fetched != 5 {
		t.Fatalf("fetched %d, want 5", fetched)
	}
	st, r := read("--max-lag", "25", "--max-lag-seconds", "3600")
	if r.code != 0 || st.Consumer.NumPending != 20 || st.Consumer.NumAckPending != 5 || st.Lag.Messages != 25 ||
		st.AckFloor.StreamSeq != 100 || st.Lag.Seconds == nil || *st.Lag.Seconds < 0 || *st.Lag.Seconds > 60 ||
		st.Process.State != "unknown" || st.Process.Readiness != "unreachable" || st.DLQ.Entries == nil || *st.DLQ.Entries != 0 {
		t.Errorf("status with a known backlog: %+v\n%v", st, r)
	}
	r = runNatsSink(t, cmdEnv(), "status", cfg, "--max-lag", "24")
	if r.code != 1 || !strings.Contains(r.stdout, "status: unhealthy (lag)\n") || !regexp.MustCompile(`(?m)^lag +fail +25 messages · \d+\.\d s$`).MatchString(r.stdout) {
		t.Errorf("status --max-lag 24 with 25 outstanding: %v", r)
	}
}
