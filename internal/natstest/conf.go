package natstest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// StartConf runs a server from nats-server configuration text (listen,
// jetstream, accounts, leafnodes, max_payload, …), without logging or
// signal handling. The caller shuts it down.
func StartConf(conf string) (*server.Server, error) {
	o := &server.Options{}
	if err := o.ProcessConfigString(conf); err != nil {
		return nil, fmt.Errorf("server configuration: %w", err)
	}
	o.NoLog, o.NoSigs = true, true
	s, err := server.NewServer(o)
	if err != nil {
		return nil, fmt.Errorf("new server: %w", err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, errors.New("server not ready after 10s")
	}
	return s, nil
}

// RunConf is StartConf for a test: it fails the test on error and shuts the
// server down when the test ends.
func RunConf(t testing.TB, conf string) *server.Server {
	t.Helper()
	s, err := StartConf(conf)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// Leaf is a hub server and a leaf node connected to it, each with its own
// JetStream domain ("hub" and "leaf"), both in the global account. A client
// of the leaf reaches the hub's streams through the "hub" domain (or the
// API prefix "$JS.hub.API"), as an edge site reaches a central cluster.
type Leaf struct {
	Hub, Leaf *server.Server
}

// RunLeaf starts a hub and a leaf node, waits until the leaf link is up and
// the hub's JetStream API answers through it, and shuts both down when the
// test ends.
func RunLeaf(t testing.TB) *Leaf {
	t.Helper()
	ports := freePorts(t, 1)
	hub := RunConf(t, fmt.Sprintf(`
server_name: hub
listen: "127.0.0.1:-1"
jetstream { store_dir: %q, domain: hub }
leafnodes { listen: "127.0.0.1:%d" }`, t.TempDir(), ports[0]))
	leaf := RunConf(t, fmt.Sprintf(`
server_name: leaf
listen: "127.0.0.1:-1"
jetstream { store_dir: %q, domain: leaf }
leafnodes { remotes: [ { url: "nats://127.0.0.1:%d" } ] }`, t.TempDir(), ports[0]))
	l := &Leaf{Hub: hub, Leaf: leaf}
	WaitFor(t, clusterTimeout, func() error {
		if hub.NumLeafNodes() != 1 || leaf.NumLeafNodes() != 1 {
			return fmt.Errorf("leaf connections: hub %d, leaf %d, want 1, 1", hub.NumLeafNodes(), leaf.NumLeafNodes())
		}
		return nil
	})
	// Interest in the hub's domain API crosses the link shortly after the
	// link itself is up.
	nc, _ := Connect(t, leaf)
	js, err := jetstream.NewWithDomain(nc, "hub")
	if err != nil {
		t.Fatalf("natstest: jetstream: %v", err)
	}
	WaitFor(t, clusterTimeout, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err
	})
	nc.Close()
	return l
}
