// Package record builds the byte-compatible documents of spec data-shapes:
// times (§1.1), the standard metadata document (§3), payload normalisation
// (§4), idempotency keys and file stems (§5, §7.1), and the message envelope
// that the file record (§7), the HTTP body (§10), the S3 object and sidecar
// (§11), the Kafka value (§12) and the NATS body (§13) share. Pure
// functions, no I/O.
//
// Documents are jsonx trees (jsonx.Object in canonical key order, nil for
// null) ready for jsonx.Marshal. They share the envelope's headers map and
// labels slice, and point to its string and number fields, instead of
// copying them per message, so they are read-only, like the envelope itself,
// and reflect the envelope as it is when they are encoded.
//
// AppendMetadata and AppendHeaders write the metadata document and the
// headers map without the tree, in either jsonx.KeyOrder, for the SQL sinks
// that encode both per row.
package record

import (
	"slices"
	"strings"
	"time"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/sink"
)

// Message-creation sources (data-shapes §3).
const (
	SourceNatsTimeStamp = "nats_time_stamp"
	SourceJetStream     = "jetstream_timestamp"
	SourceMissing       = "missing"
)

// reservedHeaders are stored under this canonical spelling when present in
// any case (data-shapes §3).
var reservedHeaders = [...]string{
	"Nats-Msg-Id", "Nats-Expected-Stream", "Nats-Expected-Last-Msg-Id",
	"Nats-Expected-Last-Sequence", "Nats-Expected-Last-Subject-Sequence",
	"Nats-Expected-Last-Subject-Sequence-Subject", "Nats-Rollup", "Nats-TTL",
	"Nats-Stream", "Nats-Subject", "Nats-Sequence", "Nats-Last-Sequence",
	"Nats-Time-Stamp", "Nats-Num-Pending", "Nats-UpTo-Sequence",
	"Nats-Stream-Source", "Nats-Trace-Dest", "Nats-Trace-Only", "Nats-Trace-Hop",
	"Nats-Trace-Origin-Account", "Nats-Schedule", "Nats-Schedule-TTL",
	"Nats-Schedule-Target", "Nats-Schedule-Time-Zone", "traceparent",
	"Accept-Encoding",
}

// Created is a message's creation time as resolved by data-shapes §3.
type Created struct {
	Time      time.Time // zero when missing
	Source    string    // SourceNatsTimeStamp, SourceJetStream or SourceMissing
	Malformed bool      // Nats-Time-Stamp present but not parseable
	Header    string    // raw Nats-Time-Stamp
	HasHeader bool
}

// CreatedAt resolves the creation time of e: a parseable Nats-Time-Stamp,
// else the JetStream timestamp (µs, §1.1), else missing. Kafka's record
// timestamp and the freshness metrics use it too.
func CreatedAt(e *sink.Envelope) Created {
	var c Created
	c.Header, c.HasHeader = e.Headers.Get("Nats-Time-Stamp")
	if c.HasHeader {
		if t, ok := ParseTimeStamp(c.Header); ok {
			c.Time, c.Source = t, SourceNatsTimeStamp
			return c
		}
		c.Malformed = true
	}
	if !e.Timestamp.IsZero() {
		c.Time, c.Source = JetStreamTime(e.Timestamp), SourceJetStream
		return c
	}
	c.Source = SourceMissing
	return c
}

