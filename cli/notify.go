package cli

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/internal/sdnotify"
	"github.com/nats-sinks/nats-sink/pipeline"
)

// serviceNotifier is `run`'s side of systemd's Type=notify protocol
// (docs/deploy.md, "systemd"): READY=1 once the consumer is bound,
// WATCHDOG=1 while the fetch loop is alive (only when the unit sets
// WatchdogSec=), STOPPING=1 when shutdown begins. Without $NOTIFY_SOCKET
// every method is a no-op.
type serviceNotifier struct {
	n        *sdnotify.Notifier
	log      *slog.Logger
	stopOnce sync.Once
	wg       sync.WaitGroup
	cancel   context.CancelFunc
}

// startServiceNotifier connects to $NOTIFY_SOCKET and, when $WATCHDOG_USEC
// asks for it, starts the watchdog pings. An unusable socket is logged and
// ignored: the service manager then times the start out, which says more
// than a refusal to run.
func startServiceNotifier(env *Env, log *slog.Logger, cfg *config.Config, live *atomic.Pointer[pipeline.Pipeline]) *serviceNotifier {
	getenv := func(k string) string { v, _ := env.Getenv(k); return v }
	s := &serviceNotifier{log: log, cancel: func() {}}
	n, err := sdnotify.New(getenv("NOTIFY_SOCKET"))
	if err != nil {
		log.Warn("service manager notifications disabled", "component", "supervisor", "error", err.Error())
		n = nil
	}
	s.n = n
	timeout := sdnotify.WatchdogInterval(getenv("WATCHDOG_USEC"), getenv("WATCHDOG_PID"), os.Getpid())
	if !s.n.Enabled() || timeout <= 0 {
		return s
	}
	// A fetch lasts up to batch_timeout_ms plus a request's round trip; a
	// heartbeat older than that and the watchdog timeout means the loop is
	// stuck.
	stale := max(timeout, time.Duration(cfg.Delivery.BatchTimeoutMS)*time.Millisecond+10*time.Second)
	alive := func() bool {
		p := live.Load()
		if p == nil {
			return true // start-up, bounded by its own timeout
		}
		if p.Ready().Draining {
			return true // the drain is bounded by shutdown_timeout_ms
		}
		hb := p.Heartbeat()
		return hb.IsZero() || time.Since(hb) < stale
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.wg.Go(func() { sdnotify.RunWatchdog(ctx, timeout, alive, s.n.Notify) })
	log.Info("watchdog enabled", "component", "supervisor", "timeout_ms", timeout.Milliseconds())
	return s
}

// ready tells the service manager that start-up finished.
func (s *serviceNotifier) ready(cfg *config.Config) {
	s.notify(sdnotify.Ready, sdnotify.Status("consuming "+cfg.NATS.Stream+"/"+cfg.NATS.Consumer+" into the "+cfg.Sink.Type+" sink"))
}

// stopping tells the service manager, once, that shutdown began.
func (s *serviceNotifier) stopping() {
	s.stopOnce.Do(func() {
		s.notify(sdnotify.Stopping, sdnotify.Status("stopping: finishing in-flight batches"))
	})
}

func (s *serviceNotifier) notify(state ...string) {
	if err := s.n.Notify(state...); err != nil {
		s.log.Warn("service manager notification failed", "component", "supervisor", "error", err.Error())
	}
}

// close stops the watchdog pings and releases the socket.
func (s *serviceNotifier) close() {
	s.cancel()
	s.wg.Wait()
	s.n.Close()
}
