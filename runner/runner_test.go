package runner

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/nats-sinks/nats-sink/internal/logtest"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/telemetry"
)

// TestAckOnlyAfterCommit checks the core invariant on the server: while the
// sink is inside WriteBatch nothing is acknowledged, and everything is once
// it returned Committed.
func TestAckOnlyAfterCommit(t *testing.T) {
	e := newEnv(t, false)
	c := e.consumer(ConsumerSpec{})
	e.publish(10)
	entered := make(chan int, 1)
	release := make(chan struct{})
	fs := &funcSink{write: func(ctx context.Context, b []*sink.Envelope) []sink.Result {
		select {
		case entered <- len(b):
		default:
		}
		<-release
		return results(len(b), sink.Ok)
	}}
	m := newMetrics(t)
	start(t, &Runner{Consumer: c, Conn: e.nc, Sink: fs, BatchSize: 10, Metrics: m})

	var n int
	select {
	case n = <-entered:
	case <-time.After(waitLong):
		t.Fatal("WriteBatch was never called")
	}
	info := e.info(c)
	if info.AckFloor.Stream != 0 || info.NumAckPending != n {
		t.Errorf("during WriteBatch: AckFloor.Stream = %d, NumAckPending = %d, want 0, %d", info.AckFloor.Stream, info.NumAckPending, n)
	}
	if got := m.MessagesAcked.Value(); got != 0 {
		t.Errorf("during WriteBatch: messages_acked_total = %d, want 0", got)
	}
	close(release)
	e.waitAcked(c, 10)
	if got := m.MessagesAcked.Value(); got != 10 {
		t.Errorf("messages_acked_total = %d, want 10", got)
	}
	if got := m.MessagesWritten.Value(); got != 10 {
		t.Errorf("messages_written_total = %d, want 10", got)
	}
}

// TestBatchesAckedIndependently runs four batches at once; the one that
// fails stays unacknowledged while the others are acknowledged.
func TestBatchesAckedIndependently(t *testing.T) {
	e := newEnv(t, false)
	c := e.consumer(ConsumerSpec{})
	e.publish(20)

	var (
		mu       sync.Mutex
		inside   int
		allIn    = make(chan struct{})
		failed   []uint64
		overlap  atomic.Bool
		failSeq6 = uint64(6)
	)
	fs := &funcSink{write: func(ctx context.Context, b []*sink.Envelope) []sink.Result {
		mu.Lock()
		inside++
		if inside == 4 {
			close(allIn)
		}
		mu.Unlock()
		// Proves four batches are in flight together.
		select {
		case <-allIn:
			overlap.Store(true)
		case <-time.After(10 * time.Second):
		}
		for _, env := range b {
			if env.StreamSequence == failSeq6 {
				mu.Lock()
				failed = seqs(b)
				mu.Unlock()
				return results(len(b), sink.Result{Outcome: sink.Temporary, Err: errors.New("lock timeout")})
			}
		}
		return results(len(b), sink.Ok)
	}}
	m := newMetrics(t)
	r := &Runner{Consumer: c, Conn: e.nc, Sink: fs, BatchSize: 5, MaxInFlight: 4, Metrics: m,
		TemporaryAction: ActionLeaveUnacked}
	start(t, r)

	natstest.WaitFor(t, waitLong, func() error {
		if got := m.MessagesAcked.Value(); got != 15 {
			return fmt.Errorf("messages_acked_total = %d, want 15", got)
		}
		return nil
	})
	if !overlap.Load() {
		t.Errorf("four batches were never inside WriteBatch at the same time")
	}
	mu.Lock()
	fb := failed
	mu.Unlock()
	if len(fb) == 0 {
		t.Fatal("no batch failed")
	}
	// The server applies ACKs asynchronously: wait for its state.
	natstest.WaitFor(t, waitLong, func() error {
		info := e.info(c)
		if info.NumAckPending != len(fb) || info.AckFloor.Stream != fb[0]-1 {
			return fmt.Errorf("AckFloor.Stream = %d, NumAckPending = %d, want %d, %d (failed batch %v)",
				info.AckFloor.Stream, info.NumAckPending, fb[0]-1, len(fb), fb)
		}
		return nil
	})
	if got := m.MessagesNacked.Value(); got != 0 {
		t.Errorf("messages_nacked_total = %d with leave_unacked, want 0", got)
	}
}

