package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// TestFaultClusterNodeKill runs the connector against a 3-node JetStream
// cluster with an R3 stream and consumer, and stops the node the connector
// is attached to mid-run. Before the fault, the stream and consumer leaders
// are moved onto that node, so one node loss takes the connection, the
// stream leader and the consumer leader at once (the worst case for a
// single failure). The connector lists all three URLs and must fail over,
// re-issue its pulls to the new consumer leader and finish: exactly one file
// per message, everything acknowledged, nothing pending. The node is then
// started again and must catch up with the consumer's state.
func TestFaultClusterNodeKill(t *testing.T) {
	n, rounds := 8000, 1
	if soak() {
		n, rounds = 40000, 3
	}
	c := natstest.RunCluster(t, 3)
	nc, js := c.Connect(t, nats.Name("fault-cluster-test"))
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "FCLUSTER", Subjects: []string{"fcluster.>"}, Replicas: 3})
	c.WaitStreamCurrent(t, js, "FCLUSTER")

	out := t.TempDir()
	d := newRunDoc(c.URLs(), "FCLUSTER", "fcluster", "fcluster.>", fileSink(out))
	d.NATS["name"] = "fault-cluster-connector"
	d.Consumer["num_replicas"] = 3
	p := startMember(t, d)
	c.WaitConsumerCurrent(t, js, "FCLUSTER", "fcluster")

	// placeLeaders moves the stream and consumer leaders onto the node the
	// connector is attached to, and returns that node.
	placeLeaders := func() int {
		node := c.ConnectedNode("fault-cluster-connector")
		if node < 0 {
			t.Fatal("no cluster node holds the connector's connection")
		}
		c.StepDown(t, nc, js, "FCLUSTER", "", node)
		c.StepDown(t, nc, js, "FCLUSTER", "fcluster", node)
		c.WaitConsumerCurrent(t, js, "FCLUSTER", "fcluster")
		if got := c.ConnectedNode("fault-cluster-connector"); got != node {
			t.Fatalf("connector moved from node %d to %d while the leaders moved", node, got)
		}
		t.Logf("connector, stream leader and consumer leader on %s", c.Name(node))
		return node
	}
	// acked waits until the connector acknowledged at least want messages.
	acked := func(want int) counts {
		poll(t, 2*time.Minute, func() error {
			if got := p.counts(t); got.acked < float64(want) {
				return fmt.Errorf("%.0f acked, waiting for %d", got.acked, want)
			}
			return nil
		})
		return p.counts(t)
	}

	node := placeLeaders()
	natstest.PublishN(t, js, "fcluster.events", n, body)
	var lost time.Time
	for round := range rounds {
		if round > 0 {
			node = placeLeaders()
		}
		// Stop the node with work in flight, let the two survivors make
		// progress, then bring it back while the run goes on.
		step := n / (2*rounds + 2)
		before := acked((2*round + 1) * step)
		if before.acked >= float64(n) {
			t.Fatalf("round %d: every message was acknowledged before the node was stopped; the test no longer hits a run in flight", round)
		}
		lost = time.Now()
		c.Stop(node)
		t.Logf("round %d: stopped %s after %s", round, c.Name(node), before)
		acked((2*round + 2) * step)
		t.Logf("round %d: progress on two nodes %v after the loss; connector now on node %d",
			round, time.Since(lost).Round(100*time.Millisecond), c.ConnectedNode("fault-cluster-connector"))
		c.Start(t, node)
		c.WaitMetaLeader(t)
	}

	waitAllAcked(t, js, "FCLUSTER", "fcluster", n, 3*time.Minute)
	c.WaitConsumerCurrent(t, js, "FCLUSTER", "fcluster")
	p.settle(t)
	redelivered := redeliveries(t, js, "FCLUSTER", "fcluster", n)
	got := p.counts(t)
	t.Logf("done %v after the last loss: %d redeliveries (consumer deliveries − %d); connector %s",
		time.Since(lost).Round(100*time.Millisecond), redelivered, n, got)
	if got.reconnects < float64(rounds) {
		t.Errorf("connector reports %.0f reconnections, want at least %d: the node loss went unnoticed", got.reconnects, rounds)
	}
	p.stop(t)
	checkFiles(t, out, "FCLUSTER", n)
}
