package broker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-sinks/nats-sink/brokerconfig"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/sink"
)

// Names of the metadata set every broker record carries (Redis fields, AMQP
// headers, MQTT user properties).
const (
	Subject        = "nats-sinks-subject"
	Stream         = "nats-sinks-stream"
	StreamSequence = "nats-sinks-stream-sequence"
	IdempotencyKey = "nats-sinks-idempotency-key"
)

// TraceNames are the W3C trace-context names, the last entries of the
// metadata set.
var TraceNames = [...]string{"traceparent", "tracestate", "baggage"}

// Content types of record bodies.
const (
	JSON  = "application/json"
	Bytes = "application/octet-stream"
)

// A Pair is one name and value of a record's headers or metadata.
type Pair struct{ Name, Value string }

// A Record is one message as a broker sink writes it.
type Record struct {
	// Key is the idempotency key per key_strategy.
	Key string
	// Body is the record body per record_format.
	Body []byte
	// ContentType is JSON for the envelope and payload formats, Bytes for
	// raw.
	ContentType string
	// Headers are the forwarded message headers, sorted by name: none
	// without forward_headers; never a trace header or a name of the
	// metadata set.
	Headers []Pair
	// Meta is the metadata set, in its order; the trace entries are added
	// by SetTrace.
	Meta []Pair
}

// Size is what max_record_bytes limits: the body plus every name and value
// of the headers and the metadata set.
func (r *Record) Size() int {
	n := len(r.Body)
	for _, p := range r.Headers {
		n += len(p.Name) + len(p.Value)
	}
	for _, p := range r.Meta {
		n += len(p.Name) + len(p.Value)
	}
	return n
}

// SetTrace replaces the trace entries of the metadata set with h (what
// sink.Tracer.TraceHeaders returned), in the order of TraceNames.
func (r *Record) SetTrace(h map[string]string) {
	r.Meta = slices.DeleteFunc(r.Meta, func(p Pair) bool { return isTraceName(p.Name) })
	for _, name := range TraceNames {
		if v, ok := h[name]; ok {
			r.Meta = append(r.Meta, Pair{name, v})
		}
	}
}

// HeadersJSON returns the forwarded headers as one canonical (sorted, utf8,
// compact) JSON object, the Redis entry's "headers" field; nil when there
// are none.
func (r *Record) HeadersJSON() []byte {
	if len(r.Headers) == 0 {
		return nil
	}
	obj := make(jsonx.Object, len(r.Headers))
	for i, p := range r.Headers {
		obj[i] = jsonx.Member{Key: p.Name, Value: p.Value}
	}
	return jsonx.Marshal(obj, jsonx.UTF8)
}

// Build returns the record of e per o for the sink type typ ("redis",
// "rabbitmq", "mqtt"), without trace entries and without a size check
// (Check does that once the trace entries are in). Errors are Permanent:
// missing key material (ValidationError), a payload that cannot be
// normalised (SerializationError).
func Build(o *brokerconfig.Options, typ string, e *sink.Envelope, storedAt time.Time) (*Record, error) {
	key, err := Key(o, e)
	if err != nil {
		return nil, err
	}
	r := &Record{Key: key, ContentType: JSON}
	switch o.RecordFormat {
	case "raw":
		r.Body, r.ContentType = e.Data, Bytes
		if r.Body == nil {
			r.Body = []byte{}
		}
	default:
		p, err := record.NormalisePayload(e, record.PayloadMode(o.PayloadMode))
		if err != nil {
			return nil, err
		}
		var doc any = p.Value
		if o.RecordFormat == "envelope" {
			// The HTTP envelope with its schema changed and labels
			// ";"-joined, as the Kafka value; mission_metadata,
			// security_labels and custody are always there (null).
			doc = record.MessageEnvelope(e, p, record.EnvelopeOptions{
				Schema:          "nats_sinks." + typ + ".message.v1",
				LabelSeparator:  ";",
				IdempotencyKey:  true,
				Key:             key,
				Metadata:        o.IncludeMetadata,
				StoredAt:        storedAt,
				Custody:         true,
				MissionMetadata: true,
				SecurityLabels:  true,
			})
		}
		r.Body = jsonx.Marshal(doc, jsonx.UTF8)
	}
	names := metadataNames(o)
	if o.ForwardHeaders && len(e.Headers) > 0 {
		hs := make([]string, 0, len(e.Headers))
		for name := range e.Headers {
			if !isTraceName(name) && !names.isMeta(name) {
				hs = append(hs, name)
			}
		}
		slices.Sort(hs)
		r.Headers = make([]Pair, len(hs))
		for i, name := range hs {
			r.Headers[i] = Pair{name, e.Headers[name]}
		}
	}
	r.Meta = make([]Pair, 0, 10)
	r.Meta = append(r.Meta, Pair{Subject, e.Subject})
	if e.Stream != "" {
		r.Meta = append(r.Meta, Pair{Stream, e.Stream})
	}
	if e.StreamSequence != 0 {
		r.Meta = append(r.Meta, Pair{StreamSequence, strconv.FormatUint(e.StreamSequence, 10)})
	}
	r.Meta = append(r.Meta, Pair{IdempotencyKey, key})
	if e.Priority != "" {
		r.Meta = append(r.Meta, Pair{names.Priority, e.Priority})
	}
	if e.Classification != "" {
		r.Meta = append(r.Meta, Pair{names.Classification, e.Classification})
	}
	if labels := record.Labels(e); len(labels) > 0 {
		r.Meta = append(r.Meta, Pair{names.Labels, strings.Join(labels, ";")})
	}
	for _, name := range TraceNames {
		if v, ok := e.Headers.Get(name); ok {
			r.Meta = append(r.Meta, Pair{name, v})
		}
	}
	return r, nil
}

