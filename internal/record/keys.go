package record

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/sink"
)

// Filename strategies of the file sink (docs/file-sink.md).
const (
	StrategyStreamSequence = "stream_sequence"
	StrategyMessageID      = "message_id"
	StrategyPayloadSHA256  = "payload_sha256"
)

// ErrNoCoreKey is the text of the ValidationError CoreKey returns when no
// idempotency material exists (docs/formats.md#idempotency-keys).
var ErrNoCoreKey = errors.New("payload-sha256 idempotency fallback is unavailable because the original payload bytes were omitted")

// CoreKey returns the core idempotency key (docs/formats.md#idempotency-keys), or an error wrapped with
// sink.AsPermanentType(sink.ValidationError, …) when no material exists.
func CoreKey(e *sink.Envelope) (string, error) {
	switch {
	case e.Stream != "" && e.StreamSequence != 0:
		return "stream-sequence:" + e.Stream + ":" + strconv.FormatUint(e.StreamSequence, 10), nil
	case e.MessageID != "":
		return "message-id:" + e.MessageID, nil
	case !e.Payload.Omitted:
		return "payload-sha256:" + e.Subject + ":" + sha256Hex(e.Data), nil
	}
	return "", sink.AsPermanentType(sink.ValidationError, ErrNoCoreKey)
}

// FileStem returns the file name stem for a filename strategy
// ("stream_sequence", "message_id", "payload_sha256"); missing material is a
// sink.PermanentSinkError.
//
// payload_sha256 also refuses an omitted (headers-only) payload. The spec
// is silent here; upstream hashed the empty body, so every headers-only
// message on a subject got the same name and skip_existing reported all but
// the first as duplicates: acknowledged and lost. Dead-lettering them is what
// the core key (Q17 for HTTP) does as well.
func FileStem(strategy string, e *sink.Envelope) (string, error) {
	switch strategy {
	case StrategyStreamSequence, "":
		if e.Stream == "" || e.StreamSequence == 0 {
			return "", sink.AsPermanent(errors.New("stream_sequence filename strategy requires JetStream stream and sequence metadata"))
		}
		var seq [20]byte
		b := strconv.AppendUint(seq[:0], e.StreamSequence, 10)
		stem := make([]byte, 0, len(e.Stream)+21)
		stem = append(stem, SafeDistinct(e.Stream, "stream")...)
		stem = append(stem, '-')
		for range 20 - len(b) {
			stem = append(stem, '0')
		}
		return string(append(stem, b...)), nil
	case StrategyMessageID:
		if e.MessageID == "" {
			return "", sink.AsPermanent(errors.New("message_id filename strategy requires a message id header"))
		}
		return Safe(e.MessageID, "message") + "-" + sha256Hex([]byte(e.MessageID))[:16], nil
	case StrategyPayloadSHA256:
		if e.Payload.Omitted {
			return "", sink.AsPermanent(errors.New("payload_sha256 filename strategy is unavailable because the original payload bytes were omitted"))
		}
		return SafeDistinct(e.Subject, "subject") + "-" + sha256Hex(e.Data), nil
	}
	return "", sink.AsPermanent(errors.New("unknown filename strategy " + strconv.Quote(strategy)))
}

// Distinct makes a sanitised name injective: it returns safe, what a
// sanitiser made of v, when that is v itself, else safe + "-" + the first
// 16 hex digits of the SHA-256 of v. Sanitising maps many values to one
// ("order/1", "order_1" and "order 1" all become "order_1"), and two
// messages sharing a name would have the second acknowledged as a duplicate
// of the first without being stored; the hash keeps them apart, and a
// value that needed no change keeps the name nats-sinks gave it.
func Distinct(v, safe string) string {
	if safe == v {
		return v
	}
	return safe + "-" + sha256Hex([]byte(v))[:16]
}

// SafeDistinct is Safe(v, fallback) made injective as Distinct does. The
// two results of Safe that already end in a hash of v (the fallback for an
// empty result and the shortened form of a long one) are returned as they
// are.
func SafeDistinct(v, fallback string) string {
	s, hashed := safe(v, fallback)
	if hashed {
		return s
	}
	return Distinct(v, s)
}

// Identity returns what a file name or S3 key of strategy is made from, in
// the form of the idempotency keys ("stream-sequence:ORDERS:42",
// "message-id:O-1001", "payload-sha256:<subject>:<hex>"; for
// "idempotency_key" the core key itself). Two messages with one identity
// are the same message as far as the name goes: the second is a duplicate.
// Missing material is an error, as FileStem reports it.
func Identity(strategy string, e *sink.Envelope) (string, error) {
	switch strategy {
	case StrategyStreamSequence:
		if e.Stream == "" || e.StreamSequence == 0 {
			return "", sink.AsPermanent(errors.New("stream_sequence strategy requires JetStream stream and sequence metadata"))
		}
		return "stream-sequence:" + e.Stream + ":" + strconv.FormatUint(e.StreamSequence, 10), nil
	case StrategyMessageID:
		if e.MessageID == "" {
			return "", sink.AsPermanent(errors.New("message_id strategy requires a message id header"))
		}
		return "message-id:" + e.MessageID, nil
	case StrategyPayloadSHA256:
		if e.Payload.Omitted {
			return "", sink.AsPermanent(errors.New("payload_sha256 strategy is unavailable because the original payload bytes were omitted"))
		}
		return "payload-sha256:" + e.Subject + ":" + sha256Hex(e.Data), nil
	}
	return CoreKey(e)
}

