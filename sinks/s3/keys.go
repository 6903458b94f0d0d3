package s3sink

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/sink"
)

// keyPart is k(v) of docs/formats.md#s3-objects: every character that is not a Unicode
// letter or number and not '-', '_' or '.' becomes '_' (one per character,
// unlike the file sink's runs); leading and trailing '.', '_' and '-' are
// stripped; an empty result is "value". Each byte of invalid UTF-8 counts
// as one character.
func keyPart(v string) string {
	var b strings.Builder
	b.Grow(len(v))
	for _, r := range v {
		if unicode.IsLetter(r) || unicode.IsNumber(r) || r == '-' || r == '_' || r == '.' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	s := strings.Trim(b.String(), "._-")
	if s == "" {
		return "value"
	}
	return s
}

// part is keyPart(v) made injective: when k() changed v, a short hash of
// v is appended (record.Distinct), so values that sanitise alike
// ("order/1", "order_1", "order 1") keep apart; a value k() left alone
// keeps the key nats-sinks gave it.
func part(v string) string { return record.Distinct(v, keyPart(v)) }

// rawKey returns the strategy's part of the object key (docs/formats.md#s3-objects),
// each value made injective by part. Missing material is a
// SerializationError (docs/formats.md#dlq-body), except for the core key, whose own
// error is a ValidationError.
func rawKey(strategy string, e *sink.Envelope) (string, error) {
	switch strategy {
	case "stream_sequence":
		if e.Stream == "" || e.StreamSequence == 0 {
			return "", sink.AsPermanentType(sink.SerializationError,
				errors.New("stream_sequence key strategy requires JetStream stream and sequence metadata"))
		}
		return "stream-sequence/" + part(e.Stream) + "/" + strconv.FormatUint(e.StreamSequence, 10), nil
	case "message_id":
		if e.MessageID == "" {
			return "", sink.AsPermanentType(sink.SerializationError,
				errors.New("message_id key strategy requires a message id header"))
		}
		return "message-id/" + part(e.MessageID), nil
	case "payload_sha256":
		// The spec names no missing material here, but hashing the empty
		// body of a headers-only message would give every such message of
		// a subject one key, and skip_existing would acknowledge all but
		// the first as duplicates (docs/migrating.md Q17 for HTTP, the file sink).
		if e.Payload.Omitted {
			return "", sink.AsPermanentType(sink.SerializationError,
				errors.New("payload_sha256 key strategy is unavailable because the original payload bytes were omitted"))
		}
		sum := sha256.Sum256(e.Data)
		return "payload-sha256/" + part(e.Subject) + "/" + hex.EncodeToString(sum[:]), nil
	default: // idempotency_key
		k, err := record.CoreKey(e)
		if err != nil {
			return "", err
		}
		// The core key's own ':' separators become '_' as in nats-sinks;
		// that alone keeps keys apart (the forms differ in their prefix,
		// a sequence or hash is last and has no '_'). Only when k()
		// changes the message's value inside it could two keys meet.
		if v := record.CoreKeyValue(e); keyPart(v) != v {
			return "idempotency-key/" + record.Distinct(k, keyPart(k)), nil
		}
		return "idempotency-key/" + keyPart(k), nil
	}
}

// objectKey returns the full object key of e: [prefix/][key_prefix:]raw
// + object_suffix, checked against the key rules of docs/formats.md#s3-objects.
func (c *Config) objectKey(e *sink.Envelope) (string, error) {
	raw, err := rawKey(c.KeyStrategy, e)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if c.Prefix != nil {
		b.WriteString(*c.Prefix)
		b.WriteByte('/')
	}
	if c.KeyPrefix != nil {
		b.WriteString(*c.KeyPrefix)
		b.WriteByte(':')
	}
	b.WriteString(raw)
	b.WriteString(c.ObjectSuffix)
	key := b.String()
	if err := c.checkKey(key); err != nil {
		return "", err
	}
	return key, nil
}

// checkKey applies the key rules of docs/formats.md#s3-objects. With the validated
// configuration and keyPart no rule but the length can fail today; the
// checks stay so that a future strategy cannot produce a key that escapes
// its prefix.
func (c *Config) checkKey(key string) error {
	fail := func(format string, args ...any) error {
		return sink.AsPermanentType(sink.SerializationError, fmt.Errorf(format, args...))
	}
	if len(key) > c.MaxKeyBytes {
		return fail("S3 object key is %d bytes, more than max_key_bytes (%d)", len(key), c.MaxKeyBytes)
	}
	if strings.HasPrefix(key, "/") || strings.Contains(key, "//") {
		return fail("S3 object key %s must not start with \"/\" or contain \"//\"", key)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fail("S3 object key %s contains an empty, \".\" or \"..\" segment", key)
		}
	}
	return nil
}

// sidecarKey is the object key with object_suffix replaced by
// sidecar_suffix (appended when the key does not end with object_suffix).
func (c *Config) sidecarKey(objectKey string) string {
	return strings.TrimSuffix(objectKey, c.ObjectSuffix) + c.SidecarSuffix
}

// errSidecarCollision rejects a message whose object or sidecar key could be
// another message's sidecar or object key.
var errSidecarCollision = errors.New("S3 object key could collide with another message's sidecar key")

// checkSidecarCollision guards the sidecar layout against a key that is
// both one message's sidecar and another's object. With object_suffix
// ".json" and sidecar_suffix ".metadata.json", message id "42.metadata"
// has object key ".../42.metadata.json", which is the sidecar key of
// message id "42": whichever came second would be reported Duplicate and
// never stored. Such a collision needs one suffix to end with the other, and
// then one of the two keys of the colliding message ends with the other
// suffix; that message is dead-lettered instead of silently lost. The spec
// is silent (upstream has the collision).
func (c *Config) checkSidecarCollision(objectKey, sidecarKey string) error {
	switch {
	case strings.HasSuffix(c.SidecarSuffix, c.ObjectSuffix):
		if strings.HasSuffix(objectKey, c.SidecarSuffix) {
			return sink.AsPermanentType(sink.SerializationError, fmt.Errorf("%w: %s", errSidecarCollision, objectKey))
		}
	case strings.HasSuffix(c.ObjectSuffix, c.SidecarSuffix):
		if strings.HasSuffix(sidecarKey, c.ObjectSuffix) {
			return sink.AsPermanentType(sink.SerializationError, fmt.Errorf("%w: %s", errSidecarCollision, objectKey))
		}
	}
	return nil
}
