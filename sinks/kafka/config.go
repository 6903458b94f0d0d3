// Package kafkasink is the Kafka sink (docs/kafka.md, docs/formats.md#kafka-records):
// every message becomes one Kafka record, produced by franz-go's idempotent
// producer with acks=all, and counts as written only when the broker
// acknowledged that record.
//
// The duplicate model is the record key. The idempotent producer removes the
// duplicates its own retries would create within one producer session, but a
// crash between the broker's acknowledgement and the runner's NATS ACK
// redelivers the message, and the redelivery is produced again as a second
// record with the same key (and, through the key-hash partitioner, in the
// same partition). Consumers de-duplicate by key, or the topic is compacted.
// "Exactly once" therefore means "exactly one distinct key", never "exactly
// one record"; docs/kafka.md states this for operators.
//
// The directory is sinks/kafka; the package is named kafkasink so that it
// does not read as the client library in importers.
package kafkasink

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/subject"
	"github.com/nats-sinks/nats-sink/sink"
)

// Config is the kafka sink's configuration (docs/kafka.md). Default returns it
// with every default; Decode fills it from a "sink" object.
type Config struct {
	Type             string       `json:"type" trim:"true" lower:"true" enum:"kafka" doc:"Sink type."`
	Brokers          []string     `json:"brokers" required:"true" minitems:"1" maxitems:"64" unique:"true" nonblank:"true" nopad:"true" nocontrol:"true" doc:"Seed brokers, host:port (1 to 64)."`
	Topic            string       `json:"topic" required:"true" pattern:"^[A-Za-z0-9._-]{1,249}$" doc:"Topic of every message no topic_routes entry matches. The sink never asks the cluster to create it."`
	TopicRoutes      []TopicRoute `json:"topic_routes" doc:"Per-subject topics; the first route whose subject pattern matches wins, else topic."`
	ClientID         string       `json:"client_id" nonblank:"true" nopad:"true" nocontrol:"true" maxlen:"255" doc:"Kafka client.id, shown in broker logs and quotas."`
	RecordFormat     string       `json:"record_format" enum:"envelope,payload,raw" doc:"Record value: the nats_sinks.kafka.message.v1 envelope, the normalised payload alone, or the delivered bytes unchanged (docs/formats.md#kafka-records)."`
	PayloadMode      string       `json:"payload_mode" enum:"json_or_envelope,json_only,text_envelope,bytes_envelope" doc:"Payload normalisation for the envelope and payload formats (docs/formats.md#payload-normalisation)."`
	IncludeMetadata  bool         `json:"include_metadata" doc:"Add the standard metadata document to the envelope value."`
	KeyStrategy      string       `json:"key_strategy" enum:"idempotency_key,stream_sequence,message_id,payload_sha256" doc:"What the record key is derived from (docs/formats.md#idempotency-keys); a message without that material is dead-lettered (ValidationError)."`
	ForwardHeaders   bool         `json:"forward_headers" doc:"Copy the message's normalised NATS headers onto the record."`
	RecordTimestamp  string       `json:"record_timestamp" enum:"jetstream,now" doc:"jetstream: the message creation time (Nats-Time-Stamp, else the JetStream time); now: the produce time."`
	Acks             string       `json:"acks" enum:"all" doc:"Required acknowledgements: all in-sync replicas (the only value)."`
	Idempotent       bool         `json:"idempotent" doc:"Idempotent producer (must be true)."`
	Compression      string       `json:"compression" enum:"none,gzip,snappy,lz4,zstd" doc:"Record batch compression codec."`
	MaxRecordBytes   int          `json:"max_record_bytes" min:"1024" max:"104857600" doc:"Largest record as framed in a batch (key, value, headers and about 128 bytes of framing); a larger message is dead-lettered. Also the producer's batch size limit: keep it at or below the topic's max.message.bytes."`
	ProduceTimeoutMS int          `json:"produce_timeout_ms" min:"1000" max:"600000" doc:"How long one write waits for the broker's acknowledgements before its unacknowledged records are a temporary failure."`
	TLS              TLS          `json:"tls" doc:"TLS to the brokers."`
	SASL             SASL         `json:"sasl" doc:"SASL authentication to the brokers."`
}

