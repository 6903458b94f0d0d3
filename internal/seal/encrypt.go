package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
)

// Settings is one encryption configuration: the top level of docs/configuration.md
// docs/delivery.md#ack-order or, after inheritance, one rule's effective values.
type Settings struct {
	// Enabled says whether the settings encrypt at all. Policy reads it;
	// Encrypt ignores it.
	Enabled bool
	// Algorithm is aes-256-gcm or aes-256-ccm, spelled as docs/configuration.md#encryption
	// allows (see NormalizeAlgorithm); envelopes carry the normalised name.
	Algorithm string
	// KeyID is written into every envelope: non-blank, at most 128
	// characters.
	KeyID string
	// Key is the 32-byte AES-256 key. Policy does not keep it: it expands
	// it into the cipher once.
	Key []byte
	// NonceSize is the nonce length in bytes: 8..13 for GCM (docs/migrating.md Q13),
	// 7..13 for CCM.
	NonceSize int
	// TagLength is the CCM tag length: 4, 6, 8, 10, 12, 14 or 16. GCM
	// always uses 16 and ignores it.
	TagLength int
	// EnvelopeVersion is 1 (0 means 1: upstream's envelope, with a clear
	// plaintext SHA-256) or 2 (a keyed MAC instead, and associated data
	// binding the message; see EncryptMessage).
	EnvelopeVersion int
}

// String prints the settings with the key masked.
func (s Settings) String() string {
	key := "nil"
	if s.Key != nil {
		key = mask
	}
	return fmt.Sprintf("seal.Settings{Enabled: %t, Algorithm: %q, KeyID: %q, Key: %s, NonceSize: %d, TagLength: %d, EnvelopeVersion: %d}",
		s.Enabled, s.Algorithm, s.KeyID, key, s.NonceSize, s.TagLength, s.EnvelopeVersion)
}

// Format prints String for every verb, so %#v and %x cannot dump the key.
func (s Settings) Format(f fmt.State, _ rune) { fmt.Fprint(f, s.String()) }

// LogValue keeps the key out of structured logs.
func (s Settings) LogValue() slog.Value { return slog.StringValue(s.String()) }

// Encrypt returns plaintext sealed into the encryption envelope of
// docs/formats.md#encryption-envelope under s (s.Enabled is not consulted): a fresh nonce of
// s.NonceSize bytes read from random (nil means crypto/rand.Reader), no
// associated data, the envelope serialised in the ascii flavour.
//
// Each call expands the key; Policy.Seal does that once per policy.
func Encrypt(plaintext []byte, s Settings, random io.Reader) ([]byte, error) {
	sl, err := newSealer(s)
	if err != nil {
		return nil, err
	}
	if random == nil {
		random = rand.Reader
	}
	return sl.sealMessage(plaintext, Message{}, random)
}

// defaultRand is the nonce source when none is given.
func defaultRand() io.Reader { return rand.Reader }

// A sealer is one validated Settings with its key expanded into an AEAD.
// It is immutable, so one sealer serves concurrent Seal calls.
type sealer struct {
	alg       string
	keyID     string
	nonceSize int
	tagLength int    // as written into the envelope
	maxLen    uint64 // longest plaintext the mode can take
	aead      cipher.AEAD
	version   int    // envelope version: 1 or 2
	macKey    []byte // version 2: the plaintext MAC key
}

