package e2e

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// benchLatency is the destination's write latency per message.
const benchLatency = 5 * time.Millisecond

// TestScaleOutThroughput measures end-to-end throughput with 1, 2 and 3
// `nats-sink run` processes sharing one durable consumer, writing to an
// HTTP endpoint that takes 5 ms per message (docs/delivery.md#scale-out, docs/scaling.md).
// Each process has the same write capacity (max_in_flight_batches ×
// sink.concurrency requests in flight), so when the destination is not the
// bottleneck, throughput must grow nearly linearly with processes. It runs
// only with NATS_SINKS_BENCH=1; NATS_SINKS_BENCH_CONCURRENCY sets the http
// sink's concurrency (default 1) and NATS_SINKS_BENCH_SECONDS the length of
// the one-process run at the ideal rate (default 10).
func TestScaleOutThroughput(t *testing.T) {
	if os.Getenv("NATS_SINKS_BENCH") != "1" {
		t.Skip("benchmark: set NATS_SINKS_BENCH=1")
	}
	concurrency := envInt(t, "NATS_SINKS_BENCH_CONCURRENCY", 1)
	seconds := envInt(t, "NATS_SINKS_BENCH_SECONDS", 10)
	const inFlight = 2
	perProcess := float64(inFlight*concurrency) / benchLatency.Seconds() // ideal msgs/s
	n := int(perProcess * float64(seconds))

	rates := map[int]float64{}
	for _, procs := range []int{1, 2, 3} {
		t.Run(strconv.Itoa(procs), func(t *testing.T) {
			stream, consumer := "FBENCH", "fbench"
			s := natstest.RunJetStream(t)
			_, js := natstest.Connect(t, s)
			natstest.CreateStream(t, js, jetstream.StreamConfig{Name: stream, Subjects: []string{"fbench.>"}})
			ep := newEndpoint(t, stream, func(string, int) reply { return reply{delay: benchLatency} })
			d := newRunDoc([]string{s.ClientURL()}, stream, consumer, "fbench.>", httpSink(ep, concurrency))
			d.Consumer["ack_wait_seconds"] = 30
			d.Delivery = with(d.Delivery, "batch_size", 100, "max_in_flight_batches", inFlight)
			fleet := make([]*member, procs)
			for i := range fleet {
				fleet[i] = startMember(t, d)
			}
			began := time.Now()
			natstest.PublishN(t, js, "fbench.events", procs*n, body)
			waitAllAcked(t, js, stream, consumer, procs*n, 5*time.Minute)
			took := time.Since(began)
			rate := float64(procs*n) / took.Seconds()
			rates[procs] = rate
			var shares []string
			var cpu time.Duration
			for _, m := range fleet {
				m.settle(t)
				shares = append(shares, fmt.Sprintf("%.0f", m.counts(t).acked))
				c, err := cpuTime(m.cmd.Process.Pid)
				if err == nil {
					cpu += c
				}
			}
			t.Logf("%d process(es), %d in flight each: %d messages in %v = %.0f msgs/s (ideal %.0f); ACKs per process %v; connector CPU %v in total",
				procs, inFlight*concurrency, procs*n, took.Round(10*time.Millisecond), rate, perProcess*float64(procs), shares, cpu.Round(10*time.Millisecond))
			for _, m := range fleet {
				m.stop(t)
			}
			ep.check(t, procs*n)
		})
	}
	if rates[1] == 0 {
		return
	}
	s2, s3 := rates[2]/rates[1], rates[3]/rates[1]
	t.Logf("speed-up: 2 processes %.2f×, 3 processes %.2f×", s2, s3)
	// Near-linear: each process adds at least 75% of what the first one
	// does. (On the shared 2-core machine the endpoint, the server and the
	// processes compete for CPU, which costs the larger fleets most.)
	if s2 < 1.5 || s3 < 2.25 {
		t.Errorf("speed-up %.2f× with 2 and %.2f× with 3 processes; want ≥ 1.5× and ≥ 2.25×", s2, s3)
	}
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return i
}
