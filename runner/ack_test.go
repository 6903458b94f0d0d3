package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/sink"
)

// TestAckConfirmation: with confirmed ACKs the server has applied every ACK
// by the time it is counted, so the consumer state shows it at once.
func TestAckConfirmation(t *testing.T) {
	e := newEnv(t, false)
	c := e.consumer(ConsumerSpec{})
	e.publish(20)
	m := newMetrics(t)
	fs := &funcSink{write: func(ctx context.Context, b []*sink.Envelope) []sink.Result { return results(len(b), sink.Ok) }}
	start(t, &Runner{Consumer: c, Conn: e.nc, Sink: fs, Metrics: m, BatchSize: 20,
		AckConfirmation: &AckConfirmation{Timeout: 5 * time.Second}})
	natstest.WaitFor(t, waitLong, func() error {
		if got := m.MessagesAcked.Value(); got != 20 {
			return fmt.Errorf("messages_acked_total = %d, want 20", got)
		}
		return nil
	})
	// Read once, no polling: a confirmed ACK is already applied.
	if info := e.info(c); info.AckFloor.Stream != 20 || info.NumAckPending != 0 {
		t.Errorf("right after the confirmations: AckFloor.Stream = %d, NumAckPending = %d, want 20, 0",
			info.AckFloor.Stream, info.NumAckPending)
	}
	if a, s := m.AckConfirmationAttempts.Value(), m.AckConfirmationSuccesses.Value(); a != 20 || s != 20 {
		t.Errorf("ack_confirmation attempts, successes = %d, %d, want 20, 20", a, s)
	}
	if got := m.AckConfirmationSeconds.Summary().Count; got != 20 {
		t.Errorf("ack_confirmation_seconds count = %v, want 20", got)
	}
	if got := m.MessageAckSeconds.Summary().Count; got != 1 {
		t.Errorf("message_ack_seconds count = %v, want 1 (one pass per batch)", got)
	}
}

// TestAckConfirmationServerDown stops the server after a batch committed and
// before its ACKs are confirmed: the confirmations fail (no reconnect
// buffer: the publish fails at once) or time out (buffered), are counted and
// logged, and nothing is lost: after the restart every message is either
// acknowledged by the buffered ACK or redelivered, absorbed by the
// destination's duplicate model, and confirmed.
func TestAckConfirmationServerDown(t *testing.T) {
	for _, buffered := range []bool{false, true} {
		t.Run(fmt.Sprintf("reconnect_buffer=%v", buffered), func(t *testing.T) {
			e := newEnv(t, false)
			observer := e.consumer(ConsumerSpec{AckWait: new(time.Second)})
			var opts []nats.Option
			if !buffered {
				opts = append(opts, nats.ReconnectBufSize(-1))
			}
			nc, js := natstest.Connect(t, e.srv, opts...)
			c, err := js.Consumer(t.Context(), testStream, testConsumer)
			if err != nil {
				t.Fatal(err)
			}
			e.publish(5)
			srv := e.srv
			port, dir := natstest.Port(srv), srv.StoreDir()
			down := make(chan struct{})
			var once sync.Once
			var store idempotentStore
			fs := &funcSink{write: func(ctx context.Context, b []*sink.Envelope) []sink.Result {
				res := store.put(b)
				once.Do(func() { // committed; now the server goes away
					srv.Shutdown()
					srv.WaitForShutdown()
					close(down)
				})
				return res
			}}
			m := newMetrics(t)
			logs := &logRecorder{}
			start(t, &Runner{Consumer: c, Conn: nc, Sink: fs, Metrics: m, BatchSize: 5, BatchTimeout: 100 * time.Millisecond,
				AckConfirmation: &AckConfirmation{Timeout: 300 * time.Millisecond}, Logger: slog.New(logs)})
			select {
			case <-down:
			case <-time.After(waitLong):
				t.Fatal("the sink was never called")
			}
			natstest.WaitFor(t, waitLong, func() error {
				if got := m.AckErrors.Value(); got != 5 {
					return fmt.Errorf("ack_errors_total = %d, want 5 (the whole batch's confirmations failed)", got)
				}
				return nil
			})
			// Failed at once, or timed out when the client had not yet
			// noticed the dead socket its requests went into.
			failures, timeouts := m.AckConfirmationFailures.Value(), m.AckConfirmationTimeouts.Value()
			if failures+timeouts != 5 || m.AckConfirmationSuccesses.Value() != 0 {
				t.Errorf("ack_confirmation failures, timeouts, successes = %d, %d, %d, want 5 failed or timed out, 0 successes",
					failures, timeouts, m.AckConfirmationSuccesses.Value())
			}
			if got := logs.count("ack failed"); got != 5 {
				t.Errorf(`%d "ack failed" log records, want 5`, got)
			}
			if got := m.MessagesAcked.Value(); got != 0 {
				t.Errorf("messages_acked_total = %d during the outage, want 0", got)
			}

			e.srv = startOn(t, dir, port)
			natstest.WaitFor(t, 40*time.Second, func() error {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				info, err := observer.Info(ctx)
				if err != nil {
					return err
				}
				if info.AckFloor.Stream != 5 || info.NumAckPending != 0 {
					return fmt.Errorf("AckFloor.Stream, NumAckPending = %d, %d, want 5, 0", info.AckFloor.Stream, info.NumAckPending)
				}
				return nil
			})
			rows, writes := store.counts()
			if rows != 5 {
				t.Errorf("destination rows = %d, want 5", rows)
			}
			if !buffered && (writes != 10 || m.MessagesAcked.Value() != 5) {
				// Nothing reached the server: each message redelivered once
				// and confirmed then.
				t.Errorf("writes, messages_acked_total = %d, %d, want 10, 5", writes, m.MessagesAcked.Value())
			}
		})
	}
}

