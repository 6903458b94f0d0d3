package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// TestFaultServerRestart stops the nats-server mid-run and starts it again
// on the same port and store after an outage, while the connector writes one
// fsynced file per message. The connector must reconnect by itself and
// finish: exactly one file per message, everything acknowledged, nothing
// pending. ACKs lost with the connection come back as redeliveries, which
// the file sink absorbs as duplicates; their count is logged.
func TestFaultServerRestart(t *testing.T) {
	n, rounds, outage := 6000, 1, 2*time.Second
	if soak() {
		n, rounds, outage = 30000, 5, 5*time.Second
	}
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "FRESTART", Subjects: []string{"frestart.>"}})
	natstest.PublishN(t, js, "frestart.events", n, body)

	out := t.TempDir()
	d := newRunDoc([]string{s.ClientURL()}, "FRESTART", "frestart", "frestart.>", fileSink(out))
	p := startMember(t, d)

	for round := range rounds {
		// Progress first, so the outage hits batches in flight.
		want := float64(n) * float64(round+1) / float64(rounds+2)
		poll(t, 2*time.Minute, func() error {
			if c := p.counts(t); c.acked < want {
				return fmt.Errorf("%.0f acked, waiting for %.0f", c.acked, want)
			}
			return nil
		})
		before := p.counts(t)
		if before.acked >= float64(n) {
			t.Fatalf("round %d: every message was acknowledged before the outage; the test no longer hits a run in flight", round)
		}
		s = restartServer(t, s, outage)
		t.Logf("round %d: server down for %v after %s", round, outage, before)
	}

	waitAllAcked(t, js, "FRESTART", "frestart", n, 3*time.Minute)
	p.settle(t)
	redelivered := redeliveries(t, js, "FRESTART", "frestart", n)
	c := p.counts(t)
	t.Logf("done: %d redeliveries (consumer deliveries − %d); connector %s", redelivered, n, c)
	if c.reconnects < float64(rounds) {
		t.Errorf("connector reports %.0f reconnections, want at least %d: the outage went unnoticed", c.reconnects, rounds)
	}
	p.stop(t)
	checkFiles(t, out, "FRESTART", n)
}

// restartServer shuts s down, keeps it down for outage, and starts a new
// server on the same port and store (natstest.Restart without the pause).
func restartServer(t *testing.T, s *server.Server, outage time.Duration) *server.Server {
	t.Helper()
	port, dir := natstest.Port(s), s.StoreDir()
	s.Shutdown()
	s.WaitForShutdown()
	time.Sleep(outage) // the outage itself: clients see a refused connection
	var (
		ns  *server.Server
		err error
	)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ns, err = natstest.StartOn(dir, port); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("restart nats-server on port %d: %v", port, err)
	}
	t.Cleanup(ns.Shutdown)
	return ns
}