// newSealer validates s (the rules of docs/configuration.md#encryption) and expands its key.
// Problems are reported as "<key>: <message>", without key material.
func newSealer(s Settings) (*sealer, error) {
	var problems []error
	alg := NormalizeAlgorithm(s.Algorithm)
	if err := checkAlgorithm(alg, false); err != nil {
		problems = append(problems, fmt.Errorf("algorithm: %w", err))
	}
	if strings.TrimSpace(s.KeyID) == "" {
		problems = append(problems, errors.New("key_id: must not be empty"))
	} else if n := utf8.RuneCountInString(s.KeyID); n > 128 {
		problems = append(problems, fmt.Errorf("key_id: must be at most 128 characters (got %d)", n))
	}
	if len(s.Key) != KeySize {
		// The length is not key material, but the product's wording
		// (docs/configuration.md#encryption) does not print it either.
		problems = append(problems, errors.New("key: must be exactly 32 bytes for AES-256"))
	}
	switch alg {
	case AES256GCM:
		if s.NonceSize < 8 || s.NonceSize > 13 {
			problems = append(problems, fmt.Errorf("nonce_size_bytes: must be between 8 and 13 for aes-256-gcm (got %d)", s.NonceSize))
		}
	case AES256CCM:
		if s.NonceSize < 7 || s.NonceSize > 13 {
			problems = append(problems, fmt.Errorf("nonce_size_bytes: must be between 7 and 13 (got %d)", s.NonceSize))
		}
		if !validCCMTag(s.TagLength) {
			problems = append(problems, fmt.Errorf("tag_length: must be one of 4, 6, 8, 10, 12, 14, 16 (got %d)", s.TagLength))
		}
	}
	version := s.EnvelopeVersion
	if version == 0 {
		version = Version
	}
	if version != Version && version != VersionV2 {
		problems = append(problems, fmt.Errorf("envelope_version: must be one of 1, 2 (got %d)", s.EnvelopeVersion))
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	block, err := aes.NewCipher(s.Key)
	if err != nil {
		return nil, errors.New("key: cannot create AES cipher") // unreachable with 32 bytes
	}
	sl := &sealer{alg: alg, keyID: s.KeyID, nonceSize: s.NonceSize, version: version}
	if version == VersionV2 {
		sl.macKey = macKey(s.Key)
	}
	if alg == AES256GCM {
		sl.tagLength = gcmTagSize
		sl.maxLen = 1<<36 - 32 // GCM's own bound, far beyond any NATS message
		sl.aead, err = cipher.NewGCMWithNonceSize(block, s.NonceSize)
	} else {
		var c *ccm
		c, err = newCCM(block, s.NonceSize, s.TagLength)
		if c != nil {
			sl.tagLength, sl.maxLen, sl.aead = s.TagLength, c.maxLen(), c
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", alg, err)
	}
	return sl, nil
}

func validCCMTag(n int) bool { return n >= 4 && n <= 16 && n%2 == 0 }

// sealMessage encrypts plaintext and returns the envelope bytes; a
// version 2 envelope binds m.
func (sl *sealer) sealMessage(plaintext []byte, m Message, random io.Reader) ([]byte, error) {
	if uint64(len(plaintext)) > sl.maxLen {
		// CCM's length field is 15 − nonce bytes: a 13-byte nonce caps the
		// payload at 65535 bytes.
		return nil, fmt.Errorf("payload of %d bytes is too long for %s with a %d-byte nonce (at most %d bytes)",
			len(plaintext), sl.alg, sl.nonceSize, sl.maxLen)
	}
	nonce := make([]byte, sl.nonceSize)
	if _, err := io.ReadFull(random, nonce); err != nil {
		return nil, fmt.Errorf("read random nonce: %w", err)
	}
	if sl.version == VersionV2 {
		return sl.sealV2(plaintext, nonce, m), nil
	}
	sum := sha256.Sum256(plaintext)
	ct := sl.aead.Seal(make([]byte, 0, len(plaintext)+sl.tagLength), nonce, plaintext, nil)
	return sl.appendEnvelope(make([]byte, 0, 320+len(sl.keyID)+base64.StdEncoding.EncodedLen(len(ct))),
		ct, nonce, sum[:], len(plaintext)), nil
}

// appendEnvelope writes the envelope with its keys in canonical (sorted)
// order. It produces exactly what jsonx.Marshal(…, jsonx.ASCII) makes of the
// equivalent map, without building and sorting a map per message; the only
// free-form string, key_id, goes through the jsonx escaper. A test pins the
// equivalence.
func (sl *sealer) appendEnvelope(b, ct, nonce, sum []byte, size int) []byte {
	b = append(b, `{"`+EnvelopeKey+`":{"algorithm":"`...)
	b = append(b, sl.alg...)
	b = append(b, `","ciphertext":"`...)
	b = base64.StdEncoding.AppendEncode(b, ct)
	b = append(b, `","ciphertext_encoding":"base64","key_id":`...)
	b = jsonx.AppendString(b, sl.keyID, jsonx.ASCII)
	b = append(b, `,"nonce":"`...)
	b = base64.StdEncoding.AppendEncode(b, nonce)
	b = append(b, `","nonce_size_bytes":`...)
	b = strconv.AppendInt(b, int64(sl.nonceSize), 10)
	b = append(b, `,"plaintext_sha256":"`...)
	b = hex.AppendEncode(b, sum)
	b = append(b, `","plaintext_size_bytes":`...)
	b = strconv.AppendInt(b, int64(size), 10)
	b = append(b, `,"schema":"`+Schema+`","tag_length":`...)
	b = strconv.AppendInt(b, int64(sl.tagLength), 10)
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, Version, 10)
	return append(b, "}}"...)
}
