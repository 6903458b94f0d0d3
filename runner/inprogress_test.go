package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/sink"
)

// wrapConsumer hands every fetched message through wrap, so a test can
// change how one acknowledgement call behaves while everything else talks
// to the real server.
type wrapConsumer struct {
	jetstream.Consumer
	wrap func(jetstream.Msg) jetstream.Msg
}

type wrapBatch struct {
	ch  chan jetstream.Msg
	src jetstream.MessageBatch
}

func (b *wrapBatch) Messages() <-chan jetstream.Msg { return b.ch }
func (b *wrapBatch) Error() error                   { return b.src.Error() }

func (c *wrapConsumer) batch(b jetstream.MessageBatch, err error) (jetstream.MessageBatch, error) {
	if err != nil {
		return nil, err
	}
	wb := &wrapBatch{ch: make(chan jetstream.Msg), src: b}
	go func() {
		defer close(wb.ch)
		for m := range b.Messages() {
			wb.ch <- c.wrap(m)
		}
	}()
	return wb, nil
}

func (c *wrapConsumer) FetchNoWait(n int) (jetstream.MessageBatch, error) {
	return c.batch(c.Consumer.FetchNoWait(n))
}

func (c *wrapConsumer) Fetch(n int, opts ...jetstream.FetchOpt) (jetstream.MessageBatch, error) {
	return c.batch(c.Consumer.Fetch(n, opts...))
}

// idempotentStore is a destination keyed by stream sequence, like every
// sink's duplicate model: a second write of a sequence is a Duplicate.
type idempotentStore struct {
	mu     sync.Mutex
	rows   map[uint64]bool
	writes int
}

func (s *idempotentStore) put(b []*sink.Envelope) []sink.Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rows == nil {
		s.rows = map[uint64]bool{}
	}
	out := make([]sink.Result, len(b))
	for i, e := range b {
		s.writes++
		if s.rows[e.StreamSequence] {
			out[i] = sink.Result{Outcome: sink.Duplicate}
			continue
		}
		s.rows[e.StreamSequence] = true
		out[i] = sink.Ok
	}
	return out
}

func (s *idempotentStore) counts() (rows, writes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.rows), s.writes
}