// TopicRoute is one topic_routes item: messages whose subject matches the
// pattern go to the topic.
type TopicRoute struct {
	Subject string `json:"subject" required:"true" doc:"NATS subject pattern."`
	Topic   string `json:"topic" required:"true" pattern:"^[A-Za-z0-9._-]{1,249}$" doc:"Kafka topic."`
}

// TLS is the "tls" object. The files are read when the sink opens.
type TLS struct {
	Enabled            bool    `json:"enabled" doc:"Connect with TLS."`
	CAFile             *string `json:"ca_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"PEM CA bundle; when set only these CAs are trusted, else the system roots."`
	CertFile           *string `json:"cert_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"Client certificate (mTLS); requires key_file."`
	KeyFile            *string `json:"key_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"Client key (mTLS); requires cert_file."`
	InsecureSkipVerify bool    `json:"insecure_skip_verify" doc:"Disable certificate and host-name verification (lab use only)."`
}

// SASL is the "sasl" object. The password is read from the environment (or
// a file) when the sink opens, never from the configuration file itself.
type SASL struct {
	Mechanism    string  `json:"mechanism" trim:"true" lower:"true" enum:"none,plain,scram-sha-256,scram-sha-512" doc:"SASL mechanism; plain without tls.enabled is accepted but warned about (the password crosses in clear text)."`
	Username     *string `json:"username" nonblank:"true" nopad:"true" nocontrol:"true" doc:"User name; required unless mechanism is none."`
	PasswordEnv  *string `json:"password_env" pattern:"^[A-Z_][A-Z0-9_]{0,127}$" doc:"Environment variable holding the password; one of password_env, password_file is required unless mechanism is none."`
	PasswordFile *string `json:"password_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"File holding the password (one trailing newline removed); alternative to password_env."`
}

var _ fields.Validator = (*Config)(nil)

// Default returns the configuration with every default of docs/kafka.md.
func Default() Config {
	return Config{
		Type:             "kafka",
		Brokers:          []string{},
		TopicRoutes:      []TopicRoute{},
		ClientID:         "nats-sink",
		RecordFormat:     "envelope",
		PayloadMode:      string(record.JSONOrEnvelope),
		IncludeMetadata:  true,
		KeyStrategy:      "idempotency_key",
		ForwardHeaders:   true,
		RecordTimestamp:  "jetstream",
		Acks:             "all",
		Idempotent:       true,
		Compression:      "none",
		MaxRecordBytes:   1048576,
		ProduceTimeoutMS: 30000,
		SASL:             SASL{Mechanism: "none"},
	}
}

// Decode validates one kafka "sink" object without I/O and returns its
// Config. Problems come back as one *sink.ConfigError with paths relative to
// the sink object ("brokers: required"). The SASL password is read by Open,
// not here.
func Decode(raw json.RawMessage) (sink.Opener, error) {
	c := Default()
	if err := fields.DecodeSink(raw, &c); err != nil {
		return nil, err
	}
	return c, nil
}

// Validate checks c: the rules of the struct tags and, when they pass, the
// rules they cannot express. Problems have paths relative to the sink
// object and come back as one *sink.ConfigError, or nil. Decode calls it on
// the decoded object, New before anything else, so a Config built in Go is
// checked like a loaded one.
func (c *Config) Validate() error { return fields.Validate(c, c.rules) }

