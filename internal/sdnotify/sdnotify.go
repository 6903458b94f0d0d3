// Package sdnotify speaks systemd's service notification protocol
// (sd_notify(3)) without linking libsystemd: each state change is one
// datagram of newline-separated KEY=VALUE assignments sent over the unixgram
// socket named by $NOTIFY_SOCKET. A name that starts with "@" is a socket in
// Linux's abstract namespace.
//
// Without $NOTIFY_SOCKET (not started by systemd with Type=notify, or a
// container runtime that does not pass it) a Notifier is a no-op, so callers
// never check.
package sdnotify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Messages of sd_notify(3) that nats-sink sends.
const (
	Ready    = "READY=1"    // start-up finished: the consumer is bound
	Stopping = "STOPPING=1" // shutdown began
	Watchdog = "WATCHDOG=1" // keep-alive ping while the fetch loop is alive
)

// A Notifier sends notifications to the service manager. The zero value and
// a nil *Notifier are no-ops. It is safe for concurrent use.
type Notifier struct {
	mu   sync.Mutex
	conn *net.UnixConn // nil: no service manager listening
}

// New returns a Notifier for socket, the value of $NOTIFY_SOCKET. An empty
// socket gives a no-op Notifier. Only absolute paths and abstract names
// ("@name") are valid, as in sd_notify(3); anything else is an error.
func New(socket string) (*Notifier, error) {
	if socket == "" {
		return &Notifier{}, nil
	}
	name := socket
	switch {
	case strings.HasPrefix(socket, "@"):
		// Go maps a leading "@" to the abstract namespace (a leading NUL).
	case strings.HasPrefix(socket, "/"):
	default:
		return nil, fmt.Errorf("NOTIFY_SOCKET %q: not an absolute path or an abstract socket name", socket)
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("NOTIFY_SOCKET: %w", err)
	}
	return &Notifier{conn: conn}, nil
}

// Enabled reports whether a service manager is listening.
func (n *Notifier) Enabled() bool { return n != nil && n.conn != nil }

// Notify sends one datagram holding the given assignments, one per line.
func (n *Notifier) Notify(state ...string) error {
	if !n.Enabled() || len(state) == 0 {
		return nil
	}
	msg := strings.Join(state, "\n")
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.conn == nil {
		return errors.New("sdnotify: notifier closed")
	}
	_, err := n.conn.Write([]byte(msg))
	return err
}

// Close releases the socket. Later calls to Notify are errors.
func (n *Notifier) Close() error {
	if !n.Enabled() {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.conn == nil {
		return nil
	}
	err := n.conn.Close()
	n.conn = nil
	return err
}

// Status returns a STATUS= assignment: a one-line human description that
// systemctl status shows. Newlines are replaced, as one assignment is one
// line.
func Status(s string) string {
	return "STATUS=" + strings.NewReplacer("\n", " ", "\r", " ").Replace(s)
}

// WatchdogInterval parses $WATCHDOG_USEC and $WATCHDOG_PID as sd_watchdog_enabled(3)
// does: it returns the watchdog timeout, or 0 when no watchdog is asked of
// this process (unset, malformed, zero, or meant for another pid).
func WatchdogInterval(usec, pid string, self int) time.Duration {
	if usec == "" {
		return 0
	}
	if pid != "" {
		p, err := strconv.Atoi(pid)
		if err != nil || p != self {
			return 0
		}
	}
	us, err := strconv.ParseUint(usec, 10, 63)
	if err != nil || us == 0 {
		return 0
	}
	return time.Duration(us) * time.Microsecond
}

// RunWatchdog sends WATCHDOG=1 through send every timeout/2 while alive
// reports true, until ctx ends. When alive reports false it sends nothing,
// so the service manager's timeout fires and it restarts the process: a
// stalled process must not be kept alive by a timer that still ticks.
func RunWatchdog(ctx context.Context, timeout time.Duration, alive func() bool, send func(...string) error) {
	if timeout <= 0 {
		return
	}
	t := time.NewTicker(timeout / 2)
	defer t.Stop()
	for {
		if alive() {
			send(Watchdog) // an error here only means no ping: the timeout decides
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
