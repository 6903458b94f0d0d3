package redissink

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-sinks/nats-sink/sink"
)

// TestDriverLogRouted: go-redis's own lines (here its pool's dial errors
// against a closed port) reach the sink's logger at debug level instead of
// the process's stderr.
func TestDriverLogRouted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens
	var buf syncBuf
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := Default()
	c.Address = addr
	s, err := New(context.Background(), c, sink.Deps{Logger: log})
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.Healthcheck(ctx)
		cancel()
		s.Stop(context.Background())
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(buf.String(), "redis driver:") {
		if time.Now().After(deadline) {
			t.Fatalf("no driver line reached the sink's logger (New: %v); log:\n%s", err, buf.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(buf.String(), "level=DEBUG") {
		t.Errorf("driver lines are not at debug level:\n%s", buf.String())
	}
}

type syncBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
