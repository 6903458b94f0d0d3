package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// TestCrashRecovery kills the real binary with SIGKILL at random moments
// while it writes 20,000 messages with fsync, restarts it each time, and
// checks the end state: exactly one correct file per message, no temp files,
// and the consumer's ack floor at the last sequence.
func TestCrashRecovery(t *testing.T) {
	const n = 20000
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "CRASH", Subjects: []string{"crash.>"}})
	natstest.PublishN(t, js, "crash.events", n, body)

	out := t.TempDir()
	cfg := fileConfig(t, s.ClientURL(), "CRASH", "crash-file", "crash.>", out, "")
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("random seed %d", seed)

	ctx := context.Background()
	for round := range 5 {
		p := start(t, cfg)
		// Kill at a random moment: some rounds die during start-up, most
		// mid-batch with files, links and fsyncs in flight.
		time.Sleep(time.Duration(200+rng.IntN(1500)) * time.Millisecond)
		p.kill(t)
		floor, pending, err := ackState(ctx, js, "CRASH", "crash-file")
		t.Logf("round %d: killed; ack floor %d, ack pending %d (%v)", round, floor, pending, err)
	}

	p := start(t, cfg)
	natstest.WaitFor(t, 3*time.Minute, func() error {
		floor, pending, err := ackState(ctx, js, "CRASH", "crash-file")
		if err != nil {
			return err
		}
		if floor != n || pending != 0 {
			return fmt.Errorf("ack floor %d, ack pending %d; want %d, 0", floor, pending, n)
		}
		return nil
	})
	// The last kill may have come after everything was written: wait until
	// this process is up and fetching, so SIGTERM tests the graceful stop.
	waitFetching(t, js, "CRASH", "crash-file")
	p.stop(t)
	checkFiles(t, out, "CRASH", n)
}
