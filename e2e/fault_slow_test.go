package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// slowAckWait is the consumer's AckWait in the slow-sink tests, and
// slowWrite how long the endpoint takes with each message's first request:
// longer than AckWait, so without InProgress JetStream redelivers every
// message while its first write is still running.
const (
	slowAckWait = 1 // seconds
	slowWrite   = 1600 * time.Millisecond
)

// slowScript answers a key's first request after slowWrite plus a step
// per batch (the n-th first request belongs to batch n/slowBatch; four
// batches are in flight), and every later request at once. Batches that
// all took exactly slowWrite finished together: their ACKs reached the
// server before the runner's next fetch, which the expired messages need
// to be redelivered (a pull consumer redelivers only into a pull
// request), so a run could end with no redelivery at all. Staggered, the
// first batch to finish fetches again while the others still hold
// expired messages.
func slowScript() func(string, int) reply {
	var mu sync.Mutex
	firsts := 0
	return func(_ string, attempt int) reply {
		if attempt > 1 {
			return reply{}
		}
		mu.Lock()
		batch := firsts / slowBatch
		firsts++
		mu.Unlock()
		return reply{delay: slowWrite + time.Duration(batch%4)*500*time.Millisecond}
	}
}

// slowBatch is the batch size of the slow-sink runs.
const slowBatch = 25

// slowRun publishes n messages, runs the connector against an endpoint that
// is slower than AckWait, waits until everything is acknowledged, and
// returns the endpoint and the number of redeliveries.
func slowRun(t *testing.T, n int, inProgress map[string]any) (*endpoint, *member, uint64) {
	t.Helper()
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "FSLOW", Subjects: []string{"fslow.>"}})
	natstest.PublishN(t, js, "fslow.events", n, body)
	ep := newEndpoint(t, "FSLOW", slowScript())
	d := newRunDoc([]string{s.ClientURL()}, "FSLOW", "fslow", "fslow.>", httpSink(ep, slowBatch))
	d.Consumer["ack_wait_seconds"] = slowAckWait
	d.Delivery = with(d.Delivery, "batch_size", slowBatch, "max_in_flight_batches", 4)
	if inProgress != nil {
		d.Delivery["in_progress"] = inProgress
	}
	p := startMember(t, d)
	waitAllAcked(t, js, "FSLOW", "fslow", n, 2*time.Minute)
	p.settle(t)
	return ep, p, redeliveries(t, js, "FSLOW", "fslow", n)
}

// TestFaultSlowSink runs a sink slower than AckWait with InProgress off:
// JetStream redelivers messages whose first write is still running, the
// endpoint sees them twice, and it must still store each exactly once (the
// Idempotency-Key), with everything acknowledged in the end.
func TestFaultSlowSink(t *testing.T) {
	n := 200
	if soak() {
		n = 2000
	}
	ep, p, redelivered := slowRun(t, n, nil)
	requests, stored := ep.requests()
	c := p.counts(t)
	t.Logf("%d messages: %d requests, %d keys stored, %d redeliveries (consumer deliveries − %d); connector %s",
		n, requests, stored, redelivered, n, c)
	if redelivered == 0 || requests <= n {
		t.Errorf("%d redeliveries and %d requests for %d messages: a write slower than AckWait must cause redelivery, or this test tests nothing",
			redelivered, requests, n)
	}
	p.stop(t)
	ep.check(t, n)
}

// TestFaultSlowSinkInProgress is TestFaultSlowSink with InProgress
// heartbeats on (docs/delivery.md#inprogress-heartbeats): each batch extends its AckWait while the
// write runs, so nothing is redelivered and the endpoint sees each message
// once. It is skipped while the binary still refuses
// delivery.in_progress.enabled.
func TestFaultSlowSinkInProgress(t *testing.T) {
	if refused, why := refusesInProgress(t); refused {
		t.Logf("nats-sink run refused the configuration: %s", why)
		t.Skip("in_progress not wired into the CLI yet")
	}
	const n = 200
	ep, p, redelivered := slowRun(t, n, map[string]any{"enabled": true, "interval_ms": 300})
	requests, _ := ep.requests()
	t.Logf("%d messages: %d requests, %d redeliveries; connector %s", n, requests, redelivered, p.counts(t))
	if redelivered != 0 || requests != n {
		t.Errorf("%d redeliveries and %d requests for %d messages, want 0 and %d: heartbeats did not hold the messages",
			redelivered, requests, n, n)
	}
	p.stop(t)
	ep.check(t, n)
}

// refusesInProgress starts `nats-sink run` with InProgress enabled and
// reports whether it refused to start because the feature is not built.
func refusesInProgress(t *testing.T) (bool, string) {
	t.Helper()
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "FPROBE", Subjects: []string{"fprobe.>"}})
	d := newRunDoc([]string{s.ClientURL()}, "FPROBE", "fprobe", "fprobe.>", fileSink(t.TempDir()))
	d.Consumer["ack_wait_seconds"] = slowAckWait
	d.Delivery["in_progress"] = map[string]any{"enabled": true, "interval_ms": 300}
	d.Metrics = freeAddr(t)
	p := start(t, d.write(t))
	// Refused: exits at start-up. Accepted: becomes ready.
	ready := false
	poll(t, 30*time.Second, func() error {
		select {
		case <-p.done:
			return nil
		default:
		}
		resp, err := http.Get("http://" + d.Metrics + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: %s", resp.Status)
		}
		ready = true
		return nil
	})
	if ready {
		p.stop(t)
		return false, ""
	}
	stderr := p.stderr.String()
	if code := p.cmd.ProcessState.ExitCode(); code == 2 &&
		strings.Contains(stderr, "delivery.in_progress.enabled") && strings.Contains(stderr, "not available") {
		return true, strings.TrimSpace(stderr)
	}
	t.Fatalf("nats-sink run with in_progress exited %d\nstderr:\n%s", p.cmd.ProcessState.ExitCode(), stderr)
	return false, ""
}
