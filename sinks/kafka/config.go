// Package kafkasink is the Kafka sink (spec sinks.md §9, data-shapes §12):
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
	"regexp"
	"strconv"
	"strings"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/subject"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/telemetry"
)

// Config is the kafka sink's configuration (sinks.md §9). Default returns it
// with every default; Decode fills it from a "sink" object.
type Config struct {
	Type             string             `json:"type" trim:"true" lower:"true" enum:"kafka" doc:"Sink type."`
	Brokers          []string           `json:"brokers" required:"true" minitems:"1" maxitems:"64" unique:"true" nonblank:"true" nopad:"true" nocontrol:"true" doc:"Seed brokers, host:port (1 to 64)."`
	Topic            string             `json:"topic" required:"true" pattern:"^[A-Za-z0-9._-]{1,249}$" doc:"Topic of every message no topic_routes entry matches. The sink never asks the cluster to create it."`
	TopicRoutes      []TopicRoute       `json:"topic_routes" doc:"Per-subject topics; the first route whose subject pattern matches wins, else topic."`
	ClientID         string             `json:"client_id" nonblank:"true" nopad:"true" nocontrol:"true" maxlen:"255" doc:"Kafka client.id, shown in broker logs and quotas."`
	RecordFormat     string             `json:"record_format" enum:"envelope,payload,raw" doc:"Record value: the nats_sinks.kafka.message.v1 envelope, the normalised payload alone, or the delivered bytes unchanged (data-shapes §12)."`
	PayloadMode      record.PayloadMode `json:"payload_mode" enum:"json_or_envelope,json_only,text_envelope,bytes_envelope" doc:"Payload normalisation for the envelope and payload formats (data-shapes §4)."`
	IncludeMetadata  bool               `json:"include_metadata" doc:"Add the standard metadata document to the envelope value."`
	KeyStrategy      string             `json:"key_strategy" enum:"idempotency_key,stream_sequence,message_id,payload_sha256" doc:"What the record key is derived from (data-shapes §5); a message without that material is dead-lettered (ValidationError)."`
	ForwardHeaders   bool               `json:"forward_headers" doc:"Copy the message's normalised NATS headers onto the record."`
	RecordTimestamp  string             `json:"record_timestamp" enum:"jetstream,now" doc:"jetstream: the message creation time (Nats-Time-Stamp, else the JetStream time); now: the produce time."`
	Acks             string             `json:"acks" enum:"all" doc:"Required acknowledgements: all in-sync replicas (the only value)."`
	Idempotent       bool               `json:"idempotent" doc:"Idempotent producer (must be true)."`
	Compression      string             `json:"compression" enum:"none,gzip,snappy,lz4,zstd" doc:"Record batch compression codec."`
	MaxRecordBytes   int                `json:"max_record_bytes" min:"1024" max:"104857600" doc:"Largest record as framed in a batch (key, value, headers and about 128 bytes of framing); a larger message is dead-lettered. Also the producer's batch size limit: keep it at or below the topic's max.message.bytes."`
	ProduceTimeoutMS int                `json:"produce_timeout_ms" min:"1000" max:"600000" doc:"How long one write waits for the broker's acknowledgements before its unacknowledged records are a temporary failure."`
	TLS              TLS                `json:"tls" doc:"TLS to the brokers."`
	SASL             SASL               `json:"sasl" doc:"SASL authentication to the brokers."`

	// Metrics, when set (by the CLI), receives kafka_produce_seconds and
	// kafka_records_total. Nil means no sink metrics.
	Metrics *telemetry.Metrics `json:"-"`
	// Env looks up environment variables for sasl.password_env; nil means
	// the process environment. Tests set it.
	Env config.Env `json:"-"`
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
	Mechanism    string  `json:"mechanism" trim:"true" lower:"true" enum:"none,plain,scram-sha-256,scram-sha-512" doc:"SASL mechanism."`
	Username     *string `json:"username" nonblank:"true" nopad:"true" nocontrol:"true" doc:"User name; required unless mechanism is none."`
	PasswordEnv  *string `json:"password_env" pattern:"^[A-Z_][A-Z0-9_]{0,127}$" doc:"Environment variable holding the password; one of password_env, password_file is required unless mechanism is none."`
	PasswordFile *string `json:"password_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"File holding the password (one trailing newline removed); alternative to password_env."`
}

var _ fields.Validator = (*Config)(nil)