// TestTemporaryFailureNakedWithDelay: a failing write acknowledges nothing
// and NAKs with the computed delay, so the redelivery comes no earlier.
func TestTemporaryFailureNakedWithDelay(t *testing.T) {
	e := newEnv(t, false)
	c := e.consumer(ConsumerSpec{})
	e.publish(3)
	const delay = 300 * time.Millisecond
	var (
		mu       sync.Mutex
		failedAt time.Time
		retryAt  time.Time
		floor    = uint64(1 << 62)
	)
	fs := &funcSink{}
	fs.write = func(ctx context.Context, b []*sink.Envelope) []sink.Result {
		mu.Lock()
		defer mu.Unlock()
		if failedAt.IsZero() {
			failedAt = time.Now()
			return results(len(b), sink.Result{Outcome: sink.Temporary, Err: errors.New("connection reset")})
		}
		if retryAt.IsZero() {
			retryAt = time.Now()
			floor = e.info(c).AckFloor.Stream
		}
		return results(len(b), sink.Ok)
	}
	m := newMetrics(t)
	start(t, &Runner{Consumer: c, Conn: e.nc, Sink: fs, Metrics: m,
		Retry: Retry{Mode: ModeFixed, Backoff: new(delay), Jitter: JitterNone}})
	e.waitAcked(c, 3)

	mu.Lock()
	defer mu.Unlock()
	if got := retryAt.Sub(failedAt); got < delay {
		t.Errorf("redelivered %v after the failure, want not before %v", got, delay)
	}
	if floor != 0 {
		t.Errorf("AckFloor.Stream at redelivery = %d, want 0 (nothing acked after the failure)", floor)
	}
	if got := m.MessagesNacked.Value(); got != 3 {
		t.Errorf("messages_nacked_total = %d, want 3", got)
	}
	if got := m.MessagesFailed.Value(); got != 3 {
		t.Errorf("messages_failed_total = %d, want 3", got)
	}
	if got := m.SinkWriteErrors.Value(); got != 3 {
		t.Errorf("sink_write_errors_total = %d, want 3", got)
	}
	if got := m.RetryBackoffDelaySeconds.Summary(); got.Count != 1 || got.Last != delay.Seconds() {
		t.Errorf("retry_backoff_delay_seconds = %+v, want one observation of %v", got, delay.Seconds())
	}
}

// perMessageSink fails the given sequences permanently, like a file sink
// whose target exists with duplicate_policy fail.
func perMessageSink(bad map[uint64]bool, log *committedLog) *funcSink {
	return &funcSink{write: func(ctx context.Context, b []*sink.Envelope) []sink.Result {
		out := make([]sink.Result, len(b))
		var ok []*sink.Envelope
		for i, env := range b {
			if bad[env.StreamSequence] {
				out[i] = sink.Result{Outcome: sink.Permanent, ErrorType: sink.ValidationError, Err: errors.New("bad row")}
				continue
			}
			out[i] = sink.Ok
			ok = append(ok, env)
		}
		if log != nil {
			log.add(ok)
		}
		return out
	}}
}

func dlqOptions() *DeadLetter {
	dl := NewDeadLetter(dlqSubject)
	dl.PublishTimeout = 2 * time.Second
	return dl
}

// TestPoisonMessageDeadLettered: one permanent failure in a batch goes to the
// DLQ with every docs/formats.md#dlq-headers header while the rest is written; all are
// acknowledged (or terminated) only after the DLQ PubAck.
func TestPoisonMessageDeadLettered(t *testing.T) {
	for _, term := range []bool{false, true} {
		t.Run(fmt.Sprintf("term=%v", term), func(t *testing.T) {
			e := newEnv(t, true)
			c := e.consumer(ConsumerSpec{})
			for i := 1; i <= 5; i++ {
				h := nats.Header{}
				if i == 3 {
					h.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
				}
				natstest.Publish(t, e.js, "orders.created", fmt.Appendf(nil, `{"n":%d}`, i), h)
			}
			var written committedLog
			fs := perMessageSink(map[uint64]bool{3: true}, &written)
			m := newMetrics(t)
			dl := dlqOptions()
			dl.TermAfterPublish = term
			failedAt := time.Date(2026, 5, 29, 10, 0, 0, 123456000, time.UTC)
			start(t, &Runner{Consumer: c, JetStream: e.js, Conn: e.nc, Sink: fs, Metrics: m, DeadLetter: dl,
				Now: func() time.Time { return failedAt }})
			e.waitAcked(c, 5)

			if diff := cmp.Diff([]uint64{1, 2, 4, 5}, written.get()); diff != "" {
				t.Errorf("written mismatch (-want +got):\n%s", diff)
			}
			dead := e.dlqMessages()
			if len(dead) != 1 {
				t.Fatalf("DLQ holds %d messages, want 1", len(dead))
			}
			got := map[string]string{}
			for k := range dead[0].Header {
				got[k] = dead[0].Header.Get(k)
			}
			want := map[string]string{
				"Nats-Sinks-Error-Type":       "ValidationError",
				"Nats-Sinks-Original-Subject": "orders.created",
				"Nats-Msg-Id":                 "nats-sinks-dlq:" + testConsumer + ":stream-sequence:ORDERS:3",
				"x-dead-letter-reason":        "ValidationError: bad row",
				"x-original-subject":          "orders.created",
				"x-original-stream":           testStream,
				"x-failed-at":                 record.FailedAt(failedAt),
				"x-delivery-count":            "1",
				"traceparent":                 "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("DLQ headers mismatch (-want +got):\n%s", diff)
			}
			var body map[string]any
			if err := json.Unmarshal(dead[0].Data, &body); err != nil {
				t.Fatalf("DLQ body: %v", err)
			}
			wantBody := map[string]any{
				"stream_sequence": 3.0, "subject": "orders.created", "stream": testStream,
				"error_type": "ValidationError", "error": "bad row",
				"payload_base64": base64.StdEncoding.EncodeToString([]byte(`{"n":3}`)),
			}
			for k, v := range wantBody {
				if body[k] != v {
					t.Errorf("DLQ body %s = %v, want %v", k, body[k], v)
				}
			}
			if got := m.MessagesDLQ.Value(); got != 1 {
				t.Errorf("messages_dlq_total = %d, want 1", got)
			}
			wantAcked, wantTermed := uint64(5), uint64(0)
			if term {
				wantAcked, wantTermed = 4, 1
			}
			if a, tm := m.MessagesAcked.Value(), m.MessagesTerminated.Value(); a != wantAcked || tm != wantTermed {
				t.Errorf("acked, terminated = %d, %d, want %d, %d", a, tm, wantAcked, wantTermed)
			}
		})
	}
}

