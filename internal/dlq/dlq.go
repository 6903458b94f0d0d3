// Package dlq builds dead-letter messages (spec data-shapes §8): the body and
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
}

// Message is a dead-letter message ready to publish.
type Message struct {
	Body   []byte
	Header map[string][]string // convertible to nats.Header
	// MsgID is the deterministic Nats-Msg-Id, "" when the core key is
	// unavailable (then the header is omitted too).
	MsgID string
}

// Header names set on dead-letter messages (data-shapes §8.2).
const (
	HeaderErrorType       = "Nats-Sinks-Error-Type"
	HeaderOriginalSubject = "Nats-Sinks-Original-Subject"
	HeaderMsgID           = "Nats-Msg-Id"
	HeaderReason          = "x-dead-letter-reason"
	HeaderXSubject        = "x-original-subject"
	HeaderXStream         = "x-original-stream"
	HeaderFailedAt        = "x-failed-at"
	HeaderDeliveryCount   = "x-delivery-count"
)

// MsgIDPrefix starts every DLQ Nats-Msg-Id: nats-sinks-dlq:<consumer>:<core key>.
const MsgIDPrefix = "nats-sinks-dlq:"

// maxReason bounds x-dead-letter-reason in bytes.
const maxReason = 512

// traceHeaders are forwarded verbatim while tracing is not implemented
// (data-shapes §8.2, tracing disabled).
var traceHeaders = [...]string{"traceparent", "tracestate", "baggage"}

// Build returns the DLQ message for e. failedAt is the time the record is
// built (x-failed-at).
func Build(e *sink.Envelope, f Failure, o Options, failedAt time.Time) Message {
	key, keyErr := record.CoreKey(e)
	body := map[string]any{
		"subject":                            e.Subject,
		"stream":                             nullable(e.Stream),
		"consumer":                           nullable(e.Consumer),
		"stream_sequence":                    sequence(e.StreamSequence),
		"consumer_sequence":                  sequence(e.ConsumerSequence),
		"message_id":                         nullable(e.MessageID),
		"priority":                           nullable(e.Priority),
		"classification":                     nullable(e.Classification),
		"labels":                             record.Labels(e),
		"redelivered":                        nil,
		"pending":                            nil,
		"idempotency_key":                    nil,
		"idempotency_key_unavailable_reason": nil,
		"payload":                            record.PayloadObject(e),
	}
	if r, known := e.Redelivered(); known {
		body["redelivered"] = r
	}
	if e.Pending >= 0 {
		body["pending"] = e.Pending
	}
	if keyErr == nil {
		body["idempotency_key"] = key
	} else {
		// CoreKey fails only for an omitted payload without stream or
		// message-id material.
		body["idempotency_key_unavailable_reason"] = "payload_omitted"
	}
	if o.IncludeError {
		body["error_type"] = f.ErrorType
		body["error"] = f.Error
	}
	if !e.Timestamp.IsZero() {
		body["timestamp"] = record.ISO(record.JetStreamTime(e.Timestamp))
	}
	if o.IncludeHeaders {
		body["headers"] = record.Headers(e)
	}
	if o.IncludePayload {
		if e.Payload.Present {
			body["payload_base64"] = base64.StdEncoding.EncodeToString(e.Data)
		} else {
			reason := e.Payload.OmittedReason
			if reason == "" {
				reason = "payload_omitted"
			}
			body["payload_unavailable_reason"] = reason
		}
	}

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
	for _, name := range traceHeaders {
		if v, ok := e.Headers.Get(name); ok {
			set(name, v)
		}
	}
	return m
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
