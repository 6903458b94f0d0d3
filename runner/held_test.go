package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-sinks/nats-sink/sink"
)

// testHold is a hold a test settles by hand.
type testHold struct {
	done chan struct{}
	once sync.Once
	out  sink.Outcome
	err  error
}

func newTestHold() *testHold { return &testHold{done: make(chan struct{})} }

func (h *testHold) Done() <-chan struct{} { return h.done }
func (h *testHold) Outcome() sink.Outcome { return h.out }
func (h *testHold) Err() error            { return h.err }
func (h *testHold) settle(o sink.Outcome, err error) {
	h.once.Do(func() { h.out, h.err = o, err; close(h.done) })
}

// holdSink holds every message of every first delivery in one hold per
// WriteBatch call, and commits redeliveries directly.
type holdSink struct {
	maxHeld int
	mu      sync.Mutex
	holds   []*testHold
	seen    map[uint64]int
	flush   func(ctx context.Context, h []*testHold) error
}

func (s *holdSink) Type() string { return "fake" }
func (s *holdSink) MaxHeld() int { return s.maxHeld }
func (s *holdSink) WriteBatch(_ context.Context, b []*sink.Envelope) []sink.Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[uint64]int{}
	}
	h := newTestHold()
	out := make([]sink.Result, len(b))
	held := false
	for i, e := range b {
		s.seen[e.StreamSequence]++
		if s.seen[e.StreamSequence] > 1 {
			out[i] = sink.Ok
			continue
		}
		out[i] = sink.Result{Outcome: sink.Held, Hold: h}
		held = true
	}
	if held {
		s.holds = append(s.holds, h)
	}
	return out
}
func (s *holdSink) Flush(ctx context.Context) error {
	if s.flush == nil {
		return nil
	}
	s.mu.Lock()
	h := append([]*testHold(nil), s.holds...)
	s.mu.Unlock()
	return s.flush(ctx, h)
}
func (s *holdSink) Stop(context.Context) error { return nil }

func (s *holdSink) settleAll(o sink.Outcome, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.holds {
		h.settle(o, err)
	}
}

func (s *holdSink) count(seq uint64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[seq]
}

var _ sink.Holder = (*holdSink)(nil)

