package seal

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
)

// nonceReader yields 0xa0, 0xa1, … from the start of every Read: each
// Encrypt reads its nonce in one call, so every nonce is a0 a1 … as in the
// spec's test vectors.
type nonceReader struct{}

func (nonceReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 0xa0 + byte(i)
	}
	return len(p), nil
}

// testKey is the spec's vector key, bytes 0x00..0x1f.
func testKey() []byte { return seq(0, 32) }

func testKeyRing(t testing.TB, ids ...string) KeyRing {
	t.Helper()
	var keys []Key
	for _, id := range ids {
		k := Key{ID: id}
		copy(k.Secret[:], testKey())
		keys = append(keys, k)
	}
	r, err := NewKeyRing(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func gcm(keyID string, nonce int) Settings {
	return Settings{Enabled: true, Algorithm: AES256GCM, KeyID: keyID, Key: testKey(), NonceSize: nonce, TagLength: 16}
}

func ccmSettings(keyID string, nonce, tag int) Settings {
	return Settings{Enabled: true, Algorithm: AES256CCM, KeyID: keyID, Key: testKey(), NonceSize: nonce, TagLength: tag}
}

// The three test vectors of data-shapes §6, byte for byte.
var specVectors = []struct {
	name      string
	settings  Settings
	plaintext string
	want      string
}{
	{"gcm nonce 12", gcm("orders-2026-05", 12), `{"order_id":"O-1001"}`,
		`{"_nats_sinks_encryption":{"algorithm":"aes-256-gcm","ciphertext":"nToTXyGucOALAaXpJTXt70CcaDLv9XxY9e545jFSGDxTYPlkHg==","ciphertext_encoding":"base64","key_id":"orders-2026-05","nonce":"oKGio6Slpqeoqaqr","nonce_size_bytes":12,"plaintext_sha256":"51da635f51227c04d5aa09c1541f00349f25b2ee105a6da1461507379b05d850","plaintext_size_bytes":21,"schema":"nats_sinks.encrypted_payload.v1","tag_length":16,"version":1}}`},
	{"gcm nonce 8", gcm("k", 8), `x`,
		`{"_nats_sinks_encryption":{"algorithm":"aes-256-gcm","ciphertext":"7pMM5p6EMvfzALkT2hfWEnQ=","ciphertext_encoding":"base64","key_id":"k","nonce":"oKGio6Slpqc=","nonce_size_bytes":8,"plaintext_sha256":"2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881","plaintext_size_bytes":1,"schema":"nats_sinks.encrypted_payload.v1","tag_length":16,"version":1}}`},
	{"ccm nonce 13 tag 8", ccmSettings("k2", 13, 8), `hello`,
		`{"_nats_sinks_encryption":{"algorithm":"aes-256-ccm","ciphertext":"O7WOiWsLbKBmwkj3VA==","ciphertext_encoding":"base64","key_id":"k2","nonce":"oKGio6SlpqeoqaqrrA==","nonce_size_bytes":13,"plaintext_sha256":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824","plaintext_size_bytes":5,"schema":"nats_sinks.encrypted_payload.v1","tag_length":8,"version":1}}`},
}

func TestSpecVectors(t *testing.T) {
	for _, tt := range specVectors {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Encrypt([]byte(tt.plaintext), tt.settings, nonceReader{})
			if err != nil {
				t.Fatalf("Encrypt: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("Encrypt(%q) =\n%s\nwant\n%s", tt.plaintext, got, tt.want)
			}
			pt, err := Decrypt([]byte(tt.want), testKeyRing(t, tt.settings.KeyID))
			if err != nil || string(pt) != tt.plaintext {
				t.Errorf("Decrypt(vector) = %q, %v; want %q", pt, err, tt.plaintext)
			}
		})
	}
}

func TestSpecVectorKeyBase64(t *testing.T) {
	k, err := ParseKey("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
	if err != nil || !bytes.Equal(k[:], testKey()) {
		t.Fatalf("ParseKey(spec key) = %x, %v", k, err)
	}
}

// TestInterop decrypts ciphertexts made by the Python "cryptography"
// package (AESGCM / AESCCM, what upstream nats-sinks uses) and checks that
// Encrypt makes the same bytes: key 0x00..0x1f, nonce a0 a1 …, plaintext
// interopPlaintext.
func TestInterop(t *testing.T) {
	const interopPlaintext = `{"interop":"upstream python cryptography","n":42}`
	for _, tt := range []struct {
		alg        string
		nonce, tag int
		ciphertext string
	}{
		{"aes-256-gcm", 8, 16, "7WxQexABsJS33F9pSoDrZbIImEXUbi4jinXCiOiG4dYxuVCxjWUqsTPnNPWeGhmn3pDC6+kPrQIw7x11hgXfdNA="},
		{"aes-256-gcm", 12, 16, "nToVQzGucNASR73xcgqzqgLJOH2yxzsY9GFIphzZDHGmGSCNzlI7RH2wJqYrQLfLOhqtmuFKbslhfXvEnriai0E="},
		{"aes-256-gcm", 13, 16, "8ya5dGHr4OxJI5Z6tPpeGhwk7dDPoJubo2DfKQc6YTrrUtj9FjHeD6DT9YjmDncGZmxzniOfqfTMF6XpSq/aZcM="},
		{"aes-256-gcm", 16, 16, "UYFK0myovxmzvCWTmGT+5PAgIhReRCjYlX0ElnpHX/d4/oER9KPXxMwlEsw6eIPCZ2cz9UjVPqwhppyBvsZmROs="},
		{"aes-256-gcm", 64, 16, "ufL9sAfkdNkSdtWy6EJrLSQ9vmwQnw2Vo+5I6IGu821k+nefZKCK7EBkNriItADs8fNPIVtVZyxwj3LhaILfskU="},
		{"aes-256-gcm", 128, 16, "oxhR6AEUAqeBW3DTUHmrSUieWiyRkt6+8Q2HtnAI3Eh0KDvQgY8NABELH57ufIdLYFZIPMcJ8eK/cnMX6savS9o="},
		{"aes-256-ccm", 7, 16, "vn2jib/IEcm/BLfM37ZbrCh+cHFpDwhbBOhiAYcHd/biUdpwQLu3pDiiuRa0x/sLHQMnihnlbIF+NKTXbDJ7mHs="},
		{"aes-256-ccm", 8, 16, "c3eEvhf+nAYuuarXe95wVgJxmr/PfGGqXFs8zVOsMjWaslwVid/TIfIelHR3GfeX/Gl8EV/7WOquUgFhoYnedsA="},
		{"aes-256-ccm", 9, 16, "5NbgWmPlRmqklzq13YAHpFLdWnzwLn72UvoiHtS4r2ibwaIomsbAYTiQ2CPj7FHdegUDqxDXVCpe/aP1xhwOthU="},
		{"aes-256-ccm", 10, 16, "t1A52mwobglm2FZRO6iSBNlnK/c+X10h8jVPfZLkKeNTrvQ28dKkrqzLs13PHidpQuJswccNrbNWTuRnhq/Fty0="},
		{"aes-256-ccm", 11, 16, "44Mq4YU3hiGY2Q/QQ5XHnbipP7S5QeskmuQjDSJLXAQlWElsAUoZtnXM891LI4aC/5/BO8i+svI2t0CAb5tG58k="},
		{"aes-256-ccm", 12, 16, "FLYrPuSZlAs6ehIAEv/BpUah0iiezgE8l82rptml43ua0c6S7x+laWigIdRR1ullkzbiEMagsHjvAFigCguFZDY="},
		{"aes-256-ccm", 13, 16, "KPKLi3AqBWWOt48fhch8uwkH41/2xyKfms/xrTgWBz4Z2AwjFU78JjcC9mzCBwvzCEtVGyI7UX1BwL10f7iqZ+4="},
		{"aes-256-ccm", 13, 4, "KPKLi3AqBWWOt48fhch8uwkH41/2xyKfms/xrTgWBz4Z2AwjFU78JjcC9mzCBwvzCJfltb8="},
		{"aes-256-ccm", 13, 6, "KPKLi3AqBWWOt48fhch8uwkH41/2xyKfms/xrTgWBz4Z2AwjFU78JjcC9mzCBwvzCBm+FevfZw=="},
		{"aes-256-ccm", 13, 8, "KPKLi3AqBWWOt48fhch8uwkH41/2xyKfms/xrTgWBz4Z2AwjFU78JjcC9mzCBwvzCDONHaDOVgKG"},
		{"aes-256-ccm", 13, 10, "KPKLi3AqBWWOt48fhch8uwkH41/2xyKfms/xrTgWBz4Z2AwjFU78JjcC9mzCBwvzCJ8mcvJdl841H7w="},
		{"aes-256-ccm", 13, 12, "KPKLi3AqBWWOt48fhch8uwkH41/2xyKfms/xrTgWBz4Z2AwjFU78JjcC9mzCBwvzCM4JCjkIRrE4+lL5DQ=="},
		{"aes-256-ccm", 13, 14, "KPKLi3AqBWWOt48fhch8uwkH41/2xyKfms/xrTgWBz4Z2AwjFU78JjcC9mzCBwvzCDAD8ViGnVz4iLYFzlC9"},
		{"aes-256-ccm", 7, 4, "vn2jib/IEcm/BLfM37ZbrCh+cHFpDwhbBOhiAYcHd/biUdpwQLu3pDiiuRa0x/sLHVaJY2M="},
		{"aes-256-ccm", 7, 6, "vn2jib/IEcm/BLfM37ZbrCh+cHFpDwhbBOhiAYcHd/biUdpwQLu3pDiiuRa0x/sLHY4oPT4EEQ=="},
		{"aes-256-ccm", 7, 8, "vn2jib/IEcm/BLfM37ZbrCh+cHFpDwhbBOhiAYcHd/biUdpwQLu3pDiiuRa0x/sLHS5TABfE2TY0"},
		{"aes-256-ccm", 7, 10, "vn2jib/IEcm/BLfM37ZbrCh+cHFpDwhbBOhiAYcHd/biUdpwQLu3pDiiuRa0x/sLHWBpOcLGTEAfv3k="},
		{"aes-256-ccm", 7, 12, "vn2jib/IEcm/BLfM37ZbrCh+cHFpDwhbBOhiAYcHd/biUdpwQLu3pDiiuRa0x/sLHRKo0/QLFOFPsn0YBw=="},
		{"aes-256-ccm", 7, 14, "vn2jib/IEcm/BLfM37ZbrCh+cHFpDwhbBOhiAYcHd/biUdpwQLu3pDiiuRa0x/sLHZxDlvsolNKbw2SXp9aT"},
	} {
		t.Run(fmt.Sprintf("%s nonce %d tag %d", tt.alg, tt.nonce, tt.tag), func(t *testing.T) {
			env := envelopeDoc(tt.alg, "k", tt.nonce, tt.tag, seq(0xa0, tt.nonce), tt.ciphertext)
			pt, err := Decrypt(env, testKeyRing(t, "k"))
			if err != nil || string(pt) != interopPlaintext {
				t.Fatalf("Decrypt = %q, %v; want %q", pt, err, interopPlaintext)
			}
			if tt.alg == AES256GCM && (tt.nonce < 8 || tt.nonce > 13) {
				return // decrypt-only nonce size
			}
			s := Settings{Algorithm: tt.alg, KeyID: "k", Key: testKey(), NonceSize: tt.nonce, TagLength: tt.tag}
			got, err := Encrypt([]byte(interopPlaintext), s, nonceReader{})
			if err != nil {
				t.Fatalf("Encrypt: %v", err)
			}
			if fields := parseEnvelope(t, got); fields["ciphertext"] != tt.ciphertext {
				t.Errorf("Encrypt ciphertext = %v, want %s", fields["ciphertext"], tt.ciphertext)
			}
		})
	}
}

// envelopeDoc builds an envelope the way any conforming writer would, for
// parameters Encrypt itself refuses (decrypt-only nonce sizes).
func envelopeDoc(alg, keyID string, nonceSize, tag int, nonce []byte, ciphertext string) []byte {
	return jsonx.Marshal(map[string]any{EnvelopeKey: map[string]any{
		"algorithm": alg, "ciphertext": ciphertext, "ciphertext_encoding": "base64", "key_id": keyID,
		"nonce": base64.StdEncoding.EncodeToString(nonce), "nonce_size_bytes": nonceSize,
		"schema": Schema, "tag_length": tag, "version": 1,
	}}, jsonx.ASCII)
}

// parseEnvelope returns the inner object of an envelope document.
func parseEnvelope(t testing.TB, doc []byte) map[string]any {
	t.Helper()
	v, err := jsonx.Parse(doc)
	if err != nil {
		t.Fatalf("envelope is not strict JSON: %v\n%s", err, doc)
	}
	root, ok := v.(map[string]any)
	if !ok || len(root) != 1 {
		t.Fatalf("envelope root = %v, want one key", v)
	}
	env, ok := root[EnvelopeKey].(map[string]any)
	if !ok {
		t.Fatalf("envelope lacks %s: %s", EnvelopeKey, doc)
	}
	return env
}

// TestEnvelopeIsCanonical pins appendEnvelope to the canonical encoder:
// Encrypt's bytes equal jsonx.Marshal(ascii) of the parsed envelope, also
// for key ids that need escaping.
func TestEnvelopeIsCanonical(t *testing.T) {
	for _, id := range []string{"k", `quote"back\slash`, "ünïcödé-😀", "tab\there", "</script>&"} {
		for _, s := range []Settings{gcm(id, 12), ccmSettings(id, 7, 4)} {
			got, err := Encrypt([]byte("payload"), s, nil)
			if err != nil {
				t.Fatalf("Encrypt(key_id %q): %v", id, err)
			}
			v, err := jsonx.Parse(got)
			if err != nil {
				t.Fatalf("Encrypt(key_id %q) is not strict JSON: %v", id, err)
			}
			if want := jsonx.Marshal(v, jsonx.ASCII); !bytes.Equal(got, want) {
				t.Errorf("Encrypt(key_id %q) =\n%s\nwant canonical\n%s", id, got, want)
			}
			if env := parseEnvelope(t, got); env["key_id"] != id {
				t.Errorf("key_id = %v, want %q", env["key_id"], id)
			}
		}
	}
}

func TestRoundTripEveryConfigurableSize(t *testing.T) {
	payloads := [][]byte{{}, []byte("x"), seq(0, 15), seq(0, 16), seq(0, 17), bytes.Repeat([]byte("0123456789abcdef"), 300)}
	var settings []Settings
	for n := 8; n <= 13; n++ {
		settings = append(settings, gcm("g", n))
	}
	for n := 7; n <= 13; n++ {
		for tag := 4; tag <= 16; tag += 2 {
			settings = append(settings, ccmSettings("c", n, tag))
		}
	}
	keys := testKeyRing(t, "g", "c")
	for _, s := range settings {
		for _, p := range payloads {
			env, err := Encrypt(p, s, nil)
			if err != nil {
				t.Fatalf("Encrypt(%s nonce %d tag %d, %d bytes): %v", s.Algorithm, s.NonceSize, s.TagLength, len(p), err)
			}
			fields := parseEnvelope(t, env)
			wantTag := s.TagLength
			if s.Algorithm == AES256GCM {
				wantTag = 16
			}
			if fields["nonce_size_bytes"] != jsonx.Integer(fmt.Sprint(s.NonceSize)) || fields["tag_length"] != jsonx.Integer(fmt.Sprint(wantTag)) {
				t.Errorf("%s nonce %d tag %d: envelope says nonce %v tag %v", s.Algorithm, s.NonceSize, s.TagLength, fields["nonce_size_bytes"], fields["tag_length"])
			}
			got, err := Decrypt(env, keys)
			if err != nil || !bytes.Equal(got, p) {
				t.Errorf("round trip %s nonce %d tag %d, %d bytes: got %d bytes, %v", s.Algorithm, s.NonceSize, s.TagLength, len(p), len(got), err)
			}
		}
	}
}

// TestGCMTagLengthIgnored: config.md §7.4 lets tag_length differ for GCM,
// which always writes and uses a 16-byte tag.
func TestEncryptNormalisesAlgorithm(t *testing.T) {
	s := ccmSettings("k2", 13, 8)
	s.Algorithm = " AES_256_CCM "
	got, err := Encrypt([]byte("hello"), s, nonceReader{})
	if err != nil || string(got) != specVectors[2].want {
		t.Errorf("Encrypt(algorithm %q) = %s, %v; want the ccm spec vector", s.Algorithm, got, err)
	}
}

func TestGCMTagLengthIgnored(t *testing.T) {
	s := gcm("k", 12)
	s.TagLength = 8
	got, err := Encrypt([]byte(`{"order_id":"O-1001"}`), s, nonceReader{})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Encrypt([]byte(`{"order_id":"O-1001"}`), gcm("k", 12), nonceReader{})
	if !bytes.Equal(got, want) {
		t.Errorf("GCM with tag_length 8 =\n%s\nwant\n%s", got, want)
	}
}

// TestDecryptOnlyGCMNonces: envelopes from other writers may use any GCM
// nonce length from 1 to 128 bytes (README Q13).
func TestDecryptOnlyGCMNonces(t *testing.T) {
	keys := testKeyRing(t, "k")
	for n := 1; n <= 128; n++ {
		sl := mustSealerWithNonce(t, n)
		env, err := sl.sealMessage([]byte("decrypt-only nonce"), Message{}, nonceReader{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decrypt(env, keys)
		if err != nil || string(got) != "decrypt-only nonce" {
			t.Errorf("Decrypt(gcm nonce %d) = %q, %v", n, got, err)
		}
	}
	if _, err := Encrypt([]byte("x"), gcm("k", 7), nil); err == nil {
		t.Error("Encrypt with a 7-byte GCM nonce succeeded; config-level GCM needs 8..13")
	}
}

// mustSealerWithNonce bypasses newSealer's configuration rules to produce
// GCM envelopes with any nonce size.
func mustSealerWithNonce(t testing.TB, n int) *sealer {
	t.Helper()
	aead := openAEAD(testKey(), AES256GCM, n, 16)
	if aead == nil {
		t.Fatalf("no GCM for nonce %d", n)
	}
	return &sealer{alg: AES256GCM, keyID: "k", nonceSize: n, tagLength: 16, maxLen: 1 << 30, aead: aead}
}

func TestEncryptRejectsSettings(t *testing.T) {
	for _, tt := range []struct {
		name string
		s    Settings
		want []string // every problem, in order
	}{
		{"unknown algorithm", Settings{Algorithm: "aes-128-gcm", KeyID: "k", Key: testKey(), NonceSize: 12},
			[]string{"algorithm: must be one of aes-256-gcm, aes-256-ccm"}},
		{"gcm nonce 7", gcm("k", 7), []string{"nonce_size_bytes: must be between 8 and 13 for aes-256-gcm (got 7)"}},
		{"gcm nonce 14", gcm("k", 14), []string{"nonce_size_bytes: must be between 8 and 13 for aes-256-gcm (got 14)"}},
		{"ccm nonce 6 and tag 5", ccmSettings("k", 6, 5), []string{
			"nonce_size_bytes: must be between 7 and 13 (got 6)",
			"tag_length: must be one of 4, 6, 8, 10, 12, 14, 16 (got 5)"}},
		{"short key and blank id", Settings{Algorithm: AES256GCM, KeyID: " ", Key: seq(0, 16), NonceSize: 12},
			[]string{"key_id: must not be empty", "key: must be exactly 32 bytes for AES-256"}},
		{"long key id", gcm(strings.Repeat("é", 129), 12), []string{"key_id: must be at most 128 characters (got 129)"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Encrypt([]byte("x"), tt.s, nonceReader{})
			if err == nil {
				t.Fatal("Encrypt succeeded")
			}
			if diff := cmp.Diff(tt.want, strings.Split(err.Error(), "\n")); diff != "" {
				t.Errorf("Encrypt error mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := Encrypt([]byte("x"), gcm(strings.Repeat("é", 128), 12), nil); err != nil {
		t.Errorf("Encrypt with a 128-character key id: %v", err)
	}
}

func TestEncryptCCMLengthLimit(t *testing.T) {
	s := ccmSettings("k", 13, 16)
	if _, err := Encrypt(make([]byte, 65535), s, nil); err != nil {
		t.Fatalf("Encrypt(65535 bytes, ccm nonce 13): %v", err)
	}
	_, err := Encrypt(make([]byte, 65536), s, nil)
	want := "payload of 65536 bytes is too long for aes-256-ccm with a 13-byte nonce (at most 65535 bytes)"
	if err == nil || err.Error() != want {
		t.Errorf("Encrypt(65536 bytes, ccm nonce 13) error = %v, want %q", err, want)
	}
	s.NonceSize = 12 // L = 3
	if _, err := Encrypt(make([]byte, 65536), s, nil); err != nil {
		t.Errorf("Encrypt(65536 bytes, ccm nonce 12): %v", err)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("entropy exhausted") }

func TestEncryptRandomFailure(t *testing.T) {
	_, err := Encrypt([]byte("x"), gcm("k", 12), failingReader{})
	if err == nil || err.Error() != "read random nonce: entropy exhausted" {
		t.Errorf("Encrypt with a failing reader error = %v", err)
	}
	_, err = Encrypt([]byte("x"), gcm("k", 12), io.LimitReader(nonceReader{}, 5))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("Encrypt with a short reader error = %v, want io.ErrUnexpectedEOF", err)
	}
}

// TestNoncesAreFresh: the default source gives every message its own nonce.
func TestNoncesAreFresh(t *testing.T) {
	seen := map[any]bool{}
	for range 200 {
		env, err := Encrypt([]byte("same"), gcm("k", 12), nil)
		if err != nil {
			t.Fatal(err)
		}
		n := parseEnvelope(t, env)["nonce"]
		if seen[n] {
			t.Fatalf("nonce %v repeated", n)
		}
		seen[n] = true
	}
}

// TestSecretsDoNotPrint: neither Key nor Settings reveals key bytes under
// any fmt verb or in slog.
func TestSecretsDoNotPrint(t *testing.T) {
	k := Key{ID: "k1", Algorithm: AES256GCM}
	for i := range k.Secret {
		k.Secret[i] = 0xab
	}
	s := gcm("k1", 12)
	s.Key = bytes.Repeat([]byte{0xab}, 32)
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "key", k, "settings", s)
	outputs := []string{logged.String()}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%q", "%d"} {
		outputs = append(outputs, fmt.Sprintf(verb, k), fmt.Sprintf(verb, s),
			fmt.Sprintf(verb, []Key{k}), fmt.Sprintf(verb, Rule{Subject: "a", Settings: s}))
	}
	for _, out := range outputs {
		if strings.Contains(strings.ToLower(out), "abab") || strings.Contains(out, "171") || strings.Contains(out, "q6ur") {
			t.Errorf("printed form leaks the key: %s", out)
		}
		if !strings.Contains(out, mask) {
			t.Errorf("printed form lacks the mask: %s", out)
		}
	}
}