// txSink is a transactional-style fake: a set containing a bad row fails as a
// whole with a shared permanent result.
func txSink(bad map[uint64]bool, log *committedLog) *funcSink {
	return &funcSink{write: func(ctx context.Context, b []*sink.Envelope) []sink.Result {
		for _, env := range b {
			if bad[env.StreamSequence] {
				return results(len(b), sink.Result{Outcome: sink.Permanent, ErrorType: sink.PermanentSinkError,
					Err: errors.New("check constraint violated"), Shared: true})
			}
		}
		log.add(b)
		return results(len(b), sink.Ok)
	}}
}

func TestBisectionIsolatesPoison(t *testing.T) {
	e := newEnv(t, true)
	c := e.consumer(ConsumerSpec{})
	e.publish(8)
	var written committedLog
	fs := txSink(map[uint64]bool{5: true}, &written)
	m := newMetrics(t)
	start(t, &Runner{Consumer: c, JetStream: e.js, Conn: e.nc, Sink: fs, Metrics: m, DeadLetter: dlqOptions(), BatchSize: 8})
	e.waitAcked(c, 8)

	if diff := cmp.Diff([]uint64{1, 2, 3, 4, 6, 7, 8}, written.get()); diff != "" {
		t.Errorf("committed mismatch (-want +got):\n%s", diff)
	}
	if n := fs.callCount(); n > 2*8-1 {
		t.Errorf("WriteBatch calls = %d, want at most 15", n)
	}
	dead := e.dlqMessages()
	if len(dead) != 1 || dead[0].Header.Get("Nats-Msg-Id") != "nats-sinks-dlq:"+testConsumer+":stream-sequence:ORDERS:5" {
		t.Errorf("DLQ = %d messages (first id %q), want exactly stream sequence 5", len(dead), firstID(dead))
	}
	if m.SinkBatchBisections.Value() == 0 {
		t.Errorf("sink_batch_bisections_total = 0, want > 0")
	}
}

func firstID(ms []*jetstream.RawStreamMsg) string {
	if len(ms) == 0 {
		return ""
	}
	return ms[0].Header.Get("Nats-Msg-Id")
}

func TestBatchIsolationModeDeadLettersWholeBatch(t *testing.T) {
	e := newEnv(t, true)
	c := e.consumer(ConsumerSpec{})
	e.publish(4)
	fs := perMessageSink(map[uint64]bool{2: true}, nil)
	start(t, &Runner{Consumer: c, JetStream: e.js, Conn: e.nc, Sink: fs, DeadLetter: dlqOptions(),
		Isolation: IsolationBatch, BatchSize: 4})
	e.waitAcked(c, 4)
	dead := e.dlqMessages()
	var types []string
	for _, d := range dead {
		types = append(types, d.Header.Get("Nats-Sinks-Error-Type"))
	}
	if diff := cmp.Diff([]string{"ValidationError", "ValidationError", "ValidationError", "ValidationError"}, types); diff != "" {
		t.Errorf("DLQ error types mismatch (-want +got):\n%s", diff)
	}
}

// TestMissingDLQStreamNeverAcks: a DLQ publish nobody acknowledges sends the
// poison message to the temporary path; it is redelivered, never ACKed, and
// the runner keeps running.
func TestMissingDLQStreamNeverAcks(t *testing.T) {
	e := newEnv(t, false) // no stream captures dlq.orders
	c := e.consumer(ConsumerSpec{})
	e.publish(3)
	fs := perMessageSink(map[uint64]bool{1: true}, nil)
	m := newMetrics(t)
	dl := dlqOptions()
	dl.PublishTimeout = 300 * time.Millisecond
	stop := start(t, &Runner{Consumer: c, JetStream: e.js, Conn: e.nc, Sink: fs, Metrics: m, DeadLetter: dl,
		BatchTimeout: 100 * time.Millisecond, Retry: Retry{Mode: ModeFixed, Backoff: new(20 * time.Millisecond), Jitter: JitterNone, MaxRetries: new(1000)}})

	natstest.WaitFor(t, waitLong, func() error {
		if got := m.DLQPublishErrors.Value(); got < 2 {
			return fmt.Errorf("dlq_publish_errors_total = %d, want >= 2 (a redelivery failed again)", got)
		}
		return nil
	})
	info := e.info(c)
	if info.AckFloor.Stream != 0 || info.NumRedelivered == 0 {
		t.Errorf("AckFloor.Stream = %d, NumRedelivered = %d, want 0, > 0", info.AckFloor.Stream, info.NumRedelivered)
	}
	if got := m.MessagesAcked.Value(); got != 2 {
		t.Errorf("messages_acked_total = %d, want 2 (only the good messages)", got)
	}
	if got := m.MessagesDLQ.Value(); got != 0 {
		t.Errorf("messages_dlq_total = %d, want 0", got)
	}
	if err := stop(); err != nil {
		t.Errorf("Run() = %v, want nil", err)
	}
}

