package record

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"

	"github.com/nats-sinks/nats-sink/sink"
)

// Filename strategies of the file sink (sinks.md §1).
const (
	StrategyStreamSequence = "stream_sequence"
	StrategyMessageID      = "message_id"
	StrategyPayloadSHA256  = "payload_sha256"
)

// ErrNoCoreKey is the text of the ValidationError CoreKey returns when no
// idempotency material exists (data-shapes §5).
var ErrNoCoreKey = errors.New("payload-sha256 idempotency fallback is unavailable because the original payload bytes were omitted")

// CoreKey returns the core idempotency key (§5), or an error wrapped with
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
		stem = append(stem, Safe(e.Stream, "stream")...)
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
		return Safe(e.Subject, "subject") + "-" + sha256Hex(e.Data), nil
	}
	return "", sink.AsPermanent(errors.New("unknown filename strategy " + strconv.Quote(strategy)))
}

// Safe is the path-component sanitiser of §7.1 with the given fallback
// ("stream", "message" or "subject"): each maximal run of characters outside
// [A-Za-z0-9._-] becomes one '_'; leading and trailing '.', '_' and '-' are
// stripped; an empty result becomes <fallback>-<16 hex of sha256(v)>, and
// one longer than 120 characters its first 80 + '-' + 32 hex of sha256(v).
// Each invalid UTF-8 byte counts as one character outside the set.
func Safe(v, fallback string) string {
	if isSafe(v) {
		return v
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
		return fallback + "-" + sha256Hex([]byte(v))[:16]
	case len(b) > 120:
		return string(b[:80]) + "-" + sha256Hex([]byte(v))[:32]
	}
	return string(b)
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
