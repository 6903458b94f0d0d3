package natssink

import (
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/internal/natsconn"
	"github.com/nats-sinks/nats-sink/sink"
)

// options turns a connection object into client options through the same
// builder as the nats section (internal/natsconn). Secrets are resolved
// here, when the sink opens; a missing variable or unreadable file is a
// configuration error naming the key, never the secret.
func (c *Connection) options(env config.Env) ([]nats.Option, error) {
	opts, err := natsconn.Options(c.settings(), "connection", env)
	if err != nil {
		return nil, configErr(err)
	}
	// Publish errors are reported per message; the default handler would
	// print them to stderr.
	return append(opts, nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})), nil
}

// settings returns the connection as the nats section's type, which the
// option builder takes; the keys are the same.
func (c *Connection) settings() *config.NATS {
	return &config.NATS{
		URL: c.URL, URLs: c.URLs, Name: c.Name,
		User: c.User, Password: c.Password, PasswordEnv: c.PasswordEnv, PasswordFile: c.PasswordFile,
		Token: c.Token, TokenEnv: c.TokenEnv, TokenFile: c.TokenFile,
		CredsFile: c.CredsFile, NkeySeedFile: c.NkeySeedFile,
		TLSCAFile: c.TLSCAFile, TLSCertFile: c.TLSCertFile, TLSKeyFile: c.TLSKeyFile, TLSVerify: c.TLSVerify,
		WebsocketHeaders: c.WebsocketHeaders, WebsocketHeadersEnv: c.WebsocketHeadersEnv,
		NoEcho: c.NoEcho, AllowReconnect: c.AllowReconnect,
		ConnectTimeoutSeconds: c.ConnectTimeoutSeconds, ReconnectTimeWaitSeconds: c.ReconnectTimeWaitSeconds,
		MaxReconnectAttempts: c.MaxReconnectAttempts, PingIntervalSeconds: c.PingIntervalSeconds,
		MaxOutstandingPings: c.MaxOutstandingPings, PendingSizeBytes: c.PendingSizeBytes,
		DrainTimeoutSeconds: c.DrainTimeoutSeconds, Domain: c.Domain, APIPrefix: c.APIPrefix,
	}
}

// configErr marks an error from config.ResolveSecret as a configuration
// error, keeping its text (which names the key, never the secret).
func configErr(err error) error { return fmt.Errorf("%w: %w", err, sink.ErrConfig) }

// jetStream returns the JetStream context for the connection's domain or
// API prefix, with the async publish options of the sink. With connection
// null it is the source's: its domain or API prefix.
func (c *Config) jetStream(nc *nats.Conn, opts ...jetstream.JetStreamOpt) (jetstream.JetStream, error) {
	domain, prefix := c.SourceDomain, c.SourceAPIPrefix
	if c.Connection != nil {
		domain, prefix = c.Connection.Domain, c.Connection.APIPrefix
	}
	switch {
	case domain != nil:
		return jetstream.NewWithDomain(nc, *domain, opts...)
	case prefix != nil:
		return jetstream.NewWithAPIPrefix(nc, *prefix, opts...)
	}
	return jetstream.New(nc, opts...)
}
