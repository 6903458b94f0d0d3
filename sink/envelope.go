package sink

import (
	"strings"
	"time"
)

// An Envelope is the immutable record built from one JetStream message
// (docs/formats.md#metadata-document). It is the only thing a sink sees. Sinks must not
// modify an Envelope or its slices and maps: the runner may hand the same
// envelope to another WriteBatch call during isolation.
//
// Fields that the spec allows to be null use a documented zero value for
// "unknown": the empty string, sequence 0 (JetStream sequences start at 1),
// Pending -1, the zero time.
type Envelope struct {
	Subject string
	// Data is the delivered body; after encryption it is the encryption
	// envelope bytes. Empty for headers-only messages.
	Data []byte
	// Headers holds the normalised headers (docs/formats.md#metadata-document): one value per
	// name, trimmed, invalid names dropped. Read them with Headers.Get.
	Headers Headers

	Stream   string // "" = unknown
	Consumer string // "" = unknown
	Domain   string // "" = none

	StreamSequence   uint64 // 0 = unknown
	ConsumerSequence uint64 // 0 = unknown
	Pending          int64  // -1 = unknown
	// Timestamp is the JetStream server timestamp (nanosecond precision, as
	// in the ACK reply subject); zero = unknown.
	Timestamp time.Time
	// DeliveryCount is JetStream's num_delivered; 0 = unknown.
	DeliveryCount uint64

	// MessageID is the first non-empty value of Nats-Msg-Id, Nats-Message-Id,
	// message-id; "" = none.
	MessageID string
	// Priority and Classification are resolved from headers, rules and
	// defaults (docs/formats.md#metadata-document); "" = null.
	Priority       string
	Classification string
	// Labels are normalised (docs/configuration.md#priority-classification-and-labels); never nil-vs-empty sensitive.
	Labels []string

	// Reply is the JetStream ACK subject; "" = none.
	Reply string

	Payload PayloadPresence

	// ReceivedAt is the wall clock when the envelope was built, truncated to
	// microseconds.
	ReceivedAt time.Time

	// Custody is the chain-of-custody document the runner computed for
	// this delivery; nil when custody is disabled. Record shapes that carry
	// a "custody" member write it there (docs/integrity.md).
	Custody *Custody
}

// Custody is the custody document of one envelope: hashes over the record
// as received (after encryption), never keyed. Empty strings are null.
type Custody struct {
	// Algorithm is "sha256" or "sha512".
	Algorithm string
	// KeyID is the configured label of the custody policy; "" = null.
	KeyID string
	// PayloadHash and MetadataHash are lower-case hex; "" when the
	// configuration does not hash that part.
	PayloadHash  string
	MetadataHash string
	// RecordHash binds the other hashes to subject, stream, stream sequence
	// and message id.
	RecordHash string
	// PreviousRecordHash is the chain link the producer named; "" = null.
	PreviousRecordHash string
	// HashPayload and HashMetadata are the configured switches.
	HashPayload  bool
	HashMetadata bool
}

// PayloadPresence says whether the producer's payload was delivered
// (docs/headers-only.md).
type PayloadPresence struct {
	Present bool
	Omitted bool
	// OmittedReason is "headers_only" when Omitted, else "".
	OmittedReason string
	// OriginalSize is the producer's payload size: Nats-Msg-Size when it is
	// valid, else the delivered length. -1 = null (malformed header).
	OriginalSize int64
	// SizeHeader is the raw Nats-Msg-Size value; HasSizeHeader tells whether
	// the header was present at all.
	SizeHeader    string
	HasSizeHeader bool
	// SizeHeaderMalformed is true when Nats-Msg-Size is present but not a
	// non-negative integer.
	SizeHeaderMalformed bool
}

// Redelivered reports JetStream's redelivered flag and whether it is known.
func (e *Envelope) Redelivered() (redelivered, known bool) {
	if e.DeliveryCount == 0 {
		return false, false
	}
	return e.DeliveryCount > 1, true
}

// Headers is a normalised header map: one value per name.
type Headers map[string]string

// Get looks name up ignoring ASCII case. Among several names equal ignoring
// case it picks the one spelled exactly like name, else the byte-wise
// smallest (docs/formats.md#metadata-document).
func (h Headers) Get(name string) (string, bool) {
	if v, ok := h[name]; ok {
		return v, true
	}
	best, found := "", false
	for k := range h {
		if strings.EqualFold(k, name) && (!found || k < best) {
			best, found = k, true
		}
	}
	if !found {
		return "", false
	}
	return h[best], true
}
