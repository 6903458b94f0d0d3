package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/sink"
)

// TestSettled checks that the Settled hook reports every message exactly
// once, with how it ended, for plain and confirmed ACKs and for TERM, and
// never a message that will be delivered again.
func TestSettled(t *testing.T) {
	for _, tt := range []struct {
		name    string
		confirm bool
		term    bool
	}{
		{"plain acks", false, false},
		{"confirmed acks", true, false},
		{"term after dlq", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, true)
			c := e.consumer(ConsumerSpec{MaxDeliver: new(2)})
			e.publish(5)
			s := &funcSink{write: func(ctx context.Context, b []*sink.Envelope) []sink.Result {
				out := make([]sink.Result, len(b))
				for i, env := range b {
					switch env.StreamSequence {
					case 2:
						out[i] = sink.Result{Outcome: sink.Duplicate}
					case 3:
						out[i] = sink.Result{Outcome: sink.Permanent, ErrorType: sink.PermanentSinkError, Err: errors.New("exists")}
					case 4:
						out[i] = sink.Result{Outcome: sink.Temporary, Err: errors.New("busy")}
					default:
						out[i] = sink.Ok
					}
				}
				return out
			}}
			var mu sync.Mutex
			got := map[uint64][]Settlement{}
			dl := dlqOptions()
			dl.OnMaxDeliver = false
			dl.TermAfterPublish = tt.term
			r := &Runner{Consumer: c, JetStream: e.js, Conn: e.nc, Sink: s, DeadLetter: dl, BatchTimeout: 100 * time.Millisecond,
				Retry: Retry{Mode: ModeFixed, Backoff: new(10 * time.Millisecond), Jitter: JitterNone},
				Settled: func(msg jetstream.Msg, st Settlement) {
					md, err := msg.Metadata()
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					got[md.Sequence.Stream] = append(got[md.Sequence.Stream], st)
					mu.Unlock()
				}}
			if tt.confirm {
				r.AckConfirmation = &AckConfirmation{}
			}
			start(t, r)
			want := map[uint64][]Settlement{1: {SettledWritten}, 2: {SettledDuplicate}, 3: {SettledDeadLettered},
				4: {SettledGivenUp}, 5: {SettledWritten}}
			natstest.WaitFor(t, waitLong, func() error {
				mu.Lock()
				defer mu.Unlock()
				if diff := cmp.Diff(want, got); diff != "" {
					return fmt.Errorf("settlements (-want +got):\n%s", diff)
				}
				return nil
			})
		})
	}
}
