package natstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// clusterTimeout bounds each wait of the cluster helpers: a JetStream meta
// leader election on a loaded 2-core machine takes a few seconds, an R3
// stream or consumer leader election after a node loss about as long.
const clusterTimeout = 30 * time.Second

// Cluster is a JetStream cluster of in-process nats-servers on loopback.
// Every node has its own client port, route port and store directory, and
// routes to every other node, as in a production three-node deployment.
// A node can be stopped and started again on the same ports and store, so
// clients configured with all URLs fail over and the node rejoins with its
// state.
type Cluster struct {
	t    testing.TB
	name string

	mu      sync.Mutex
	opts    []*server.Options
	servers []*server.Server // nil while a node is down
}

// RunCluster starts an n-node JetStream cluster and waits until it has a
// meta leader that every node follows. Every node is shut down when the test
// ends.
func RunCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("natstest: cluster of %d nodes", n)
	}
	ports := freePorts(t, 2*n)
	c := &Cluster{t: t, name: "nats-sink-test", servers: make([]*server.Server, n)}
	routes := make([]*url.URL, n)
	for i := range n {
		routes[i] = &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", ports[n+i])}
	}
	for i := range n {
		c.opts = append(c.opts, &server.Options{
			ServerName: fmt.Sprintf("n%d", i),
			Host:       "127.0.0.1",
			Port:       ports[i],
			JetStream:  true,
			StoreDir:   t.TempDir(),
			NoLog:      true,
			NoSigs:     true,
			Cluster: server.ClusterOpts{
				Name: c.name,
				Host: "127.0.0.1",
				Port: ports[n+i],
			},
			Routes: routes,
		})
	}
	t.Cleanup(c.shutdown)
	// Start every node before waiting on any: a JetStream cluster elects
	// its meta leader only once a quorum of routes is up.
	for i := range n {
		s, err := server.NewServer(c.opts[i])
		if err != nil {
			t.Fatalf("natstest: cluster node %d: %v", i, err)
		}
		s.Start()
		c.servers[i] = s
	}
	for i, s := range c.servers {
		if !s.ReadyForConnections(readyTimeout) {
			t.Fatalf("natstest: cluster node %d not ready after %v", i, readyTimeout)
		}
	}
	c.WaitMetaLeader(t)
	return c
}

// readyTimeout is the per-node bound for accepting clients, as in
// internal/embedded.
const readyTimeout = 10 * time.Second

// freePorts reserves n distinct free TCP ports on loopback. They are
// released before the servers bind them; another process could take one
// in between, which on a test machine is rare enough to fail loudly on.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("natstest: reserve port: %v", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// Size returns the number of nodes, running or not.
func (c *Cluster) Size() int { return len(c.opts) }

// Server returns node i, or nil while it is stopped.
func (c *Cluster) Server(i int) *server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.servers[i]
}

// Name returns node i's server name (n0, n1, …), which JetStream reports
// as stream and consumer leader.
func (c *Cluster) Name(i int) string { return c.opts[i].ServerName }

// URL returns node i's client URL. It stays the same across Stop and Start.
func (c *Cluster) URL(i int) string {
	return fmt.Sprintf("nats://127.0.0.1:%d", c.opts[i].Port)
}

// URLs returns every node's client URL, in node order.
func (c *Cluster) URLs() []string {
	urls := make([]string, c.Size())
	for i := range urls {
		urls[i] = c.URL(i)
	}
	return urls
}

// Stop shuts node i down and waits until it is gone: its clients are
// disconnected and fail over to the other nodes, and the remaining nodes
// elect new leaders for what it led. Stopping a stopped node does nothing.
func (c *Cluster) Stop(i int) {
	c.mu.Lock()
	s := c.servers[i]
	c.servers[i] = nil
	c.mu.Unlock()
	if s != nil {
		s.Shutdown()
		s.WaitForShutdown()
	}
}

// Start starts a stopped node again on its ports and store, as a crashed
// node comes back, and waits until it accepts clients. It does not wait for
// the node to catch up: use WaitMetaLeader and WaitStreamCurrent.
func (c *Cluster) Start(t testing.TB, i int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.servers[i] != nil {
		t.Fatalf("natstest: cluster node %d is already running", i)
	}
	// The old listeners may linger for a moment after Shutdown: retry the
	// bind rather than fail on the first EADDRINUSE.
	var err error
	deadline := time.Now().Add(readyTimeout)
	for {
		var s *server.Server
		if s, err = server.NewServer(c.opts[i]); err == nil {
			s.Start()
			if s.ReadyForConnections(readyTimeout) {
				c.servers[i] = s
				return
			}
			s.Shutdown()
			err = errors.New("not ready")
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("natstest: restart cluster node %d: %v", i, err)
}

// shutdown stops every running node.
func (c *Cluster) shutdown() {
	for i := range c.opts {
		c.Stop(i)
	}
}

// running returns the nodes that are up.
func (c *Cluster) running() []*server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	var up []*server.Server
	for _, s := range c.servers {
		if s != nil {
			up = append(up, s)
		}
	}
	return up
}

// WaitMetaLeader waits until one running node is the JetStream meta leader,
// every running node is current with it, and the leader can place assets
// on every running node. The last is separate: the leader counts a peer for
// placement only once that peer's statistics have arrived, which can be
// after the peer is current, and creating an R3 stream before then fails
// with "no suitable peers for placement".
func (c *Cluster) WaitMetaLeader(t testing.TB) {
	t.Helper()
	WaitFor(t, clusterTimeout, func() error {
		running := c.running()
		var leader *server.Server
		for _, s := range running {
			if s.JetStreamIsLeader() {
				if leader != nil {
					return fmt.Errorf("two JetStream meta leaders: %s and %s", leader.Name(), s.Name())
				}
				leader = s
			}
			if !s.JetStreamIsCurrent() {
				return fmt.Errorf("node %s is not current with the meta leader", s.Name())
			}
		}
		if leader == nil {
			return errors.New("no JetStream meta leader")
		}
		placeable := leader.JetStreamClusterPeers()
		for _, s := range running {
			if !slices.Contains(placeable, s.Name()) {
				return fmt.Errorf("meta leader %s cannot place on node %s yet (placeable: %v)", leader.Name(), s.Name(), placeable)
			}
		}
		return nil
	})
}

// WaitStreamCurrent waits until stream has a leader and every one of its
// replicas is online and current, as seen from js.
func (c *Cluster) WaitStreamCurrent(t testing.TB, js jetstream.JetStream, stream string) {
	t.Helper()
	WaitFor(t, clusterTimeout, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := js.Stream(ctx, stream)
		if err != nil {
			return err
		}
		info, err := st.Info(ctx)
		if err != nil {
			return err
		}
		return replicasCurrent(info.Config.Replicas, info.Cluster)
	})
}

