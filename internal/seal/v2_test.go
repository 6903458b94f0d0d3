package seal

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
)

// v2Vector is the version 2 test vector of docs/formats.md: the vector key,
// nonce bytes 0xa0.., GCM with a 12-byte nonce, key_id orders-2026-05, the
// message orders.created in stream ORDERS at sequence 42.
const v2Vector = `{"_nats_sinks_encryption":{"algorithm":"aes-256-gcm","ciphertext":"VECTOR","ciphertext_encoding":"base64","key_id":"orders-2026-05","nonce":"oKGio6Slpqeoqaqr","nonce_size_bytes":12,"plaintext_mac":"MAC","plaintext_size_bytes":21,"schema":"nats_sinks.encrypted_payload.v2","stream":"ORDERS","stream_sequence":42,"subject":"orders.created","tag_length":16,"version":2}}`

var v2Message = Message{Subject: "orders.created", Stream: "ORDERS", Sequence: 42}

func v2Settings() Settings {
	s := gcm("orders-2026-05", 12)
	s.EnvelopeVersion = 2
	return s
}

func TestV2Vector(t *testing.T) {
	got, err := EncryptMessage([]byte(`{"order_id":"O-1001"}`), v2Settings(), v2Message, nonceReader{})
	if err != nil {
		t.Fatal(err)
	}
	// Ciphertext and MAC checked independently with Python's
	// cryptography package (AESGCM with the associated data, HKDF-SHA256
	// and HMAC-SHA256 from hashlib).
	want := strings.NewReplacer("VECTOR", "nToTXyGucOALAaXpJTXt70CcaDLv+Bxsxjkdciurta+bfOlcOQ==",
		"MAC", "133cd373a88a40076c0de5c6d889a12ba1aa05d23131fed8d62f8053bf8e10e6").Replace(v2Vector)
	if string(got) != want {
		t.Errorf("v2 envelope =\n%s\nwant\n%s", got, want)
	}
	pt, err := Decrypt(got, testKeyRing(t, "orders-2026-05"))
	if err != nil || string(pt) != `{"order_id":"O-1001"}` {
		t.Errorf("Decrypt(v2) = %q, %v", pt, err)
	}
}

func TestV2BindsItsContext(t *testing.T) {
	doc, err := EncryptMessage([]byte("4711"), v2Settings(), v2Message, nil)
	if err != nil {
		t.Fatal(err)
	}
	fixed := Key{}
	copy(fixed.Secret[:], testKey())
	ring := FixedKeyRing(fixed) // a fixed key ignores key_id: only the associated data can catch an edit
	for _, tt := range []struct {
		name string
		edit func(map[string]any)
		want error
	}{
		{"key_id", func(e map[string]any) { e["key_id"] = "orders-2026-06" }, ErrDecrypt},
		{"subject", func(e map[string]any) { e["subject"] = "orders.cancelled" }, ErrDecrypt},
		{"stream", func(e map[string]any) { e["stream"] = "OTHER" }, ErrDecrypt},
		{"stream null", func(e map[string]any) { e["stream"] = nil }, ErrDecrypt},
		{"stream_sequence", func(e map[string]any) { e["stream_sequence"] = jsonx.Integer("43") }, ErrDecrypt},
		{"subject missing", func(e map[string]any) { delete(e, "subject") }, ErrDecrypt},
		{"plaintext_mac", func(e map[string]any) { e["plaintext_mac"] = strings.Repeat("0", 64) }, ErrMACMismatch},
		{"plaintext_mac missing", func(e map[string]any) { delete(e, "plaintext_mac") }, ErrMACMismatch},
		{"version 1 with the v2 schema", func(e map[string]any) { e["version"] = jsonx.Integer("1") }, ErrVersion},
		{"v1 schema with version 2", func(e map[string]any) { e["schema"] = Schema }, ErrVersion},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v, _ := jsonx.Parse(doc)
			env := v.(map[string]any)[EnvelopeKey].(map[string]any)
			tt.edit(env)
			_, err := Decrypt(jsonx.Marshal(v, jsonx.ASCII), ring)
			if !errors.Is(err, tt.want) {
				t.Errorf("Decrypt(edited %s) error = %v, want %v", tt.name, err, tt.want)
			}
		})
	}
	if pt, err := Decrypt(doc, ring); err != nil || string(pt) != "4711" {
		t.Errorf("Decrypt(unedited) = %q, %v", pt, err)
	}
}

func TestV2NoClearDigest(t *testing.T) {
	// The same low-entropy payload twice: nothing in the envelope lets a
	// reader without the key confirm a guess (no digest of the plaintext).
	a, _ := EncryptMessage([]byte("4711"), v2Settings(), v2Message, nil)
	if bytes.Contains(a, []byte("plaintext_sha256")) {
		t.Errorf("v2 envelope has plaintext_sha256: %s", a)
	}
	ccm := ccmSettings("k2", 13, 8)
	ccm.EnvelopeVersion = 2
	doc, err := EncryptMessage([]byte("hello"), ccm, Message{Subject: "s"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := Decrypt(doc, testKeyRing(t, "k2")); err != nil || string(pt) != "hello" {
		t.Errorf("Decrypt(v2 ccm, no stream) = %q, %v (%s)", pt, err, doc)
	}
}