// Metadata returns the standard metadata document v1 (§3) for e, stored at
// storedAt. withCustody adds the top-level "custody" key (the envelope's custody document, or null) (SQL sinks,
// S3 envelope).
//
// Every object is a jsonx.Object literal written in canonical key order, so
// the encoder writes it without sorting; TestBuiltObjectsAreSorted catches a
// key added out of order (which would still encode correctly, only slower).
//
// AppendMetadata writes the same document without building it.
func Metadata(e *sink.Envelope, storedAt time.Time, withCustody bool) jsonx.Object {
	m := new(metaMembers)
	m.facts = newMetaFacts(e, storedAt)
	received, stored, created := m.facts.received, m.facts.stored, &m.facts.created
	m.source = created.Source

	var jsTime, jsNS any
	if js := m.facts.jetStream; m.facts.hasJetStream {
		m.jsTime = ISO(js)
		jsTime, jsNS = &m.jsTime, epochValue(&m.jsNS, js)
	}
	var createdNS, ageReceive, ageStore, skew any
	if m.facts.createdKnown() {
		createdNS = epochValue(&m.createdNS, created.Time)
		ageReceive, ageStore, skew = &m.facts.ageReceive, &m.facts.ageStore, &m.facts.skew
	}
	var tsHeader any
	if created.HasHeader {
		tsHeader = &created.Header
	}
	m.received, m.stored = ISO(received), ISO(stored)

	m.freshness = [...]jsonx.Member{
		{Key: "event_age_at_receive_seconds", Value: ageReceive},
		{Key: "event_age_at_store_seconds", Value: ageStore},
		{Key: "message_created_at_header_malformed", Value: created.Malformed},
		{Key: "message_created_at_missing", Value: created.Source == SourceMissing},
		{Key: "message_created_at_source", Value: &m.source},
		{Key: "source_clock_skew_seconds", Value: skew},
	}
	m.jetstream = [...]jsonx.Member{
		{Key: "consumer", Value: str(&e.Consumer)},
		{Key: "consumer_sequence", Value: seq(&e.ConsumerSequence)},
		{Key: "domain", Value: str(&e.Domain)},
		{Key: "pending", Value: pending(&e.Pending)},
		{Key: "redelivered", Value: redelivered(e)},
		{Key: "stream", Value: str(&e.Stream)},
		{Key: "stream_sequence", Value: seq(&e.StreamSequence)},
		{Key: "timestamp", Value: jsTime},
		{Key: "timestamp_epoch_ns", Value: jsNS},
	}
	m.messageMetadata = [...]jsonx.Member{
		{Key: "classification", Value: str(&e.Classification)},
		{Key: "labels", Value: Labels(e)},
		{Key: "priority", Value: str(&e.Priority)},
	}
	fillPayload(&m.payload, &m.delivered, e)
	m.timestamps = [...]jsonx.Member{
		{Key: "jetstream_timestamp_epoch_ns", Value: jsNS},
		{Key: "message_created_at_epoch_ns", Value: createdNS},
		{Key: "message_created_at_header_malformed", Value: created.Malformed},
		{Key: "message_created_at_source", Value: &m.source},
		{Key: "nats_time_stamp", Value: tsHeader},
		{Key: "received_at", Value: &m.received},
		{Key: "received_at_epoch_ns", Value: epochValue(&m.receivedNS, received)},
		{Key: "stored_at", Value: &m.stored},
		{Key: "stored_at_epoch_ns", Value: epochValue(&m.storedNS, stored)},
	}
	doc := m.doc[:0]
	if withCustody {
		doc = append(doc, jsonx.Member{Key: "custody", Value: Custody(e.Custody)})
	}
	return append(doc,
		jsonx.Member{Key: "freshness", Value: jsonx.Object(m.freshness[:])},
		jsonx.Member{Key: "headers", Value: Headers(e)},
		jsonx.Member{Key: "jetstream", Value: jsonx.Object(m.jetstream[:])},
		jsonx.Member{Key: "message_id", Value: str(&e.MessageID)},
		jsonx.Member{Key: "message_metadata", Value: jsonx.Object(m.messageMetadata[:])},
		jsonx.Member{Key: "metadata_version", Value: 1},
		jsonx.Member{Key: "mission_metadata"},
		jsonx.Member{Key: "nats", Value: fillReserved(&m.nats, e.Headers)},
		jsonx.Member{Key: "payload", Value: jsonx.Object(m.payload[:])},
		jsonx.Member{Key: "reply", Value: str(&e.Reply)},
		jsonx.Member{Key: "security_labels"},
		jsonx.Member{Key: "subject", Value: &e.Subject},
		jsonx.Member{Key: "timestamps", Value: jsonx.Object(m.timestamps[:])},
	)
}

// metaMembers holds the member arrays of one metadata document, and the
// computed scalars its members point to, so that building it costs one
// allocation rather than one per object and one per boxed value (a pointer
// fits in an interface as is; a string, float or large integer is copied to
// the heap). The array sizes are the member counts; doc has room for the
// optional custody member.
type metaMembers struct {
	doc             [14]jsonx.Member
	freshness       [6]jsonx.Member
	jetstream       [9]jsonx.Member
	messageMetadata [3]jsonx.Member
	nats            [2]jsonx.Member
	payload         [7]jsonx.Member
	timestamps      [9]jsonx.Member

	facts                                            metaFacts
	source, jsTime, received, stored                 string
	jsNS, createdNS, receivedNS, storedNS, delivered int64
}

