// Package mqtt is the MQTT 5 sink: every message is published at QoS 1 or
// 2 and is Committed only when the broker acknowledged it with a success
// reason code (PUBACK, or PUBCOMP after a successful PUBREC). MQTT 3.1.1 is
// not offered: a 3.1.1 broker answers a publish it discards (denied by an
// ACL, dropped from a full queue) with the same PUBACK as one it accepted,
// so a commit could not be told from a loss.
//
// The session is kept across reconnects (Clean Start only on the process's
// first connection), so a publish cut by a network break is retransmitted
// and completed rather than lost; a redelivery after a crash between the
// broker's acknowledgement and the runner's ACK publishes a second copy,
// on whose nats-sinks-idempotency-key property subscribers de-duplicate
// (docs/brokers.md).
package mqtt

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strconv"

	"github.com/nats-sinks/nats-sink/brokerconfig"
	"github.com/nats-sinks/nats-sink/internal/broker"
	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/sink"
)

// MaxRecordBytes is the largest max_record_bytes: MQTT's largest packet
// (268,435,455 bytes). The server's Maximum Packet Size may be lower; a
// PUBLISH over it is refused before it is sent.
const MaxRecordBytes = 268435455

// Config is the mqtt sink's configuration. Default returns it with every
// default; Decode fills it from a "sink" object.
type Config struct {
	Type                 string  `json:"type" trim:"true" lower:"true" enum:"mqtt" doc:"Sink type."`
	URL                  string  `json:"url" nonblank:"true" nopad:"true" nocontrol:"true" doc:"mqtt://host[:port], mqtts:// (TLS), ws://host[:port]/path or wss://; no credentials in the URL."`
	ProtocolVersion      int     `json:"protocol_version" doc:"MQTT protocol version (must be 5)."`
	ClientID             *string `json:"client_id" pattern:"^[A-Za-z0-9_.-]{1,64}$" doc:"Client identifier; must differ per process. null = <client_id_prefix>-<16 random hex>, chosen when the sink starts."`
	ClientIDPrefix       string  `json:"client_id_prefix" pattern:"^[A-Za-z0-9_.-]{1,40}$" doc:"Prefix of the generated client identifier."`
	SessionExpirySeconds int     `json:"session_expiry_seconds" min:"1" max:"604800" doc:"Session Expiry Interval: how long the broker keeps the session (and unacknowledged flows) after a network break."`
	KeepAliveSeconds     int     `json:"keep_alive_seconds" min:"1" max:"65535" doc:"Keep Alive interval."`
	brokerconfig.Auth
	TLS                  brokerconfig.TLS `json:"tls" doc:"TLS to the broker (also on with an mqtts or wss URL)."`
	Topic                string           `json:"topic" doc:"Topic template: literal text plus {subject}, {stream}, {token:N}; values are escaped as topic levels."`
	QoS                  int              `json:"qos" enum:"1,2" doc:"Quality of service: 1 (PUBACK) or 2 (PUBREC, PUBREL, PUBCOMP). QoS 0 has no acknowledgement."`
	Retain               bool             `json:"retain" doc:"Retain flag (must be false)."`
	RequireSubscribers   bool             `json:"require_subscribers" doc:"Treat reason 0x10 (no matching subscribers) as a destination failure instead of a commit."`
	MessageExpirySeconds *int64           `json:"message_expiry_seconds" min:"1" max:"4294967295" doc:"Message Expiry Interval; null = none."`
	MaxInflight          int              `json:"max_inflight" min:"1" max:"65535" doc:"Publishes awaiting acknowledgement at once (the server's Receive Maximum caps it)."`
	brokerconfig.Options
	MaxRecordBytes int `json:"max_record_bytes" min:"1024" max:"268435455" doc:"Largest record (body plus user properties; at most the server's Maximum Packet Size); a larger message is dead-lettered (PermanentSinkError)."`
}

// Default returns the configuration with every default.
func Default() Config {
	return Config{
		Type:                 "mqtt",
		URL:                  "mqtt://127.0.0.1:1883",
		ProtocolVersion:      5,
		ClientIDPrefix:       "nats-sink",
		SessionExpirySeconds: 300,
		KeepAliveSeconds:     30,
		Topic:                "{subject}",
		QoS:                  1,
		RequireSubscribers:   true,
		MaxInflight:          64,
		Options:              brokerconfig.DefaultOptions("raw"),
		MaxRecordBytes:       brokerconfig.DefaultMaxRecordBytes,
	}
}

// Decode validates one mqtt "sink" object without I/O and returns its
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
	switch c.ProtocolVersion {
	case 5:
	case 4, 3:
		ck.Add("protocol_version", "MQTT 3.1.1 cannot report refused publishes; only 5 is supported")
	default:
		ck.Addf("protocol_version", "must be 5 (got %d)", c.ProtocolVersion)
	}
	ck.Append(c.Auth.Rules(false))
	if c.TLS.Enabled && u != nil && !u.tls {
		ck.Add("tls.enabled", "requires an mqtts or wss URL")
	}
	ck.Append(c.TLS.Rules(c.TLS.Enabled || (u != nil && u.tls)))
	if _, err := broker.ParseTemplate(c.Topic, broker.Topic); err != nil {
		ck.Add("topic", err.Error())
	} else if c.Topic == "" {
		ck.Add("topic", "must not be empty")
	}
	if c.Retain {
		ck.Add("retain", "must be false")
	}
	for _, pr := range ck.Problems() {
		p.Add(pr.Path, pr.Message)
	}
}

// target is a parsed url.
type target struct {
	url  *url.URL
	tls  bool
	host string
}

// parseURL checks an MQTT URL and returns its parts, or the problem.
func parseURL(s string) (*target, string) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Sprintf("must be an mqtt://, mqtts://, ws:// or wss:// URL (%v)", err)
	}
	t := &target{}
	port := ""
	switch u.Scheme {
	case "mqtt":
		port = "1883"
	case "mqtts":
		t.tls, port = true, "8883"
	case "ws":
		port = "80"
	case "wss":
		t.tls, port = true, "443"
	default:
		return nil, fmt.Sprintf("scheme must be mqtt, mqtts, ws or wss (got %q)", u.Scheme)
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
	case (u.Scheme == "mqtt" || u.Scheme == "mqtts") && u.Path != "" && u.Path != "/":
		return nil, "a path is only allowed for ws and wss"
	}
	if p := u.Port(); p != "" {
		port = p
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return nil, fmt.Sprintf("port must be between 1 and 65535 (got %q)", port)
	}
	t.host = u.Hostname()
	d := *u
	d.Host = net.JoinHostPort(t.host, port)
	if d.Scheme == "mqtt" || d.Scheme == "mqtts" {
		d.Path = ""
	}
	t.url = &d
	return t, ""
}
