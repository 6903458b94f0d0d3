package seal

import (
	"errors"
	"testing"

	"github.com/nats-sinks/nats-sink/sink"
)

// FuzzDecrypt feeds arbitrary documents to Decrypt and Locate: neither may
// panic, every Decrypt failure is one of the documented errors, and
// whatever Decrypt accepts must re-encrypt and decrypt to the same bytes.
func FuzzDecrypt(f *testing.F) {
	for _, v := range specVectors {
		f.Add([]byte(v.want))
	}
	f.Add([]byte(`{"_nats_sinks_encryption":{"algorithm":"aes-256-ccm","ciphertext":"","key_id":"k","nonce":"oKGio6Slpqc=","schema":"nats_sinks.encrypted_payload.v1","tag_length":4,"version":1}}`))
	f.Add([]byte(`{"payload_base64":"e30="}`))
	f.Add([]byte{0x1f, 0x8b, 0x08, 0x00})
	f.Add([]byte(`{"_nats_sinks_encryption":{"algorithm":"aes-256-gcm","nonce":"","ciphertext":"AAAAAAAAAAAAAAAAAAAAAA==","key_id":"k","schema":"nats_sinks.encrypted_payload.v1","version":1}}`))
	keys := testKeyRing(f, "orders-2026-05", "k", "k2")
	documented := []error{ErrNoEnvelope, ErrUnknownKey, ErrAlgorithm, ErrSchema, ErrVersion, ErrBase64,
		ErrTagLength, ErrDecrypt, ErrSizeMismatch, ErrDigestMismatch}
	f.Fuzz(func(t *testing.T, data []byte) {
		if loc, err := Locate(data); err == nil {
			_, _ = Decrypt(loc, keys)
		}
		pt, err := Decrypt(data, keys)
		if err != nil {
			known := false
			for _, e := range documented {
				known = known || errors.Is(err, e)
			}
			if !known {
				t.Fatalf("Decrypt error %v is not a documented error", err)
			}
			if res := sink.Failed(err); res.ErrorType != sink.SerializationError {
				t.Fatalf("Decrypt error %v classified as %v/%s", err, res.Outcome, res.ErrorType)
			}
			return
		}
		env, err := Encrypt(pt, gcm("k", 12), nil)
		if err != nil {
			t.Fatalf("re-encrypting %d accepted bytes: %v", len(pt), err)
		}
		again, err := Decrypt(env, keys)
		if err != nil || string(again) != string(pt) {
			t.Fatalf("round trip of accepted plaintext: %q, %v; want %q", again, err, pt)
		}
	})
}
