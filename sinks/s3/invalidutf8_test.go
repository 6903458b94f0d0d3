package s3sink

import (
	"testing"

	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/sink"
)

// TestRedeliveryInvalidUTF8: a message whose subject and message id hold
// invalid UTF-8 is stored once; its redelivery finds its own object and is
// acknowledged as a duplicate, not refused as another message's object
// (the object's record stores those bytes as U+FFFD).
func TestRedeliveryInvalidUTF8(t *testing.T) {
	for _, strategy := range []string{"stream_sequence", "message_id", "payload_sha256"} {
		t.Run(strategy, func(t *testing.T) {
			st := newStore(t)
			c := st.config()
			c.KeyStrategy = strategy
			s, _ := open(t, c)
			msg := func() *sink.Envelope {
				e := shapestest.Golden()
				e.Subject = "orders.\x8e"
				e.MessageID = "id-\xff"
				return e
			}
			if rs := s.WriteBatch(t.Context(), []*sink.Envelope{msg()}); rs[0].Outcome != sink.Committed {
				t.Fatalf("first delivery: %v %v", rs[0].Outcome, rs[0].Err)
			}
			if rs := s.WriteBatch(t.Context(), []*sink.Envelope{msg()}); !rs[0].Outcome.Acked() {
				t.Fatalf("redelivery: %v %v, want acknowledged as a duplicate", rs[0].Outcome, rs[0].Err)
			}
		})
	}
}