// TestInProgressPreventsRedelivery: a write three times longer than AckWait
// is not redelivered while heartbeats run; without them the server
// redelivers the batch during the write, and the destination, keyed by
// stream sequence, still holds each message once.
func TestInProgressPreventsRedelivery(t *testing.T) {
	const ackWait = time.Second
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("in_progress=%v", on), func(t *testing.T) {
			e := newEnv(t, false)
			c := e.consumer(ConsumerSpec{AckWait: new(ackWait)})
			e.publish(5)
			var store idempotentStore
			var calls atomic.Int64
			var maxDelivery atomic.Uint64
			// NumRedelivered as the slow write ends (on) or while the
			// redelivered batch is written (off).
			var redeliveredAtEnd atomic.Int64
			redeliveredAtEnd.Store(-1)
			redelivered := make(chan struct{})
			// The redelivered messages may come in more than one batch (a
			// fetch can end while the server is still redelivering): the
			// slow write ends once all five were written again.
			var rewritten atomic.Int64
			fs := &funcSink{write: func(ctx context.Context, b []*sink.Envelope) []sink.Result {
				for _, env := range b {
					if env.DeliveryCount > maxDelivery.Load() {
						maxDelivery.Store(env.DeliveryCount)
					}
				}
				if calls.Add(1) == 1 {
					// The slow write. With heartbeats it outlasts AckWait
					// three times; without, it ends as soon as the
					// redelivered messages were written (or after 20 s).
					wait := time.After(3 * ackWait)
					if !on {
						wait = time.After(waitLong)
					}
					select {
					case <-wait:
					case <-redelivered:
					}
					// The server's view while the batch is still unacked.
					if info, err := c.Info(context.Background()); err == nil && on {
						redeliveredAtEnd.Store(int64(info.NumRedelivered))
					}
				} else if !on {
					if rewritten.Add(int64(len(b))) == 5 {
						defer close(redelivered)
					}
					if info, err := c.Info(context.Background()); err == nil {
						redeliveredAtEnd.Store(int64(info.NumRedelivered))
					}
				}
				return store.put(b)
			}}
			m := newMetrics(t)
			r := &Runner{Consumer: c, Conn: e.nc, Sink: fs, Metrics: m, BatchSize: 5, MaxInFlight: 2,
				BatchTimeout: 100 * time.Millisecond}
			if on {
				r.InProgress = &InProgress{Interval: ackWait / 4}
			}
			start(t, r)
			e.waitAcked(c, 5)
			if !on {
				// The first batch's own ACKs follow the redelivered one's.
				natstest.WaitFor(t, waitLong, func() error {
					if got := m.MessagesAcked.Value(); got != 10 {
						return fmt.Errorf("messages_acked_total = %d, want 10", got)
					}
					return nil
				})
			}

			rows, writes := store.counts()
			if rows != 5 {
				t.Errorf("destination rows = %d, want 5 (idempotent)", rows)
			}
			if on {
				if got := redeliveredAtEnd.Load(); got != 0 || writes != 5 || calls.Load() != 1 || maxDelivery.Load() != 1 {
					t.Errorf("NumRedelivered after 3 x AckWait, writes, WriteBatch calls, max delivery = %d, %d, %d, %d, want 0, 5, 1, 1",
						got, writes, calls.Load(), maxDelivery.Load())
				}
				att, ok := m.InProgressAttempts.Value(), m.InProgressSuccesses.Value()
				if att < 5*2 || ok != att || m.InProgressFailures.Value() != 0 {
					t.Errorf("in_progress attempts, successes, failures = %d, %d, %d, want >= 10, all successful",
						att, ok, m.InProgressFailures.Value())
				}
				if got := m.InProgressHeartbeatSeconds.Summary().Count; got < 2 {
					t.Errorf("in_progress_heartbeat_seconds count = %v, want one per round (>= 2)", got)
				}
			} else {
				if got := redeliveredAtEnd.Load(); got <= 0 || writes != 10 || maxDelivery.Load() != 2 {
					t.Errorf("NumRedelivered during the write, writes, max delivery = %d, %d, %d, want > 0, 10, 2",
						got, writes, maxDelivery.Load())
				}
				if got := m.InProgressAttempts.Value(); got != 0 {
					t.Errorf("in_progress_attempts_total = %d without heartbeats, want 0", got)
				}
			}
			if got := m.CurrentInProgressBatches.Value(); got != 0 {
				t.Errorf("current_in_progress_batches_active = %v after the batch, want 0", got)
			}
		})
	}
}

// TestInProgressLimits: heartbeats stop after MaxHeartbeats rounds, and
// after the first round with a failed InProgress; the batch is acknowledged
// as usual either way.
func TestInProgressLimits(t *testing.T) {
	t.Run("max heartbeats", func(t *testing.T) {
		e := newEnv(t, false)
		c := e.consumer(ConsumerSpec{AckWait: new(10 * time.Second)})
		e.publish(3)
		m := newMetrics(t)
		fs := &funcSink{write: func(ctx context.Context, b []*sink.Envelope) []sink.Result {
			natstest.WaitFor(t, waitLong, func() error {
				if m.InProgressMaxHeartbeats.Value() != 1 {
					return errors.New("heartbeat limit not reached yet")
				}
				return nil
			})
			return results(len(b), sink.Ok)
		}}
		start(t, &Runner{Consumer: c, Conn: e.nc, Sink: fs, Metrics: m, BatchSize: 3,
			InProgress: &InProgress{Interval: 20 * time.Millisecond, MaxHeartbeats: 2}})
		e.waitAcked(c, 3)
		if got := m.InProgressAttempts.Value(); got != 6 {
			t.Errorf("in_progress_attempts_total = %d, want 6 (2 rounds x 3 messages)", got)
		}
	})

	t.Run("failure stops the batch's heartbeats", func(t *testing.T) {
		e := newEnv(t, false)
		c := e.consumer(ConsumerSpec{AckWait: new(10 * time.Second)})
		e.publish(3)
		m := newMetrics(t)
		wc := &wrapConsumer{Consumer: c, wrap: func(msg jetstream.Msg) jetstream.Msg { return brokenProgress{msg} }}
		fs := &funcSink{write: func(ctx context.Context, b []*sink.Envelope) []sink.Result {
			// The heartbeat task ends by itself, while the write still
			// runs: no second round follows the failed one.
			natstest.WaitFor(t, waitLong, func() error {
				if m.InProgressFailures.Value() == 0 || m.CurrentInProgressBatches.Value() != 0 {
					return errors.New("heartbeats still running")
				}
				return nil
			})
			return results(len(b), sink.Ok)
		}}
		start(t, &Runner{Consumer: wc, Conn: e.nc, Sink: fs, Metrics: m, BatchSize: 3,
			InProgress: &InProgress{Interval: 10 * time.Millisecond}})
		e.waitAcked(c, 3)
		if a, f := m.InProgressAttempts.Value(), m.InProgressFailures.Value(); a != 3 || f != 3 {
			t.Errorf("in_progress attempts, failures = %d, %d, want 3, 3 (one round, then stop)", a, f)
		}
		if got := m.MessagesAcked.Value(); got != 3 {
			t.Errorf("messages_acked_total = %d, want 3 (decisions unchanged)", got)
		}
	})
}

