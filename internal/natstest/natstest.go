// Package natstest is the one embedded JetStream fixture every test in the
// module shares: a real nats-server running in-process on its own port and
// store, plus helpers to connect, create streams, publish and poll.
//
// Tests never mock NATS; they run this server. Helpers fail the test through
// t.Fatalf on setup errors, so callers stay short.
package natstest

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/embedded"
)

// Start runs a JetStream server on 127.0.0.1 with a free port and its store
// under dir. It does not register any cleanup: the caller shuts it down. The
// testscript "natsserver" command uses it as well as RunJetStream.
func Start(dir string) (*server.Server, error) {
	return embedded.Start(dir, -1)
}

// StartOn is Start on a fixed port (-1 picks a free one). Restart uses it to
// bring a server back on the address its clients reconnect to.
func StartOn(dir string, port int) (*server.Server, error) {
	return embedded.Start(dir, port)
}

// RunJetStream starts an in-process JetStream server on a free port with its
// store under t.TempDir, and shuts it down when the test ends.
func RunJetStream(t testing.TB) *server.Server {
	t.Helper()
	s, err := Start(t.TempDir())
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	t.Cleanup(s.Shutdown) // runs before TempDir removal: cleanups are LIFO
	return s
}

// Port returns the TCP port s listens on.
func Port(s *server.Server) int {
	return s.Addr().(*net.TCPAddr).Port
}

// Restart shuts s down and starts a new server on the same port and store, as
// a crashed or upgraded server comes back. Clients created by Connect
// reconnect on their own. The new server is shut down when the test ends.
func Restart(t testing.TB, s *server.Server) *server.Server {
	t.Helper()
	port, dir := Port(s), s.StoreDir()
	s.Shutdown()
	s.WaitForShutdown()
	// The old listener may linger for a moment after Shutdown returns, so
	// retry the bind rather than fail on the first EADDRINUSE.
	var (
		ns  *server.Server
		err error
	)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ns, err = StartOn(dir, port)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("natstest: restart on port %d: %v", port, err)
	}
	t.Cleanup(ns.Shutdown)
	return ns
}

// Connect opens a client connection to s and its JetStream context, closed
// when the test ends. The connection reconnects forever at a short interval so
// that tests which Restart the server keep working.
func Connect(t testing.TB, s *server.Server, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	all := append([]nats.Option{
		nats.MaxReconnects(-1),
		nats.ReconnectWait(20 * time.Millisecond),
		nats.ReconnectJitter(0, 0),
	}, opts...)
	nc, err := nats.Connect(s.ClientURL(), all...)
	if err != nil {
		t.Fatalf("natstest: connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: jetstream: %v", err)
	}
	return nc, js
}

// CreateStream creates (or updates) a stream and fails the test on error.
func CreateStream(t testing.TB, js jetstream.JetStream, cfg jetstream.StreamConfig) jetstream.Stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.CreateOrUpdateStream(ctx, cfg)
	if err != nil {
		t.Fatalf("natstest: create stream %s: %v", cfg.Name, err)
	}
	return st
}

// Publish publishes one message and waits for its PubAck.
func Publish(t testing.TB, js jetstream.JetStream, subject string, data []byte, header nats.Header) *jetstream.PubAck {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: data, Header: header})
	if err != nil {
		t.Fatalf("natstest: publish to %s: %v", subject, err)
	}
	return ack
}

// PublishN publishes n messages to subject with bodies produced by body(i)
// (i from 0), pipelined with PublishAsync in windows of 1000, and waits for
// every PubAck. (A window keeps the client below its limit of outstanding
// async publishes, which otherwise stalls large runs.)
func PublishN(t testing.TB, js jetstream.JetStream, subject string, n int, body func(i int) []byte) {
	t.Helper()
	const window = 1000
	for first := 0; first < n; first += window {
		futures := make([]jetstream.PubAckFuture, 0, window)
		for i := first; i < min(first+window, n); i++ {
			f, err := js.PublishAsync(subject, body(i))
			if err != nil {
				t.Fatalf("natstest: publish %d to %s: %v", i, subject, err)
			}
			futures = append(futures, f)
		}
		timeout := time.After(30 * time.Second)
		for i, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				t.Fatalf("natstest: publish %d to %s: %v", first+i, subject, err)
			case <-timeout:
				t.Fatalf("natstest: publish to %s: PubAcks not received within 30s", subject)
			}
		}
	}
}

// WaitFor calls f every 10 ms until it returns nil, and fails the test with
// f's last error when timeout passes first. Use it to wait for server state
// (consumer info, stream contents) instead of sleeping.
func WaitFor(t testing.TB, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("natstest: condition not met after %v: %v", timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// RequireServicesEnv names the variable that turns a missing external
// service from a skip into a failure (CI sets it to 1).
const RequireServicesEnv = "NATS_SINKS_REQUIRE_SERVICES"

// Service returns the value of envVar, the address of an external service a
// test needs. When it is unset or empty the test is skipped with a reason,
// except when NATS_SINKS_REQUIRE_SERVICES=1, where it fails.
func Service(t testing.TB, envVar string) string {
	t.Helper()
	v := os.Getenv(envVar)
	if v != "" {
		return v
	}
	reason := fmt.Sprintf("external service not configured: set %s", envVar)
	if os.Getenv(RequireServicesEnv) == "1" {
		t.Fatalf("%s (%s=1 makes this a failure)", reason, RequireServicesEnv)
	}
	t.Skip(reason)
	return ""
}

// WaitAckState waits until the durable consumer stream/consumer has
// acknowledged everything up to stream sequence floor and has ackPending
// messages awaiting acknowledgement. Plain ACKs are fire-and-forget: when
// the sender counts an ACK the server may not have applied it yet, so every
// assertion about the ack floor or ack-pending count after ACKs must wait
// like this rather than read once.
func WaitAckState(t testing.TB, js jetstream.JetStream, stream, consumer string, floor uint64, ackPending int, timeout time.Duration) {
	t.Helper()
	WaitFor(t, timeout, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := js.Consumer(ctx, stream, consumer)
		if err != nil {
			return err
		}
		info, err := c.Info(ctx)
		if err != nil {
			return err
		}
		if info.AckFloor.Stream != floor || info.NumAckPending != ackPending {
			return fmt.Errorf("consumer %s/%s: ack floor %d, ack pending %d; want %d, %d",
				stream, consumer, info.AckFloor.Stream, info.NumAckPending, floor, ackPending)
		}
		return nil
	})
}
