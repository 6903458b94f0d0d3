package cli

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/internal/telemetry"
)

// natsOptions turns the nats section into client options (runtime §16).
// Secrets are resolved here, at connect time, never during validation; a
// missing variable or unreadable file is a *config.Error (exit 2).
func natsOptions(c *config.NATS, env config.Env, log *slog.Logger, m *telemetry.Metrics) ([]nats.Option, error) {
	opts := []nats.Option{
		nats.Timeout(time.Duration(c.ConnectTimeoutSeconds) * time.Second),
		nats.ReconnectWait(time.Duration(c.ReconnectTimeWaitSeconds) * time.Second),
		nats.MaxReconnects(c.MaxReconnectAttempts),
		nats.PingInterval(time.Duration(c.PingIntervalSeconds) * time.Second),
		nats.MaxPingsOutstanding(c.MaxOutstandingPings),
		nats.ReconnectBufSize(c.PendingSizeBytes),
		nats.DrainTimeout(time.Duration(c.DrainTimeoutSeconds) * time.Second),
	}
	if c.Name != nil {
		opts = append(opts, nats.Name(*c.Name))
	}
	if c.NoEcho {
		opts = append(opts, nats.NoEcho())
	}
	if !c.AllowReconnect {
		opts = append(opts, nats.NoReconnect())
	}

	// Authentication: the loader allows at most one method.
	if c.User != nil {
		pw, _, err := config.ResolveSecret("nats.password", c.Password, c.PasswordEnv, c.PasswordFile, env)
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.UserInfo(*c.User, pw.Reveal()))
	}
	if tok, ok, err := config.ResolveSecret("nats.token", c.Token, c.TokenEnv, c.TokenFile, env); err != nil {
		return nil, err
	} else if ok {
		opts = append(opts, nats.Token(tok.Reveal()))
	}
	if c.CredsFile != nil {
		opts = append(opts, nats.UserCredentials(*c.CredsFile))
	}
	if c.NkeySeedFile != nil {
		o, err := nats.NkeyOptionFromSeed(*c.NkeySeedFile)
		if err != nil {
			return nil, &config.Error{Problems: []config.Problem{{Path: "nats.nkey_seed_file", Message: fmt.Sprintf("cannot use NKey seed file: %v", err)}}}
		}
		opts = append(opts, o)
	}

	// TLS: Secure first (it replaces the TLS config), then CA and client
	// certificate options, which amend it.
	useTLS := c.TLSCAFile != nil || c.TLSCertFile != nil || !c.TLSVerify
	for _, u := range c.Servers() {
		if strings.HasPrefix(u, "tls://") || strings.HasPrefix(u, "wss://") {
			useTLS = true
		}
	}
	if useTLS {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if !c.TLSVerify {
			log.Warn("nats.tls_verify is false: server certificates and host names are not verified")
			tc.InsecureSkipVerify = true
		}
		opts = append(opts, nats.Secure(tc))
		if c.TLSCAFile != nil {
			opts = append(opts, nats.RootCAs(*c.TLSCAFile))
		}
		if c.TLSCertFile != nil {
			key := *c.TLSCertFile
			if c.TLSKeyFile != nil {
				key = *c.TLSKeyFile
			}
			opts = append(opts, nats.ClientCert(*c.TLSCertFile, key))
		}
	}
	if len(c.WebsocketHeaders) > 0 || len(c.WebsocketHeadersEnv) > 0 {
		h := http.Header{}
		for k, v := range c.WebsocketHeaders {
			h.Set(k, v)
		}
		for k, name := range c.WebsocketHeadersEnv {
			v, ok := env(name)
			if !ok {
				return nil, &config.Error{Problems: []config.Problem{{Path: "nats.websocket_headers_env." + k, Message: fmt.Sprintf("environment variable %s is not set", name)}}}
			}
			h.Set(k, v)
		}
		opts = append(opts, nats.WebSocketConnectionHeaders(h))
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
