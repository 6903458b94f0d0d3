package kafkasink

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/sink"
)

// Schema is the schema name of envelope values (docs/formats.md#kafka-records).
const Schema = "nats_sinks.kafka.message.v1"

// Record headers the sink sets itself (docs/formats.md#kafka-records).
const (
	HeaderSubject        = "nats-sinks-subject"
	HeaderStream         = "nats-sinks-stream"
	HeaderStreamSequence = "nats-sinks-stream-sequence"
	HeaderIdempotencyKey = "nats-sinks-idempotency-key"
)

// traceHeaders carry the message's trace context. Record copies them
// verbatim from the message, after the sink's own headers: what
// docs/tracing.md asks for with tracing disabled. With tracing, WriteBatch
// replaces them with the context of the record's produce span
// (setTraceHeaders).
var traceHeaders = [...]string{"traceparent", "tracestate", "baggage"}

// ownHeaders are never forwarded from the message: the sink sets them, and
// Kafka headers may repeat a name, so a forwarded copy would let a publisher
// spoof the origin a consumer reads.
var ownHeaders = [...]string{HeaderSubject, HeaderStream, HeaderStreamSequence, HeaderIdempotencyKey}

// Record builds the Kafka record e is written as (docs/formats.md#kafka-records): topic,
// key, value, headers and timestamp. storedAt is the time the envelope
// value's metadata is built. Errors are Permanent (sink.Failed classifies
// them): no key material (ValidationError), a payload that cannot be
// normalised or a record larger than max_record_bytes (SerializationError).
func (c *Config) Record(e *sink.Envelope, storedAt time.Time) (*kgo.Record, error) {
	key, err := c.key(e)
	if err != nil {
		return nil, err
	}
	r := &kgo.Record{Topic: c.topicFor(e.Subject), Key: []byte(key), Headers: c.headers(e, key)}
	switch c.RecordFormat {
	case "raw":
		// The delivered bytes unchanged; for a headers-only delivery that
		// is the empty value. A nil slice would be a Kafka null value
		// (a tombstone on a compacted topic), so empty stays empty.
		r.Value = e.Data
		if r.Value == nil {
			r.Value = []byte{}
		}
	default:
		p, err := record.NormalisePayload(e, record.PayloadMode(c.PayloadMode))
		if err != nil {
			return nil, err
		}
		var doc any = p.Value
		if c.RecordFormat == "envelope" {
			// docs/formats.md#kafka-records: the HTTP envelope with its schema changed
			// and labels ";"-joined. The kafka sink has only
			// include_metadata; mission_metadata, security_labels and
			// custody are always there (null), as with the HTTP sink's
			// defaults. idempotency_key is the record key.
			doc = record.MessageEnvelope(e, p, record.EnvelopeOptions{
				Schema:          Schema,
				LabelSeparator:  ";",
				IdempotencyKey:  true,
				Key:             key,
				Metadata:        c.IncludeMetadata,
				StoredAt:        storedAt,
				Custody:         true,
				MissionMetadata: true,
				SecurityLabels:  true,
			})
		}
		r.Value = jsonx.Marshal(doc, jsonx.UTF8)
	}
	if c.RecordTimestamp == "jetstream" {
		// Message creation time, else the JetStream time (record.CreatedAt
		// falls back in that order), else left zero: kgo stamps it with
		// the produce time.
		r.Timestamp = record.CreatedAt(e).Time
	}
	if n := framedSize(r); n > c.MaxRecordBytes {
		// SerializationError, as the HTTP sink's oversized body: the
		// serialised form of this message is what does not fit.
		return nil, sink.AsPermanentType(sink.SerializationError,
			fmt.Errorf("kafka record of %d bytes exceeds max_record_bytes (%d)", n, c.MaxRecordBytes))
	}
	return r, nil
}

// framedSize is an upper bound of the bytes r takes as the only record of
// a record batch in a produce request: its key, value and headers, the
// varint lengths around each (at most 5 bytes each), and 128 bytes for the
// record and batch framing (franz-go counts 61 bytes of batch header plus
// the request's per-partition fields). The producer's own size check
// uses the exact figure, which this bound is never below, so a record that
// passes here is never refused by the client for its size.
func framedSize(r *kgo.Record) int {
	n := 128 + len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += 10 + len(h.Key) + len(h.Value)
	}
	return n
}

