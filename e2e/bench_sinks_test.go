package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/nats-sinks/nats-sink/internal/broker/mqtttest"
)

// The tests in this file measure sink throughput through the real binary's
// `bench` command (docs/performance.md) against destinations started in the test
// process: kfake for Kafka, gofakes3 for S3, an httptest endpoint that takes
// 5 ms per request for HTTP, and the file sink on disk and tmpfs. Every
// number is a ratio to the consume+ACK ceiling that the same bench run
// measured, so machine noise hits both sides alike. Each configuration runs
// three times, alternating with the configurations it is compared with, and
// the tests log the medians (docs/performance.md). They run only with
// NATS_SINKS_BENCH=1: they take minutes and their numbers need a quiet
// machine. NATS_SINKS_BENCH_SCALE multiplies every message count (default 1),
// NATS_SINKS_BENCH_RUNS sets the runs per configuration (default 3), and
// subtests select configurations (-run 'TestBenchAckConfirmation/tmpfs/');
// NATS_SINKS_BENCH_CPUPROFILE_DIR, when set, makes each bench run write a CPU
// profile of the binary there.
//
// They assert what a benchmark can assert without timing: bench exits 0
// (which it does only when the pipeline acknowledged every message), and the
// destination holds exactly one record per message.

// benchResult is one parsed `bench --format json` run.
type benchResult struct {
	Title string `json:"title"`
	Rows  []struct {
		Phase   string  `json:"phase"`
		Msgs    int     `json:"msgs"`
		Seconds float64 `json:"seconds"`
		Rate    float64 `json:"msgs_per_second"`
	} `json:"rows"`

	// binaryCPU is the CPU time of the whole bench process (server, client,
	// every phase); serverCPU that of this test process during the run, which
	// is almost all the in-process destination's, busy only in its phase.
	binaryCPU, serverCPU time.Duration
}

// seconds returns the duration of phase.
func (r benchResult) seconds(t *testing.T, phase string) float64 {
	t.Helper()
	for _, row := range r.Rows {
		if row.Phase == phase {
			return row.Seconds
		}
	}
	t.Fatalf("bench printed no %q row: %+v", phase, r)
	return 0
}

// rate returns the msgs/s of phase, failing the test when bench printed no
// such row.
func (r benchResult) rate(t *testing.T, phase string) float64 {
	t.Helper()
	for _, row := range r.Rows {
		if row.Phase == phase {
			return row.Rate
		}
	}
	t.Fatalf("bench printed no %q row: %+v", phase, r)
	return 0
}

// ratio is phase's rate over the ceiling of the same run.
func (r benchResult) ratio(t *testing.T, phase string) float64 {
	t.Helper()
	return r.rate(t, phase) / r.rate(t, "consume+ack ceiling")
}

// benchSkip skips unless NATS_SINKS_BENCH=1 and returns the message-count
// multiplier.
func benchSkip(t *testing.T) float64 {
	t.Helper()
	if os.Getenv("NATS_SINKS_BENCH") != "1" {
		t.Skip("benchmark: set NATS_SINKS_BENCH=1")
	}
	scale := 1.0
	if v := os.Getenv("NATS_SINKS_BENCH_SCALE"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			t.Fatalf("NATS_SINKS_BENCH_SCALE=%q: want a positive number", v)
		}
		scale = f
	}
	return scale
}