// startOn starts a server on the store and port of one that was shut down,
// retrying while the old listener lingers.
func startOn(t *testing.T, dir string, port int) *server.Server {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := natstest.StartOn(dir, port)
		if err == nil {
			t.Cleanup(s.Shutdown)
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("restart on port %d: %v", port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTermAfterDeadLetter: with ack_term_after_publish the dead-lettered
// message is terminated on the server (its MSG_TERMINATED advisory), only
// after the DLQ PubAck, and TERMs are never confirmed.
func TestTermAfterDeadLetter(t *testing.T) {
	e := newEnv(t, true)
	c := e.consumer(ConsumerSpec{})
	advisories, err := e.nc.SubscribeSync("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED." + testStream + "." + testConsumer)
	if err != nil {
		t.Fatal(err)
	}
	e.publish(4)
	fs := perMessageSink(map[uint64]bool{3: true}, nil)
	m := newMetrics(t)
	dl := dlqOptions()
	dl.TermAfterPublish = true
	start(t, &Runner{Consumer: c, JetStream: e.js, Conn: e.nc, Sink: fs, Metrics: m, DeadLetter: dl,
		AckConfirmation: &AckConfirmation{}})
	e.waitAcked(c, 4)

	msg, err := advisories.NextMsg(waitLong)
	if err != nil {
		t.Fatalf("no MSG_TERMINATED advisory: %v", err)
	}
	var adv struct {
		StreamSeq  uint64 `json:"stream_seq"`
		Deliveries uint64 `json:"deliveries"`
	}
	if err := json.Unmarshal(msg.Data, &adv); err != nil {
		t.Fatal(err)
	}
	if adv.StreamSeq != 3 || adv.Deliveries != 1 {
		t.Errorf("terminated stream_seq, deliveries = %d, %d, want 3, 1", adv.StreamSeq, adv.Deliveries)
	}
	if _, err := advisories.NextMsg(100 * time.Millisecond); !errors.Is(err, nats.ErrTimeout) {
		t.Errorf("a second MSG_TERMINATED advisory arrived (err %v), want only stream sequence 3", err)
	}
	if got := len(e.dlqMessages()); got != 1 {
		t.Errorf("DLQ holds %d messages, want 1", got)
	}
	if a, tm, u := m.MessagesAcked.Value(), m.MessagesTerminated.Value(), m.AckConfirmationUnsupported.Value(); a != 3 || tm != 1 || u != 1 {
		t.Errorf("acked, terminated, ack_confirmation_unsupported = %d, %d, %d, want 3, 1, 1", a, tm, u)
	}
	if got := m.AckConfirmationAttempts.Value(); got != 3 {
		t.Errorf("ack_confirmation_attempts_total = %d, want 3 (TERMs are not confirmed)", got)
	}
}

func TestMaxAckPendingWarning(t *testing.T) {
	info := func(n int) *jetstream.ConsumerInfo {
		return &jetstream.ConsumerInfo{Config: jetstream.ConsumerConfig{MaxAckPending: n}}
	}
	for _, tt := range []struct {
		name string
		info *jetstream.ConsumerInfo
		need int
		warn bool
	}{
		{"enough", info(1000), 1000, false},
		{"too small", info(500), 4 * 200, true},
		{"server default 1000 when unset", info(0), 4 * 500, true},
		{"unset but enough", info(0), 100, false},
		{"unlimited", info(-1), 64 * 10000, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := maxAckPendingWarning(tt.info, tt.need); (got != "") != tt.warn {
				t.Errorf("maxAckPendingWarning(need %d) = %q, want warning %v", tt.need, got, tt.warn)
			}
		})
	}
}