// brokenProgress is a message whose InProgress fails, as on a closed
// connection.
type brokenProgress struct{ jetstream.Msg }

func (brokenProgress) InProgress() error { return errors.New("nats: connection closed") }

func TestCheckInProgress(t *testing.T) {
	info := func(durable string, ackWait time.Duration, backoff ...time.Duration) *jetstream.ConsumerInfo {
		return &jetstream.ConsumerInfo{Name: "c", Config: jetstream.ConsumerConfig{Durable: durable, AckWait: ackWait, BackOff: backoff}}
	}
	for _, tt := range []struct {
		name     string
		info     *jetstream.ConsumerInfo
		interval time.Duration
		want     string
	}{
		{"ok", info("c", 30*time.Second), 5 * time.Second, ""},
		{"default interval", info("c", 30*time.Second), 0, ""},
		{"just below 80%", info("c", 10*time.Second), 7999 * time.Millisecond, ""},
		{"at 80%", info("c", 10*time.Second), 8 * time.Second,
			"delivery.in_progress.interval_ms: must be less than 80% of the consumer's AckWait (8000 ms) (got 8000)"},
		{"default interval against a short AckWait", info("c", 5*time.Second), 0,
			"delivery.in_progress.interval_ms: must be less than 80% of the consumer's AckWait (4000 ms) (got 5000)"},
		{"ephemeral", info("", 30*time.Second), time.Second,
			"delivery.in_progress.enabled: requires a durable consumer (nats.durable true)"},
		{"backoff", info("c", 30*time.Second, time.Second, 5*time.Second), time.Second,
			`delivery.in_progress.enabled: must not be used with a consumer BackOff (consumer "c" has backoff [1,5])`},
		{"no ack wait", info("c", 0), time.Second, `delivery.in_progress.enabled: consumer "c" reports no positive AckWait`},
		{"no info", nil, time.Second, "delivery.in_progress.enabled: the consumer's AckWait could not be read"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckInProgress(tt.info, tt.interval)
			got := ""
			if err != nil {
				got = err.Error()
				var ce *ConfigError
				if !errors.As(err, &ce) {
					t.Errorf("CheckInProgress() = %T, want *ConfigError", err)
				}
			}
			if got != tt.want {
				t.Errorf("CheckInProgress(%v) = %q, want %q", tt.interval, got, tt.want)
			}
		})
	}
}

// TestRunRefusesInProgressGuard: Run checks the guards against the bound
// consumer (here one with a server BackOff) before fetching anything.
func TestRunRefusesInProgressGuard(t *testing.T) {
	e := newEnv(t, false)
	c, _, err := EnsureConsumer(t.Context(), e.js, ConsumerSpec{Stream: testStream, Name: testConsumer, Subject: "orders.>",
		MaxDeliver: new(3), BackOff: []time.Duration{time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	e.publish(1)
	fs := &funcSink{write: func(ctx context.Context, b []*sink.Envelope) []sink.Result { return results(len(b), sink.Ok) }}
	err = (&Runner{Consumer: c, Sink: fs, InProgress: &InProgress{}}).Run(t.Context())
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Path != "delivery.in_progress.enabled" {
		t.Errorf("Run() = %v, want a delivery.in_progress.enabled *ConfigError", err)
	}
	if fs.callCount() != 0 || e.info(c).NumAckPending != 0 {
		t.Errorf("Run fetched or wrote although it refused to start")
	}
}