// StoredForm is s as a stored record reads back: the JSON encoder replaces
// invalid UTF-8 with U+FFFD, so a subject or message id holding such bytes
// comes back changed. Sinks that recognise their own record on redelivery
// (the file and S3 sinks) compare identities in this form; their names
// already carry a hash of the raw value, so two values that read back alike
// never share a destination.
func StoredForm(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	v, err := jsonx.Parse(jsonx.Marshal(s, jsonx.UTF8))
	if str, ok := v.(string); err == nil && ok {
		return str
	}
	return s
}

// CoreKeyValue returns the message's own value that CoreKey(e) embeds: the
// stream name, the message id or the subject, whichever the key is made of.
func CoreKeyValue(e *sink.Envelope) string {
	switch {
	case e.Stream != "" && e.StreamSequence != 0:
		return e.Stream
	case e.MessageID != "":
		return e.MessageID
	}
	return e.Subject
}

// Stored is the identity of a stored record: the members of a file record
// or an S3 envelope object that names are made from. Records written by
// nats-sinks have them too.
type Stored struct {
	Subject        *string `json:"subject"`
	Stream         *string `json:"stream"`
	StreamSequence *uint64 `json:"stream_sequence"`
	MessageID      *string `json:"message_id"`
	PayloadInfo    *struct {
		SHA256 *string `json:"sha256"`
	} `json:"payload_info"`
}

// ParseStored reads the identity members of a stored record (JSON, not
// compressed). ok is false when doc is not a JSON object.
func ParseStored(doc []byte) (st Stored, ok bool) {
	if err := json.Unmarshal(doc, &st); err != nil {
		return Stored{}, false
	}
	return st, true
}

// Identity returns the identity (as Identity computes it for a message) of
// the record st was read from under strategy, and false when the record
// lacks the material.
func (st Stored) Identity(strategy string) (string, bool) {
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	stream, id, subject := str(st.Stream), str(st.MessageID), str(st.Subject)
	var seq uint64
	if st.StreamSequence != nil {
		seq = *st.StreamSequence
	}
	digest := ""
	if st.PayloadInfo != nil {
		digest = str(st.PayloadInfo.SHA256)
	}
	bySeq := func() (string, bool) {
		return "stream-sequence:" + stream + ":" + strconv.FormatUint(seq, 10), stream != "" && seq != 0
	}
	byID := func() (string, bool) { return "message-id:" + id, id != "" }
	byPayload := func() (string, bool) {
		return "payload-sha256:" + subject + ":" + digest, st.Subject != nil && digest != ""
	}
	switch strategy {
	case StrategyStreamSequence:
		return bySeq()
	case StrategyMessageID:
		return byID()
	case StrategyPayloadSHA256:
		return byPayload()
	}
	if k, ok := bySeq(); ok {
		return k, true
	}
	if k, ok := byID(); ok {
		return k, true
	}
	return byPayload()
}

// Safe is the path-component sanitiser of docs/formats.md#file-names with the given fallback
// ("stream", "message" or "subject"): each maximal run of characters outside
// [A-Za-z0-9._-] becomes one '_'; leading and trailing '.', '_' and '-' are
// stripped; an empty result becomes <fallback>-<16 hex of sha256(v)>, and
// one longer than 120 characters its first 80 + '-' + 32 hex of sha256(v).
// Each invalid UTF-8 byte counts as one character outside the set.
func Safe(v, fallback string) string {
	s, _ := safe(v, fallback)
	return s
}

// safe is Safe, and reports whether the result is one of the two forms
// that end in a hash of v.
func safe(v, fallback string) (string, bool) {
	if isSafe(v) {
		return v, false
	}
	b := make([]byte, 0, len(v))
	run := false
	for i := 0; i < len(v); i++ {
		if safeByte(v[i]) {
			b = append(b, v[i])
			run = false
		} else if !run {
			// A multi-byte character is several bytes, all outside the
			// set, so byte runs and character runs coincide.
			b = append(b, '_')
			run = true
		}
	}
	i, j := 0, len(b)
	for i < j && strip(b[i]) {
		i++
	}
	for j > i && strip(b[j-1]) {
		j--
	}
	b = b[i:j]
	switch {
	case len(b) == 0:
		return fallback + "-" + sha256Hex([]byte(v))[:16], true
	case len(b) > 120:
		return string(b[:80]) + "-" + sha256Hex([]byte(v))[:32], true
	}
	return string(b), false
}

// isSafe reports whether Safe(v) is v itself, to skip the copy for the
// common subject or stream name.
func isSafe(v string) bool {
	if v == "" || len(v) > 120 || strip(v[0]) || strip(v[len(v)-1]) {
		return false
	}
	for i := 0; i < len(v); i++ {
		if !safeByte(v[i]) {
			return false
		}
	}
	return true
}

func safeByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

func strip(c byte) bool { return c == '.' || c == '_' || c == '-' }

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
