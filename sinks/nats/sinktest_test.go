package natssink

import (
	"strconv"
	"testing"
	"time"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sink/sinktest"
)

// TestConformance runs the sink contract suite against a target stream on
// an embedded server. ReadBack identifies each stored message by the
// Nats-Sinks-Original-Stream/-Sequence headers the sink adds.
func TestConformance(t *testing.T) {
	_, nc, js := serverWithStream(t, "COPY", "copy.>")
	sinktest.Run(t, sinktest.Harness{
		Open: func(t *testing.T) sink.Sink {
			s, err := New(t.Context(), prefixed("copy"), deps(nc))
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			return s
		},
		ReadBack: func(t *testing.T) []sinktest.Stored {
			var out []sinktest.Stored
			for _, m := range stored(t, js, "COPY") {
				seq, err := strconv.ParseUint(m.Header.Get(HeaderOriginalSequence), 10, 64)
				if err != nil {
					t.Fatalf("stored message %d: bad %s: %v", m.Sequence, HeaderOriginalSequence, err)
				}
				out = append(out, sinktest.Stored{Stream: m.Header.Get(HeaderOriginalStream), Sequence: seq})
			}
			return out
		},
		// The target stream's duplicate window absorbs redeliveries.
		Idempotent: true,
		// Without stream metadata or a message id the core key falls back
		// to the payload hash; a headers-only message has none at all.
		Poison: func(stream string, seq uint64) *sink.Envelope {
			return intake.Build(intake.Message{Subject: "sinktest." + stream,
				Header: map[string][]string{"Nats-Msg-Size": {"64"}}}, nil, time.Now())
		},
	})
}