// Open starts the sink; it is New behind the sink.Opener interface.
func (c Config) Open(ctx context.Context, deps sink.Deps) (sink.Sink, error) {
	s, err := New(ctx, c, deps)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// rules checks what the struct tags cannot express: broker addresses,
// topic names Kafka rejects, route subjects, the idempotent producer, and
// the keys of tls and sasl that belong together.
func (c *Config) rules(p *fields.Problems) {
	for i, b := range c.Brokers {
		if msg := checkBroker(b); msg != "" {
			p.Add(fields.Index("brokers", i), msg)
		}
	}
	if msg := checkTopic(c.Topic); msg != "" {
		p.Add("topic", msg)
	}
	for i, r := range c.TopicRoutes {
		rp := fields.Index("topic_routes", i)
		if err := subject.Validate(r.Subject); err != nil {
			p.Add(rp+".subject", err.Error())
		}
		if msg := checkTopic(r.Topic); msg != "" {
			p.Add(rp+".topic", msg)
		}
	}
	if !c.Idempotent {
		// A non-idempotent producer's own retries write duplicates and can
		// reorder a partition; the sink does not offer it.
		p.Add("idempotent", "must be true: the sink always uses the idempotent producer")
	}

	t := c.TLS
	if !t.Enabled {
		// Files or a verification switch without TLS would silently do
		// nothing: the operator meant to use TLS.
		for _, f := range []struct {
			key string
			set bool
		}{{"ca_file", t.CAFile != nil}, {"cert_file", t.CertFile != nil}, {"key_file", t.KeyFile != nil}, {"insecure_skip_verify", t.InsecureSkipVerify}} {
			if f.set {
				p.Add("tls."+f.key, "requires tls.enabled")
			}
		}
	}
	if t.CertFile != nil && t.KeyFile == nil {
		p.Add("tls.cert_file", "requires tls.key_file")
	}
	if t.KeyFile != nil && t.CertFile == nil {
		p.Add("tls.key_file", "requires tls.cert_file")
	}

	s := c.SASL
	if s.Mechanism == "none" {
		if s.Username != nil {
			p.Add("sasl.username", "requires a sasl.mechanism other than none")
		}
		if s.PasswordEnv != nil {
			p.Add("sasl.password_env", "requires a sasl.mechanism other than none")
		}
		if s.PasswordFile != nil {
			p.Add("sasl.password_file", "requires a sasl.mechanism other than none")
		}
	} else {
		if s.Username == nil || *s.Username == "" {
			p.Add("sasl.username", "required unless sasl.mechanism is none")
		}
		switch {
		case s.PasswordEnv == nil && s.PasswordFile == nil:
			p.Add("sasl.password_env", "required unless sasl.mechanism is none (or set sasl.password_file)")
		case s.PasswordEnv != nil && s.PasswordFile != nil:
			p.Add("sasl.password_env", "set only one of password_env, password_file")
		}
	}
}

var _ sink.Warner = Config{}

// Warnings reports the settings that are accepted but weak: SASL PLAIN
// without TLS sends the password to the brokers in clear text (accepted for
// brokers on a trusted network, as the Kafka clients do).
func (c Config) Warnings() []sink.Problem {
	if c.SASL.Mechanism == "plain" && !c.TLS.Enabled {
		return []sink.Problem{{Path: "sasl.mechanism", Message: "plain without tls.enabled sends the SASL password to the brokers in clear text; " +
			"enable tls (or use scram-sha-512 over TLS)"}}
	}
	return nil
}

// checkTopic returns the problem with a topic name, or "". Kafka itself
// rejects "." and "..", which the character rule of the pattern tag lets
// through.
func checkTopic(t string) string {
	if t == "." || t == ".." {
		return fmt.Sprintf("must not be %q", t)
	}
	return ""
}

// checkBroker returns the problem with a seed broker address, or "".
func checkBroker(b string) string {
	if strings.Contains(b, "@") {
		// Not echoed: user-info is where credentials hide.
		return "must be host:port without user-info; credentials belong in sasl"
	}
	host, port, err := net.SplitHostPort(b)
	if err != nil || host == "" {
		return fmt.Sprintf("must be host:port (got %q)", b)
	}
	if strings.ContainsAny(host, "/@ ") {
		return fmt.Sprintf("host must be a host name or IP address (got %q)", host)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Sprintf("port must be between 1 and 65535 (got %q)", port)
	}
	return ""
}

// topics returns every configured topic once, the default topic first:
// what the healthcheck proves exists.
func (c *Config) topics() []string {
	out := []string{c.Topic}
	for _, r := range c.TopicRoutes {
		dup := false
		for _, t := range out {
			dup = dup || t == r.Topic
		}
		if !dup {
			out = append(out, r.Topic)
		}
	}
	return out
}

// topicFor returns the topic of a message on subj: the first matching
// route's, else the default topic.
func (c *Config) topicFor(subj string) string {
	for _, r := range c.TopicRoutes {
		if subject.Match(r.Subject, subj) {
			return r.Topic
		}
	}
	return c.Topic
}