// lossyConsumer drops the first ACK of every stream sequence, as a
// connection loss would, so that JetStream redelivers after AckWait.
type lossyConsumer struct {
	jetstream.Consumer
	mu      sync.Mutex
	dropped map[uint64]bool
}

type lossyBatch struct {
	ch  chan jetstream.Msg
	src jetstream.MessageBatch
}

func (b *lossyBatch) Messages() <-chan jetstream.Msg { return b.ch }
func (b *lossyBatch) Error() error                   { return b.src.Error() }

type lossyMsg struct {
	jetstream.Msg
	c *lossyConsumer
}

func (m lossyMsg) Ack() error {
	md, err := m.Metadata()
	if err != nil {
		return err
	}
	m.c.mu.Lock()
	first := !m.c.dropped[md.Sequence.Stream]
	m.c.dropped[md.Sequence.Stream] = true
	m.c.mu.Unlock()
	if first {
		return nil // "sent" but lost
	}
	return m.Msg.Ack()
}

func (c *lossyConsumer) wrap(b jetstream.MessageBatch, err error) (jetstream.MessageBatch, error) {
	if err != nil {
		return nil, err
	}
	lb := &lossyBatch{ch: make(chan jetstream.Msg), src: b}
	go func() {
		defer close(lb.ch)
		for m := range b.Messages() {
			lb.ch <- lossyMsg{Msg: m, c: c}
		}
	}()
	return lb, nil
}

func (c *lossyConsumer) FetchNoWait(n int) (jetstream.MessageBatch, error) {
	return c.wrap(c.Consumer.FetchNoWait(n))
}

func (c *lossyConsumer) Fetch(n int, opts ...jetstream.FetchOpt) (jetstream.MessageBatch, error) {
	return c.wrap(c.Consumer.Fetch(n, opts...))
}

// TestDLQRedeliveryDeduplicated: a message dead-lettered twice because its
// ACK was lost has one DLQ entry (deterministic Nats-Msg-Id).
func TestDLQRedeliveryDeduplicated(t *testing.T) {
	e := newEnv(t, true)
	c := e.consumer(ConsumerSpec{AckWait: new(time.Second)})
	e.publish(1)
	fs := perMessageSink(map[uint64]bool{1: true}, nil)
	m := newMetrics(t)
	lc := &lossyConsumer{Consumer: c, dropped: map[uint64]bool{}}
	start(t, &Runner{Consumer: lc, JetStream: e.js, Conn: e.nc, Sink: fs, Metrics: m, DeadLetter: dlqOptions()})
	e.waitAcked(c, 1)
	if got := len(e.dlqMessages()); got != 1 {
		t.Errorf("DLQ holds %d messages, want 1", got)
	}
	if got, dup := m.MessagesDLQ.Value(), m.DLQPublishDuplicates.Value(); got != 2 || dup != 1 {
		t.Errorf("messages_dlq_total, dlq_publish_duplicates_total = %d, %d, want 2, 1", got, dup)
	}
}

// blockingSink blocks in WriteBatch until released or ctx ends; a cancelled
// write is Temporary, as the contract requires.
func blockingSink(entered chan<- int, release <-chan struct{}) *funcSink {
	return &funcSink{write: func(ctx context.Context, b []*sink.Envelope) []sink.Result {
		select {
		case entered <- len(b):
		default:
		}
		select {
		case <-release:
			return results(len(b), sink.Ok)
		case <-ctx.Done():
			return results(len(b), sink.Result{Outcome: sink.Temporary, Err: ctx.Err()})
		}
	}}
}