// metaFacts are the values of the metadata document that are computed
// rather than read from the envelope. Metadata and AppendMetadata both take
// them from newMetaFacts, so the two cannot disagree on what they contain.
type metaFacts struct {
	received, stored time.Time // microsecond precision
	created          Created
	// jetStream is the JetStream timestamp at microsecond precision (§1.1),
	// when hasJetStream.
	jetStream    time.Time
	hasJetStream bool
	// The freshness ages and skew, in seconds; set only when createdKnown.
	ageReceive, ageStore, skew float64
}

func newMetaFacts(e *sink.Envelope, storedAt time.Time) metaFacts {
	f := metaFacts{received: Micro(e.ReceivedAt), stored: Micro(storedAt), created: CreatedAt(e)}
	if !e.Timestamp.IsZero() {
		f.jetStream, f.hasJetStream = JetStreamTime(e.Timestamp), true
	}
	if f.createdKnown() {
		f.ageReceive = AgeSeconds(f.received, f.created.Time)
		f.ageStore = AgeSeconds(f.stored, f.created.Time)
		f.skew = AgeSeconds(f.created.Time, f.received)
	}
	return f
}

// createdKnown reports whether the message has a creation time; when it
// does not, its epoch, ages and skew are null.
func (f *metaFacts) createdKnown() bool { return f.created.Source != SourceMissing }

// epochValue is EpochNS(t) without boxing an int64: it stores the value in
// *slot and returns slot, or returns the exact jsonx.Integer when the value
// does not fit int64.
func epochValue(slot *int64, t time.Time) any {
	n, b := epochNS(t)
	if b != nil {
		return jsonx.Integer(b.String())
	}
	*slot = n
	return slot
}

// PayloadObject returns the "payload" object shared by the metadata
// document (§3) and the DLQ body (§8.1).
func PayloadObject(e *sink.Envelope) jsonx.Object {
	var o struct {
		members   [7]jsonx.Member
		delivered int64
	}
	fillPayload(&o.members, &o.delivered, e)
	return o.members[:]
}

// fillPayload builds the payload object in o; delivered holds the delivered
// size that the object points to. Envelope fields are pointed to as well.
func fillPayload(o *[7]jsonx.Member, delivered *int64, e *sink.Envelope) {
	p := &e.Payload
	reason, original, header := payloadNullables(p)
	*delivered = int64(len(e.Data))
	*o = [...]jsonx.Member{
		{Key: "delivered_size_bytes", Value: delivered},
		{Key: "nats_msg_size_header", Value: header},
		{Key: "nats_msg_size_header_malformed", Value: p.SizeHeaderMalformed},
		{Key: "omitted", Value: p.Omitted},
		{Key: "omitted_reason", Value: reason},
		{Key: "original_size_bytes", Value: original},
		{Key: "present", Value: p.Present},
	}
}

// payloadNullables returns the members of the payload object that may be
// null: omitted_reason, original_size_bytes and nats_msg_size_header, each
// nil or a pointer into p.
func payloadNullables(p *sink.PayloadPresence) (reason, original, header any) {
	if p.OmittedReason != "" {
		reason = &p.OmittedReason
	}
	if p.OriginalSize >= 0 {
		original = &p.OriginalSize
	}
	if p.HasSizeHeader {
		header = &p.SizeHeader
	}
	return reason, original, header
}

// Headers returns the normalised header map of e as a JSON object ({} when
// there are none). The conversion drops the sink.Headers name so that the
// encoder sees a plain map[string]string.
func Headers(e *sink.Envelope) map[string]string {
	if e.Headers == nil {
		return map[string]string{}
	}
	return map[string]string(e.Headers)
}

// Labels returns e's labels as a JSON list ([] when there are none).
func Labels(e *sink.Envelope) []string {
	if e.Labels == nil {
		return []string{}
	}
	return e.Labels
}