// key returns the record key of e per key_strategy (docs/formats.md#idempotency-keys).
// Missing material is a Permanent ValidationError (docs/kafka.md): a record
// without its key would escape the consumers' de-duplication.
func (c *Config) key(e *sink.Envelope) (string, error) {
	switch c.KeyStrategy {
	case "stream_sequence":
		if e.Stream == "" || e.StreamSequence == 0 {
			return "", sink.AsPermanentType(sink.ValidationError,
				errors.New("stream_sequence key strategy requires JetStream stream and sequence metadata"))
		}
		return "stream-sequence:" + e.Stream + ":" + strconv.FormatUint(e.StreamSequence, 10), nil
	case "message_id":
		if e.MessageID == "" {
			return "", sink.AsPermanentType(sink.ValidationError,
				errors.New("message_id key strategy requires a message id (Nats-Msg-Id)"))
		}
		return "message-id:" + e.MessageID, nil
	case "payload_sha256":
		// docs/migrating.md Q17: hashing the empty body of a headers-only message
		// would give every such message on a subject the same key.
		if e.Payload.Omitted {
			return "", sink.AsPermanentType(sink.ValidationError,
				errors.New("payload_sha256 key is unavailable because the original payload bytes were omitted"))
		}
		sum := sha256.Sum256(e.Data)
		return "payload-sha256:" + e.Subject + ":" + hex.EncodeToString(sum[:]), nil
	default: // idempotency_key
		return record.CoreKey(e)
	}
}

// headers returns the record headers (docs/formats.md#kafka-records): when
// forward_headers, the message's normalised headers sorted by name (Kafka
// keeps header order, and a stable order makes records comparable) except
// the trace headers and the sink's own names; then the sink's headers; then
// the trace headers.
func (c *Config) headers(e *sink.Envelope, key string) []kgo.RecordHeader {
	h := make([]kgo.RecordHeader, 0, len(e.Headers)+7)
	if c.ForwardHeaders && len(e.Headers) > 0 {
		names := make([]string, 0, len(e.Headers))
		for name := range e.Headers {
			if !isOneOf(name, traceHeaders[:]) && !isOneOf(name, ownHeaders[:]) {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		for _, name := range names {
			h = append(h, kgo.RecordHeader{Key: name, Value: []byte(e.Headers[name])})
		}
	}
	h = append(h, kgo.RecordHeader{Key: HeaderSubject, Value: []byte(e.Subject)})
	// The spec omits only an unknown key; an unknown stream or sequence is
	// omitted too, since an empty value would only look like a name.
	if e.Stream != "" {
		h = append(h, kgo.RecordHeader{Key: HeaderStream, Value: []byte(e.Stream)})
	}
	if e.StreamSequence != 0 {
		h = append(h, kgo.RecordHeader{Key: HeaderStreamSequence, Value: []byte(strconv.FormatUint(e.StreamSequence, 10))})
	}
	if key != "" {
		h = append(h, kgo.RecordHeader{Key: HeaderIdempotencyKey, Value: []byte(key)})
	}
	for _, name := range traceHeaders {
		if v, ok := e.Headers.Get(name); ok {
			h = append(h, kgo.RecordHeader{Key: name, Value: []byte(v)})
		}
	}
	return h
}

// setTraceHeaders replaces r's trace headers (any case) with h, appended
// in the order of traceHeaders, as Record places them.
func setTraceHeaders(r *kgo.Record, h map[string]string) {
	r.Headers = slices.DeleteFunc(r.Headers, func(rh kgo.RecordHeader) bool { return isOneOf(rh.Key, traceHeaders[:]) })
	for _, name := range traceHeaders {
		if v, ok := h[name]; ok {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: name, Value: []byte(v)})
		}
	}
}

func isOneOf(name string, set []string) bool {
	for _, s := range set {
		if strings.EqualFold(name, s) {
			return true
		}
	}
	return false
}