// TestShutdownTimeoutAbandonsWrite: when the drain times out the write is
// cancelled, nothing is acknowledged and the messages are NAKed at once (they
// come back long before AckWait).
func TestShutdownTimeoutAbandonsWrite(t *testing.T) {
	e := newEnv(t, false)
	c := e.consumer(ConsumerSpec{}) // AckWait 30 s
	e.publish(5)
	entered := make(chan int, 1)
	fs := blockingSink(entered, make(chan struct{}))
	m := newMetrics(t)
	stop := start(t, &Runner{Consumer: c, Conn: e.nc, Sink: fs, Metrics: m,
		ShutdownTimeout: new(100 * time.Millisecond)})
	select {
	case <-entered:
	case <-time.After(waitLong):
		t.Fatal("WriteBatch was never called")
	}
	if err := stop(); err != nil {
		t.Fatalf("Run() = %v, want nil after a drain", err)
	}
	if info := e.info(c); info.AckFloor.Stream != 0 {
		t.Errorf("AckFloor.Stream = %d, want 0", info.AckFloor.Stream)
	}
	if a, n, ab := m.MessagesAcked.Value(), m.MessagesNacked.Value(), m.ShutdownAbandonedMessages.Value(); a != 0 || n != 5 || ab != 5 {
		t.Errorf("acked, nacked, abandoned = %d, %d, %d, want 0, 5, 5", a, n, ab)
	}
	// NAKed without delay: a new fetch gets them back well within AckWait.
	b, err := c.Fetch(5, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	var got []uint64
	for msg := range b.Messages() {
		md, _ := msg.Metadata()
		if md.NumDelivered != 2 {
			t.Errorf("stream seq %d NumDelivered = %d, want 2", md.Sequence.Stream, md.NumDelivered)
		}
		got = append(got, md.Sequence.Stream)
	}
	if len(got) != 5 {
		t.Errorf("redelivered %v within 5 s, want all 5 (NAK without delay)", got)
	}
}

// TestShutdownDrainsInFlightBatch: a batch in flight when ctx ends still
// commits and is acknowledged within the shutdown timeout.
func TestShutdownDrainsInFlightBatch(t *testing.T) {
	e := newEnv(t, false)
	c := e.consumer(ConsumerSpec{})
	e.publish(4)
	entered := make(chan int, 1)
	release := make(chan struct{})
	fs := blockingSink(entered, release)
	r := &Runner{Consumer: c, Conn: e.nc, Sink: fs, ShutdownTimeout: new(waitLong)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	<-entered
	cancel()
	natstest.WaitFor(t, waitLong, func() error {
		if !r.Status().Draining {
			return errors.New("Status().Draining = false")
		}
		return nil
	})
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	case <-time.After(waitLong):
		t.Fatal("Run did not return")
	}
	e.waitAcked(c, 4)
}

func TestRetryBudgetExhaustedSendsNoNak(t *testing.T) {
	e := newEnv(t, false)
	c := e.consumer(ConsumerSpec{})
	e.publish(3)
	fs := &funcSink{write: func(ctx context.Context, b []*sink.Envelope) []sink.Result {
		return results(len(b), sink.Result{Outcome: sink.Temporary, Err: errors.New("timeout")})
	}}
	m := newMetrics(t)
	logs := &logRecorder{}
	start(t, &Runner{Consumer: c, Conn: e.nc, Sink: fs, Metrics: m, Logger: slog.New(logs),
		Retry: Retry{MaxRetries: new(0)}})
	natstest.WaitFor(t, waitLong, func() error {
		if logs.count("retry budget exhausted; left for redelivery") == 0 {
			return errors.New("no retry budget log")
		}
		return nil
	})
	if got := m.MessagesNacked.Value(); got != 0 {
		t.Errorf("messages_nacked_total = %d, want 0", got)
	}
	info := e.info(c)
	if info.NumAckPending != 3 || info.NumRedelivered != 0 || info.AckFloor.Stream != 0 {
		t.Errorf("NumAckPending, NumRedelivered, AckFloor = %d, %d, %d, want 3, 0, 0 (left for AckWait)",
			info.NumAckPending, info.NumRedelivered, info.AckFloor.Stream)
	}
}

func TestMaxDeliverReached(t *testing.T) {
	failing := func() *funcSink {
		return &funcSink{write: func(ctx context.Context, b []*sink.Envelope) []sink.Result {
			return results(len(b), sink.Result{Outcome: sink.Temporary, Err: errors.New("deadlock detected")})
		}}
	}
	fast := Retry{Mode: ModeFixed, Backoff: new(10 * time.Millisecond), Jitter: JitterNone}
	const linger = 100 * time.Millisecond

	t.Run("dead-lettered", func(t *testing.T) {
		e := newEnv(t, true)
		c := e.consumer(ConsumerSpec{MaxDeliver: new(2)})
		e.publish(1)
		m := newMetrics(t)
		start(t, &Runner{Consumer: c, JetStream: e.js, Conn: e.nc, Sink: failing(), Metrics: m,
			DeadLetter: dlqOptions(), Retry: fast, BatchTimeout: linger})
		e.waitAcked(c, 1)
		dead := e.dlqMessages()
		if len(dead) != 1 {
			t.Fatalf("DLQ holds %d messages, want 1", len(dead))
		}
		h := dead[0].Header
		if h.Get("Nats-Sinks-Error-Type") != sink.MaxDeliveriesExceeded || h.Get("x-delivery-count") != "2" ||
			h.Get("x-dead-letter-reason") != "MaxDeliveriesExceeded: deadlock detected" {
			t.Errorf("DLQ headers = %v, want MaxDeliveriesExceeded on delivery 2 with the last error", h)
		}
	})

	t.Run("without DLQ counted", func(t *testing.T) {
		e := newEnv(t, false)
		c := e.consumer(ConsumerSpec{MaxDeliver: new(2)})
		e.publish(1)
		m := newMetrics(t)
		start(t, &Runner{Consumer: c, Conn: e.nc, Sink: failing(), Metrics: m, Retry: fast, BatchTimeout: linger})
		natstest.WaitFor(t, waitLong, func() error {
			if got := m.MessagesMaxDeliverReached.Value(); got != 1 {
				return fmt.Errorf("messages_max_deliver_reached_total = %d, want 1", got)
			}
			return nil
		})
		if got := m.MessagesAcked.Value(); got != 0 {
			t.Errorf("messages_acked_total = %d, want 0", got)
		}
	})
}

// healthSink is a funcSink with a Healthcheck.
type healthSink struct {
	*funcSink
	healthy atomic.Bool
	checks  atomic.Int64
}

func (s *healthSink) Healthcheck(context.Context) error {
	s.checks.Add(1)
	if s.healthy.Load() {
		return nil
	}
	return errors.New("password authentication failed")
}

func TestDestinationCircuit(t *testing.T) {
	e := newEnv(t, false)
	c := e.consumer(ConsumerSpec{})
	e.publish(2)
	hs := &healthSink{}
	hs.funcSink = &funcSink{write: func(ctx context.Context, b []*sink.Envelope) []sink.Result {
		if !hs.healthy.Load() {
			return results(len(b), sink.Result{Outcome: sink.Destination, Err: errors.New("password authentication failed"), Shared: true})
		}
		return results(len(b), sink.Ok)
	}}
	m := newMetrics(t)
	r := &Runner{Consumer: c, Conn: e.nc, Sink: hs, Metrics: m,
		Retry: Retry{Mode: ModeFixed, Backoff: new(20 * time.Millisecond), Jitter: JitterNone}}
	start(t, r)

	natstest.WaitFor(t, waitLong, func() error {
		if hs.checks.Load() < 3 {
			return fmt.Errorf("%d health probes, want >= 3", hs.checks.Load())
		}
		return nil
	})
	e.publish(3)
	natstest.WaitFor(t, waitLong, func() error {
		if hs.checks.Load() < 6 {
			return fmt.Errorf("%d health probes, want >= 6", hs.checks.Load())
		}
		return nil
	})
	if n := hs.callCount(); n != 1 {
		t.Errorf("WriteBatch calls while the circuit is open = %d, want 1 (no fetch)", n)
	}
	if st := r.Status(); !st.CircuitOpen || !st.SinkUnhealthy {
		t.Errorf("Status() = %+v, want CircuitOpen and SinkUnhealthy", st)
	}
	if info := e.info(c); info.NumPending != 3 {
		t.Errorf("NumPending = %d while broken, want 3 (nothing fetched)", info.NumPending)
	}
	if m.SinkCircuitOpen.Value() != 1 || m.SinkHealthy.Value() != 0 || m.SinkDestinationErrors.Value() != 2 {
		t.Errorf("sink_circuit_open, sink_healthy, sink_destination_errors_total = %v, %v, %d, want 1, 0, 2",
			m.SinkCircuitOpen.Value(), m.SinkHealthy.Value(), m.SinkDestinationErrors.Value())
	}

	hs.healthy.Store(true)
	e.waitAcked(c, 5)
	if st := r.Status(); st.CircuitOpen || st.SinkUnhealthy {
		t.Errorf("Status() = %+v after recovery, want circuit closed and sink healthy", st)
	}
}

// TestDestinationCircuitHalfOpen: a sink without Healthcheck is probed with
// the next batch.
func TestDestinationCircuitHalfOpen(t *testing.T) {
	e := newEnv(t, false)
	c := e.consumer(ConsumerSpec{})
	e.publish(3)
	var calls atomic.Int64
	fs := &funcSink{write: func(ctx context.Context, b []*sink.Envelope) []sink.Result {
		if calls.Add(1) <= 2 {
			return results(len(b), sink.Result{Outcome: sink.Destination, Err: errors.New("table missing"), Shared: true})
		}
		return results(len(b), sink.Ok)
	}}
	r := &Runner{Consumer: c, Conn: e.nc, Sink: fs,
		Retry: Retry{Mode: ModeFixed, Backoff: new(20 * time.Millisecond), Jitter: JitterNone}}
	start(t, r)
	e.waitAcked(c, 3)
	if st := r.Status(); st.CircuitOpen || st.SinkUnhealthy {
		t.Errorf("Status() = %+v, want circuit closed after a commit", st)
	}
}

func TestFailFastOnDestination(t *testing.T) {
	e := newEnv(t, false)
	c := e.consumer(ConsumerSpec{})
	e.publish(2)
	fs := &funcSink{write: func(ctx context.Context, b []*sink.Envelope) []sink.Result {
		return results(len(b), sink.Result{Outcome: sink.Destination, Err: errors.New("permission denied"), Shared: true})
	}}
	r := &Runner{Consumer: c, Conn: e.nc, Sink: fs, FailFast: true}
	err := r.Run(t.Context())
	if !errors.Is(err, ErrFailFast) {
		t.Fatalf("Run() = %v, want an ErrFailFast error", err)
	}
	if info := e.info(c); info.AckFloor.Stream != 0 {
		t.Errorf("AckFloor.Stream = %d, want 0", info.AckFloor.Stream)
	}
}

func TestConsumerDeletedStopsRun(t *testing.T) {
	e := newEnv(t, false)
	c := e.consumer(ConsumerSpec{})
	r := &Runner{Consumer: c, Conn: e.nc, Sink: &funcSink{write: func(ctx context.Context, b []*sink.Envelope) []sink.Result {
		return results(len(b), sink.Ok)
	}}, BatchTimeout: 50 * time.Millisecond}
	done := make(chan error, 1)
	go func() { done <- r.Run(t.Context()) }()
	natstest.WaitFor(t, waitLong, func() error {
		if !r.Status().Bound {
			return errors.New("not bound")
		}
		return nil
	})
	if err := e.js.DeleteConsumer(t.Context(), testStream, testConsumer); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrConsumerNotFound) {
			t.Errorf("Run() = %v, want ErrConsumerNotFound", err)
		}
	case <-time.After(waitLong):
		t.Fatal("Run did not return after the consumer was deleted")
	}
}

