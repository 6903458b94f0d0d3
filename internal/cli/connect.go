package cli

import (
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/internal/natsconn"
	"github.com/nats-sinks/nats-sink/internal/telemetry"
)

// natsOptions turns the nats section into client options (runtime §16),
// with the connection events counted and logged. Secrets are resolved here;
// a missing variable or unreadable file is a *config.Error (exit 2).
func natsOptions(c *config.NATS, env config.Env, log *slog.Logger, m *telemetry.Metrics) ([]nats.Option, error) {
	opts, err := natsconn.Options(c, "nats", env)
	if err != nil {
		return nil, err
	}
	if !c.TLSVerify {
		log.Warn("nats.tls_verify is false: server certificates and host names are not verified", "component", "connector")
	}

	// Connection events (runtime §16): counted, logged, readiness follows
	// the connection state through Conn.Status.
	log = log.With("component", "connector")
	opts = append(opts,
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			m.NATSDisconnected.Inc()
			m.NATSConnected.Set(0)
			log.Warn("nats disconnected", "error", errString(err))
		}),
		nats.ReconnectHandler(func(*nats.Conn) {
			m.NATSReconnected.Inc()
			m.NATSConnected.Set(1)
			log.Info("nats reconnected")
		}),
		nats.ClosedHandler(func(*nats.Conn) {
			m.NATSClosed.Inc()
			m.NATSConnected.Set(0)
		}),
		nats.DiscoveredServersHandler(func(*nats.Conn) { m.NATSDiscoveredServers.Inc() }),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			m.NATSAsyncErrors.Inc()
			log.Warn("nats error", "error", errString(err))
		}),
	)
	return opts, nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// newJetStream returns the JetStream context for the configured domain or
// API prefix.
func newJetStream(nc *nats.Conn, c *config.NATS) (jetstream.JetStream, error) {
	switch {
	case c.Domain != nil:
		return jetstream.NewWithDomain(nc, *c.Domain)
	case c.APIPrefix != nil:
		return jetstream.NewWithAPIPrefix(nc, *c.APIPrefix)
	}
	return jetstream.New(nc)
}
