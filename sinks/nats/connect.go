package natssink

import (
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natsconn"
	"github.com/nats-sinks/nats-sink/sink"
)

// options turns the connection object into client options through the
// same builder as the nats section (internal/natsconn). Secrets are
// resolved here, when the sink opens; a missing variable or unreadable file
// is a *sink.ConfigError naming the key ("connection.password_env"), never
// the secret.
func (c *Config) options(deps sink.Deps) ([]nats.Option, error) {
	opts, err := natsconn.Options(c.Connection, "connection", deps.LookupEnv)
	if err != nil {
		return nil, err
	}
	// Publish errors are reported per message; the default handler would
	// print them to stderr.
	return append(opts, nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})), nil
}

// jetStream returns the JetStream context for the connection's domain or
// API prefix, with the async publish options of the sink. With connection
// null it is the source's: with the source connection the sink reuses the
// source's JetStream domain or API prefix too. (On a leaf node whose source
// is reached through domain "hub", the target stream lookup goes to the
// hub; a target in another domain needs a connection object with its own
// domain.)
func (c *Config) jetStream(nc *nats.Conn, src sink.Source, opts ...jetstream.JetStreamOpt) (jetstream.JetStream, error) {
	domain, prefix := src.Domain, src.APIPrefix
	if c.Connection != nil {
		domain, prefix = "", ""
		if c.Connection.Domain != nil {
			domain = *c.Connection.Domain
		}
		if c.Connection.APIPrefix != nil {
			prefix = *c.Connection.APIPrefix
		}
	}
	switch {
	case domain != "":
		return jetstream.NewWithDomain(nc, domain, opts...)
	case prefix != "":
		return jetstream.NewWithAPIPrefix(nc, prefix, opts...)
	}
	return jetstream.New(nc, opts...)
}