func TestPanickingSinkRedelivers(t *testing.T) {
	e := newEnv(t, false)
	c := e.consumer(ConsumerSpec{})
	e.publish(2)
	var calls atomic.Int64
	fs := &funcSink{write: func(ctx context.Context, b []*sink.Envelope) []sink.Result {
		if calls.Add(1) == 1 {
			panic("boom")
		}
		return results(len(b), sink.Ok)
	}}
	m := newMetrics(t)
	start(t, &Runner{Consumer: c, Conn: e.nc, Sink: fs, Metrics: m, BatchTimeout: 100 * time.Millisecond,
		Retry: Retry{Mode: ModeFixed, Backoff: new(10 * time.Millisecond), Jitter: JitterNone}})
	e.waitAcked(c, 2)
	if got := m.MessagesNacked.Value(); got != 2 {
		t.Errorf("messages_nacked_total = %d, want 2", got)
	}
}

func TestEncryptHook(t *testing.T) {
	e := newEnv(t, false)
	c := e.consumer(ConsumerSpec{})
	e.publish(2)
	var fail atomic.Bool
	fail.Store(true)
	var seen sync.Map
	fs := &funcSink{write: func(ctx context.Context, b []*sink.Envelope) []sink.Result {
		for _, env := range b {
			seen.Store(env.StreamSequence, string(env.Data))
		}
		return results(len(b), sink.Ok)
	}}
	m := newMetrics(t)
	start(t, &Runner{Consumer: c, Conn: e.nc, Sink: fs, Metrics: m, BatchTimeout: 100 * time.Millisecond,
		Retry: Retry{Mode: ModeFixed, Backoff: new(10 * time.Millisecond), Jitter: JitterNone},
		Encrypt: func(env *sink.Envelope) error {
			if fail.Swap(false) {
				return errors.New("key unavailable")
			}
			env.Data = []byte("sealed")
			return nil
		}})
	e.waitAcked(c, 2)
	if got := m.PayloadEncryptionErrors.Value(); got != 2 {
		t.Errorf("payload_encryption_errors_total = %d, want 2 (whole batch)", got)
	}
	for _, seq := range []uint64{1, 2} {
		if v, _ := seen.Load(seq); v != "sealed" {
			t.Errorf("sink saw data %q for seq %d, want the encrypted bytes", v, seq)
		}
	}
}

