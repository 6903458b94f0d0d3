package runner

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/telemetry"
)

// waitGauge waits until g reads want.
func waitGauge(t *testing.T, name string, g *telemetry.Gauge, want float64) {
	t.Helper()
	natstest.WaitFor(t, waitLong, func() error {
		if got := g.Value(); got != want {
			return fmt.Errorf("%s = %v, want %v", name, got, want)
		}
		return nil
	})
}

// TestBatchesInFlightGauge checks current_batches_in_flight: in-flight
// slots that hold messages. An idle runner's waiting fetch holds a slot but
// no messages, so it reads 0; two batches inside the sink read 2; once they
// are settled, 0 again.
func TestBatchesInFlightGauge(t *testing.T) {
	e := newEnv(t, false)
	c := e.consumer(ConsumerSpec{})
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	fs := &funcSink{write: func(ctx context.Context, b []*sink.Envelope) []sink.Result {
		entered <- struct{}{}
		<-release
		return results(len(b), sink.Ok)
	}}
	m := newMetrics(t)
	r := &Runner{Consumer: c, Conn: e.nc, Sink: fs, BatchSize: 5, MaxInFlight: 2, Metrics: m, BatchTimeout: time.Minute}
	start(t, r)

	// Idle: a lingering pull request waits for messages.
	natstest.WaitFor(t, waitLong, func() error {
		if n := e.info(c).NumWaiting; n < 1 {
			return fmt.Errorf("NumWaiting = %d, want a waiting fetch", n)
		}
		return nil
	})
	if got := m.CurrentBatchesInFlight.Value(); got != 0 {
		t.Errorf("idle: current_batches_in_flight = %v, want 0", got)
	}

	e.publish(10)
	for range 2 {
		select {
		case <-entered:
		case <-time.After(waitLong):
			t.Fatal("two batches did not reach the sink")
		}
	}
	if got := m.CurrentBatchesInFlight.Value(); got != 2 {
		t.Errorf("two batches in the sink: current_batches_in_flight = %v, want 2", got)
	}
	if got := r.Status().InFlight; got != 2 {
		t.Errorf("two batches in the sink: Status().InFlight = %d, want 2", got)
	}
	close(release)
	e.waitAcked(c, 10)
	waitGauge(t, "current_batches_in_flight after settling", m.CurrentBatchesInFlight, 0)
}

// TestConsumerGauges checks the lag, backlog and oldest-batch gauges
// against a known backlog: 50 messages, one batch of 10 held inside the
// sink, so the server has 40 not yet delivered and 10 awaiting ACK; after
// one temporary failure the 10 are redelivered.
func TestConsumerGauges(t *testing.T) {
	e := newEnv(t, false)
	e.publish(50)
	c := e.consumer(ConsumerSpec{})
	release := make(chan struct{})
	var calls atomic.Int32
	fs := &funcSink{write: func(ctx context.Context, b []*sink.Envelope) []sink.Result {
		if calls.Add(1) == 1 {
			return results(len(b), sink.Result{Outcome: sink.Temporary, Err: fmt.Errorf("lock timeout")})
		}
		<-release
		return results(len(b), sink.Ok)
	}}
	m := newMetrics(t)
	r := &Runner{Consumer: c, Conn: e.nc, Sink: fs, BatchSize: 10, Metrics: m,
		Retry: Retry{Backoff: new(time.Duration(0))}, refreshEvery: 50 * time.Millisecond, oldestEvery: 50 * time.Millisecond}
	start(t, r)

	// The first batch failed once and was NAKed; its redelivery is the
	// batch now held in the sink.
	waitGauge(t, "consumer_num_pending", m.ConsumerNumPending, 40)
	waitGauge(t, "consumer_num_ack_pending", m.ConsumerNumAckPending, 10)
	waitGauge(t, "consumer_num_redelivered", m.ConsumerNumRedelivered, 10)
	natstest.WaitFor(t, waitLong, func() error {
		if got := m.OldestInFlightBatchSeconds.Value(); got <= 0 {
			return fmt.Errorf("oldest_in_flight_batch_seconds = %v while a batch is held, want > 0", got)
		}
		return nil
	})
	close(release)
	e.waitAcked(c, 50)
	waitGauge(t, "consumer_num_pending", m.ConsumerNumPending, 0)
	waitGauge(t, "consumer_num_ack_pending", m.ConsumerNumAckPending, 0)
	waitGauge(t, "oldest_in_flight_batch_seconds", m.OldestInFlightBatchSeconds, 0)
}