// JoinLabels is the scalar storage form of labels (data-shapes §2.4): the
// items joined with sep, or null when there are none.
func JoinLabels(labels []string, sep string) any {
	if len(labels) == 0 {
		return nil
	}
	return strings.Join(labels, sep)
}

// fillReserved builds the "nats" object of h in o and returns it.
func fillReserved(o *[2]jsonx.Member, h sink.Headers) jsonx.Object {
	var inline [inlineReserved]reservedHeader
	rh := reservedMembers(h, inline[:0])
	res := make(jsonx.Object, len(rh))
	// The values, copied once so that members can point to them: boxing
	// each string would cost an allocation per header.
	values := make([]string, len(rh))
	present := make([]string, len(rh))
	for i, r := range rh {
		values[i] = r.value
		res[i] = jsonx.Member{Key: r.key, Value: &values[i]}
		present[i] = r.key
	}
	*o = [...]jsonx.Member{
		{Key: "reserved_headers", Value: res},
		{Key: "reserved_headers_present", Value: present},
	}
	return o[:]
}

// reservedHeader is one member of the reserved_headers object.
type reservedHeader struct{ key, value string }

// inlineReserved is the reserved_headers size that the callers of
// reservedMembers hold on their stack; beyond it, the slice grows on the heap.
const inlineReserved = 16

// reservedMembers appends the members of the reserved_headers object of h
// (data-shapes §3) to buf, sorted by key in canonical order, and returns the
// result: canonical reserved names first, then every other header whose
// name starts with "nats-" in any case, under its own spelling unless that
// exact spelling is already a key.
//
// For each reserved name the value is what h.Get would return (the exact
// spelling, else the byte-wise smallest case variant), but found in one
// pass over h: 26 Get calls, each a full scan of h when the name is
// absent, were a tenth of the file sink's CPU.
func reservedMembers(h sink.Headers, buf []reservedHeader) []reservedHeader {
	var found [len(reservedHeaders)]string // the winning header name, "" if none
	res := buf
	for name, v := range h {
		i := reservedIndex(name)
		if i >= 0 {
			if best := found[i]; best == "" || best != reservedHeaders[i] && (name == reservedHeaders[i] || name < best) {
				found[i] = name
			}
		}
		if len(name) >= 5 && strings.EqualFold(name[:5], "nats-") && (i < 0 || reservedHeaders[i] != name) {
			res = append(res, reservedHeader{key: name, value: v})
		}
	}
	for i, name := range found {
		if name != "" {
			res = append(res, reservedHeader{key: reservedHeaders[i], value: h[name]})
		}
	}
	// A canonical name and another header's own spelling never collide:
	// the own spelling is added only when it differs from every canonical
	// name. So the keys are distinct and one sort puts them in order.
	slices.SortFunc(res, func(a, b reservedHeader) int { return strings.Compare(a.key, b.key) })
	return res
}

// reservedIndex returns the index in reservedHeaders of the name equal to
// name ignoring ASCII case, or -1.
func reservedIndex(name string) int {
	if len(name) >= len(reservedByLength) {
		return -1
	}
	for _, i := range reservedByLength[len(name)] {
		if strings.EqualFold(reservedHeaders[i], name) {
			return int(i)
		}
	}
	return -1
}

// reservedByLength lists the indexes in reservedHeaders of the names of
// each length: reservedIndex runs once per header of every message, and
// most header names match no reserved name's length. Its size is one more
// than the longest name (43 bytes); a longer one panics at start-up.
var reservedByLength = func() (by [44][]uint8) {
	for i, r := range reservedHeaders {
		by[len(r)] = append(by[len(r)], uint8(i))
	}
	return by
}()

// str maps the envelope's "" = unknown convention to null. It returns the
// pointer, not the string: boxing a pointer does not allocate, and the
// document shares the read-only envelope anyway.
func str(s *string) any {
	if *s == "" {
		return nil
	}
	return s
}

// seq maps sequence 0 (unknown; JetStream sequences start at 1) to null.
func seq(n *uint64) any {
	if *n == 0 {
		return nil
	}
	return n
}

// pending maps a negative count (unknown) to null.
func pending(n *int64) any {
	if *n < 0 {
		return nil
	}
	return n
}

func redelivered(e *sink.Envelope) any {
	r, known := e.Redelivered()
	if !known {
		return nil
	}
	return r
}
