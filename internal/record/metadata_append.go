package record

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/sink"
)

// AppendMetadata appends the encoding of Metadata(e, storedAt, withCustody)
// to dst in flavour f, with every object's members in key order o. With
// jsonx.CanonicalOrder the bytes are exactly those of jsonx.Append of the
// Metadata tree; with jsonx.JSONBOrder the JSON value is the same.
//
// It writes the document member by member instead of building the tree:
// the SQL sinks encode one per row, and building the tree (seven objects,
// fifty members, the reserved-headers copies) and then encoding it took
// 18 allocations and about twice the time. The keys of the fixed objects
// are sorted once per order, at package initialisation; only the header
// maps are sorted per call. Into a buffer with room for the document it
// does not allocate, unless the envelope has more than 16 headers (or 16
// reserved ones), or a time outside 1677–2262, whose epoch ns is written
// from a big.Int.
func AppendMetadata(dst []byte, e *sink.Envelope, storedAt time.Time, withCustody bool, f jsonx.Flavour, o jsonx.KeyOrder) []byte {
	w := metaWriter{e: e, facts: newMetaFacts(e, storedAt), flavour: f, order: o, custody: withCustody}
	return w.object(dst, &metaDocument)
}

// AppendHeaders appends the encoding of Headers(e) ({} when there are none)
// in flavour f and key order o, as jsonx.AppendOrdered would write it.
func AppendHeaders(dst []byte, e *sink.Envelope, f jsonx.Flavour, o jsonx.KeyOrder) []byte {
	return appendHeaders(dst, e.Headers, f, o)
}

// inlineHeaders is the number of header names appendHeaders sorts on its
// stack; more go to the heap.
const inlineHeaders = 16

func appendHeaders(dst []byte, h sink.Headers, f jsonx.Flavour, o jsonx.KeyOrder) []byte {
	var inline [inlineHeaders]string
	keys := inline[:0]
	for k := range h {
		keys = append(keys, k)
	}
	jsonx.SortKeys(keys, o)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonx.AppendString(dst, k, f)
		dst = append(dst, ':')
		dst = jsonx.AppendString(dst, h[k], f)
	}
	return append(dst, '}')
}

// metaValue names the value of one member of the metadata document; the
// metaWriter.value switch writes it. A switch rather than a table of
// funcs: an indirect call would make the writer, and the buffers it
// points to, escape to the heap.
type metaValue uint8

const (
	valNull    metaValue = iota // mission_metadata, security_labels
	valCustody                  // null, present only withCustody
	valFreshness
	valHeaders
	valJetStream
	valMessageID
	valMessageMetadata
	valVersion
	valNats
	valPayload
	valReply
	valSubject
	valTimestamps

	valAgeReceive
	valAgeStore
	valCreatedMalformed
	valCreatedMissing
	valCreatedSource
	valSkew

	valConsumer
	valConsumerSequence
	valDomain
	valPending
	valRedelivered
	valStream
	valStreamSequence
	valJetStreamTime
	valJetStreamNS

	valClassification
	valLabels
	valPriority

	valReservedHeaders
	valReservedPresent

	valDelivered
	valSizeHeader
	valSizeHeaderMalformed
	valOmitted
	valOmittedReason
	valOriginalSize
	valPresent

	valCreatedNS
	valTimeStampHeader
	valReceivedAt
	valReceivedNS
	valStoredAt
	valStoredNS
)

