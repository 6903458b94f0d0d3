package runner

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/nats-sinks/nats-sink/sink"
)

// countingSink makes three write calls of its own per WriteBatch, as the
// fanout sink does with three targets, and reports two of them (the third
// committed nothing) to the observer Run hands it.
type countingSink struct {
	funcSink
	mu      sync.Mutex
	observe func(time.Duration)
	batches int // WriteBatch calls
}

func (s *countingSink) CountWrites(observe func(time.Duration)) {
	s.mu.Lock()
	s.observe = observe
	s.mu.Unlock()
}

func (s *countingSink) WriteBatch(ctx context.Context, b []*sink.Envelope) []sink.Result {
	s.mu.Lock()
	observe := s.observe
	s.batches++
	s.mu.Unlock()
	if observe != nil {
		observe(time.Millisecond)
		observe(2 * time.Millisecond)
	}
	return results(len(b), sink.Ok)
}

// TestSinkCountsItsWriteCalls: sink_batches_written_total and
// sink_batch_write_seconds count the write calls a sink reports through
// CountWrites (the fanout sink's target calls), not the runner's WriteBatch
// calls.
func TestSinkCountsItsWriteCalls(t *testing.T) {
	e := newEnv(t, false)
	c := e.consumer(ConsumerSpec{})
	e.publish(30)
	s := &countingSink{}
	m := newMetrics(t)
	start(t, &Runner{Consumer: c, Conn: e.nc, Sink: s, BatchSize: 10, Metrics: m})
	e.waitAcked(c, 30)
	if got := m.MessagesAcked.Value(); got != 30 {
		t.Fatalf("messages_acked_total = %d, want 30", got)
	}
	s.mu.Lock()
	batches := s.batches
	s.mu.Unlock()
	if got, want := m.SinkBatchesWritten.Value(), uint64(2*batches); got != want {
		t.Errorf("sink_batches_written_total = %d, want %d (two reported calls for each of %d WriteBatch calls, none of the runner's own)", got, want, batches)
	}
	sum := m.SinkBatchWriteSeconds.Summary()
	if sum.Count != float64(2*batches) {
		t.Errorf("sink_batch_write_seconds count = %v, want %d (one observation per reported call)", sum.Count, 2*batches)
	}
	if want := 0.003 * float64(batches); math.Abs(sum.Sum-want) > 1e-9 {
		t.Errorf("sink_batch_write_seconds sum = %v, want %v (the reported durations)", sum.Sum, want)
	}
}