// WaitConsumerCurrent is WaitStreamCurrent for a consumer.
func (c *Cluster) WaitConsumerCurrent(t testing.TB, js jetstream.JetStream, stream, consumer string) {
	t.Helper()
	WaitFor(t, clusterTimeout, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		cons, err := js.Consumer(ctx, stream, consumer)
		if err != nil {
			return err
		}
		info, err := cons.Info(ctx)
		if err != nil {
			return err
		}
		want := info.Config.Replicas
		if want == 0 {
			want = 1 // a consumer inherits its stream's replicas; 0 reports "inherit"
			if st, err := js.Stream(ctx, stream); err == nil {
				if si, err := st.Info(ctx); err == nil {
					want = si.Config.Replicas
				}
			}
		}
		return replicasCurrent(want, info.Cluster)
	})
}

func replicasCurrent(replicas int, ci *jetstream.ClusterInfo) error {
	if ci == nil || ci.Leader == "" {
		return errors.New("no leader")
	}
	if got := len(ci.Replicas) + 1; got < replicas {
		return fmt.Errorf("%d of %d replicas known", got, replicas)
	}
	for _, r := range ci.Replicas {
		if r.Offline || !r.Current {
			return fmt.Errorf("replica %s: offline %v, current %v", r.Name, r.Offline, r.Current)
		}
	}
	return nil
}

// ConnectedNode returns the index of the running node that holds a client
// connection named name (nats.Name), or -1 when none does. Tests use it to
// find the node a subprocess attached to.
func (c *Cluster) ConnectedNode(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, s := range c.servers {
		if s == nil {
			continue
		}
		cz, err := s.Connz(&server.ConnzOptions{Limit: 10000})
		if err != nil {
			continue
		}
		for _, ci := range cz.Conns {
			if ci.Name == name {
				return i
			}
		}
	}
	return -1
}

// Connect opens a client connection to the cluster that knows every node's
// URL and reconnects forever, closed when the test ends.
func (c *Cluster) Connect(t testing.TB, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	all := append([]nats.Option{
		nats.MaxReconnects(-1),
		nats.ReconnectWait(20 * time.Millisecond),
		nats.ReconnectJitter(0, 0),
	}, opts...)
	var urls string
	for i, u := range c.URLs() {
		if i > 0 {
			urls += ","
		}
		urls += u
	}
	nc, err := nats.Connect(urls, all...)
	if err != nil {
		t.Fatalf("natstest: connect to cluster: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: jetstream: %v", err)
	}
	return nc, js
}

// StepDown asks the leader of stream (or, when consumer is not empty, of
// that consumer) to hand leadership to node preferred, and waits until the
// new leader is elected. Tests use it to put the leader where the fault
// will be injected.
func (c *Cluster) StepDown(t testing.TB, nc *nats.Conn, js jetstream.JetStream, stream, consumer string, preferred int) {
	t.Helper()
	subject := "$JS.API.STREAM.LEADER.STEPDOWN." + stream
	if consumer != "" {
		subject = "$JS.API.CONSUMER.LEADER.STEPDOWN." + stream + "." + consumer
	}
	req, _ := json.Marshal(map[string]any{"placement": map[string]string{"preferred": c.Name(preferred)}})
	leader := func() (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var ci *jetstream.ClusterInfo
		if consumer != "" {
			cons, err := js.Consumer(ctx, stream, consumer)
			if err != nil {
				return "", err
			}
			info, err := cons.Info(ctx)
			if err != nil {
				return "", err
			}
			ci = info.Cluster
		} else {
			st, err := js.Stream(ctx, stream)
			if err != nil {
				return "", err
			}
			info, err := st.Info(ctx)
			if err != nil {
				return "", err
			}
			ci = info.Cluster
		}
		if ci == nil {
			return "", errors.New("no cluster info")
		}
		return ci.Leader, nil
	}
	WaitFor(t, clusterTimeout, func() error {
		l, err := leader()
		if err != nil {
			return err
		}
		if l == c.Name(preferred) {
			return nil
		}
		msg, err := nc.Request(subject, req, 2*time.Second)
		if err != nil {
			return fmt.Errorf("stepdown request: %w", err)
		}
		var resp struct {
			Error *struct {
				Description string `json:"description"`
			} `json:"error"`
		}
		if json.Unmarshal(msg.Data, &resp) == nil && resp.Error != nil {
			return fmt.Errorf("stepdown: %s", resp.Error.Description)
		}
		time.Sleep(200 * time.Millisecond) // let the election run before asking again
		return fmt.Errorf("leader is %s, want %s", l, c.Name(preferred))
	})
}