// The objects of the metadata document (data-shapes §3), each a table of
// key and value, in any order: metaObject sorts them. Metadata builds the
// same objects as literals; the equality tests hold the two together.
var (
	metaDocument = newMetaObject(map[string]metaValue{
		"custody": valCustody, "freshness": valFreshness, "headers": valHeaders, "jetstream": valJetStream,
		"message_id": valMessageID, "message_metadata": valMessageMetadata, "metadata_version": valVersion,
		"mission_metadata": valNull, "nats": valNats, "payload": valPayload, "reply": valReply,
		"security_labels": valNull, "subject": valSubject, "timestamps": valTimestamps,
	})
	metaFreshness = newMetaObject(map[string]metaValue{
		"event_age_at_receive_seconds": valAgeReceive, "event_age_at_store_seconds": valAgeStore,
		"message_created_at_header_malformed": valCreatedMalformed, "message_created_at_missing": valCreatedMissing,
		"message_created_at_source": valCreatedSource, "source_clock_skew_seconds": valSkew,
	})
	metaJetStream = newMetaObject(map[string]metaValue{
		"consumer": valConsumer, "consumer_sequence": valConsumerSequence, "domain": valDomain,
		"pending": valPending, "redelivered": valRedelivered, "stream": valStream,
		"stream_sequence": valStreamSequence, "timestamp": valJetStreamTime, "timestamp_epoch_ns": valJetStreamNS,
	})
	metaMessageMetadata = newMetaObject(map[string]metaValue{
		"classification": valClassification, "labels": valLabels, "priority": valPriority,
	})
	metaNats = newMetaObject(map[string]metaValue{
		"reserved_headers": valReservedHeaders, "reserved_headers_present": valReservedPresent,
	})
	metaPayload = newMetaObject(map[string]metaValue{
		"delivered_size_bytes": valDelivered, "nats_msg_size_header": valSizeHeader,
		"nats_msg_size_header_malformed": valSizeHeaderMalformed, "omitted": valOmitted,
		"omitted_reason": valOmittedReason, "original_size_bytes": valOriginalSize, "present": valPresent,
	})
	metaTimestamps = newMetaObject(map[string]metaValue{
		"jetstream_timestamp_epoch_ns": valJetStreamNS, "message_created_at_epoch_ns": valCreatedNS,
		"message_created_at_header_malformed": valCreatedMalformed, "message_created_at_source": valCreatedSource,
		"nats_time_stamp": valTimeStampHeader, "received_at": valReceivedAt, "received_at_epoch_ns": valReceivedNS,
		"stored_at": valStoredAt, "stored_at_epoch_ns": valStoredNS,
	})
)

// metaObject is one fixed-shape object of the metadata document with its
// members sorted in each key order.
type metaObject struct {
	canonical, jsonb []metaMember
}

// metaMember is one member: its key, already quoted and followed by the
// colon, and its value.
type metaMember struct {
	key   string
	value metaValue
}

func newMetaObject(members map[string]metaValue) metaObject {
	names := make([]string, 0, len(members))
	for name := range members {
		names = append(names, name)
	}
	sorted := func(o jsonx.KeyOrder) []metaMember {
		jsonx.SortKeys(names, o)
		out := make([]metaMember, len(names))
		for i, name := range names {
			// The keys are plain ASCII, which both flavours write alike.
			out[i] = metaMember{key: string(jsonx.AppendString(nil, name, jsonx.ASCII)) + ":", value: members[name]}
		}
		return out
	}
	return metaObject{canonical: sorted(jsonx.CanonicalOrder), jsonb: sorted(jsonx.JSONBOrder)}
}

func (o *metaObject) members(order jsonx.KeyOrder) []metaMember {
	switch order {
	case jsonx.CanonicalOrder:
		return o.canonical
	case jsonx.JSONBOrder:
		return o.jsonb
	}
	panic("record: invalid jsonx.KeyOrder " + strconv.Itoa(int(order)))
}

// metaWriter carries one AppendMetadata call.
type metaWriter struct {
	e       *sink.Envelope
	facts   metaFacts
	flavour jsonx.Flavour
	order   jsonx.KeyOrder
	custody bool
}

func (w *metaWriter) object(dst []byte, o *metaObject) []byte {
	dst = append(dst, '{')
	first := true
	for _, m := range o.members(w.order) {
		if m.value == valCustody && !w.custody {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, m.key...)
		dst = w.value(dst, m.value)
	}
	return append(dst, '}')
}

