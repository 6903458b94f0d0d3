package natstest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestCluster checks what the fault-injection tests rely on: a 3-node
// cluster holds an R3 stream, the leader can be moved to a chosen node, a
// client named on connect is found on its node, stopping that node elects a
// new leader on the others with no message lost, and the node comes back on
// its own URL and catches up.
func TestCluster(t *testing.T) {
	c := RunCluster(t, 3)
	if got := len(c.URLs()); got != 3 {
		t.Fatalf("URLs() has %d entries, want 3", got)
	}
	nc, js := c.Connect(t, nats.Name("natstest-cluster"))
	CreateStream(t, js, jetstream.StreamConfig{Name: "CL", Subjects: []string{"cl.>"}, Replicas: 3})
	c.WaitStreamCurrent(t, js, "CL")
	PublishN(t, js, "cl.x", 100, func(i int) []byte { return []byte{byte(i)} })

	node := c.ConnectedNode("natstest-cluster")
	if node < 0 {
		t.Fatal("ConnectedNode found no node holding the named client")
	}
	if other := c.ConnectedNode("no-such-client"); other != -1 {
		t.Errorf("ConnectedNode(no-such-client) = %d, want -1", other)
	}
	c.StepDown(t, nc, js, "CL", "", node)
	if l := streamLeader(t, js, "CL"); l != c.Name(node) {
		t.Fatalf("after StepDown the leader is %q, want %q", l, c.Name(node))
	}

	c.Stop(node)
	if c.Server(node) != nil {
		t.Fatalf("Server(%d) is not nil after Stop", node)
	}
	c.WaitMetaLeader(t)
	WaitFor(t, clusterTimeout, func() error {
		if l := streamLeader(t, js, "CL"); l == "" || l == c.Name(node) {
			return fmt.Errorf("stream leader %q after its node stopped", l)
		}
		return nil
	})
	if got := c.ConnectedNode("natstest-cluster"); got == node || got < 0 {
		t.Errorf("client is on node %d after node %d stopped, want another running node", got, node)
	}
	PublishN(t, js, "cl.x", 50, func(i int) []byte { return []byte{byte(i)} })

	c.Start(t, node)
	c.WaitMetaLeader(t)
	c.WaitStreamCurrent(t, js, "CL")
	st, err := js.Stream(context.Background(), "CL")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 150 {
		t.Errorf("stream holds %d messages after the node loss, want 150", info.State.Msgs)
	}
	// The restarted node serves clients on its old URL.
	one, err := nats.Connect(c.URL(node), nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("connect to restarted node %d: %v", node, err)
	}
	one.Close()
}

func streamLeader(t *testing.T, js jetstream.JetStream, stream string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return ""
	}
	info, err := st.Info(ctx)
	if err != nil || info.Cluster == nil {
		return ""
	}
	return info.Cluster.Leader
}