// TestServerRestartLosesNothing restarts the embedded server (same port and
// store) mid-run: every message is eventually written and acknowledged.
func TestServerRestartLosesNothing(t *testing.T) {
	e := newEnv(t, false)
	c := e.consumer(ConsumerSpec{AckWait: new(2 * time.Second)})
	e.publish(200)
	var written sync.Map
	fs := &funcSink{write: func(ctx context.Context, b []*sink.Envelope) []sink.Result {
		for _, env := range b {
			written.Store(env.StreamSequence, true)
		}
		return results(len(b), sink.Ok)
	}}
	start(t, &Runner{Consumer: c, Conn: e.nc, Sink: fs, BatchSize: 20, MaxInFlight: 2,
		Retry: Retry{Mode: ModeFixed, Backoff: new(50 * time.Millisecond), Jitter: JitterNone}})
	natstest.WaitFor(t, waitLong, func() error {
		if fs.callCount() < 2 {
			return errors.New("not writing yet")
		}
		return nil
	})
	// Connected alone is not enough: right after the restart the client
	// may not have noticed the old connection's end yet.
	reconnects := e.nc.Stats().Reconnects
	e.srv = natstest.Restart(t, e.srv)
	natstest.WaitFor(t, waitLong, func() error {
		if e.nc.Stats().Reconnects == reconnects || !e.nc.IsConnected() {
			return errors.New("client not reconnected")
		}
		return nil
	})
	e.publish(100)
	natstest.WaitFor(t, 40*time.Second, func() error {
		for seq := uint64(1); seq <= 300; seq++ {
			if _, ok := written.Load(seq); !ok {
				return fmt.Errorf("stream seq %d not written", seq)
			}
		}
		return nil
	})
	e.waitAcked(c, 300)
}

// flakyConsumer fails Fetch while broken is set, as a leader change or a
// request timeout would.
type flakyConsumer struct {
	jetstream.Consumer
	broken atomic.Bool
}

func (c *flakyConsumer) Fetch(n int, opts ...jetstream.FetchOpt) (jetstream.MessageBatch, error) {
	if c.broken.Load() {
		return nil, errors.New("nats: timeout")
	}
	return c.Consumer.Fetch(n, opts...)
}