// value writes one member's value. Where Metadata decides whether a value
// is null (str, seq, pending, redelivered, payloadNullables), this calls
// the same function and writes its result with scalar.
func (w *metaWriter) value(dst []byte, v metaValue) []byte {
	e, f := w.e, &w.facts
	switch v {
	case valNull:
		return append(dst, "null"...)
	case valCustody:
		return appendCustody(dst, e.Custody, w.flavour, w.order)
	case valFreshness:
		return w.object(dst, &metaFreshness)
	case valHeaders:
		return appendHeaders(dst, e.Headers, w.flavour, w.order)
	case valJetStream:
		return w.object(dst, &metaJetStream)
	case valMessageID:
		return w.scalar(dst, str(&e.MessageID))
	case valMessageMetadata:
		return w.object(dst, &metaMessageMetadata)
	case valVersion:
		return append(dst, '1')
	case valNats:
		return w.nats(dst)
	case valPayload:
		return w.object(dst, &metaPayload)
	case valReply:
		return w.scalar(dst, str(&e.Reply))
	case valSubject:
		return jsonx.AppendString(dst, e.Subject, w.flavour)
	case valTimestamps:
		return w.object(dst, &metaTimestamps)

	case valAgeReceive:
		return w.age(dst, f.ageReceive)
	case valAgeStore:
		return w.age(dst, f.ageStore)
	case valCreatedMalformed:
		return strconv.AppendBool(dst, f.created.Malformed)
	case valCreatedMissing:
		return strconv.AppendBool(dst, !f.createdKnown())
	case valCreatedSource:
		return jsonx.AppendString(dst, f.created.Source, w.flavour)
	case valSkew:
		return w.age(dst, f.skew)

	case valConsumer:
		return w.scalar(dst, str(&e.Consumer))
	case valConsumerSequence:
		return w.scalar(dst, seq(&e.ConsumerSequence))
	case valDomain:
		return w.scalar(dst, str(&e.Domain))
	case valPending:
		return w.scalar(dst, pending(&e.Pending))
	case valRedelivered:
		return w.scalar(dst, redelivered(e))
	case valStream:
		return w.scalar(dst, str(&e.Stream))
	case valStreamSequence:
		return w.scalar(dst, seq(&e.StreamSequence))
	case valJetStreamTime:
		if !f.hasJetStream {
			return append(dst, "null"...)
		}
		return appendISOValue(dst, f.jetStream)
	case valJetStreamNS:
		if !f.hasJetStream {
			return append(dst, "null"...)
		}
		return appendEpochValue(dst, f.jetStream)

	case valClassification:
		return w.scalar(dst, str(&e.Classification))
	case valLabels:
		dst = append(dst, '[')
		for i, l := range Labels(e) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = jsonx.AppendString(dst, l, w.flavour)
		}
		return append(dst, ']')
	case valPriority:
		return w.scalar(dst, str(&e.Priority))

	case valDelivered:
		return strconv.AppendInt(dst, int64(len(e.Data)), 10)
	case valSizeHeader:
		_, _, header := payloadNullables(&e.Payload)
		return w.scalar(dst, header)
	case valSizeHeaderMalformed:
		return strconv.AppendBool(dst, e.Payload.SizeHeaderMalformed)
	case valOmitted:
		return strconv.AppendBool(dst, e.Payload.Omitted)
	case valOmittedReason:
		reason, _, _ := payloadNullables(&e.Payload)
		return w.scalar(dst, reason)
	case valOriginalSize:
		_, original, _ := payloadNullables(&e.Payload)
		return w.scalar(dst, original)
	case valPresent:
		return strconv.AppendBool(dst, e.Payload.Present)

	case valCreatedNS:
		if !f.createdKnown() {
			return append(dst, "null"...)
		}
		return appendEpochValue(dst, f.created.Time)
	case valTimeStampHeader:
		if !f.created.HasHeader {
			return append(dst, "null"...)
		}
		return jsonx.AppendString(dst, f.created.Header, w.flavour)
	case valReceivedAt:
		return appendISOValue(dst, f.received)
	case valReceivedNS:
		return appendEpochValue(dst, f.received)
	case valStoredAt:
		return appendISOValue(dst, f.stored)
	case valStoredNS:
		return appendEpochValue(dst, f.stored)
	}
	// valReservedHeaders and valReservedPresent are written by nats, which
	// holds the members they share.
	panic("record: metadata value " + strconv.Itoa(int(v)) + " has no writer")
}

