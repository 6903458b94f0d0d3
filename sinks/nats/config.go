// Package natssink is the NATS republish sink (docs/nats-sink.md,
// docs/formats.md#nats-republish-messages): every message is published to a JetStream-stored subject
// and counts as written only when its PubAck arrives. The package is named
// natssink, not nats, so that it does not clash with nats.go in importers.
//
// The duplicate model is JetStream's own: each message carries Nats-Msg-Id =
// the core idempotency key, so a redelivery inside the target stream's
// duplicate window is answered with a PubAck flagged duplicate and reported
// as sink.Duplicate.
package natssink

import (
	"context"
	"encoding/json"
	"regexp"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/subject"
	"github.com/nats-sinks/nats-sink/natsconfig"
	"github.com/nats-sinks/nats-sink/sink"
)

// Config is the nats sink's configuration (docs/nats-sink.md). Default returns it
// with every default; Decode fills it from a "sink" object.
type Config struct {
	Type                   string                 `json:"type" trim:"true" lower:"true" enum:"nats" doc:"Sink type."`
	Subject                *string                `json:"subject" nonblank:"true" doc:"Literal target subject; exactly one of subject, subject_prefix."`
	SubjectPrefix          *string                `json:"subject_prefix" nonblank:"true" doc:"Target = prefix + \".\" + original subject; exactly one of subject, subject_prefix."`
	Connection             *natsconfig.Connection `json:"connection" doc:"null reuses the source connection; else the connection keys of the nats section, for another cluster or account."`
	ExpectedStream         *string                `json:"expected_stream" nonblank:"true" doc:"Publishes fail unless this stream stores the message (Nats-Expected-Stream)."`
	BodyFormat             string                 `json:"body_format" enum:"raw,envelope" doc:"raw = the delivered bytes; envelope = nats_sinks.nats.message.v1 (docs/formats.md#nats-republish-messages)."`
	PayloadMode            string                 `json:"payload_mode" enum:"json_or_envelope,json_only,text_envelope,bytes_envelope" doc:"Payload normalisation for the envelope body (docs/formats.md#payload-normalisation)."`
	ForwardHeaders         bool                   `json:"forward_headers" doc:"Copy the original headers, except names starting with Nats-."`
	PublishTimeoutMS       int                    `json:"publish_timeout_ms" min:"100" max:"60000" doc:"How long one publish waits for its PubAck."`
	MaxConcurrentPublishes int                    `json:"max_concurrent_publishes" min:"1" max:"10000" doc:"Outstanding asynchronous publishes of the sink."`
}

var _ fields.Validator = (*Config)(nil)

// Default returns the configuration with every default of docs/nats-sink.md.
func Default() Config {
	return Config{
		Type:                   "nats",
		BodyFormat:             "raw",
		PayloadMode:            string(record.JSONOrEnvelope),
		ForwardHeaders:         true,
		PublishTimeoutMS:       5000,
		MaxConcurrentPublishes: 256,
	}
}

// Decode validates one nats "sink" object without I/O and returns its
// Config. Problems come back as one *sink.ConfigError with paths relative to
// the sink object ("subject: ...").
func Decode(raw json.RawMessage) (sink.Opener, error) {
	c := Default()
	if err := fields.DecodeSink(raw, &c); err != nil {
		return nil, err
	}
	return c, nil
}

// Validate checks c: the rules of the struct tags (the connection's
// included) and, when they pass, the rules they cannot express. Problems
// have paths relative to the sink object and come back as one
// *sink.ConfigError, or nil. Decode calls it on the decoded object, New
// before anything else, so a Config built in Go is checked like a loaded
// one. The loop rule needs the source's filters and is checked by New.
func (c *Config) Validate() error { return fields.Validate(c, c.rules) }

var streamNameBad = regexp.MustCompile(`[\x00-\x20\x7f.*>/\\\x{85}\x{a0}]`)

func (c *Config) rules(p *fields.Problems) {
	switch {
	case c.Subject == nil && c.SubjectPrefix == nil:
		p.Add("subject", "exactly one of subject, subject_prefix is required")
	case c.Subject != nil && c.SubjectPrefix != nil:
		p.Add("subject", "set only one of subject, subject_prefix")
	}
	if c.Subject != nil && !subject.IsLiteral(*c.Subject) {
		p.Add("subject", "must be a literal subject: no wildcards, empty tokens or whitespace")
	}
	if c.SubjectPrefix != nil && !subject.IsLiteral(*c.SubjectPrefix) {
		p.Add("subject_prefix", "must be a literal subject prefix: no wildcards, empty tokens or whitespace")
	}
	if c.Connection != nil {
		for _, pr := range c.Connection.Rules("connection", "") {
			p.Add(pr.Path, pr.Message)
		}
	}
	if c.ExpectedStream != nil && streamNameBad.MatchString(*c.ExpectedStream) {
		p.Add("expected_stream", `must not contain whitespace, '.', '*', '>', '/' or '\'`)
	}
}

// Open starts the sink; it is New behind the sink.Opener interface.
func (c Config) Open(ctx context.Context, deps sink.Deps) (sink.Sink, error) {
	s, err := New(ctx, c, deps)
	if err != nil {
		return nil, err
	}
	return s, nil
}
