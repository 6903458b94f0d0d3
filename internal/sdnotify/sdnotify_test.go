package sdnotify

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// listen opens a unixgram socket at name, as the service manager does.
func listen(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func read(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("read notification: %v", err)
	}
	return string(buf[:n])
}

func TestNotifyPathSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	srv := listen(t, path)
	n, err := New(path)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if !n.Enabled() {
		t.Fatal("Enabled() = false for a socket path")
	}
	if err := n.Notify(Ready, Status("consuming ORDERS/orders")); err != nil {
		t.Fatal(err)
	}
	if got, want := read(t, srv), "READY=1\nSTATUS=consuming ORDERS/orders"; got != want {
		t.Errorf("datagram = %q, want %q", got, want)
	}
	if err := n.Notify(Stopping); err != nil {
		t.Fatal(err)
	}
	if got := read(t, srv); got != Stopping {
		t.Errorf("datagram = %q, want %q", got, Stopping)
	}
}

func TestNotifyAbstractSocket(t *testing.T) {
	name := fmt.Sprintf("@nats-sink-sdnotify-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	srv := listen(t, name)
	n, err := New(name)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.Notify(Watchdog); err != nil {
		t.Fatal(err)
	}
	if got := read(t, srv); got != Watchdog {
		t.Errorf("datagram = %q, want %q", got, Watchdog)
	}
}

func TestNotifyDisabled(t *testing.T) {
	n, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	if n.Enabled() {
		t.Error("Enabled() = true without NOTIFY_SOCKET")
	}
	if err := n.Notify(Ready); err != nil {
		t.Errorf("Notify on a no-op notifier = %v, want nil", err)
	}
	var nilN *Notifier
	if err := nilN.Notify(Ready); err != nil || nilN.Close() != nil {
		t.Error("a nil *Notifier must be a no-op")
	}
}

func TestNewRejects(t *testing.T) {
	for _, s := range []string{"relative/path", filepath.Join(t.TempDir(), "missing")} {
		if _, err := New(s); err == nil {
			t.Errorf("New(%q) = nil error, want one", s)
		}
	}
}

func TestWatchdogInterval(t *testing.T) {
	for _, tt := range []struct {
		usec, pid string
		want      time.Duration
	}{
		{"", "", 0},
		{"30000000", "", 30 * time.Second},
		{"30000000", "42", 30 * time.Second},
		{"30000000", "43", 0}, // meant for another process
		{"30000000", "x", 0},
		{"0", "", 0},
		{"-5", "", 0},
		{"abc", "", 0},
	} {
		if got := WatchdogInterval(tt.usec, tt.pid, 42); got != tt.want {
			t.Errorf("WatchdogInterval(%q, %q, 42) = %v, want %v", tt.usec, tt.pid, got, tt.want)
		}
	}
}

// TestRunWatchdogStopsWhenNotAlive checks that pings come every half
// timeout while alive, and stop as soon as alive reports false: a stalled
// loop must let the service manager's timeout fire.
func TestRunWatchdogStopsWhenNotAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var alive atomic.Bool
		alive.Store(true)
		var mu sync.Mutex
		var pings []time.Duration
		start := time.Now()
		send := func(s ...string) error {
			if diff := cmp.Diff([]string{Watchdog}, s); diff != "" {
				t.Errorf("sent (-want +got):\n%s", diff)
			}
			mu.Lock()
			pings = append(pings, time.Since(start))
			mu.Unlock()
			return nil
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); RunWatchdog(ctx, 10*time.Second, alive.Load, send) }()
		time.Sleep(12 * time.Second) // pings at 0, 5 s, 10 s
		synctest.Wait()
		alive.Store(false) // the loop stalls
		time.Sleep(30 * time.Second)
		synctest.Wait()
		alive.Store(true) // and recovers
		time.Sleep(4 * time.Second)
		synctest.Wait()
		cancel()
		<-done
		want := []time.Duration{0, 5 * time.Second, 10 * time.Second, 45 * time.Second}
		if diff := cmp.Diff(want, pings); diff != "" {
			t.Errorf("ping times (-want +got):\n%s", diff)
		}
	})
}