// scalar writes a value that Metadata's helpers return: nil, a bool, or a
// pointer to an envelope field. (jsonx.Append writes these alike, but
// through a call and a longer type switch per value.)
func (w *metaWriter) scalar(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		return strconv.AppendBool(dst, x)
	case *string:
		return jsonx.AppendString(dst, *x, w.flavour)
	case *int64:
		return strconv.AppendInt(dst, *x, 10)
	case *uint64:
		return strconv.AppendUint(dst, *x, 10)
	}
	return jsonx.Append(dst, v, w.flavour)
}

// age writes an age in seconds, null when the creation time is unknown.
func (w *metaWriter) age(dst []byte, seconds float64) []byte {
	if !w.facts.createdKnown() {
		return append(dst, "null"...)
	}
	return jsonx.AppendFloat(dst, seconds)
}

// nats writes the "nats" object. Its two members are views of one list,
// computed here once into a stack buffer.
func (w *metaWriter) nats(dst []byte) []byte {
	var inline [inlineReserved]reservedHeader
	res := reservedMembers(w.e.Headers, inline[:0])
	dst = append(dst, '{')
	for i, m := range metaNats.members(w.order) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, m.key...)
		switch m.value {
		case valReservedHeaders:
			dst = w.reservedHeaders(dst, res)
		case valReservedPresent:
			// An array: sorted names, in canonical order whatever the key
			// order.
			dst = append(dst, '[')
			for i, r := range res {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = jsonx.AppendString(dst, r.key, w.flavour)
			}
			dst = append(dst, ']')
		}
	}
	return append(dst, '}')
}

// reservedHeaders writes the reserved_headers object from res, which is in
// canonical order. Other orders sort a copy of the keys, the way jsonx
// sorts map keys, and look each one up in res.
func (w *metaWriter) reservedHeaders(dst []byte, res []reservedHeader) []byte {
	var inline [inlineReserved]string
	var keys []string
	if w.order != jsonx.CanonicalOrder {
		keys = inline[:0]
		for _, r := range res {
			keys = append(keys, r.key)
		}
		jsonx.SortKeys(keys, w.order)
	}
	dst = append(dst, '{')
	for i, r := range res {
		if keys != nil {
			j, _ := slices.BinarySearchFunc(res, keys[i], func(r reservedHeader, k string) int { return strings.Compare(r.key, k) })
			r = res[j]
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonx.AppendString(dst, r.key, w.flavour)
		dst = append(dst, ':')
		dst = jsonx.AppendString(dst, r.value, w.flavour)
	}
	return append(dst, '}')
}

// appendISOValue writes ISO(t) as a JSON string. ISO strings are ASCII digits and punctuation that no flavour escapes, so
// they need no escaping pass.
func appendISOValue(dst []byte, t time.Time) []byte {
	dst = append(dst, '"')
	dst = AppendISO(dst, t)
	return append(dst, '"')
}

// appendEpochValue writes EpochNS(t).
func appendEpochValue(dst []byte, t time.Time) []byte {
	n, b := epochNS(t)
	if b != nil {
		return b.Append(dst, 10)
	}
	return strconv.AppendInt(dst, n, 10)
}
