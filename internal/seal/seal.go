// Package seal encrypts message payloads into nats-sinks encryption
// envelopes and decrypts them again (docs/formats.md#encryption-envelope, docs/configuration.md#encryption,
// docs/security.md#payload-encryption-keys). It is named seal because "crypto" would shadow the
// standard library.
//
// A Policy, built once from the encryption configuration, decides per
// subject whether and how a payload is encrypted; the runner calls
// Policy.Seal on every envelope before the sink sees it. Decrypt and Locate
// serve the decrypt command (docs/security.md#payload-encryption-keys).
//
// Key material never appears in errors or in printed values: Key and
// Settings print a mask under every fmt verb and in slog.
package seal

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/nats-sinks/nats-sink/sink"
)

// Algorithm names as they appear in configuration and envelopes.
const (
	AES256GCM = "aes-256-gcm"
	AES256CCM = "aes-256-ccm"
)

// Envelope constants (docs/formats.md#encryption-envelope).
const (
	// EnvelopeKey is the single root key of an encryption envelope.
	EnvelopeKey = "_nats_sinks_encryption"
	// Schema is the envelope's schema value.
	Schema = "nats_sinks.encrypted_payload.v1"
	// Version is the envelope's version value.
	Version = 1
)

// KeySize is the only key length the product accepts: AES-256.
const KeySize = 32

// gcmTagSize is GCM's tag length. The envelope always says 16 for GCM,
// whatever tag_length the configuration holds (docs/configuration.md#encryption).
const gcmTagSize = 16

// Decryption errors. Decrypt wraps them so that errors.Is finds them and
// sink.Failed classifies them as permanent SerializationErrors
// (docs/formats.md#encryption-envelope); their texts are the spec's.
var (
	// ErrNoEnvelope: the input is not a JSON object holding an
	// _nats_sinks_encryption object.
	ErrNoEnvelope = errors.New("payload does not contain a nats-sinks encryption envelope")
	// ErrUnknownKey: the envelope's key_id is not in the key ring.
	ErrUnknownKey = errors.New("no decryption key is configured for this key_id")
	// ErrAlgorithm: the envelope names an algorithm this product does not
	// provide, or not the one the key is configured for.
	ErrAlgorithm = errors.New("unsupported encryption algorithm")
	// ErrSchema: the envelope's schema is not nats_sinks.encrypted_payload.v1.
	ErrSchema = errors.New("unsupported encryption envelope schema")
	// ErrVersion: the envelope's version is not 1.
	ErrVersion = errors.New("unsupported encryption envelope version")
	// ErrBase64: nonce or ciphertext is not strict standard base64.
	ErrBase64 = errors.New("not valid base64")
	// ErrTagLength: an aes-256-ccm envelope lacks an integer tag_length.
	ErrTagLength = errors.New("aes-256-ccm envelope requires an integer tag_length")
	// ErrDecrypt: authentication failed (wrong key, tampered envelope, a
	// nonce or tag length the algorithm cannot have).
	ErrDecrypt = errors.New("encrypted payload could not be decrypted")
	// ErrSizeMismatch: the plaintext's length differs from
	// plaintext_size_bytes.
	ErrSizeMismatch = errors.New("decrypted payload size does not match plaintext_size_bytes")
	// ErrDigestMismatch: the plaintext's SHA-256 differs from
	// plaintext_sha256.
	ErrDigestMismatch = errors.New("decrypted payload sha256 does not match plaintext_sha256")
)

// serialization marks err as the SerializationError of docs/formats.md#encryption-envelope.
func serialization(err error) error {
	return sink.AsPermanentType(sink.SerializationError, err)
}

// mask is what every printed form of key material shows (docs/security.md#secret-hygiene).
const mask = "********"

// A Key is one AES-256 decryption key.
type Key struct {
	// ID is the key_id envelopes name. A fixed key ring ignores it.
	ID string
	// Secret is the raw key.
	Secret [KeySize]byte
	// Algorithm, when set, is the only algorithm accepted with this key
	// (docs/formats.md#encryption-envelope: "equal the configured one when a single
	// configuration is used"); "" accepts both.
	Algorithm string
}

// String masks the secret: keys end up in %v of larger structs.
func (k Key) String() string {
	return fmt.Sprintf("seal.Key{ID: %q, Secret: %s, Algorithm: %q}", k.ID, mask, k.Algorithm)
}

