// Package intake builds sink.Envelopes from received JetStream messages
// (docs/formats.md#metadata-document): header normalisation, JetStream metadata from the
// ACK reply subject, payload presence (headers-only), message id and
// metadata resolution. Pure functions, no I/O.
package intake

import (
	"strings"
	"time"

	"github.com/nats-sinks/nats-sink/metadata"
	"github.com/nats-sinks/nats-sink/sink"
)

// Message is a received message as the client delivered it. Header is a
// nats.Header (map[string][]string, several values per name in wire order).
type Message struct {
	Subject string
	Reply   string
	Data    []byte
	Header  map[string][]string
}

// HeadersOnlyReason is PayloadPresence.OmittedReason for a payload the
// server left out because the consumer is headers-only.
const HeadersOnlyReason = "headers_only"

// Build returns the envelope of m. now is the receive time (truncated to
// microseconds by Build). r may be nil (zero Resolver).
func Build(m Message, r *metadata.Resolver, now time.Time) *sink.Envelope {
	h := NormaliseHeaders(m.Header)
	e := &sink.Envelope{
		Subject:    m.Subject,
		Data:       m.Data,
		Headers:    h,
		Pending:    -1,
		Reply:      m.Reply,
		ReceivedAt: now.UTC().Truncate(time.Microsecond),
	}
	if a, ok := ParseAckSubject(m.Reply); ok {
		e.Stream, e.Consumer, e.Domain = a.Stream, a.Consumer, a.Domain
		e.StreamSequence, e.ConsumerSequence = a.StreamSequence, a.ConsumerSequence
		e.Pending, e.Timestamp, e.DeliveryCount = a.Pending, a.Timestamp, a.Delivered
	}
	e.MessageID = messageID(h)
	e.Priority, e.Classification, e.Labels = r.Resolve(m.Subject, h)
	e.Payload = Presence(h, len(m.Data))
	return e
}

// messageID returns the first non-empty value among the three message-id
// headers (docs/formats.md#metadata-document). Values are not trimmed beyond normalisation.
func messageID(h sink.Headers) string {
	for _, name := range [...]string{"Nats-Msg-Id", "Nats-Message-Id", "message-id"} {
		if v, ok := h.Get(name); ok && v != "" {
			return v
		}
	}
	return ""
}

// Presence classifies the payload from the Nats-Msg-Size header and the
// delivered body length n (docs/headers-only.md, docs/migrating.md Q7).
func Presence(h sink.Headers, n int) sink.PayloadPresence {
	p := sink.PayloadPresence{Present: true, OriginalSize: int64(n)}
	raw, ok := h.Get("Nats-Msg-Size")
	if !ok {
		return p
	}
	p.SizeHeader, p.HasSizeHeader = raw, true
	size, valid := parseSize(raw)
	switch {
	case !valid:
		p.OriginalSize, p.SizeHeaderMalformed = -1, true
	case n == 0:
		p.Present, p.Omitted, p.OmittedReason, p.OriginalSize = false, true, HeadersOnlyReason, size
	default:
		p.OriginalSize = size
	}
	return p
}

// parseSize accepts an optionally signed decimal integer ≥ 0 with
// surrounding whitespace, as upstream's int() did for this header. Unlike
// int() it takes only ASCII digits and no '_' separators: the spec says
// "decimal integer", and a server never writes anything else. A value beyond
// int64 is reported malformed because it cannot be a real payload size.
func parseSize(s string) (int64, bool) {
	s = metadata.TrimSpace(s)
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	n, ok := parseUint(s)
	if !ok || n > 1<<63-1 || (neg && n != 0) {
		return 0, false
	}
	return int64(n), true
}

// parseUint parses a non-empty string of ASCII digits, rejecting overflow.
func parseUint(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (1<<64-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// Ack is the JetStream metadata carried by an ACK reply subject. Unknown
// values use the sink.Envelope conventions: "" strings, 0 sequences and
// delivery count, Pending -1, zero Timestamp.
type Ack struct {
	Domain, Stream, Consumer string
	Delivered                uint64
	StreamSequence           uint64
	ConsumerSequence         uint64
	Timestamp                time.Time
	Pending                  int64
}

// Token positions after "$JS.ACK." in the v2 layout; v1 lacks the first two.
const (
	tokDomain = iota
	tokAccount
	tokStream
	tokConsumer
	tokDelivered
	tokStreamSeq
	tokConsumerSeq
	tokTimestamp
	tokPending
	numTokens
)

// ParseAckSubject parses a JetStream ACK reply subject the way nats.go's
// jetstream package does (internal/parser.GetMetadataFields): 9 tokens is the
// v1 form $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>;
// 11 or more is the v2 form with <domain>.<account hash> after $JS.ACK and
// possibly a trailing random token (the client accepts 11 so that the 12th
// may be dropped by future servers; so do we). Domain "_" means none. Unlike
// the client, which reads an unparseable number as 0, an invalid, negative
// or overflowing number is unknown (docs/formats.md#metadata-document). ok is false when reply
// is not an ACK subject; then every field is unknown.
func ParseAckSubject(reply string) (a Ack, ok bool) {
	a.Pending = -1
	const prefix = "$JS.ACK."
	if !strings.HasPrefix(reply, prefix) {
		return a, false
	}
	n := strings.Count(reply, ".") + 1
	if n != 9 && n < 11 {
		return a, false
	}
	var tok [numTokens]string
	rest := reply[len(prefix):]
	start := tokDomain
	if n == 9 {
		start = tokStream
	}
	for i := start; i < numTokens; i++ {
		tok[i], rest, _ = strings.Cut(rest, ".")
	}
	a.Domain = tok[tokDomain]
	if a.Domain == "_" {
		a.Domain = ""
	}
	a.Stream, a.Consumer = tok[tokStream], tok[tokConsumer]
	if v, ok := parseUint(tok[tokDelivered]); ok {
		a.Delivered = v
	}
	if v, ok := parseUint(tok[tokStreamSeq]); ok {
		a.StreamSequence = v
	}
	if v, ok := parseUint(tok[tokConsumerSeq]); ok {
		a.ConsumerSequence = v
	}
	if v, ok := parseUint(tok[tokPending]); ok && v <= 1<<63-1 {
		a.Pending = int64(v)
	}
	if v, ok := parseUint(tok[tokTimestamp]); ok && v <= 1<<63-1 {
		a.Timestamp = time.Unix(0, int64(v)).UTC()
	}
	return a, true
}
