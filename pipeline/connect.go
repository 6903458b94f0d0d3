package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/internal/natsconn"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/telemetry"
)

// NATSOptions turns the nats section into client options (docs/security.md#authenticating-to-nats),
// with the connection events counted in m and logged. Secrets are resolved
// here; a missing variable or unreadable file is a *config.Error naming the
// key.
func NATSOptions(c *config.NATS, env config.Env, log *slog.Logger, m *telemetry.Metrics) ([]nats.Option, error) {
	opts, err := natsconn.Options(&c.Connection, "nats", env)
	if ce, ok := errors.AsType[*sink.ConfigError](err); ok {
		// File names the settings for the multi-problem header ("2
		// problems in the nats settings"); a single problem prints alone.
		return nil, &config.Error{File: "the nats settings", Problems: ce.Problems}
	}
	if err != nil {
		return nil, err
	}
	if !c.TLSVerify {
		log.Warn("nats.tls_verify is false: server certificates and host names are not verified", "component", "connector")
	}

	// Connection events (docs/security.md#authenticating-to-nats): counted, logged (warning for a
	// disconnect and errors, info otherwise), readiness follows the
	// connection state through Conn.Status. Errors carry the server's
	// reason ("Authorization Violation", a permissions violation naming
	// the subject), never a credential.
	log = log.With("component", "connector")
	opts = append(opts,
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			m.NATSDisconnected.Inc()
			m.NATSConnected.Set(0)
			if err == nil {
				// nats.go passes no error when the connection closes for
				// good; its last error says why, and there is none when
				// the program closed or drained it (every graceful
				// shutdown), which is no warning.
				err = nc.LastError()
			}
			if err == nil && (nc.IsClosed() || nc.IsDraining()) {
				log.Debug("nats disconnected")
				return
			}
			log.Warn("nats disconnected", "error", errString(err))
		}),
		nats.ReconnectHandler(func(*nats.Conn) {
			m.NATSReconnected.Inc()
			m.NATSConnected.Set(1)
			log.Info("nats reconnected")
		}),
		// A failed reconnect attempt (server down, refused); failed
		// authentication arrives through the error handler below. The
		// logger rate-limits the repeats.
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn("nats reconnect attempt failed", "error_type", natsErrorType(err), "error", errString(err))
		}),
		nats.ClosedHandler(func(*nats.Conn) {
			m.NATSClosed.Inc()
			m.NATSConnected.Set(0)
			log.Info("nats connection closed")
		}),
		nats.DiscoveredServersHandler(func(*nats.Conn) {
			m.NATSDiscoveredServers.Inc()
			log.Info("nats discovered servers")
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			m.NATSAsyncErrors.Inc()
			log.Warn("nats error", "error_type", natsErrorType(err), "error", errString(err))
		}),
	)
	return opts, nil
}

// natsErrorType classifies a client error for the error_type log key, so
// that the logger's rate limit (same msg and error_type) does not hide a
// permissions violation behind an earlier authentication error.
func natsErrorType(err error) string {
	switch {
	case errors.Is(err, nats.ErrPermissionViolation):
		return "PermissionViolation"
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired),
		errors.Is(err, nats.ErrAuthRevoked), errors.Is(err, nats.ErrAccountAuthExpired):
		return "AuthenticationError"
	case errors.Is(err, nats.ErrTLS):
		return "TLSError"
	case errors.Is(err, nats.ErrSlowConsumer):
		return "SlowConsumer"
	}
	return "ConnectionError"
}

// watchClosed calls cancel with a *ConnClosedError when nc closes. A
// process whose connection can never come back would otherwise sit
// unready forever; exiting 1 hands it to the supervisor (systemd,
// Kubernetes) to restart. stop ends the watch; call it before closing nc
// on purpose.
func watchClosed(nc *nats.Conn, cancel context.CancelCauseFunc) (stop func()) {
	ch := nc.StatusChanged(nats.CLOSED)
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, ok := <-ch; ok {
			cancel(&ConnClosedError{nc.LastError()})
		}
	})
	if nc.IsClosed() { // closed before the listener was registered
		cancel(&ConnClosedError{nc.LastError()})
	}
	return func() {
		nc.RemoveStatusListener(ch) // closes ch: the goroutine returns
		wg.Wait()
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// NewJetStream returns the JetStream context for the configured domain or
// API prefix.
func NewJetStream(nc *nats.Conn, c *config.NATS) (jetstream.JetStream, error) {
	switch {
	case c.Domain != nil:
		return jetstream.NewWithDomain(nc, *c.Domain)
	case c.APIPrefix != nil:
		return jetstream.NewWithAPIPrefix(nc, *c.APIPrefix)
	}
	return jetstream.New(nc)
}

// refusals turns the server's permissions violations into something the
// pipeline can act on. A publish the user has no permission for is answered
// with an asynchronous violation, never with a reply:
//   - during start-up, the step waiting for that reply would wait for the
//     whole start-up timeout and then fail with a bare "context deadline
//     exceeded"; instead, a violation cancels the running step's context
//     with the violation as the cause;
//   - while running, a refused pull request (CONSUMER.MSG.NEXT) looks to
//     the client like an empty fetch; the time of the latest one makes
//     readiness report the consumer as fetch_failing.
//
// See docs/nats-permissions.md.
type refusals struct {
	nc    *nats.Conn
	prev  nats.ErrHandler
	fetch string // `CONSUMER.MSG.NEXT.<stream>.` as it appears in a violation

	mu     sync.Mutex
	cancel context.CancelCauseFunc // of the start-up step running now, or nil

	lastFetch atomic.Int64 // Unix nanoseconds of the latest refused fetch
}

// fetchRefusalWindow is how long after a refused fetch readiness reports
// fetch_failing. Refusals repeat with every fetch (at least once per
// delivery.batch_timeout_ms), so the state clears soon after the
// permission is granted.
const fetchRefusalWindow = 10 * time.Second

// watchRefusals wraps nc's error handler; stop restores it.
func watchRefusals(nc *nats.Conn, stream string) *refusals {
	r := &refusals{nc: nc, prev: nc.ErrorHandler(), fetch: ".CONSUMER.MSG.NEXT." + stream + "."}
	nc.SetErrorHandler(func(c *nats.Conn, s *nats.Subscription, err error) {
		if r.prev != nil {
			r.prev(c, s, err)
		}
		if !errors.Is(err, nats.ErrPermissionViolation) {
			return
		}
		if strings.Contains(err.Error(), r.fetch) {
			r.lastFetch.Store(time.Now().UnixNano())
		}
		r.mu.Lock()
		if r.cancel != nil {
			r.cancel(err)
		}
		r.mu.Unlock()
	})
	return r
}

// step returns the context for one start-up step; end it with done.
func (r *refusals) step(ctx context.Context) (_ context.Context, done func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	r.mu.Lock()
	r.cancel = cancel
	r.mu.Unlock()
	return ctx, func() {
		r.mu.Lock()
		r.cancel = nil
		r.mu.Unlock()
		cancel(nil)
	}
}

// explain adds the server's refusal to err when that is why the step's
// context ended.
func (r *refusals) explain(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); errors.Is(cause, nats.ErrPermissionViolation) {
		return fmt.Errorf("%w; the server refused a request: %w", err, cause)
	}
	return err
}

// fetchRefused reports whether the server refused a pull request within
// fetchRefusalWindow.
func (r *refusals) fetchRefused() bool {
	last := r.lastFetch.Load()
	return last != 0 && time.Since(time.Unix(0, last)) < fetchRefusalWindow
}

func (r *refusals) stop() { r.nc.SetErrorHandler(r.prev) }