// CheckSize returns the Permanent PermanentSinkError of a record of n bytes
// (body plus metadata, as the sink counts them; Record.Size for most) when
// n is over limit (max_record_bytes), or nil.
func CheckSize(typ string, n, limit int) error {
	if n > limit {
		return sink.AsPermanent(fmt.Errorf("%s record exceeds max_record_bytes (%d bytes, limit %d)", typ, n, limit))
	}
	return nil
}

// Key returns e's idempotency key per o's key_strategy. Missing material is a
// Permanent ValidationError: a record without its key would escape the
// readers' de-duplication.
func Key(o *brokerconfig.Options, e *sink.Envelope) (string, error) {
	switch o.KeyStrategy {
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
		// Hashing the empty body of a headers-only message would give
		// every such message on a subject the same key.
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

// metadataNames returns o's metadata names with the defaults filled in.
func metadataNames(o *brokerconfig.Options) metaNames {
	n, d := o.Names, brokerconfig.DefaultMetadataNames()
	if n.Priority == "" {
		n.Priority = d.Priority
	}
	if n.Classification == "" {
		n.Classification = d.Classification
	}
	if n.Labels == "" {
		n.Labels = d.Labels
	}
	return metaNames(n)
}

type metaNames brokerconfig.MetadataNames

// isMeta reports whether name is (ignoring ASCII case) a name of the
// metadata set. Such headers are never forwarded: the sink sets them, and a
// forwarded copy would let a publisher spoof what a reader trusts.
func (n metaNames) isMeta(name string) bool {
	for _, m := range [...]string{Subject, Stream, StreamSequence, IdempotencyKey, n.Priority, n.Classification, n.Labels} {
		if strings.EqualFold(name, m) {
			return true
		}
	}
	return false
}

func isTraceName(name string) bool {
	for _, t := range TraceNames {
		if strings.EqualFold(name, t) {
			return true
		}
	}
	return false
}

// Trace starts a record's producer span under e's message span, named
// "send <destination>", and puts the span's trace context into r's metadata
// (without tracing: the message's own trace headers, which Build already
// copied). The caller ends the span with EndSpan.
func Trace(ctx context.Context, tr sink.Tracer, e *sink.Envelope, r *Record, system, destination string, attrs ...sink.Attr) sink.Span {
	attrs = append([]sink.Attr{
		{Key: "messaging.system", Value: system},
		{Key: "messaging.operation.type", Value: "send"},
		{Key: "messaging.operation.name", Value: "send"},
		{Key: "messaging.destination.name", Value: destination},
		{Key: "messaging.message.body.size", Value: len(r.Body)},
	}, attrs...)
	sctx, span := tr.StartClient(ctx, e, "send "+destination, true, attrs...)
	r.SetTrace(tr.TraceHeaders(sctx, e))
	return span
}

// EndSpan ends a record's span with the record's result.
func EndSpan(span sink.Span, res sink.Result) {
	if span == nil {
		return
	}
	if !res.Outcome.Acked() {
		errType := res.ErrorType
		if errType == "" {
			errType = res.Outcome.String()
		}
		span.Fail(errType, res.Err)
	}
	span.End()
}
