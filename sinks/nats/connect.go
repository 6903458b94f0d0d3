package natssink

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/sink"
)

// options turns a connection object into client options, as the CLI does
// for the nats section (runtime §16). Secrets are resolved here, when the
// sink opens; a missing variable or unreadable file is a configuration error.
func (c *Connection) options(env config.Env) ([]nats.Option, error) {
	opts := []nats.Option{
		nats.Timeout(time.Duration(c.ConnectTimeoutSeconds) * time.Second),
		nats.ReconnectWait(time.Duration(c.ReconnectTimeWaitSeconds) * time.Second),
		nats.MaxReconnects(c.MaxReconnectAttempts),
		nats.PingInterval(time.Duration(c.PingIntervalSeconds) * time.Second),
		nats.MaxPingsOutstanding(c.MaxOutstandingPings),
		nats.ReconnectBufSize(c.PendingSizeBytes),
		nats.DrainTimeout(time.Duration(c.DrainTimeoutSeconds) * time.Second),
		// Publish errors are reported per message; the default handler
		// would print them to stderr.
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}),
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
	if c.User != nil {
		pw, _, err := config.ResolveSecret("connection.password", c.Password, c.PasswordEnv, c.PasswordFile, env)
		if err != nil {
			return nil, configErr(err)
		}
		opts = append(opts, nats.UserInfo(*c.User, pw.Reveal()))
	}
	if tok, ok, err := config.ResolveSecret("connection.token", c.Token, c.TokenEnv, c.TokenFile, env); err != nil {
		return nil, configErr(err)
	} else if ok {
		opts = append(opts, nats.Token(tok.Reveal()))
	}
	if c.CredsFile != nil {
		opts = append(opts, nats.UserCredentials(*c.CredsFile))
	}
	if c.NkeySeedFile != nil {
		o, err := nats.NkeyOptionFromSeed(*c.NkeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("connection.nkey_seed_file: cannot use NKey seed file: %v: %w", err, sink.ErrConfig)
		}
		opts = append(opts, o)
	}
	useTLS := c.TLSCAFile != nil || c.TLSCertFile != nil || !c.TLSVerify
	for _, u := range c.Servers() {
		if l := strings.ToLower(u); strings.HasPrefix(l, "tls://") || strings.HasPrefix(l, "wss://") {
			useTLS = true
		}
	}
	if useTLS {
		// Secure first (it replaces the TLS config), then the options that
		// amend it.
		opts = append(opts, nats.Secure(&tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: !c.TLSVerify}))
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
		lookup := env
		if lookup == nil {
			lookup = os.LookupEnv
		}
		for k, name := range c.WebsocketHeadersEnv {
			v, ok := lookup(name)
			if !ok {
				return nil, fmt.Errorf("connection.websocket_headers_env.%s: environment variable %s is not set: %w", k, name, sink.ErrConfig)
			}
			h.Set(k, v)
		}
		opts = append(opts, nats.WebSocketConnectionHeaders(h))
	}
	return opts, nil
}

// configErr marks an error from config.ResolveSecret as a configuration
// error, keeping its text (which names the key, never the secret).
func configErr(err error) error { return fmt.Errorf("%w: %w", err, sink.ErrConfig) }

// jetStream returns the JetStream context for the connection's domain or
// API prefix, with the async publish options of the sink.
func (c *Connection) jetStream(nc *nats.Conn, opts ...jetstream.JetStreamOpt) (jetstream.JetStream, error) {
	switch {
	case c != nil && c.Domain != nil:
		return jetstream.NewWithDomain(nc, *c.Domain, opts...)
	case c != nil && c.APIPrefix != nil:
		return jetstream.NewWithAPIPrefix(nc, *c.APIPrefix, opts...)
	}
	return jetstream.New(nc, opts...)
}
