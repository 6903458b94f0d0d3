package runner

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// failingMsg fails its ACK or TERM, as a closed connection would.
type failingMsg struct {
	jetstream.Msg
	ack, term bool
}

var errClosed = errors.New("nats: connection closed")

func (m failingMsg) Ack() error {
	if m.ack {
		return errClosed
	}
	return m.Msg.Ack()
}

func (m failingMsg) Term() error {
	if m.term {
		return errClosed
	}
	return m.Msg.Term()
}

// runFailFast runs r until it stops by itself and returns its error.
func runFailFast(t *testing.T, r *Runner) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- r.Run(t.Context()) }()
	select {
	case err := <-done:
		return err
	case <-time.After(waitLong):
		t.Fatal("Run did not stop by itself (fail_fast)")
		return nil
	}
}

func wantFailFast(t *testing.T, err error, reason string) {
	t.Helper()
	var ff *FailFastError
	if !errors.Is(err, ErrFailFast) || !errors.As(err, &ff) || ff.Reason != reason {
		t.Fatalf("Run() = %v, want a *FailFastError with reason %q", err, reason)
	}
}

// TestFailFastOnAckFailure: a failed ACK stops the runner; the message
// whose ACK failed stays unacknowledged (it is committed: redelivery and
// the sink's duplicate model take care of it), and nothing is fetched
// after the stop.
func TestFailFastOnAckFailure(t *testing.T) {
	e := newEnv(t, false)
	c := e.consumer(ConsumerSpec{})
	e.publish(3)
	wc := &wrapConsumer{Consumer: c, wrap: func(m jetstream.Msg) jetstream.Msg { return failingMsg{Msg: m, ack: true} }}
	fs := perMessageSink(nil, nil)
	m := newMetrics(t)
	err := runFailFast(t, &Runner{Consumer: wc, Conn: e.nc, Sink: fs, Metrics: m, FailFast: true, BatchSize: 3})
	wantFailFast(t, err, "ack")
	if got := m.AckErrors.Value(); got != 3 {
		t.Errorf("ack_errors_total = %d, want 3", got)
	}
	if got := fs.callCount(); got != 1 {
		t.Errorf("WriteBatch calls = %d, want 1 (no fetch after the stop)", got)
	}
	if info := e.info(c); info.AckFloor.Stream != 0 || info.NumAckPending != 3 {
		t.Errorf("AckFloor.Stream, NumAckPending = %d, %d, want 0, 3", info.AckFloor.Stream, info.NumAckPending)
	}
}

// TestFailFastOnTermFailure: with TERM after the DLQ publish, a failed TERM
// stops the runner; the dead letter was published first.
func TestFailFastOnTermFailure(t *testing.T) {
	e := newEnv(t, true)
	c := e.consumer(ConsumerSpec{})
	e.publish(3)
	wc := &wrapConsumer{Consumer: c, wrap: func(m jetstream.Msg) jetstream.Msg { return failingMsg{Msg: m, term: true} }}
	dl := dlqOptions()
	dl.TermAfterPublish = true
	m := newMetrics(t)
	err := runFailFast(t, &Runner{Consumer: wc, JetStream: e.js, Conn: e.nc, Sink: perMessageSink(map[uint64]bool{2: true}, nil),
		DeadLetter: dl, Metrics: m, FailFast: true, BatchSize: 3})
	wantFailFast(t, err, "term")
	if got := m.TermErrors.Value(); got != 1 {
		t.Errorf("term_errors_total = %d, want 1", got)
	}
	if got := len(e.dlqMessages()); got != 1 {
		t.Errorf("%d dead letters, want 1 (published before the TERM)", got)
	}
	// 1 and 3 were ACKed (the batch settles before Run returns), 2 was not.
	natstest.WaitAckState(t, e.js, testStream, testConsumer, 1, 1, waitLong)
}

// TestFailFastOnDLQPublishFailure: a dead letter that cannot be published
// (no stream captures the subject) stops the runner, and the poison
// message is not acknowledged.
func TestFailFastOnDLQPublishFailure(t *testing.T) {
	e := newEnv(t, false) // no DLQ stream
	c := e.consumer(ConsumerSpec{})
	e.publish(3)
	dl := dlqOptions()
	dl.PublishTimeout = 300 * time.Millisecond
	m := newMetrics(t)
	fs := perMessageSink(map[uint64]bool{2: true}, nil)
	err := runFailFast(t, &Runner{Consumer: c, JetStream: e.js, Conn: e.nc, Sink: fs, DeadLetter: dl, Metrics: m,
		FailFast: true, BatchSize: 3, Retry: Retry{Backoff: new(time.Duration(0))}})
	wantFailFast(t, err, "dlq publish")
	if got := m.DLQPublishErrors.Value(); got != 1 {
		t.Errorf("dlq_publish_errors_total = %d, want 1", got)
	}
	if got := fs.callCount(); got != 1 {
		t.Errorf("WriteBatch calls = %d, want 1 (no fetch after the stop)", got)
	}
	// 1 and 3 ACKed; 2 NAKed, never ACKed.
	natstest.WaitAckState(t, e.js, testStream, testConsumer, 1, 1, waitLong)
	if got := m.MessagesAcked.Value(); got != 2 {
		t.Errorf("messages_acked_total = %d, want 2", got)
	}
}
