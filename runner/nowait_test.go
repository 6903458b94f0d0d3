package runner

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// TestNoWaitOption pins noWaitOpt to the nats.go in go.mod: the request is
// a no-wait request (it returns what is pending without waiting for more,
// and an empty result at once when nothing is), and the byte limit of the
// same Fetch still applies.
func TestNoWaitOption(t *testing.T) {
	opt := noWaitOpt()
	if opt == nil {
		t.Fatal("noWaitOpt() = nil: nats.go's pull request no longer has NoWait and Expires fields; the runner falls back to a timed probe")
	}
	check := func(t *testing.T, js jetstream.JetStream, stream, subject string) {
		t.Helper()
		// Three small messages and three of 400 kB: a request for 10 that
		// allows 1 MB stops after the first two large ones.
		for i := range 3 {
			natstest.Publish(t, js, subject, fmt.Appendf(nil, `{"n":%d}`, i), nil)
		}
		for range 3 {
			natstest.Publish(t, js, subject, make([]byte, 400_000), nil)
		}
		c, err := js.CreateConsumer(t.Context(), stream, jetstream.ConsumerConfig{AckPolicy: jetstream.AckExplicitPolicy, InactiveThreshold: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		fetch := func(maxBytes int) (int, time.Duration) {
			t.Helper()
			start := time.Now()
			// Were the option ignored, this Fetch would wait 30 s (its
			// default expiry) for the ten messages it asks for.
			b, err := c.Fetch(10, jetstream.FetchMaxBytes(maxBytes), opt)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for m := range b.Messages() {
				n++
				m.Ack()
			}
			if err := b.Error(); err != nil {
				t.Fatalf("batch error: %v", err)
			}
			return n, time.Since(start)
		}
		if n, took := fetch(1 << 20); n != 5 || took > 10*time.Second {
			t.Errorf("first fetch: %d messages after %v, want 5 (3 small, 2 large within 1 MB) at once", n, took)
		}
		if n, took := fetch(1 << 20); n != 1 || took > 10*time.Second {
			t.Errorf("second fetch: %d messages after %v, want the last large one at once", n, took)
		}
		if n, took := fetch(1 << 20); n != 0 || took > 10*time.Second {
			t.Errorf("fetch with nothing pending: %d messages after %v, want none at once", n, took)
		}
	}
	t.Run("embedded", func(t *testing.T) {
		e := newEnv(t, false)
		check(t, e.js, testStream, "orders.created")
	})
	t.Run("machine server", func(t *testing.T) {
		url := natstest.Service(t, "NATS_SINKS_TEST_NATS_URL")
		nc, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		id := fmt.Sprint(time.Now().UnixNano())
		stream := "RUNNER_NOWAIT_" + id
		if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: stream, Subjects: []string{"runner-nowait." + id}}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { js.DeleteStream(context.Background(), stream) })
		t.Logf("server %s", nc.ConnectedServerVersion())
		check(t, js, stream, "runner-nowait."+id)
	})
}
