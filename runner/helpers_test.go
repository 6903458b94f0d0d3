package runner

import (
	"context"
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
	"github.com/nats-sinks/nats-sink/telemetry"
)

const (
	testStream   = "ORDERS"
	testConsumer = "orders-sink"
	dlqStream    = "DLQ"
	dlqSubject   = "dlq.orders"
	waitLong     = 20 * time.Second
)

// env is one test's embedded server with the orders stream and, optionally,
// a DLQ stream.
type env struct {
	t   *testing.T
	srv *server.Server
	nc  *nats.Conn
	js  jetstream.JetStream
}

func newEnv(t *testing.T, withDLQ bool) *env {
	t.Helper()
	s := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: testStream, Subjects: []string{"orders.>"}})
	if withDLQ {
		natstest.CreateStream(t, js, jetstream.StreamConfig{Name: dlqStream, Subjects: []string{"dlq.>"}})
	}
	return &env{t: t, srv: s, nc: nc, js: js}
}

// consumer creates the durable consumer through EnsureConsumer. ackWait
// long by default so that nothing redelivers behind a test's back.
func (e *env) consumer(spec ConsumerSpec) jetstream.Consumer {
	e.t.Helper()
	spec.Stream, spec.Name, spec.Subject = testStream, testConsumer, "orders.>"
	if spec.AckWait == nil {
		spec.AckWait = new(30 * time.Second)
	}
	c, _, err := EnsureConsumer(e.t.Context(), e.js, spec)
	if err != nil {
		e.t.Fatalf("EnsureConsumer: %v", err)
	}
	return c
}

func (e *env) publish(n int) {
	e.t.Helper()
	natstest.PublishN(e.t, e.js, "orders.created", n, func(i int) []byte {
		return fmt.Appendf(nil, `{"n":%d}`, i+1)
	})
}

func (e *env) info(c jetstream.Consumer) *jetstream.ConsumerInfo {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := c.Info(ctx)
	if err != nil {
		e.t.Fatalf("consumer info: %v", err)
	}
	return info
}

// waitAcked waits until the consumer's ack floor reaches seq with nothing
// pending acknowledgement.
func (e *env) waitAcked(c jetstream.Consumer, seq uint64) {
	e.t.Helper()
	natstest.WaitFor(e.t, waitLong, func() error {
		info := e.info(c)
		if info.AckFloor.Stream != seq || info.NumAckPending != 0 {
			return fmt.Errorf("AckFloor.Stream = %d, NumAckPending = %d, want %d, 0", info.AckFloor.Stream, info.NumAckPending, seq)
		}
		return nil
	})
}

// dlqMessages returns every message in the DLQ stream.
func (e *env) dlqMessages() []*jetstream.RawStreamMsg {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := e.js.Stream(ctx, dlqStream)
	if err != nil {
		e.t.Fatalf("dlq stream: %v", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		e.t.Fatalf("dlq stream info: %v", err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			e.t.Fatalf("dlq get %d: %v", seq, err)
		}
		out = append(out, m)
	}
	return out
}

// start runs r in the background. The returned stop cancels Run's context
// and returns Run's error; it is also registered as a cleanup.
func start(t *testing.T, r *Runner) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(waitLong):
				err = errors.New("Run did not return within 20s")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func newMetricsB(b *testing.B) *telemetry.Metrics {
	b.Helper()
	m, err := telemetry.NewMetrics(nil, "nats_sinks")
	if err != nil {
		b.Fatalf("NewMetrics: %v", err)
	}
	return m
}

func newMetrics(t *testing.T) *telemetry.Metrics {
	t.Helper()
	m, err := telemetry.NewMetrics(nil, "nats_sinks")
	if err != nil {
		t.Fatalf("NewMetrics: %v", err)
	}
	return m
}

// funcSink is a sink whose WriteBatch is a function; it records every call.
type funcSink struct {
	write func(ctx context.Context, b []*sink.Envelope) []sink.Result

	mu    sync.Mutex
	calls [][]uint64 // stream sequences per call
}

func (s *funcSink) Type() string { return "fake" }

func (s *funcSink) WriteBatch(ctx context.Context, b []*sink.Envelope) []sink.Result {
	s.mu.Lock()
	s.calls = append(s.calls, seqs(b))
	s.mu.Unlock()
	return s.write(ctx, b)
}

func (s *funcSink) Stop(context.Context) error { return nil }

func (s *funcSink) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

func seqs(b []*sink.Envelope) []uint64 {
	out := make([]uint64, len(b))
	for i, e := range b {
		out[i] = e.StreamSequence
	}
	return out
}

func results(n int, r sink.Result) []sink.Result {
	out := make([]sink.Result, n)
	for i := range out {
		out[i] = r
	}
	return out
}

// committedLog collects committed stream sequences in commit order.
type committedLog struct {
	mu   sync.Mutex
	seqs []uint64
}

func (l *committedLog) add(b []*sink.Envelope) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seqs = append(l.seqs, seqs(b)...)
}

func (l *committedLog) get() []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]uint64(nil), l.seqs...)
}

// logRecorder is a slog.Handler that keeps every record's message.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.msgs = append(h.msgs, r.Message)
	h.mu.Unlock()
	return nil
}
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecorder) WithGroup(string) slog.Handler      { return h }

func (h *logRecorder) count(msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.msgs {
		if m == msg {
			n++
		}
	}
	return n
}
