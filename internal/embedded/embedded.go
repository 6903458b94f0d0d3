// Package embedded starts an in-process nats-server with JetStream: real
// server code on loopback, with its own port and store directory. `demo` and
// `bench` run on it, and so does every test through internal/natstest.
package embedded

import (
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// readyTimeout bounds how long Start waits for the server to accept clients.
// A cold JetStream start on a busy 2-core machine takes well under a second;
// 10 s leaves room for -race builds.
const readyTimeout = 10 * time.Second

// Start runs a JetStream server on 127.0.0.1 with its store under dir, on
// port (-1 picks a free one). The caller shuts it down.
func Start(dir string, port int) (*server.Server, error) {
	opts := &server.Options{
		Host:      "127.0.0.1",
		Port:      port,
		JetStream: true,
		StoreDir:  dir,
		NoLog:     true,
		NoSigs:    true,
		// The server name must stay the same across a restart, or the
		// restarted server would not recognise its own stored assets.
		ServerName: "nats-sink-embedded",
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("new server: %w", err)
	}
	s.Start() // non-blocking
	if !s.ReadyForConnections(readyTimeout) {
		s.Shutdown()
		return nil, fmt.Errorf("server on %s not ready after %v", dir, readyTimeout)
	}
	return s, nil
}