func TestFetchFailuresTurnReadinessOff(t *testing.T) {
	e := newEnv(t, false)
	c := e.consumer(ConsumerSpec{})
	fc := &flakyConsumer{Consumer: c}
	fc.broken.Store(true)
	fs := &funcSink{write: func(ctx context.Context, b []*sink.Envelope) []sink.Result { return results(len(b), sink.Ok) }}
	r := &Runner{Consumer: fc, Conn: e.nc, Sink: fs, BatchTimeout: 50 * time.Millisecond}
	start(t, r)
	natstest.WaitFor(t, waitLong, func() error {
		if !r.Status().FetchFailing {
			return errors.New("Status().FetchFailing = false")
		}
		return nil
	})
	fc.broken.Store(false)
	e.publish(2)
	e.waitAcked(c, 2)
	if st := r.Status(); st.FetchFailing || !st.Bound {
		t.Errorf("Status() = %+v after recovery, want bound and not failing", st)
	}
}

// TestShutdownCancelsLingeringFetch: ending ctx cancels a waiting fetch
// instead of holding shutdown for BatchTimeout.
func TestShutdownCancelsLingeringFetch(t *testing.T) {
	e := newEnv(t, false)
	c := e.consumer(ConsumerSpec{})
	r := &Runner{Consumer: c, Conn: e.nc, Sink: &funcSink{}, BatchTimeout: 5 * time.Minute}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	natstest.WaitFor(t, waitLong, func() error {
		if n := e.info(c).NumWaiting; n != 1 {
			return fmt.Errorf("NumWaiting = %d, want 1 (a lingering pull request)", n)
		}
		return nil
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	case <-time.After(waitLong):
		t.Fatal("Run still waiting on its fetch after ctx ended")
	}
}

// TestLogsAreSafe runs failure paths with the product logger and checks that
// records carry only allowed keys and never payloads or header values.
func TestLogsAreSafe(t *testing.T) {
	e := newEnv(t, true)
	c := e.consumer(ConsumerSpec{MaxDeliver: new(2)})
	const secretBody = `{"card":"4111111111111111"}`
	const secretHeader = "tenant-secret-value"
	for range 3 {
		natstest.Publish(t, e.js, "orders.created", []byte(secretBody), nats.Header{"X-Tenant": {secretHeader}})
	}
	var calls atomic.Int64
	fs := &funcSink{write: func(ctx context.Context, b []*sink.Envelope) []sink.Result {
		out := make([]sink.Result, len(b))
		for i, env := range b {
			switch {
			case env.StreamSequence == 1:
				out[i] = sink.Result{Outcome: sink.Permanent, ErrorType: sink.SerializationError, Err: errors.New("not valid JSON")}
			case env.StreamSequence == 2 && calls.Add(1) == 1:
				panic("sink bug")
			default:
				out[i] = sink.Result{Outcome: sink.Temporary, Err: errors.New("timeout")}
			}
		}
		return out
	}}
	var buf syncBuffer
	m := newMetrics(t)
	start(t, &Runner{Consumer: c, JetStream: e.js, Conn: e.nc, Sink: fs, Metrics: m, DeadLetter: dlqOptions(),
		Logger: telemetry.NewLogger(&buf, "json", "DEBUG"), BatchTimeout: 50 * time.Millisecond,
		Retry: Retry{Mode: ModeFixed, Backoff: new(10 * time.Millisecond), Jitter: JitterNone}})
	e.waitAcked(c, 3) // seq 1 dead-lettered, 2 and 3 after MaxDeliver
	out := buf.String()
	logtest.AssertLogKeys(t, out)
	logtest.AssertLogSafe(t, out, secretBody, "4111111111111111", secretHeader)
	for _, want := range []string{`"msg":"permanent failure dead-lettered"`, `"msg":"temporary failure; batch will be redelivered"`, `"component":"dlq"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log output lacks %s", want)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestHeadersOnlyNotEncrypted: an omitted payload is never handed to the
// Encrypt hook (docs/migrating.md Q14) and still commits and acknowledges.
func TestHeadersOnlyNotEncrypted(t *testing.T) {
	e := newEnv(t, false)
	c := e.consumer(ConsumerSpec{HeadersOnly: new(true)})
	e.publish(2)
	var omitted atomic.Int64
	fs := &funcSink{write: func(ctx context.Context, b []*sink.Envelope) []sink.Result {
		for _, env := range b {
			if env.Payload.Omitted && len(env.Data) == 0 {
				omitted.Add(1)
			}
		}
		return results(len(b), sink.Ok)
	}}
	var encrypted atomic.Int64
	start(t, &Runner{Consumer: c, Conn: e.nc, Sink: fs, Encrypt: func(*sink.Envelope) error {
		encrypted.Add(1)
		return nil
	}})
	e.waitAcked(c, 2)
	if got := encrypted.Load(); got != 0 {
		t.Errorf("Encrypt called %d times for headers-only messages, want 0", got)
	}
	if got := omitted.Load(); got != 2 {
		t.Errorf("sink saw %d omitted payloads, want 2", got)
	}
}
