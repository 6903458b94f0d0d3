package runner

import (
	"context"
	"testing"

	"github.com/nats-sinks/nats-sink/sink"
)

// ignoringSink acknowledges every message but reports the even stream
// sequences as ignored (written nowhere), as the fanout sink does under
// no_match "ignore".
type ignoringSink struct{ funcSink }

func (*ignoringSink) Ignored(e *sink.Envelope) bool { return e.StreamSequence%2 == 0 }

// TestIgnoredMessagesAreNotWritten: messages a sink acknowledges without
// writing are ACKed but left out of messages_written_total.
func TestIgnoredMessagesAreNotWritten(t *testing.T) {
	e := newEnv(t, false)
	c := e.consumer(ConsumerSpec{})
	e.publish(10)
	s := &ignoringSink{funcSink{write: func(_ context.Context, b []*sink.Envelope) []sink.Result {
		return results(len(b), sink.Ok)
	}}}
	m := newMetrics(t)
	start(t, &Runner{Consumer: c, Conn: e.nc, Sink: s, BatchSize: 10, Metrics: m})
	e.waitAcked(c, 10)
	if got := m.MessagesAcked.Value(); got != 10 {
		t.Errorf("messages_acked_total = %d, want 10", got)
	}
	if got := m.MessagesWritten.Value(); got != 5 {
		t.Errorf("messages_written_total = %d, want 5 (the ignored half left out)", got)
	}
}
