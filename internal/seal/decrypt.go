package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
)

// Decrypt opens one encryption envelope (the JSON document
// {"_nats_sinks_encryption": {...}}) and returns the plaintext.
//
// The checks run in the strict order of data-shapes §6 and the first
// failure is returned: envelope present (ErrNoEnvelope); key selected by
// key_id, or the ring's fixed key (ErrUnknownKey); algorithm aes-256-gcm or
// aes-256-ccm, and the key's configured one if it has one (ErrAlgorithm);
// schema (ErrSchema); version 1 (ErrVersion); nonce and ciphertext strict
// base64 (ErrBase64); integer tag_length for CCM (ErrTagLength);
// authentication (ErrDecrypt); plaintext_size_bytes and plaintext_sha256
// when present (ErrSizeMismatch, ErrDigestMismatch). Every error is a
// permanent sink.SerializationError and carries no key or payload bytes.
//
// Decrypt accepts what any conforming encryptor may have written: GCM
// nonces of 1..128 bytes, CCM nonces of 7..13 bytes with any legal tag. It
// does not consult nonce_size_bytes or ciphertext_encoding: the decoded
// nonce is authoritative, and neither field is authenticated anyway.
func Decrypt(envelopeJSON []byte, keys KeyRing) ([]byte, error) {
	env, ok := envelopeObject(envelopeJSON)
	if !ok {
		return nil, serialization(ErrNoEnvelope)
	}

	id, hasID := env["key_id"].(string)
	key, err := keys.lookup(id, hasID)
	if err != nil {
		return nil, serialization(err)
	}

	alg, _ := env["algorithm"].(string)
	if alg != AES256GCM && alg != AES256CCM {
		return nil, serialization(ErrAlgorithm)
	}
	if key.Algorithm != "" && alg != key.Algorithm {
		return nil, serialization(fmt.Errorf("envelope uses %s but the key is configured for %s: %w", alg, key.Algorithm, ErrAlgorithm))
	}
	schema, _ := env["schema"].(string)
	if schema != Schema && schema != SchemaV2 {
		return nil, serialization(ErrSchema)
	}
	// Only the integer of the schema's version: a conforming writer never
	// produces 1.0 or true.
	version := Version
	if schema == SchemaV2 {
		version = VersionV2
	}
	if v, _ := env["version"].(jsonx.Integer); v != jsonx.Integer(strconv.Itoa(version)) {
		return nil, serialization(ErrVersion)
	}
	nonce, err := envelopeBase64(env, "nonce")
	if err != nil {
		return nil, serialization(err)
	}
	ct, err := envelopeBase64(env, "ciphertext")
	if err != nil {
		return nil, serialization(err)
	}
	tag := gcmTagSize
	if alg == AES256CCM {
		v, ok := env["tag_length"].(jsonx.Integer)
		if !ok {
			return nil, serialization(ErrTagLength)
		}
		// A huge or illegal integer cannot authenticate anything: it
		// fails below like a wrong key would.
		n, err := strconv.Atoi(string(v))
		if err != nil {
			n = -1
		}
		tag = n
	}

	if version == VersionV2 {
		plaintext, err := openV2(env, key.Secret[:], alg, nonce, ct, tag)
		if err != nil {
			return nil, serialization(err)
		}
		return plaintext, nil
	}
	aead := openAEAD(key.Secret[:], alg, len(nonce), tag)
	if aead == nil {
		return nil, serialization(ErrDecrypt)
	}
	plaintext, err := aead.Open(nil, nonce, ct, nil)
	if err != nil {
		return nil, serialization(ErrDecrypt)
	}

	if v, present := env["plaintext_size_bytes"]; present && v != nil {
		if n, _ := v.(jsonx.Integer); n != jsonx.Integer(strconv.Itoa(len(plaintext))) {
			clear(plaintext)
			return nil, serialization(ErrSizeMismatch)
		}
	}
	if v, present := env["plaintext_sha256"]; present && v != nil {
		s, _ := v.(string)
		want, err := hex.DecodeString(s) // either case, as hex digests are often retyped
		sum := sha256.Sum256(plaintext)
		if err != nil || subtle.ConstantTimeCompare(want, sum[:]) != 1 {
			clear(plaintext)
			return nil, serialization(ErrDigestMismatch)
		}
	}
	return plaintext, nil
}

// envelopeObject parses doc strictly (data-shapes §1.2) and returns its
// _nats_sinks_encryption object.
func envelopeObject(doc []byte) (map[string]any, bool) {
	v, err := jsonx.Parse(doc)
	if err != nil {
		return nil, false
	}
	root, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	env, ok := root[EnvelopeKey].(map[string]any)
	return env, ok
}

// envelopeBase64 decodes the strict-base64 string field name of env.
func envelopeBase64(env map[string]any, name string) ([]byte, error) {
	s, ok := env[name].(string)
	if !ok {
		return nil, fmt.Errorf("encryption envelope %s: %w", name, ErrBase64)
	}
	b, err := decodeStrictBase64(s)
	if err != nil {
		return nil, fmt.Errorf("encryption envelope %s: %w", name, err)
	}
	return b, nil
}

// openAEAD returns the AEAD for decrypting with the given sizes, or nil
// when the algorithm cannot have them: GCM nonces of 1..128 bytes, CCM
// nonces of 7..13 bytes with an even tag of 4..16.
func openAEAD(key []byte, alg string, nonceSize, tag int) cipher.AEAD {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil
	}
	switch alg {
	case AES256GCM:
		if nonceSize < 1 || nonceSize > 128 {
			return nil
		}
		aead, err := cipher.NewGCMWithNonceSize(block, nonceSize)
		if err != nil {
			return nil
		}
		return aead
	case AES256CCM:
		c, err := newCCM(block, nonceSize, tag)
		if err != nil {
			return nil
		}
		return c
	}
	return nil
}
