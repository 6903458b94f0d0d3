// Package dlq builds dead-letter messages (docs/formats.md#dead-letter-messages): the body and
// every header. Publishing is the runner's job.
package dlq

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/sink"
)

// Options mirror the dead_letter config keys that shape the message.
type Options struct {
	IncludePayload bool
	IncludeHeaders bool
	IncludeError   bool
	// Consumer is nats.consumer, used in the deterministic Nats-Msg-Id.
	Consumer string
}

// Failure describes why a message is dead-lettered.
type Failure struct {
	ErrorType string // sink.PermanentSinkError, …, sink.MaxDeliveriesExceeded
	Error     string // payload-free text
	// Target names the fan-out target that refused the message; "" when
	// the failure is not a target's (x-fanout-target).
	Target string
}

// Targeted is an error that names the fan-out target that caused it.
type Targeted interface {
	error
	FanoutTarget() string
}

// Message is a dead-letter message ready to publish.
type Message struct {
	Body   []byte
	Header map[string][]string // convertible to nats.Header
	// MsgID is the deterministic Nats-Msg-Id, "" when the core key is
	// unavailable (then the header is omitted too).
	MsgID string
}

// Header names set on dead-letter messages (docs/formats.md#dlq-headers).
const (
	HeaderErrorType       = "Nats-Sinks-Error-Type"
	HeaderOriginalSubject = "Nats-Sinks-Original-Subject"
	HeaderMsgID           = "Nats-Msg-Id"
	HeaderReason          = "x-dead-letter-reason"
	HeaderXSubject        = "x-original-subject"
	HeaderXStream         = "x-original-stream"
	HeaderFailedAt        = "x-failed-at"
	HeaderDeliveryCount   = "x-delivery-count"
	HeaderFanoutTarget    = "x-fanout-target"
)

// MsgIDPrefix starts every DLQ Nats-Msg-Id: nats-sinks-dlq:<consumer>:<core key>.
const MsgIDPrefix = "nats-sinks-dlq:"

// maxReason bounds x-dead-letter-reason in bytes.
const maxReason = 512

// traceHeaders are copied verbatim from the original message: what
// docs/formats.md#dlq-headers asks for with tracing disabled. With tracing enabled the
// runner replaces them, before publishing, with the context of the dead
// letter's own publish span (tracing.Inject), so Build needs no tracer.
var traceHeaders = [...]string{"traceparent", "tracestate", "baggage"}

// Build returns the DLQ message for e. failedAt is the time the record is
// built (x-failed-at).
func Build(e *sink.Envelope, f Failure, o Options, failedAt time.Time) Message {
	key, keyErr := record.CoreKey(e)
	body := buildBody(e, f, o, key, keyErr == nil)
	m := Message{Body: jsonx.Marshal(body, jsonx.ASCII), Header: make(map[string][]string, 11)}
	set := func(k, v string) { m.Header[k] = []string{v} }
	set(HeaderErrorType, f.ErrorType)
	set(HeaderOriginalSubject, e.Subject)
	if keyErr == nil {
		m.MsgID = MsgIDPrefix + o.Consumer + ":" + key
		set(HeaderMsgID, m.MsgID)
	}
	reason := f.ErrorType
	if o.IncludeError && f.Error != "" {
		// Without an error text the reason is the type alone: "<type>: "
		// would end in a space that NATS header parsing trims anyway.
		reason += ": " + f.Error
	}
	set(HeaderReason, Reason(reason))
	set(HeaderXSubject, e.Subject)
	if e.Stream != "" {
		set(HeaderXStream, e.Stream)
	}
	set(HeaderFailedAt, record.FailedAt(failedAt))
	if e.DeliveryCount > 0 {
		set(HeaderDeliveryCount, strconv.FormatUint(e.DeliveryCount, 10))
	}
	if f.Target != "" {
		set(HeaderFanoutTarget, f.Target)
	}
	for _, name := range traceHeaders {
		if v, ok := e.Headers.Get(name); ok {
			set(name, v)
		}
	}
	return m
}

// buildBody returns the DLQ body document of docs/formats.md#dlq-body for e; key is the
// core idempotency key when hasKey. Members are in canonical key order, so
// jsonx encodes the object without sorting (optional members are appended
// where they fall in that order).
func buildBody(e *sink.Envelope, f Failure, o Options, key string, hasKey bool) jsonx.Object {
	var redelivered, pending, idemKey, keyUnavailable any
	if r, known := e.Redelivered(); known {
		redelivered = r
	}
	if e.Pending >= 0 {
		pending = e.Pending
	}
	if hasKey {
		idemKey = key
	} else {
		// CoreKey fails only for an omitted payload without stream or
		// message-id material.
		keyUnavailable = "payload_omitted"
	}
	body := make(jsonx.Object, 0, 20)
	body = append(body,
		jsonx.Member{Key: "classification", Value: nullable(e.Classification)},
		jsonx.Member{Key: "consumer", Value: nullable(e.Consumer)},
		jsonx.Member{Key: "consumer_sequence", Value: sequence(e.ConsumerSequence)},
	)
	if o.IncludeError {
		body = append(body,
			jsonx.Member{Key: "error", Value: f.Error},
			jsonx.Member{Key: "error_type", Value: f.ErrorType},
		)
	}
	if o.IncludeHeaders {
		body = append(body, jsonx.Member{Key: "headers", Value: record.Headers(e)})
	}
	body = append(body,
		jsonx.Member{Key: "idempotency_key", Value: idemKey},
		jsonx.Member{Key: "idempotency_key_unavailable_reason", Value: keyUnavailable},
		jsonx.Member{Key: "labels", Value: record.Labels(e)},
		jsonx.Member{Key: "message_id", Value: nullable(e.MessageID)},
		jsonx.Member{Key: "payload", Value: record.PayloadObject(e)},
	)
	if o.IncludePayload {
		if e.Payload.Present {
			body = append(body, jsonx.Member{Key: "payload_base64", Value: base64.StdEncoding.EncodeToString(e.Data)})
		} else {
			reason := e.Payload.OmittedReason
			if reason == "" {
				reason = "payload_omitted"
			}
			body = append(body, jsonx.Member{Key: "payload_unavailable_reason", Value: reason})
		}
	}
	body = append(body,
		jsonx.Member{Key: "pending", Value: pending},
		jsonx.Member{Key: "priority", Value: nullable(e.Priority)},
		jsonx.Member{Key: "redelivered", Value: redelivered},
		jsonx.Member{Key: "stream", Value: nullable(e.Stream)},
		jsonx.Member{Key: "stream_sequence", Value: sequence(e.StreamSequence)},
		jsonx.Member{Key: "subject", Value: e.Subject},
	)
	if !e.Timestamp.IsZero() {
		body = append(body, jsonx.Member{Key: "timestamp", Value: record.ISO(record.JetStreamTime(e.Timestamp))})
	}
	return body
}

// Reason makes s a safe x-dead-letter-reason value: control characters (C0,
// DEL and C1, which would break or confuse the header line) become spaces,
// invalid UTF-8 becomes U+FFFD, and the result is cut to at most 512 bytes
// without splitting a character.
func Reason(s string) string {
	var b strings.Builder
	b.Grow(min(len(s), maxReason))
	for _, r := range s {
		if unicode.IsControl(r) {
			r = ' '
		}
		if b.Len()+utf8.RuneLen(r) > maxReason {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func sequence(n uint64) any {
	if n == 0 {
		return nil
	}
	return n
}
