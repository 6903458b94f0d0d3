// Package rabbitmq is the RabbitMQ (AMQP 0-9-1) sink: every message is
// published as a persistent message, with mandatory set, on a confirm-mode
// channel, and is Committed only when the broker confirmed it (basic.ack)
// without returning it first. A nack, a return (no queue bound) or a channel
// closed before the confirm is never a commit.
//
// RabbitMQ has no de-duplication of its own: a redelivery after a crash
// between the confirm and the runner's ACK publishes a second copy with the
// same message_id, on which consumers de-duplicate (docs/brokers.md).
package rabbitmq

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/nats-sinks/nats-sink/brokerconfig"
	"github.com/nats-sinks/nats-sink/internal/broker"
	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/sink"
)

// MaxRecordBytes is the largest max_record_bytes: RabbitMQ's default
// max_message_size (128 MiB).
const MaxRecordBytes = 134217728

// Config is the rabbitmq sink's configuration. Default returns it with
// every default; Decode fills it from a "sink" object.
type Config struct {
	Type string `json:"type" trim:"true" lower:"true" enum:"rabbitmq" doc:"Sink type."`
	URL  string `json:"url" nonblank:"true" nopad:"true" nocontrol:"true" doc:"amqp://host[:port]/[vhost] or amqps:// (TLS); no credentials in the URL."`
	brokerconfig.Auth
	TLS              brokerconfig.TLS `json:"tls" doc:"TLS to the broker (also on with an amqps URL)."`
	Exchange         string           `json:"exchange" required:"true" maxlen:"255" pattern:"^[A-Za-z0-9._:-]*$" doc:"Exchange to publish to; \"\" = the default exchange (the routing key names the queue). It must exist: the sink never declares it."`
	RoutingKey       string           `json:"routing_key" doc:"Routing key template: literal text plus {subject}, {stream}, {token:N}; rendered at most 255 bytes."`
	Mandatory        bool             `json:"mandatory" doc:"Publish with mandatory set (must be true): an unroutable message comes back instead of being dropped after its confirm."`
	DeliveryMode     int              `json:"delivery_mode" enum:"2" doc:"AMQP delivery mode (must be 2, persistent)."`
	HeartbeatSeconds int              `json:"heartbeat_seconds" min:"0" max:"600" doc:"AMQP heartbeat interval; 0 = none."`
	ConnectionName   string           `json:"connection_name" nocontrol:"true" maxlen:"255" doc:"Client-provided connection name shown in the management UI."`
	brokerconfig.Options
	MaxRecordBytes int `json:"max_record_bytes" min:"1024" max:"134217728" doc:"Largest record (body plus headers); a larger message is dead-lettered (PermanentSinkError)."`
}

// Default returns the configuration with every default.
func Default() Config {
	return Config{
		Type:             "rabbitmq",
		URL:              "amqp://127.0.0.1:5672/",
		RoutingKey:       "{subject}",
		Mandatory:        true,
		DeliveryMode:     2,
		HeartbeatSeconds: 10,
		ConnectionName:   "nats-sink",
		Options:          brokerconfig.DefaultOptions("envelope"),
		MaxRecordBytes:   brokerconfig.DefaultMaxRecordBytes,
	}
}

// Decode validates one rabbitmq "sink" object without I/O and returns its
// Config. Problems come back as one *sink.ConfigError with paths relative to
// the sink object. The password is read by Open, not here.
func Decode(raw json.RawMessage) (sink.Opener, error) {
	c := Default()
	if err := fields.DecodeSink(raw, &c); err != nil {
		return nil, err
	}
	return c, nil
}

// Open starts the sink; it is New behind the sink.Opener interface.
func (c Config) Open(ctx context.Context, deps sink.Deps) (sink.Sink, error) {
	s, err := New(ctx, c, deps)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Validate checks c: the rules of the struct tags and, when they pass, the
// rules between keys. Problems have paths relative to the sink object and
// come back as one *sink.ConfigError, or nil. Decode runs it on the decoded
// object, New before anything else, so a Config built in Go is checked like
// a loaded one.
func (c *Config) Validate() error { return fields.Validate(c, c.rules) }

// rules checks what the struct tags cannot express.
func (c *Config) rules(p *fields.Problems) {
	var ck broker.Checker
	u, msg := parseURL(c.URL)
	if msg != "" {
		ck.Add("url", msg)
	}
	ck.Append(c.Auth.Rules(true))
	if c.Auth.HasPassword() && c.Auth.Username == nil {
		ck.Add("username", "required with a password (or set neither for guest/guest)")
	}
	if c.TLS.Enabled && u != nil && !u.tls {
		ck.Add("tls.enabled", "requires an amqps URL")
	}
	ck.Append(c.TLS.Rules(c.TLS.Enabled || (u != nil && u.tls)))
	if _, err := broker.ParseTemplate(c.RoutingKey, broker.Raw); err != nil {
		ck.Add("routing_key", err.Error())
	}
	if !c.Mandatory {
		ck.Add("mandatory", "must be true: an unroutable message must come back, never be dropped after a confirm")
	}
	for _, pr := range ck.Problems() {
		p.Add(pr.Path, pr.Message)
	}
}

// target is a parsed url: what to dial, and the virtual host.
type target struct {
	tls   bool
	addr  string // host:port
	host  string
	vhost string
}

// parseURL checks an AMQP URL and returns its parts, or the problem.
func parseURL(s string) (*target, string) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Sprintf("must be an amqp:// or amqps:// URL (%v)", err)
	}
	t := &target{}
	switch u.Scheme {
	case "amqp":
	case "amqps":
		t.tls = true
	default:
		return nil, fmt.Sprintf("scheme must be amqp or amqps (got %q)", u.Scheme)
	}
	switch {
	case u.User != nil:
		return nil, "must not include credentials; use username and password_env (or password_file)"
	case u.RawQuery != "" || u.ForceQuery:
		return nil, "must not have a query"
	case u.Fragment != "":
		return nil, "must not have a fragment"
	case u.Hostname() == "":
		return nil, "host required"
	}
	t.host = u.Hostname()
	port := u.Port()
	if port == "" {
		port = "5672"
		if t.tls {
			port = "5671"
		}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return nil, fmt.Sprintf("port must be between 1 and 65535 (got %q)", port)
	}
	t.addr = net.JoinHostPort(t.host, port)
	// The path is the virtual host, percent-encoded: "", "/" and "/%2F"
	// are "/", "/orders" is "orders".
	vhost := strings.TrimPrefix(u.EscapedPath(), "/")
	if vhost == "" {
		t.vhost = "/"
	} else {
		if strings.Contains(vhost, "/") {
			return nil, `the virtual host must be one path segment (encode "/" in its name as %2F)`
		}
		v, err := url.PathUnescape(vhost)
		if err != nil {
			return nil, fmt.Sprintf("bad virtual host escape (%v)", err)
		}
		t.vhost = v
	}
	return t, ""
}