// TestHeldAckedOnCommit: held messages stay unacknowledged past AckWait
// without a redelivery (the mandatory heartbeats), and are ACKed once their
// hold commits.
func TestHeldAckedOnCommit(t *testing.T) {
	e := newEnv(t, false)
	e.publish(20)
	c := e.consumer(ConsumerSpec{AckWait: new(2 * time.Second)})
	m := newMetrics(t)
	s := &holdSink{maxHeld: 100}
	stop := start(t, &Runner{Consumer: c, Sink: s, BatchSize: 10, Metrics: m})
	waitFor(t, func() error {
		if got := m.HeldMessages.Value(); got != 20 {
			return fmt.Errorf("held_messages = %v, want 20", got)
		}
		return nil
	})
	// Three AckWaits: without heartbeats the server would redeliver.
	time.Sleep(6 * time.Second)
	info := e.info(c)
	if info.NumRedelivered != 0 || info.NumAckPending != 20 || info.AckFloor.Stream != 0 {
		t.Fatalf("while held: redelivered %d, ack pending %d, ack floor %d; want 0, 20, 0",
			info.NumRedelivered, info.NumAckPending, info.AckFloor.Stream)
	}
	if m.OldestHeldMessageSeconds.Value() <= 0 {
		t.Errorf("oldest_held_message_seconds = %v, want > 0", m.OldestHeldMessageSeconds.Value())
	}
	s.settleAll(sink.Committed, nil)
	e.waitAcked(c, 20)
	if got := m.MessagesWritten.Value(); got != 20 {
		t.Errorf("messages_written_total = %d, want 20", got)
	}
	waitFor(t, func() error {
		if got := m.HeldMessages.Value(); got != 0 {
			return fmt.Errorf("held_messages = %v, want 0", got)
		}
		return nil
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestHeldFailedIsRedelivered: a hold that settles Temporary sends its
// messages to the temporary path; their redelivery is written again.
func TestHeldFailedIsRedelivered(t *testing.T) {
	e := newEnv(t, false)
	e.publish(5)
	c := e.consumer(ConsumerSpec{})
	s := &holdSink{maxHeld: 100}
	start(t, &Runner{Consumer: c, Sink: s, BatchSize: 10, Retry: Retry{Backoff: new(time.Millisecond)}})
	waitFor(t, func() error {
		if s.count(5) != 1 {
			return errors.New("not all written")
		}
		return nil
	})
	if info := e.info(c); info.AckFloor.Stream != 0 {
		t.Fatalf("ack floor %d before the hold settled, want 0", info.AckFloor.Stream)
	}
	s.settleAll(sink.Temporary, errors.New("upload failed"))
	e.waitAcked(c, 5)
	for seq := uint64(1); seq <= 5; seq++ {
		if n := s.count(seq); n != 2 {
			t.Errorf("stream seq %d written %d times, want 2 (held, then redelivered)", seq, n)
		}
	}
}

// TestHeldShutdown: Flush runs at shutdown; holds it commits are ACKed,
// and a hold still open at the deadline is NAKed and counted abandoned.
func TestHeldShutdown(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprint("commit=", commit), func(t *testing.T) {
			e := newEnv(t, false)
			e.publish(10)
			c := e.consumer(ConsumerSpec{})
			m := newMetrics(t)
			s := &holdSink{maxHeld: 100}
			flushed := make(chan struct{})
			s.flush = func(ctx context.Context, h []*testHold) error {
				close(flushed)
				if commit {
					for _, x := range h {
						x.settle(sink.Committed, nil)
					}
				}
				return nil
			}
			stop := start(t, &Runner{Consumer: c, Sink: s, BatchSize: 10, Metrics: m, ShutdownTimeout: new(time.Second)})
			waitFor(t, func() error {
				if m.HeldMessages.Value() != 10 {
					return errors.New("not held yet")
				}
				return nil
			})
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			<-flushed
			if commit {
				// Plain ACKs are fire-and-forget: the server's floor moves a
				// moment after stop returns.
				waitFor(t, func() error {
					if f := e.info(c).AckFloor.Stream; f != 10 {
						return fmt.Errorf("ack floor %d after a flush that committed, want 10", f)
					}
					return nil
				})
				return
			}
			info := e.info(c)
			if info.AckFloor.Stream != 0 {
				t.Errorf("ack floor %d after a flush that did not commit, want 0", info.AckFloor.Stream)
			}
			if got := m.ShutdownAbandonedMessages.Value(); got != 10 {
				t.Errorf("shutdown_abandoned_messages_total = %d, want 10", got)
			}
		})
	}
}

func TestHeldGuards(t *testing.T) {
	for _, tt := range []struct {
		name string
		spec ConsumerSpec
		want string
	}{
		{"max_ack_pending too small", ConsumerSpec{MaxAckPending: new(1000)},
			"sink.max_held_messages: the consumer's max_ack_pending 1000 is below max_held_messages + max_in_flight_batches × batch_size = 20400"},
		{"ack wait too short", ConsumerSpec{AckWait: new(time.Second)},
			"sink: segments held mode needs the consumer's AckWait and BackOff steps to be at least 2s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, false)
			c := e.consumer(tt.spec)
			err := (&Runner{Consumer: c, Sink: &holdSink{maxHeld: 20000}, BatchSize: 100, MaxInFlight: 4}).Run(t.Context())
			var ce *ConfigError
			if !errors.As(err, &ce) || err.Error() != tt.want {
				t.Errorf("Run = %v, want the configuration error %q", err, tt.want)
			}
		})
	}
}

func waitFor(t *testing.T, f func() error) {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
