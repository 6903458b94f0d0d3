package natssink

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/sink"
)

// Schema is the schema name of envelope bodies (docs/formats.md#nats-republish-messages).
const Schema = "nats_sinks.nats.message.v1"

// Header names the sink sets on every republished message (docs/formats.md#nats-republish-messages).
const (
	HeaderMsgID            = "Nats-Msg-Id"
	HeaderOriginalSubject  = "Nats-Sinks-Original-Subject"
	HeaderOriginalStream   = "Nats-Sinks-Original-Stream"
	HeaderOriginalSequence = "Nats-Sinks-Original-Sequence"
	HeaderExpectedStream   = "Nats-Expected-Stream"
)

// traceHeaders carry W3C trace context. Message copies them verbatim from
// the original message, whether or not forward_headers is on: what
// docs/tracing.md asks for with tracing disabled. With tracing, WriteBatch
// replaces them with the context of the republish span.
var traceHeaders = [...]string{"traceparent", "tracestate", "baggage"}

// target returns the subject e is republished to.
func (c *Config) target(e *sink.Envelope) string {
	if c.Subject != nil {
		return *c.Subject
	}
	return *c.SubjectPrefix + "." + e.Subject
}

// probeSubject is the subject whose stream Start and Healthcheck look up:
// the literal subject, or <prefix>.healthcheck (docs/nats-sink.md).
func (c *Config) probeSubject() string {
	if c.Subject != nil {
		return *c.Subject
	}
	return *c.SubjectPrefix + ".healthcheck"
}

// Message builds the message e is republished as (docs/formats.md#nats-republish-messages):
// subject, body and headers. storedAt is the time the envelope body's
// metadata is built. Errors are Permanent (sink.Failed classifies them):
// no idempotency key (ValidationError) or a payload that cannot be
// normalised for the envelope body (SerializationError).
func (c *Config) Message(e *sink.Envelope, storedAt time.Time) (*nats.Msg, error) {
	key, err := record.CoreKey(e)
	if err != nil {
		return nil, err
	}
	m := &nats.Msg{Subject: c.target(e), Header: c.headers(e, key)}
	if c.BodyFormat == "envelope" {
		p, err := record.NormalisePayload(e, record.PayloadMode(c.PayloadMode))
		if err != nil {
			return nil, err
		}
		// docs/formats.md#nats-republish-messages: the HTTP envelope of docs/nats-sink.md with its schema
		// changed, in the ascii flavour. The HTTP sink's include_* options
		// default to true and the nats sink has none, so metadata (docs/oracle.md,
		// without custody), mission_metadata, security_labels and custody
		// are always present; idempotency_key is the core key (the
		// Nats-Msg-Id) and labels keep the HTTP envelope's ","-joined form.
		m.Data = jsonx.Marshal(record.MessageEnvelope(e, p, record.EnvelopeOptions{
			Schema:          Schema,
			LabelSeparator:  ",",
			IdempotencyKey:  true,
			Key:             key,
			Metadata:        true,
			StoredAt:        storedAt,
			Custody:         true,
			MissionMetadata: true,
			SecurityLabels:  true,
		}), jsonx.ASCII)
	} else {
		// raw: the delivered bytes unchanged, as the spec says; for a
		// headers-only delivery that is the empty body.
		m.Data = e.Data
	}
	return m, nil
}

// headers returns the republished message's headers: when forward_headers,
// the original ones except Nats-* names (which would steer the target
// stream: dedupe, expectations, TTL, rollups) and the trace headers, then
// the sink's own, then the trace headers and Nats-Expected-Stream.
func (c *Config) headers(e *sink.Envelope, key string) nats.Header {
	h := make(nats.Header, len(e.Headers)+6)
	if c.ForwardHeaders {
		for name, v := range e.Headers {
			if hasPrefixFold(name, "nats-") || isTraceHeader(name) {
				continue
			}
			h[name] = []string{v}
		}
	}
	h[HeaderMsgID] = []string{key}
	h[HeaderOriginalSubject] = []string{e.Subject}
	// The spec omits an unknown sequence; an unknown stream is omitted too,
	// since an empty value would only look like a stream name.
	if e.Stream != "" {
		h[HeaderOriginalStream] = []string{e.Stream}
	}
	if e.StreamSequence != 0 {
		h[HeaderOriginalSequence] = []string{strconv.FormatUint(e.StreamSequence, 10)}
	}
	for _, name := range traceHeaders {
		if v, ok := e.Headers.Get(name); ok {
			h[name] = []string{v}
		}
	}
	if c.ExpectedStream != nil {
		h[HeaderExpectedStream] = []string{*c.ExpectedStream}
	}
	return h
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

func isTraceHeader(name string) bool {
	for _, t := range traceHeaders {
		if strings.EqualFold(name, t) {
			return true
		}
	}
	return false
}

// errorf wraps err with the message's origin; the text names the subject
// and stream sequence only, never payload or header values.
func errorf(e *sink.Envelope, target string, err error) error {
	return fmt.Errorf("republish to %s (stream seq %d): %w", target, e.StreamSequence, err)
}
