package seal

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"strconv"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
)

// Envelope version 2 (docs/formats.md#encryption-envelope-v2): no clear
// digest, and associated data that binds the ciphertext to its key id,
// algorithm, schema and message.
const (
	// SchemaV2 is the schema value of version 2 envelopes.
	SchemaV2 = "nats_sinks.encrypted_payload.v2"
	// VersionV2 is the version value of version 2 envelopes.
	VersionV2 = 2
	// macInfo is the HKDF info of the plaintext MAC key.
	macInfo = "nats-sinks envelope v2 mac"
)

// ErrMACMismatch: a version 2 envelope's plaintext_mac does not match the
// decrypted plaintext.
var ErrMACMismatch = errors.New("decrypted payload does not match plaintext_mac")

// Message is what a version 2 envelope binds besides its own settings:
// the message's subject, stream and stream sequence ("" and 0 = unknown,
// bound as null).
type Message struct {
	Subject  string
	Stream   string
	Sequence uint64
}

// EncryptMessage is Encrypt for a known message: with s.EnvelopeVersion 2
// the envelope binds m; version 1 ignores m.
func EncryptMessage(plaintext []byte, s Settings, m Message, random io.Reader) ([]byte, error) {
	sl, err := newSealer(s)
	if err != nil {
		return nil, err
	}
	if random == nil {
		random = defaultRand()
	}
	return sl.sealMessage(plaintext, m, random)
}

// macKey derives the plaintext MAC key from the data key.
func macKey(key []byte) []byte {
	k, err := hkdf.Key(sha256.New, key, nil, macInfo, 32)
	if err != nil {
		panic("seal: hkdf: " + err.Error()) // unreachable: 32 bytes is far below the limit
	}
	return k
}

func plaintextMAC(key, plaintext []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(plaintext)
	return m.Sum(nil)
}

// associatedData is the canonical JSON (utf8 flavour) of the six bound
// values, as stored in the envelope. stream and seq are nil for null.
func associatedData(alg, keyID string, stream, seq, subject any) []byte {
	return jsonx.Marshal(jsonx.Object{
		{Key: "algorithm", Value: alg},
		{Key: "key_id", Value: keyID},
		{Key: "schema", Value: SchemaV2},
		{Key: "stream", Value: stream},
		{Key: "stream_sequence", Value: seq},
		{Key: "subject", Value: subject},
	}, jsonx.UTF8)
}

func messageValues(m Message) (stream, seq any) {
	if m.Stream != "" {
		stream = m.Stream
	}
	if m.Sequence != 0 {
		seq = jsonx.Integer(strconv.FormatUint(m.Sequence, 10))
	}
	return stream, seq
}

// sealV2 encrypts plaintext into a version 2 envelope bound to m.
func (sl *sealer) sealV2(plaintext, nonce []byte, m Message) []byte {
	stream, seq := messageValues(m)
	ad := associatedData(sl.alg, sl.keyID, stream, seq, m.Subject)
	ct := sl.aead.Seal(make([]byte, 0, len(plaintext)+sl.tagLength), nonce, plaintext, ad)
	return jsonx.Marshal(jsonx.Object{{Key: EnvelopeKey, Value: jsonx.Object{
		{Key: "algorithm", Value: sl.alg},
		{Key: "ciphertext", Value: base64.StdEncoding.EncodeToString(ct)},
		{Key: "ciphertext_encoding", Value: "base64"},
		{Key: "key_id", Value: sl.keyID},
		{Key: "nonce", Value: base64.StdEncoding.EncodeToString(nonce)},
		{Key: "nonce_size_bytes", Value: sl.nonceSize},
		{Key: "plaintext_mac", Value: hex.EncodeToString(plaintextMAC(sl.macKey, plaintext))},
		{Key: "plaintext_size_bytes", Value: len(plaintext)},
		{Key: "schema", Value: SchemaV2},
		{Key: "stream", Value: stream},
		{Key: "stream_sequence", Value: seq},
		{Key: "subject", Value: m.Subject},
		{Key: "tag_length", Value: sl.tagLength},
		{Key: "version", Value: VersionV2},
	}}}, jsonx.ASCII)
}

// openV2 authenticates and decrypts a version 2 envelope and checks its
// MAC. The associated data is rebuilt from the stored values, so editing
// any of them makes authentication fail.
func openV2(env map[string]any, key []byte, alg string, nonce, ct []byte, tag int) ([]byte, error) {
	subject, okSubject := env["subject"].(string)
	stream, seq := env["stream"], env["stream_sequence"]
	if _, ok := stream.(string); !ok && stream != nil {
		return nil, ErrDecrypt
	}
	if _, ok := seq.(jsonx.Integer); !ok && seq != nil {
		return nil, ErrDecrypt
	}
	keyID, okKeyID := env["key_id"].(string)
	if !okSubject || !okKeyID {
		return nil, ErrDecrypt
	}
	aead := openAEAD(key, alg, len(nonce), tag)
	if aead == nil {
		return nil, ErrDecrypt
	}
	plaintext, err := aead.Open(nil, nonce, ct, associatedData(alg, keyID, stream, seq, subject))
	if err != nil {
		return nil, ErrDecrypt
	}
	if v, present := env["plaintext_size_bytes"]; present && v != nil {
		if n, _ := v.(jsonx.Integer); n != jsonx.Integer(strconv.Itoa(len(plaintext))) {
			clear(plaintext)
			return nil, ErrSizeMismatch
		}
	}
	s, _ := env["plaintext_mac"].(string)
	want, err := hex.DecodeString(s)
	if err != nil || !hmac.Equal(want, plaintextMAC(macKey(key), plaintext)) {
		clear(plaintext)
		return nil, ErrMACMismatch
	}
	return plaintext, nil
}