// benchConfig writes a configuration for `bench --config`: bench takes its
// sink and delivery keys (and ignores stream and consumer). Batch 500 and 4
// batches in flight are bench's own defaults, so the numbers compare with
// the rest of docs/performance.md.
func benchConfig(t *testing.T, sink map[string]any, delivery map[string]any) string {
	t.Helper()
	d := map[string]any{"batch_size": 500, "max_in_flight_batches": 4, "batch_timeout_ms": 200}
	for k, v := range delivery {
		d[k] = v
	}
	doc := map[string]any{
		"nats":     map[string]any{"url": "nats://127.0.0.1:4222", "stream": "UNUSED", "consumer": "unused", "subject": "unused.>"},
		"delivery": d,
		"logging":  map[string]any{"level": "ERROR"},
		"sink":     sink,
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bench.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// runBench runs `nats-sink bench` on its own embedded nats-server with the
// configuration at cfg, n messages and one pipeline phase per sink, and
// returns the parsed result. env adds variables to the child's environment.
func runBench(t *testing.T, cfg string, n int, env []string, sinks ...string) benchResult {
	t.Helper()
	args := []string{"bench", "--server", "embedded", "--config", cfg, "--messages", strconv.Itoa(n), "--format", "json"}
	for _, s := range sinks {
		args = append(args, "--sink", s)
	}
	if dir := os.Getenv("NATS_SINKS_BENCH_CPUPROFILE_DIR"); dir != "" {
		// One CPU profile of the bench process per run, named after the subtest.
		name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()) + ".pprof"
		args = append(args, "--cpuprofile", filepath.Join(dir, name))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	before := selfCPU(t)
	if err := cmd.Run(); err != nil {
		t.Fatalf("nats-sink %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	var r benchResult
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("bench output is not the JSON document: %v\n%s", err, stdout.String())
	}
	r.binaryCPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	r.serverCPU = selfCPU(t) - before
	return r
}

// selfCPU is the CPU time this test process has used: with the destination
// servers in it, their share of the two cores during a bench run.
func selfCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// series collects one number per run of a configuration.
type series map[string][]float64

// median returns the median of v (the lower middle for an even count).
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// report logs each series' median and its runs, in the order of names.
func (s series) report(t *testing.T, names ...string) {
	t.Helper()
	for _, name := range names {
		v := s[name]
		if len(v) == 0 {
			continue
		}
		runs := make([]string, len(v))
		for i, x := range v {
			runs[i] = benchNumber(x)
		}
		t.Logf("%-40s median %s  (runs %s)", name, benchNumber(median(v)), strings.Join(runs, ", "))
	}
}

// benchNumber prints a rate (≥ 100) in whole msgs/s and a ratio with four
// decimals: ratios here range from about 0.005 (http, concurrency 1) to 1.
func benchNumber(x float64) string {
	if x >= 100 {
		return fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%.4f", x)
}

// benchRuns returns how many times each configuration runs:
// NATS_SINKS_BENCH_RUNS, default 3.
func benchRuns(t *testing.T) int {
	t.Helper()
	v := os.Getenv("NATS_SINKS_BENCH_RUNS")
	if v == "" {
		return 3
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("NATS_SINKS_BENCH_RUNS=%q: want a positive integer", v)
	}
	return n
}

// TestBenchKafkaS3 measures the kafka sink against kfake and the s3 sink
// against gofakes3 (concurrency 1, the default, and 16), both servers in
// this test process on loopback, alternating the three configurations run
// by run.
func TestBenchKafkaS3(t *testing.T) {
	scale := benchSkip(t)
	nKafka, nS3 := int(50000*scale), int(10000*scale)
	got := series{}
	t.Setenv("BENCH_S3_KEY_ID", "AKIDBENCH")
	t.Setenv("BENCH_S3_SECRET", "bench-secret")
	s3sink := func(url string, concurrency int) map[string]any {
		return map[string]any{
			"type": "s3", "bucket": s3Bucket, "prefix": "bench", "endpoint_url": url,
			"allow_http_for_local_testing": true, "region_name": "us-east-1",
			"credential_mode": "environment", "aws_access_key_id_env": "BENCH_S3_KEY_ID",
			"aws_secret_access_key_env": "BENCH_S3_SECRET", "concurrency": concurrency,
		}
	}
	for run := 1; run <= benchRuns(t); run++ {
		t.Run(fmt.Sprintf("kafka/%d", run), func(t *testing.T) {
			c := kafkaCluster(t)
			brokers := c.ListenAddrs()
			cfg := benchConfig(t, map[string]any{"type": "kafka", "brokers": brokers, "topic": "events"}, nil)
			r := runBench(t, cfg, nKafka, nil, "null", "kafka")
			if got := kafkaTopicRecords(t, brokers, "events"); got != int64(nKafka) {
				t.Errorf("topic holds %d records after a clean run of %d messages", got, nKafka)
			}
			got.add(t, r, "kafka", "pipeline (kafka)")
		})
		for _, conc := range []int{1, 16} {
			t.Run(fmt.Sprintf("s3-concurrency-%d/%d", conc, run), func(t *testing.T) {
				store := newS3Server(t, nil, 0)
				cfg := benchConfig(t, s3sink(store.srv.URL, conc), nil)
				r := runBench(t, cfg, nS3, nil, "null", "s3")
				if keys := len(store.objectKeys(t)); keys != nS3 {
					t.Errorf("bucket holds %d objects after a clean run of %d messages", keys, nS3)
				}
				got.add(t, r, fmt.Sprintf("s3 concurrency %d", conc), "pipeline (s3)")
			})
		}
	}
	t.Logf("kafka: %d messages per run; s3: %d", nKafka, nS3)
	got.report(t, slices.Concat(names("kafka"), names("s3 concurrency 1"), names("s3 concurrency 16"))...)
}

// add records one run of configuration name: the ceiling's msgs/s
// ("ceiling/"), the null pipeline's ratio to it ("null/") and msgs/s ("null
// msgs/s "), phase's ratio ("sink/") and msgs/s ("msgs/s "), and the cores
// the test process (the in-process destination) used during phase ("server
// cores ").
func (s series) add(t *testing.T, r benchResult, name, phase string) {
	t.Helper()
	s["ceiling/"+name] = append(s["ceiling/"+name], r.rate(t, "consume+ack ceiling"))
	s["null/"+name] = append(s["null/"+name], r.ratio(t, "pipeline (null)"))
	s["null msgs/s "+name] = append(s["null msgs/s "+name], r.rate(t, "pipeline (null)"))
	s["sink/"+name] = append(s["sink/"+name], r.ratio(t, phase))
	s["msgs/s "+name] = append(s["msgs/s "+name], r.rate(t, phase))
	// cores: the destination's CPU over the sink phase's wall time.
	cores := r.serverCPU.Seconds() / r.seconds(t, phase)
	s["server cores "+name] = append(s["server cores "+name], cores)
	t.Logf("%s: ceiling %.0f msgs/s; null %.3f×; %s %.0f msgs/s = %.4f× the ceiling; CPU: bench process %v (all phases), test process %v (%.2f cores over the %s phase)",
		name, r.rate(t, "consume+ack ceiling"), r.ratio(t, "pipeline (null)"), phase, r.rate(t, phase), r.ratio(t, phase),
		r.binaryCPU.Round(10*time.Millisecond), r.serverCPU.Round(10*time.Millisecond), cores, phase)
}

// names returns the series keys of configuration name, in report order.
func names(name string) []string {
	return []string{"ceiling/" + name, "null/" + name, "null msgs/s " + name, "sink/" + name, "msgs/s " + name, "server cores " + name}
}

// latencyEndpoint answers every request after 5 ms and counts the distinct
// Idempotency-Keys it stored. It does no other work, so the test process
// takes as little CPU from the binary as it can.
type latencyEndpoint struct {
	srv  *httptest.Server
	mu   sync.Mutex
	keys map[string]bool
}

func newLatencyEndpoint(t *testing.T) *latencyEndpoint {
	t.Helper()
	ep := &latencyEndpoint{keys: map[string]bool{}}
	ep.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		select {
		case <-time.After(benchLatency): // the simulated destination latency
		case <-r.Context().Done():
			return
		}
		ep.mu.Lock()
		ep.keys[r.Header.Get("Idempotency-Key")] = true
		ep.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(ep.srv.Close)
	return ep
}

func (ep *latencyEndpoint) stored() int {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return len(ep.keys)
}

// TestBenchHTTPConcurrency measures the http sink against a local endpoint
// that takes 5 ms per request, at concurrency 1 (the default: one request
// per in-flight batch) and 16, alternating. Batch 500 and 4 batches in
// flight, so 4 and 64 requests are in flight: ideal 800 and 12,800 msgs/s.
func TestBenchHTTPConcurrency(t *testing.T) {
	scale := benchSkip(t)
	n := map[int]int{1: int(5000 * scale), 16: int(20000 * scale)}
	got := series{}
	for run := 1; run <= benchRuns(t); run++ {
		for _, conc := range []int{1, 16} {
			t.Run(fmt.Sprintf("concurrency-%d/%d", conc, run), func(t *testing.T) {
				ep := newLatencyEndpoint(t)
				cfg := benchConfig(t, map[string]any{
					"type": "http", "url": ep.srv.URL + "/ingest", "allow_http_for_local_testing": true,
					"concurrency": conc,
				}, nil)
				r := runBench(t, cfg, n[conc], nil, "null", "http")
				if got := ep.stored(); got != n[conc] {
					t.Errorf("endpoint stored %d distinct keys after a clean run of %d messages", got, n[conc])
				}
				got.add(t, r, fmt.Sprintf("http concurrency %d", conc), "pipeline (http)")
			})
		}
	}
	t.Logf("messages per run: concurrency 1 %d, concurrency 16 %d", n[1], n[16])
	got.report(t, slices.Concat(names("http concurrency 1"), names("http concurrency 16"))...)
}

// TestBenchAckConfirmation measures delivery.ack_confirmation on and off
// for the null sink and the file sink (fsync on), with the file sink's
// directory and bench's embedded server store on the real disk and on tmpfs
// (/dev/shm, where the CPU cost shows), alternating on and off run by run.
func TestBenchAckConfirmation(t *testing.T) {
	scale := benchSkip(t)
	n := int(50000 * scale)
	type place struct {
		name string
		root string // "" = the test's temp dir (the disk)
	}
	places := []place{{"disk", ""}}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		places = append(places, place{"tmpfs", "/dev/shm"})
	}
	got := series{}
	for run := 1; run <= benchRuns(t); run++ {
		for _, pl := range places {
			for _, on := range []bool{false, true} {
				name := fmt.Sprintf("%s ack_confirmation %t", pl.name, on)
				t.Run(fmt.Sprintf("%s/%t/%d", pl.name, on, run), func(t *testing.T) {
					root := t.TempDir()
					var env []string
					if pl.root != "" {
						var err error
						if root, err = os.MkdirTemp(pl.root, "nats-sink-bench-e2e-"); err != nil {
							t.Fatal(err)
						}
						t.Cleanup(func() { os.RemoveAll(root) })
						env = []string{"TMPDIR=" + root} // bench's server store too
					}
					dir := filepath.Join(root, "files")
					cfg := benchConfig(t, map[string]any{"type": "file", "directory": dir, "fsync": true},
						map[string]any{"ack_confirmation": map[string]any{"enabled": on}})
					r := runBench(t, cfg, n, env, "null", "file")
					if files := countFiles(t, dir); files != n {
						t.Errorf("directory holds %d files after a clean run of %d messages", files, n)
					}
					got.add(t, r, name, "pipeline (file)")
					got["bare/"+name] = append(got["bare/"+name], r.ratio(t, "files (bare)"))
				})
			}
		}
	}
	t.Logf("%d messages per run", n)
	var keys []string
	for _, pl := range places {
		for _, on := range []bool{false, true} {
			name := fmt.Sprintf("%s ack_confirmation %t", pl.name, on)
			keys = append(keys, names(name)...)
			keys = append(keys, "bare/"+name)
		}
	}
	got.report(t, keys...)
}

// countFiles counts the regular files under dir.
func countFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return n
}

// TestBenchBrokers measures the broker sinks against the machine's Redis
// (dedupe window 120 s, the default; envelope and payload records) and RabbitMQ (a durable quorum queue
// bound with "#"), and a test-owned Mosquitto with a QoS 2 subscriber, at
// QoS 1 and QoS 2, alternating run by run. The servers are separate
// processes here: the cores they use are not in the test process's CPU.
func TestBenchBrokers(t *testing.T) {
	scale := benchSkip(t)
	n := int(20000 * scale)
	got := series{}
	type target struct {
		name  string
		setup func(t *testing.T) (sink map[string]any, stored func() int)
	}
	targets := []target{
		{"redis", func(t *testing.T) (map[string]any, func() int) {
			dest := newRedisDest(t)
			return dest.sink(120000), func() int { return dest.entries(t) }
		}},
		// The envelope's metadata document is most of an entry's ~2.3 KB;
		// without it Redis does far less work per add.
		{"redis payload", func(t *testing.T) (map[string]any, func() int) {
			dest := newRedisDest(t)
			s := dest.sink(120000)
			s["record_format"] = "payload"
			return s, func() int { return dest.entries(t) }
		}},
		{"rabbitmq", func(t *testing.T) (map[string]any, func() int) {
			dest := newRabbitDest(t)
			return dest.sink(), func() int {
				ch, err := dest.admin.Channel()
				if err != nil {
					t.Fatal(err)
				}
				defer ch.Close()
				q, err := ch.QueueDeclarePassive(dest.queue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
				if err != nil {
					t.Fatal(err)
				}
				return q.Messages
			}
		}},
	}
	for _, qos := range []int{1, 2} {
		targets = append(targets, target{fmt.Sprintf("mqtt qos %d", qos), func(t *testing.T) (map[string]any, func() int) {
			dest := newMQTTDest(t, mqtttest.Options{}, "", "")
			s := dest.sink(qos)
			s["max_inflight"] = 1000
			return s, func() int {
				ms := dest.sub.WaitFor(n, time.Minute)
				seen := map[string]bool{}
				for _, m := range ms {
					seen[m.Properties["nats-sinks-idempotency-key"]] = true
				}
				return len(seen)
			}
		}})
	}
	for run := 1; run <= benchRuns(t); run++ {
		for _, tg := range targets {
			t.Run(fmt.Sprintf("%s/%d", strings.ReplaceAll(tg.name, " ", "-"), run), func(t *testing.T) {
				sinkCfg, stored := tg.setup(t)
				// The sinks' default: the e2e tests' short timeout would turn
				// slow confirms on a loaded machine into redeliveries.
				delete(sinkCfg, "publish_timeout_ms")
				typ := sinkCfg["type"].(string)
				r := runBench(t, benchConfig(t, sinkCfg, nil), n, nil, "null", typ)
				if got := stored(); got != n {
					t.Errorf("destination holds %d records after a clean run of %d messages", got, n)
				}
				got.add(t, r, tg.name, "pipeline ("+typ+")")
			})
		}
	}
	t.Logf("%d messages per run", n)
	var keys []string
	for _, tg := range targets {
		keys = append(keys, names(tg.name)...)
	}
	got.report(t, keys...)
}
