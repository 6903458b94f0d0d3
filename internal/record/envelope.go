package record

import (
	"strings"
	"time"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/sink"
)

// EnvelopeOptions selects what a message envelope holds beyond the members
// every one has: classification, consumer, consumer_sequence, labels,
// labels_list, message_id, payload_info, priority, schema, schema_version,
// stream, stream_sequence and subject.
//
// The file record (data-shapes §7), the HTTP body (§10), the S3 object and
// sidecar (§11), the Kafka value (§12) and the NATS body (§13) are one
// document with these differences, so one builder keeps them from drifting
// apart: a member added to one shape by hand would be missed in the others.
type EnvelopeOptions struct {
	// Schema is the value of "schema", e.g. "nats_sinks.http.message.v1".
	Schema string
	// LabelSeparator joins the scalar "labels" member: ";" is the storage
	// form (data-shapes §2.4); the HTTP and NATS envelopes keep "," for
	// upstream compatibility (§10, §13).
	LabelSeparator string

	// IdempotencyKey adds "idempotency_key" with Key as its value, null
	// when Key is "" (an HTTP sink with idempotency disabled).
	IdempotencyKey bool
	Key            string

	// Metadata adds "metadata", the standard metadata document (§3) stored
	// at StoredAt. MetadataCustody gives that document its top-level
	// "custody": null (the S3 object has it, the other shapes do not).
	Metadata        bool
	MetadataCustody bool
	StoredAt        time.Time

	// Custody, MissionMetadata and SecurityLabels add these members.
	// Custody holds the envelope's custody document (null when custody is
	// disabled); the other two have no producer and are null. The HTTP
	// sink makes each optional (include_custody, …), the other shapes
	// always have all three.
	Custody         bool
	MissionMetadata bool
	SecurityLabels  bool

	// NoPayload leaves out "payload": the S3 sidecar describes the object's
	// payload by payload_info alone.
	NoPayload bool

	// Extra holds the members only one shape has (the S3 object's headers
	// and epoch times, the sidecar's object_key), in canonical key order
	// and with keys none of the members above use. They are merged into
	// place, so the document stays sorted.
	Extra jsonx.Object
}

// envelopeCore is the most members MessageEnvelope adds itself.
const envelopeCore = 19

// envelopeMembers holds one envelope's members and the strings they point
// to, so that a document costs one allocation for all of them (boxing a
// string in an interface copies it to the heap; a pointer fits as is).
type envelopeMembers struct {
	doc                 [envelopeCore]jsonx.Member
	schema, key, labels string
}

// MessageEnvelope returns the message envelope of e with payload p, the
// members chosen by o, in canonical key order. Envelope fields that are
// unknown ("" or sequence 0) are null. Encode it with the flavour of the
// shape: utf8 for file, HTTP, S3 and Kafka, ascii for NATS.
func MessageEnvelope(e *sink.Envelope, p Payload, o EnvelopeOptions) jsonx.Object {
	m := new(envelopeMembers)
	m.schema = o.Schema
	b := envelopeBuilder{doc: m.doc[:0], extra: o.Extra}
	if n := envelopeCore + len(o.Extra); n > len(m.doc) {
		b.doc = make(jsonx.Object, 0, n)
	}
	labels := Labels(e)
	var joined any
	if len(labels) > 0 {
		m.labels = strings.Join(labels, o.LabelSeparator)
		joined = &m.labels
	}

	b.add("classification", str(&e.Classification))
	b.add("consumer", str(&e.Consumer))
	b.add("consumer_sequence", seq(&e.ConsumerSequence))
	if o.Custody {
		b.add("custody", Custody(e.Custody))
	}
	if o.IdempotencyKey {
		var key any
		if o.Key != "" {
			m.key = o.Key
			key = &m.key
		}
		b.add("idempotency_key", key)
	}
	b.add("labels", joined)
	b.add("labels_list", labels)
	b.add("message_id", str(&e.MessageID))
	if o.Metadata {
		b.add("metadata", Metadata(e, o.StoredAt, o.MetadataCustody))
	}
	if o.MissionMetadata {
		b.add("mission_metadata", nil)
	}
	if !o.NoPayload {
		b.add("payload", p.Value)
	}
	b.add("payload_info", p.Info())
	b.add("priority", str(&e.Priority))
	b.add("schema", &m.schema)
	b.add("schema_version", 1)
	if o.SecurityLabels {
		b.add("security_labels", nil)
	}
	b.add("stream", str(&e.Stream))
	b.add("stream_sequence", seq(&e.StreamSequence))
	b.add("subject", &e.Subject)
	return append(b.doc, b.extra...)
}

// envelopeBuilder appends members in key order, placing the extra members
// that sort before each one ahead of it.
type envelopeBuilder struct {
	doc, extra jsonx.Object
}

func (b *envelopeBuilder) add(key string, v any) {
	for len(b.extra) > 0 && b.extra[0].Key < key {
		b.doc = append(b.doc, b.extra[0])
		b.extra = b.extra[1:]
	}
	b.doc = append(b.doc, jsonx.Member{Key: key, Value: v})
}
