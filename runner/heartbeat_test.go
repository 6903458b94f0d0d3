package runner

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/sink"
)

// stallConsumer is a consumer without messages whose fetches can be made to
// hang: what a fetch loop stuck in the client looks like. Methods the runner
// does not call panic through the nil embedded interface.
type stallConsumer struct {
	jetstream.Consumer
	mu    sync.Mutex
	stall chan struct{} // non-nil: fetches block until it closes
}

func (c *stallConsumer) CachedInfo() *jetstream.ConsumerInfo {
	return &jetstream.ConsumerInfo{Name: "c", Config: jetstream.ConsumerConfig{MaxAckPending: -1}}
}

func (c *stallConsumer) Info(context.Context) (*jetstream.ConsumerInfo, error) {
	return c.CachedInfo(), nil
}

func (c *stallConsumer) block() {
	c.mu.Lock()
	ch := c.stall
	c.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

func (c *stallConsumer) FetchNoWait(int) (jetstream.MessageBatch, error) {
	c.block()
	return emptyBatch(nil), nil
}

// Fetch returns an empty batch after a lingering fetch's expiry (the
// runner's BatchTimeout in TestHeartbeat).
func (c *stallConsumer) Fetch(int, ...jetstream.FetchOpt) (jetstream.MessageBatch, error) {
	c.block()
	time.Sleep(100 * time.Millisecond)
	return emptyBatch(nil), nil
}

type emptyBatch chan jetstream.Msg

func (emptyBatch) Messages() <-chan jetstream.Msg {
	ch := make(chan jetstream.Msg)
	close(ch)
	return ch
}
func (emptyBatch) Error() error { return nil }

// TestHeartbeat checks the fetch loop's liveness signal: it follows the
// clock while the loop goes round, stays where it was while a fetch hangs,
// and keeps following the clock while every slot holds a batch whose write
// is still running (a deliberate wait, not a stall).
func TestHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &stallConsumer{}
		r := &Runner{Consumer: c, Sink: &funcSink{write: func(context.Context, []*sink.Envelope) []sink.Result { return nil }},
			BatchTimeout: 100 * time.Millisecond}
		if hb := r.Status().Heartbeat; !hb.IsZero() {
			t.Fatalf("Heartbeat before Run = %v, want zero", hb)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()

		time.Sleep(time.Minute)
		synctest.Wait()
		if age := time.Since(r.Status().Heartbeat); age > time.Second {
			t.Errorf("heartbeat age while the loop goes round = %v, want under 1s", age)
		}

		// The next fetch hangs.
		stall := make(chan struct{})
		c.mu.Lock()
		c.stall = stall
		c.mu.Unlock()
		time.Sleep(time.Second) // the loop enters the hanging fetch
		synctest.Wait()
		stuck := r.Status().Heartbeat
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if got := r.Status().Heartbeat; !got.Equal(stuck) {
			t.Errorf("heartbeat moved from %v to %v while the fetch hung", stuck, got)
		}
		if age := time.Since(r.Status().Heartbeat); age < 5*time.Minute {
			t.Errorf("heartbeat age after a 5 min hang = %v, want at least 5m", age)
		}
		close(stall) // the fetch returns; the loop goes round again
		c.mu.Lock()
		c.stall = nil
		c.mu.Unlock()
		time.Sleep(time.Second)
		synctest.Wait()
		if age := time.Since(r.Status().Heartbeat); age > time.Second {
			t.Errorf("heartbeat age after the fetch returned = %v, want under 1s", age)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v", err)
		}
	})
}

// TestHeartbeatWhileSlotsBusy checks that a loop waiting for a free slot,
// with every slot holding a batch in its write, counts as alive.
func TestHeartbeatWhileSlotsBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &Runner{MaxInFlight: 1}
		slots := make(chan struct{}, 1)
		slots <- struct{}{} // the one slot holds a batch
		ctx, cancel := context.WithCancel(t.Context())
		got := make(chan bool, 1)
		go func() { got <- r.acquire(ctx, slots) }()
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if age := time.Since(r.Status().Heartbeat); age != 0 {
			t.Errorf("heartbeat age while waiting for a slot = %v, want 0 (the current time)", age)
		}
		<-slots // the write finished
		if !<-got {
			t.Fatal("acquire = false after a slot freed")
		}
		time.Sleep(time.Minute)
		if age := time.Since(r.Status().Heartbeat); age != time.Minute {
			t.Errorf("heartbeat age a minute after the wait ended = %v, want 1m", age)
		}
		cancel()
	})
}