// Default returns the configuration with every default of sinks.md §9.
func Default() Config {
	return Config{
		Type:             "kafka",
		Brokers:          []string{},
		TopicRoutes:      []TopicRoute{},
		ClientID:         "nats-sink",
		RecordFormat:     "envelope",
		PayloadMode:      record.JSONOrEnvelope,
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

// Validate checks the rules the struct tags cannot express; fields.DecodeSink
// calls it after decoding.
func (c *Config) Validate(p *fields.Problems) {
	for _, pr := range c.problems() {
		p.Add(pr.Path, pr.Message)
	}
}

// Open starts the sink; it is New behind the sink.Opener interface.
func (c Config) Open(ctx context.Context) (sink.Sink, error) {
	s, err := New(ctx, c)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// WithEnv returns c reading its *_env keys through env (nil: the process
// environment); pipeline.OpenSink passes the environment it was given.
func (c Config) WithEnv(env config.Env) sink.Opener {
	c.Env = env
	return c
}

// WithMetrics returns c with its sink metrics reported to m; the CLI calls it
// for every sink that has metrics of its own.
func (c Config) WithMetrics(m *telemetry.Metrics) sink.Opener {
	c.Metrics = m
	return c
}

var (
	topicName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)
	envName   = regexp.MustCompile(`^[A-Z_][A-Z0-9_]{0,127}$`)
)

// problems returns every rule violation in schema order. Decode reports the
// per-key rules through the struct tags first and calls this only when they
// pass; New runs it for Configs built by hand, so it repeats the per-key
// rules a hand-built Config could break.
func (c *Config) problems() []sink.Problem {
	var out []sink.Problem
	add := func(path, format string, args ...any) {
		out = append(out, sink.Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	if len(c.Brokers) == 0 {
		add("brokers", "must not be empty")
	} else if len(c.Brokers) > 64 {
		add("brokers", "must have at most 64 items (got %d)", len(c.Brokers))
	}
	for i, b := range c.Brokers {
		if msg := checkBroker(b); msg != "" {
			add(fields.Index("brokers", i), "%s", msg)
		}
	}
	if msg := checkTopic(c.Topic); msg != "" {
		add("topic", "%s", msg)
	}
	for i, r := range c.TopicRoutes {
		rp := fields.Index("topic_routes", i)
		if err := subject.Validate(r.Subject); err != nil {
			add(rp+".subject", "%s", err.Error())
		}
		if msg := checkTopic(r.Topic); msg != "" {
			add(rp+".topic", "%s", msg)
		}
	}
	if c.ClientID == "" || strings.TrimSpace(c.ClientID) != c.ClientID || fields.HasControl(c.ClientID) || len(c.ClientID) > 255 {
		add("client_id", "must be non-blank, at most 255 characters, without surrounding whitespace or control characters")
	}
	enum := func(path, got string, allowed ...string) {
		for _, a := range allowed {
			if got == a {
				return
			}
		}
		add(path, "must be one of %s (got %q)", strings.Join(allowed, ", "), got)
	}
	enum("record_format", c.RecordFormat, "envelope", "payload", "raw")
	enum("payload_mode", string(c.PayloadMode), "json_or_envelope", "json_only", "text_envelope", "bytes_envelope")
	enum("key_strategy", c.KeyStrategy, "idempotency_key", "stream_sequence", "message_id", "payload_sha256")
	enum("record_timestamp", c.RecordTimestamp, "jetstream", "now")
	enum("acks", c.Acks, "all")
	if !c.Idempotent {
		// A non-idempotent producer's own retries write duplicates and can
		// reorder a partition; the sink does not offer it.
		add("idempotent", "must be true: the sink always uses the idempotent producer")
	}
	enum("compression", c.Compression, "none", "gzip", "snappy", "lz4", "zstd")
	if c.MaxRecordBytes < 1024 || c.MaxRecordBytes > 104857600 {
		add("max_record_bytes", "must be between 1024 and 104857600 (got %d)", c.MaxRecordBytes)
	}
	if c.ProduceTimeoutMS < 1000 || c.ProduceTimeoutMS > 600000 {
		add("produce_timeout_ms", "must be between 1000 and 600000 (got %d)", c.ProduceTimeoutMS)
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
				add("tls."+f.key, "requires tls.enabled")
			}
		}
	}
	if t.CertFile != nil && t.KeyFile == nil {
		add("tls.cert_file", "requires tls.key_file")
	}
	if t.KeyFile != nil && t.CertFile == nil {
		add("tls.key_file", "requires tls.cert_file")
	}

	s := c.SASL
	enum("sasl.mechanism", s.Mechanism, "none", "plain", "scram-sha-256", "scram-sha-512")
	if s.Mechanism == "none" {
		if s.Username != nil {
			add("sasl.username", "requires a sasl.mechanism other than none")
		}
		if s.PasswordEnv != nil {
			add("sasl.password_env", "requires a sasl.mechanism other than none")
		}
		if s.PasswordFile != nil {
			add("sasl.password_file", "requires a sasl.mechanism other than none")
		}
	} else {
		if s.Username == nil || *s.Username == "" {
			add("sasl.username", "required unless sasl.mechanism is none")
		}
		switch {
		case s.PasswordEnv == nil && s.PasswordFile == nil:
			add("sasl.password_env", "required unless sasl.mechanism is none (or set sasl.password_file)")
		case s.PasswordEnv != nil && s.PasswordFile != nil:
			add("sasl.password_env", "set only one of password_env, password_file")
		}
	}
	if s.PasswordEnv != nil && !envName.MatchString(*s.PasswordEnv) {
		// Decode's pattern tag reports this first; this covers hand-built Configs.
		add("sasl.password_env", "must match %s (got %q)", envName, *s.PasswordEnv)
	}
	return out
}

// checkTopic returns the problem with a topic name, or "". Kafka itself
// rejects "." and "..", which the character rule lets through.
func checkTopic(t string) string {
	switch {
	case t == "":
		return "required"
	case !topicName.MatchString(t):
		return fmt.Sprintf("must be a Kafka topic name: 1 to 249 of A-Z a-z 0-9 . _ - (got %q)", t)
	case t == "." || t == "..":
		return fmt.Sprintf("must not be %q", t)
	}
	return ""
}

// checkBroker returns the problem with a seed broker address, or "".
func checkBroker(b string) string {
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