// Format prints String for every verb, including %#v and %x, which would
// otherwise bypass String and dump the secret.
func (k Key) Format(f fmt.State, _ rune) { fmt.Fprint(f, k.String()) }

// LogValue keeps the secret out of structured logs.
func (k Key) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", k.ID), slog.String("secret", mask), slog.String("algorithm", k.Algorithm))
}

// A KeyRing selects the decryption key for an envelope: by key_id from a
// registry, or one fixed key for any key_id (docs/security.md#payload-encryption-keys). The zero KeyRing
// holds no keys.
type KeyRing struct {
	byID  map[string]Key
	fixed *Key
}

// NewKeyRing returns a registry keyed by Key.ID. Decrypt fails for any other
// key_id. IDs must be non-empty and unique.
func NewKeyRing(keys ...Key) (KeyRing, error) {
	r := KeyRing{byID: make(map[string]Key, len(keys))}
	for _, k := range keys {
		if k.ID == "" {
			return KeyRing{}, errors.New("seal: key ring entry with an empty key_id")
		}
		if _, dup := r.byID[k.ID]; dup {
			return KeyRing{}, fmt.Errorf("seal: key_id %q given twice", k.ID)
		}
		if err := checkAlgorithm(k.Algorithm, true); err != nil {
			return KeyRing{}, fmt.Errorf("seal: key_id %q: %w", k.ID, err)
		}
		r.byID[k.ID] = k
	}
	return r, nil
}

// FixedKeyRing returns a key ring that uses k for every envelope, whatever
// its key_id says (the decrypt command's --key-env).
func FixedKeyRing(k Key) KeyRing { return KeyRing{fixed: &k} }

// lookup returns the key for an envelope's key_id; hasID is false when the
// envelope has no string key_id.
func (r KeyRing) lookup(id string, hasID bool) (Key, error) {
	if r.fixed != nil {
		return *r.fixed, nil
	}
	if !hasID {
		return Key{}, fmt.Errorf("encryption envelope key_id is missing: %w", ErrUnknownKey)
	}
	k, ok := r.byID[id]
	if !ok {
		return Key{}, fmt.Errorf("key_id %s: %w", quoteBounded(id), ErrUnknownKey)
	}
	return k, nil
}

// quoteBounded quotes an envelope-supplied string for an error message,
// cutting it short: key ids are at most 128 characters in configuration,
// and a forged envelope must not flood the logs.
func quoteBounded(s string) string {
	const limit = 128
	if len(s) > limit {
		cut := limit
		for cut > 0 && !isRuneStart(s[cut]) {
			cut--
		}
		return fmt.Sprintf("%q…", s[:cut])
	}
	return fmt.Sprintf("%q", s)
}

func isRuneStart(b byte) bool { return b&0xc0 != 0x80 }

// ParseKey decodes key material given as standard base64 with padding
// (encryption.key_b64, the value of a key_b64_env variable, the decrypt
// command's key variables). Its errors never contain the input.
func ParseKey(b64 string) ([KeySize]byte, error) {
	var k [KeySize]byte
	raw, err := decodeStrictBase64(b64)
	if err != nil {
		return k, errors.New("must be standard base64 with padding")
	}
	if len(raw) != KeySize {
		clear(raw)
		return k, errors.New("must decode to exactly 32 bytes for AES-256")
	}
	copy(k[:], raw)
	clear(raw)
	return k, nil
}

// NormalizeAlgorithm applies docs/configuration.md#encryption's spelling rules: trimmed,
// lower-cased, '_' read as '-'. It does not check the result.
func NormalizeAlgorithm(s string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "_", "-")
}

// checkAlgorithm accepts the two algorithm names, and "" when empty is true.
func checkAlgorithm(alg string, empty bool) error {
	switch {
	case alg == AES256GCM, alg == AES256CCM, alg == "" && empty:
		return nil
	}
	return errors.New("must be one of aes-256-gcm, aes-256-ccm")
}

// decodeStrictBase64 decodes standard base64 and rejects everything else:
// characters outside the alphabet (Go's decoder silently skips CR and LF),
// missing or misplaced padding, and non-zero bits in the final padding
// character, which no encoder produces.
func decodeStrictBase64(s string) ([]byte, error) {
	if len(s)%4 != 0 {
		return nil, ErrBase64
	}
	body := strings.TrimRight(s, "=")
	if len(s)-len(body) > 2 {
		return nil, ErrBase64
	}
	for i := range len(body) {
		c := body[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/') {
			return nil, ErrBase64
		}
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, ErrBase64
	}
	return b, nil
}
