package seal

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/sink"
)

// vectorFields returns a fresh copy of the inner object of spec vector i.
func vectorFields(t *testing.T, i int) map[string]any {
	t.Helper()
	return parseEnvelope(t, []byte(specVectors[i].want))
}

func doc(env map[string]any) []byte {
	return jsonx.Marshal(map[string]any{EnvelopeKey: env}, jsonx.ASCII)
}

// flipBit flips the lowest bit of byte i of a base64 field (negative i
// counts from the end).
func flipBit(t *testing.T, env map[string]any, field string, i int) {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(env[field].(string))
	if err != nil {
		t.Fatal(err)
	}
	if i < 0 {
		i += len(b)
	}
	b[i] ^= 1
	env[field] = base64.StdEncoding.EncodeToString(b)
}

func TestDecryptErrors(t *testing.T) {
	const gcmVec, ccmVec = 0, 2 // indexes into specVectors
	for _, tt := range []struct {
		name    string
		vector  int
		edit    func(t *testing.T, env map[string]any)
		raw     string // used instead of the edited vector when set
		keys    func(t *testing.T) KeyRing
		want    error
		wantMsg string
	}{
		{name: "not json", raw: "not json", want: ErrNoEnvelope},
		{name: "empty input", raw: "", want: ErrNoEnvelope},
		{name: "array root", raw: `[{"_nats_sinks_encryption":{}}]`, want: ErrNoEnvelope},
		{name: "no envelope key", raw: `{"order_id":"O-1001"}`, want: ErrNoEnvelope},
		{name: "envelope not an object", raw: `{"_nats_sinks_encryption":"x"}`, want: ErrNoEnvelope},
		{name: "duplicate key is not strict json", raw: `{"_nats_sinks_encryption":{},"_nats_sinks_encryption":{}}`, want: ErrNoEnvelope},
		{name: "unknown key_id", edit: func(t *testing.T, e map[string]any) { e["key_id"] = "nope" },
			want: ErrUnknownKey, wantMsg: `key_id "nope": no decryption key is configured for this key_id`},
		{name: "long unknown key_id is cut short", edit: func(t *testing.T, e map[string]any) { e["key_id"] = strings.Repeat("x", 500) },
			want: ErrUnknownKey, wantMsg: `key_id "` + strings.Repeat("x", 128) + `"…: no decryption key is configured for this key_id`},
		{name: "missing key_id", edit: func(t *testing.T, e map[string]any) { delete(e, "key_id") },
			want: ErrUnknownKey, wantMsg: "encryption envelope key_id is missing: no decryption key is configured for this key_id"},
		{name: "key checked before algorithm", edit: func(t *testing.T, e map[string]any) { e["key_id"] = "nope"; e["algorithm"] = "rot13" },
			want: ErrUnknownKey},
		{name: "unsupported algorithm", edit: func(t *testing.T, e map[string]any) { e["algorithm"] = "aes-128-gcm" }, want: ErrAlgorithm},
		{name: "algorithm not normalised on decrypt", edit: func(t *testing.T, e map[string]any) { e["algorithm"] = "AES_256_GCM" }, want: ErrAlgorithm},
		{name: "algorithm not a string", edit: func(t *testing.T, e map[string]any) { e["algorithm"] = 1 }, want: ErrAlgorithm},
		{name: "algorithm differs from the configured one", vector: ccmVec,
			keys: func(t *testing.T) KeyRing {
				k := Key{ID: "k2", Algorithm: AES256GCM}
				copy(k.Secret[:], testKey())
				r, _ := NewKeyRing(k)
				return r
			},
			want: ErrAlgorithm, wantMsg: "envelope uses aes-256-ccm but the key is configured for aes-256-gcm: unsupported encryption algorithm"},
		{name: "algorithm checked before schema", edit: func(t *testing.T, e map[string]any) { e["algorithm"] = "x"; e["schema"] = "y" }, want: ErrAlgorithm},
		{name: "wrong schema", edit: func(t *testing.T, e map[string]any) { e["schema"] = "nats_sinks.encrypted_payload.v3" }, want: ErrSchema},
		{name: "missing schema", edit: func(t *testing.T, e map[string]any) { delete(e, "schema") }, want: ErrSchema},
		{name: "schema checked before version", edit: func(t *testing.T, e map[string]any) { e["schema"] = "y"; e["version"] = 2 }, want: ErrSchema},
		{name: "version 2", edit: func(t *testing.T, e map[string]any) { e["version"] = 2 }, want: ErrVersion},
		{name: "version as string", edit: func(t *testing.T, e map[string]any) { e["version"] = "1" }, want: ErrVersion},
		{name: "version as float", edit: func(t *testing.T, e map[string]any) { e["version"] = 1.0 }, want: ErrVersion},
		{name: "missing version", edit: func(t *testing.T, e map[string]any) { delete(e, "version") }, want: ErrVersion},
		{name: "version checked before base64", edit: func(t *testing.T, e map[string]any) { e["version"] = 2; e["nonce"] = "!" }, want: ErrVersion},
		{name: "nonce with newline", edit: func(t *testing.T, e map[string]any) { e["nonce"] = "oKGio6Sl\npqeoqaqr" },
			want: ErrBase64, wantMsg: "encryption envelope nonce: not valid base64"},
		{name: "nonce missing padding", vector: 1, edit: func(t *testing.T, e map[string]any) { e["nonce"] = "oKGio6Slpqc" }, want: ErrBase64},
		{name: "nonce with too much padding", vector: 1, edit: func(t *testing.T, e map[string]any) { e["nonce"] = "oKGio6Slpqc===" }, want: ErrBase64},
		{name: "nonce padding inside", edit: func(t *testing.T, e map[string]any) { e["nonce"] = "oK==o6Slpqeoqaqr" }, want: ErrBase64},
		{name: "nonce url-safe alphabet", edit: func(t *testing.T, e map[string]any) { e["nonce"] = "oKGio6Slpqeoqa-_" }, want: ErrBase64},
		{name: "nonce with space", edit: func(t *testing.T, e map[string]any) { e["nonce"] = "oKGi o6Slpqeoqaq" }, want: ErrBase64},
		{name: "nonce non-canonical final bits", vector: 1, edit: func(t *testing.T, e map[string]any) { e["nonce"] = "oKGio6Slpqd=" }, want: ErrBase64},
		{name: "nonce not a string", edit: func(t *testing.T, e map[string]any) { e["nonce"] = 12 }, want: ErrBase64},
		{name: "ciphertext not base64", edit: func(t *testing.T, e map[string]any) { e["ciphertext"] = "*" },
			want: ErrBase64, wantMsg: "encryption envelope ciphertext: not valid base64"},
		{name: "missing ciphertext", edit: func(t *testing.T, e map[string]any) { delete(e, "ciphertext") }, want: ErrBase64},
		{name: "base64 checked before tag_length", vector: ccmVec, edit: func(t *testing.T, e map[string]any) { e["nonce"] = "!"; delete(e, "tag_length") }, want: ErrBase64},
		{name: "ccm missing tag_length", vector: ccmVec, edit: func(t *testing.T, e map[string]any) { delete(e, "tag_length") }, want: ErrTagLength},
		{name: "ccm tag_length as string", vector: ccmVec, edit: func(t *testing.T, e map[string]any) { e["tag_length"] = "8" }, want: ErrTagLength},
		{name: "ccm tag_length as float", vector: ccmVec, edit: func(t *testing.T, e map[string]any) { e["tag_length"] = 8.0 }, want: ErrTagLength},
		{name: "ccm wrong tag_length", vector: ccmVec, edit: func(t *testing.T, e map[string]any) { e["tag_length"] = 10 }, want: ErrDecrypt},
		{name: "ccm illegal tag_length", vector: ccmVec, edit: func(t *testing.T, e map[string]any) { e["tag_length"] = 7 }, want: ErrDecrypt},
		{name: "ccm huge tag_length", vector: ccmVec, edit: func(t *testing.T, e map[string]any) { e["tag_length"] = jsonx.Integer("99999999999999999999999") }, want: ErrDecrypt},
		{name: "ccm nonce of 6 bytes", vector: ccmVec, edit: func(t *testing.T, e map[string]any) { e["nonce"] = "oKGio6Sl" }, want: ErrDecrypt},
		{name: "gcm ignores a wrong tag_length", edit: func(t *testing.T, e map[string]any) { e["tag_length"] = "junk" }},
		{name: "gcm ignores nonce_size_bytes", edit: func(t *testing.T, e map[string]any) { e["nonce_size_bytes"] = 99 }},
		{name: "gcm empty nonce", edit: func(t *testing.T, e map[string]any) { e["nonce"] = "" }, want: ErrDecrypt},
		{name: "gcm nonce of 129 bytes", edit: func(t *testing.T, e map[string]any) {
			e["nonce"] = base64.StdEncoding.EncodeToString(make([]byte, 129))
		}, want: ErrDecrypt},
		{name: "gcm ciphertext bit flipped", edit: func(t *testing.T, e map[string]any) { flipBit(t, e, "ciphertext", 0) },
			want: ErrDecrypt, wantMsg: "encrypted payload could not be decrypted"},
		{name: "gcm tag bit flipped", edit: func(t *testing.T, e map[string]any) { flipBit(t, e, "ciphertext", -1) }, want: ErrDecrypt},
		{name: "gcm nonce bit flipped", edit: func(t *testing.T, e map[string]any) { flipBit(t, e, "nonce", 11) }, want: ErrDecrypt},
		{name: "gcm tag truncated", edit: func(t *testing.T, e map[string]any) { e["ciphertext"] = "AAAA" }, want: ErrDecrypt},
		{name: "ccm ciphertext bit flipped", vector: ccmVec, edit: func(t *testing.T, e map[string]any) { flipBit(t, e, "ciphertext", 2) }, want: ErrDecrypt},
		{name: "ccm tag bit flipped", vector: ccmVec, edit: func(t *testing.T, e map[string]any) { flipBit(t, e, "ciphertext", -8) }, want: ErrDecrypt},
		{name: "ccm nonce bit flipped", vector: ccmVec, edit: func(t *testing.T, e map[string]any) { flipBit(t, e, "nonce", 0) }, want: ErrDecrypt},
		{name: "ccm algorithm swapped", vector: ccmVec, edit: func(t *testing.T, e map[string]any) { e["algorithm"] = AES256GCM }, want: ErrDecrypt},
		{name: "wrong key bytes", keys: func(t *testing.T) KeyRing {
			r, _ := NewKeyRing(Key{ID: "orders-2026-05"}) // all-zero secret
			return r
		}, want: ErrDecrypt},
		{name: "size mismatch", edit: func(t *testing.T, e map[string]any) { e["plaintext_size_bytes"] = 22 },
			want: ErrSizeMismatch, wantMsg: "decrypted payload size does not match plaintext_size_bytes"},
		{name: "size as string", edit: func(t *testing.T, e map[string]any) { e["plaintext_size_bytes"] = "21" }, want: ErrSizeMismatch},
		{name: "size null counts as absent", edit: func(t *testing.T, e map[string]any) { e["plaintext_size_bytes"] = nil }},
		{name: "size absent", edit: func(t *testing.T, e map[string]any) { delete(e, "plaintext_size_bytes") }},
		{name: "size checked before digest", edit: func(t *testing.T, e map[string]any) {
			e["plaintext_size_bytes"] = 1
			e["plaintext_sha256"] = strings.Repeat("0", 64)
		}, want: ErrSizeMismatch},
		{name: "digest mismatch", edit: func(t *testing.T, e map[string]any) { e["plaintext_sha256"] = strings.Repeat("0", 64) },
			want: ErrDigestMismatch, wantMsg: "decrypted payload sha256 does not match plaintext_sha256"},
		{name: "digest not hex", edit: func(t *testing.T, e map[string]any) { e["plaintext_sha256"] = "zz" }, want: ErrDigestMismatch},
		{name: "digest truncated", edit: func(t *testing.T, e map[string]any) { e["plaintext_sha256"] = e["plaintext_sha256"].(string)[:62] }, want: ErrDigestMismatch},
		{name: "digest upper case", edit: func(t *testing.T, e map[string]any) {
			e["plaintext_sha256"] = strings.ToUpper(e["plaintext_sha256"].(string))
		}},
		{name: "digest absent", edit: func(t *testing.T, e map[string]any) { delete(e, "plaintext_sha256") }},
		{name: "extra keys are ignored", edit: func(t *testing.T, e map[string]any) { e["future"] = []any{1} }},
		{name: "fixed key ignores key_id", edit: func(t *testing.T, e map[string]any) { delete(e, "key_id") },
			keys: func(t *testing.T) KeyRing {
				k := Key{ID: "unused"}
				copy(k.Secret[:], testKey())
				return FixedKeyRing(k)
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			input := []byte(tt.raw)
			if tt.raw == "" && tt.name != "empty input" {
				env := vectorFields(t, tt.vector)
				if tt.edit != nil {
					tt.edit(t, env)
				}
				input = doc(env)
			}
			keys := testKeyRing(t, "orders-2026-05", "k", "k2")
			if tt.keys != nil {
				keys = tt.keys(t)
			}
			got, err := Decrypt(input, keys)
			if tt.want == nil {
				if err != nil || string(got) != specVectors[tt.vector].plaintext {
					t.Fatalf("Decrypt = %q, %v; want %q", got, err, specVectors[tt.vector].plaintext)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Decrypt error = %v, want %v", err, tt.want)
			}
			if got != nil {
				t.Errorf("Decrypt returned %q alongside an error", got)
			}
			msg := tt.wantMsg
			if msg == "" && !errors.Is(tt.want, ErrBase64) && !errors.Is(tt.want, ErrUnknownKey) {
				msg = tt.want.Error()
			}
			if msg != "" && err.Error() != msg {
				t.Errorf("Decrypt error text = %q, want %q", err.Error(), msg)
			}
			if res := sink.Failed(err); res.Outcome != sink.Permanent || res.ErrorType != sink.SerializationError {
				t.Errorf("sink.Failed(err) = %v/%s, want permanent SerializationError", res.Outcome, res.ErrorType)
			}
		})
	}
}

// TestDecryptErrorsCarryNoPayload: no error text contains plaintext, key
// or ciphertext.
func TestDecryptErrorsCarryNoPayload(t *testing.T) {
	secret := "TOP-SECRET-PAYLOAD"
	env, err := Encrypt([]byte(secret), gcm("k", 12), nil)
	if err != nil {
		t.Fatal(err)
	}
	fields := parseEnvelope(t, env)
	ct := fields["ciphertext"].(string)
	fields["plaintext_sha256"] = strings.Repeat("0", 64)
	for _, input := range [][]byte{doc(fields), []byte(secret), []byte(`{"` + secret + `":1}`)} {
		_, err := Decrypt(input, testKeyRing(t, "k"))
		if err == nil {
			t.Fatal("Decrypt succeeded")
		}
		if msg := err.Error(); strings.Contains(msg, secret) || strings.Contains(msg, ct) || strings.Contains(msg, "AAECAwQF") {
			t.Errorf("error leaks data: %s", msg)
		}
	}
}

func TestNewKeyRingRejects(t *testing.T) {
	for _, tt := range []struct {
		name string
		keys []Key
		want string
	}{
		{"empty id", []Key{{}}, "seal: key ring entry with an empty key_id"},
		{"duplicate id", []Key{{ID: "a"}, {ID: "a"}}, `seal: key_id "a" given twice`},
		{"bad algorithm", []Key{{ID: "a", Algorithm: "aes-256-ocb"}}, `seal: key_id "a": must be one of aes-256-gcm, aes-256-ccm`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewKeyRing(tt.keys...)
			if err == nil || err.Error() != tt.want {
				t.Errorf("NewKeyRing error = %v, want %q", err, tt.want)
			}
		})
	}
	var zero KeyRing
	if _, err := Decrypt([]byte(specVectors[1].want), zero); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("Decrypt with the zero KeyRing error = %v, want ErrUnknownKey", err)
	}
}

