package file

import (
	"path/filepath"
	"testing"

	"github.com/nats-sinks/nats-sink/sink"
)

// TestRedeliveryInvalidUTF8: a message whose subject and message id hold
// invalid UTF-8 is stored once; its redelivery (a new delivery, same
// message) finds its own record and is acknowledged as a duplicate, not
// refused as another message's record. The record stores those bytes as
// U+FFFD, so the comparison must use the stored form (found by FuzzPath).
func TestRedeliveryInvalidUTF8(t *testing.T) {
	for _, strategy := range []string{"stream_sequence", "message_id", "payload_sha256"} {
		t.Run(strategy, func(t *testing.T) {
			c := Default()
			c.Directory = filepath.Join(t.TempDir(), "root")
			c.Fsync = false
			c.FilenameStrategy = strategy
			s, err := New(t.Context(), c, sink.Deps{})
			if err != nil {
				t.Fatal(err)
			}
			first := env("orders.\x8e", 7, "id-\xff", "{}")
			if rs := s.WriteBatch(t.Context(), []*sink.Envelope{first}); rs[0].Outcome != sink.Committed {
				t.Fatalf("first delivery: %v %v", rs[0].Outcome, rs[0].Err)
			}
			again := env("orders.\x8e", 7, "id-\xff", "{}")
			if rs := s.WriteBatch(t.Context(), []*sink.Envelope{again}); !rs[0].Outcome.Acked() {
				t.Fatalf("redelivery: %v %v, want acknowledged as a duplicate", rs[0].Outcome, rs[0].Err)
			}
		})
	}
}