func TestParseKey(t *testing.T) {
	good := base64.StdEncoding.EncodeToString(seq(0, 32))
	for _, tt := range []struct {
		name, in, want string
	}{
		{"valid", good, ""},
		{"16 bytes", base64.StdEncoding.EncodeToString(seq(0, 16)), "must decode to exactly 32 bytes for AES-256"},
		{"33 bytes", base64.StdEncoding.EncodeToString(seq(0, 33)), "must decode to exactly 32 bytes for AES-256"},
		{"empty", "", "must decode to exactly 32 bytes for AES-256"},
		{"no padding", strings.TrimRight(good, "="), "must be standard base64 with padding"},
		{"url alphabet", base64.URLEncoding.EncodeToString(append(seq(0, 29), 0xff, 0xff, 0xff)), "must be standard base64 with padding"},
		{"trailing newline", good + "\n", "must be standard base64 with padding"},
		{"surrounding space", " " + good, "must be standard base64 with padding"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k, err := ParseKey(tt.in)
			if tt.want == "" {
				if err != nil || string(k[:]) != string(seq(0, 32)) {
					t.Errorf("ParseKey = %x, %v", k, err)
				}
				return
			}
			if err == nil || err.Error() != tt.want {
				t.Errorf("ParseKey error = %v, want %q", err, tt.want)
			}
			if err != nil && tt.in != "" && strings.Contains(err.Error(), strings.TrimSpace(tt.in)[:8]) {
				t.Errorf("ParseKey error echoes the input: %v", err)
			}
		})
	}
}
