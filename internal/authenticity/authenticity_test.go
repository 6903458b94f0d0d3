package authenticity

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/metadata"
	"github.com/nats-sinks/nats-sink/sink"
)

func bytesFrom(from byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = from + byte(i)
	}
	return b
}

var (
	k1 = bytesFrom(0x00, 32)
	k2 = bytesFrom(0x40, 64)
	// edSeed is the Ed25519 seed of the vectors; its public key is
	// Kay64UG8yvCyLhqU000LxzYeUm0L/hLIl5S8kyKWbdc=.
	edSeed = bytesFrom(0x20, 32)
)

func withHeaders(m intake.Message, kv ...string) intake.Message {
	h := map[string][]string{}
	for k, v := range m.Header {
		h[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		h[kv[i]] = []string{kv[i+1]}
	}
	m.Header = h
	return m
}

func build(m intake.Message, res *metadata.Resolver) *sink.Envelope {
	return intake.Build(m, res, shapestest.Received)
}

func policy(rules ...Rule) *Policy {
	return &Policy{SignatureHeader: DefaultSignatureHeader, AlgorithmHeader: DefaultAlgorithmHeader, KeyIDHeader: DefaultKeyIDHeader, Rules: rules}
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func TestVectorA1(t *testing.T) {
	rule := Rule{Subject: "orders.>", Algorithm: HMACSHA256, Keys: []Key{{"orders-hmac-1", k1}}, SignedFields: DefaultSignedFields}
	const canonical = `{"algorithm":"hmac-sha256","key_id":"orders-hmac-1","metadata":{"message_id":"O-1001","subject":"orders.created"},"payload_sha256":"d2bfcbf1dd84f6651073184965b2f77e0cca35dfe3babdf2ac8d0867c51f279d","schema":"nats_sinks.message_authenticity.v1","version":1}`
	const sig = "dulXuBj79ahXqHrjEioA/ABP8g0Ad3Aa/U8MY+fmCq8="
	m := withHeaders(shapestest.GoldenMessage(), DefaultAlgorithmHeader, "HMAC_SHA256", DefaultKeyIDHeader, "orders-hmac-1", DefaultSignatureHeader, sig)
	e := build(m, nil)
	got := Canonical(e, HMACSHA256, "orders-hmac-1", rule.SignedFields)
	if string(got) != canonical || len(got) != 256 || sha(got) != "0ab4412fb79dc143417ecbfcde4011486b0cabd562c5b747a679151625ed540f" {
		t.Errorf("Canonical = %s, want %s", got, canonical)
	}
	if s := independentHMAC(k1, canonicalText(t, e, HMACSHA256, "orders-hmac-1", DefaultSignedFields)); s != sig {
		t.Errorf("independent HMAC = %s, want %s", s, sig)
	}
	if v := policy(rule).Check(e); !v.Accepted || !v.Verified {
		t.Errorf("Check(A1) = %+v, want accepted", v)
	}
	m.Data = []byte(strings.Replace(string(m.Data), "42.50", "42.51", 1))
	if v := policy(rule).Check(build(m, nil)); v.Reason != ReasonSignatureInvalid {
		t.Errorf("Check(A1 tampered) = %+v, want %s", v, ReasonSignatureInvalid)
	}
}

func TestVectorA2(t *testing.T) {
	var fields []string
	seen := map[string]bool{}
	for _, f := range []string{"Subject", "message-id", "PRIORITY", "classification", "labels", "mission_metadata", "security_labels", "subject"} {
		if n := NormalizeField(f); !seen[n] {
			seen[n] = true
			fields = append(fields, n)
		}
	}
	if len(fields) != 7 {
		t.Fatalf("fields = %v, want seven", fields)
	}
	rule := Rule{Subject: "sensor.*.track", Algorithm: HMACSHA256, Keys: []Key{{"sensor-k2", k2}}, SignedFields: fields}
	const canonical = `{"algorithm":"hmac-sha256","key_id":"sensor-k2","metadata":{"classification":null,"labels":["a","b"],"message_id":"Ö-7","mission_metadata":null,"priority":"urgent","security_labels":null,"subject":"sensor.é.track"},"payload_sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","schema":"nats_sinks.message_authenticity.v1","version":1}`
	const sig = "29xbingmkWrJkFGiRKStPsA+Kz4F9rgslC7a8pfhSl0="
	m := intake.Message{Subject: "sensor.é.track", Header: map[string][]string{
		"Nats-Msg-Id": {"Ö-7"}, "Nats-Sinks-Priority": {"urgent"}, "Nats-Sinks-Labels": {"a;b"},
		"nats-sinks-authenticity-algorithm": {"hmac-sha256"}, "NATS-SINKS-AUTHENTICITY-KEY-ID": {"sensor-k2"},
		"nats-sinks-AUTHENTICITY-signature": {sig},
	}}
	e := build(m, nil)
	got := Canonical(e, HMACSHA256, "sensor-k2", fields)
	if string(got) != canonical || len(got) != 359 || sha(got) != "48a2e2d995e21fe62f9d6fcdc7c4df0366f20b0f85750b401769548c8885475a" {
		t.Errorf("Canonical = %s, want %s", got, canonical)
	}
	if v := policy(rule).Check(e); !v.Accepted {
		t.Errorf("Check(A2) = %+v, want accepted", v)
	}
}

func TestVectorA3(t *testing.T) {
	priv := ed25519.NewKeyFromSeed(edSeed)
	pub := priv.Public().(ed25519.PublicKey)
	if got := base64.StdEncoding.EncodeToString(pub); got != "Kay64UG8yvCyLhqU000LxzYeUm0L/hLIl5S8kyKWbdc=" {
		t.Fatalf("public key = %s", got)
	}
	fields := []string{"subject", "message_id", "priority", "labels"}
	rule := Rule{Subject: "orders.>", Algorithm: Ed25519, Keys: []Key{{"orders-ed-2026", pub}}, SignedFields: fields}
	const canonical = `{"algorithm":"ed25519","key_id":"orders-ed-2026","metadata":{"labels":["billing","eu"],"message_id":"O-1001","priority":"high","subject":"orders.created"},"payload_sha256":"d2bfcbf1dd84f6651073184965b2f77e0cca35dfe3babdf2ac8d0867c51f279d","schema":"nats_sinks.message_authenticity.v1","version":1}`
	const sig = "Fa94XdPS3iJ9JUSk3mIbJudJNuCfrR2ANtAkuvnXXDMUnOW6D8vJyq19Xq+pI+RGRaRb62cTy+t5yRO2QB30AA=="
	m := withHeaders(shapestest.GoldenMessage(), DefaultAlgorithmHeader, "ed25519", DefaultKeyIDHeader, "orders-ed-2026", DefaultSignatureHeader, sig)
	e := build(m, nil)
	got := Canonical(e, Ed25519, "orders-ed-2026", fields)
	if string(got) != canonical || len(got) != 297 || sha(got) != "963182d51581012381f4c4cbc2b564a97182dc6d24041f0b32476d76f9ebbbcf" {
		t.Errorf("Canonical = %s, want %s", got, canonical)
	}
	if s := base64.StdEncoding.EncodeToString(ed25519.Sign(priv, []byte(canonicalText(t, e, Ed25519, "orders-ed-2026", fields)))); s != sig {
		t.Errorf("independent Ed25519 signature = %s, want %s", s, sig)
	}
	if v := policy(rule).Check(e); !v.Accepted || !v.Verified {
		t.Errorf("Check(A3) = %+v, want accepted", v)
	}
	// The sink resolves priority "low" (a header the producer did not sign).
	low := withHeaders(m, "Nats-Sinks-Priority", "low")
	if v := policy(rule).Check(build(low, nil)); v.Reason != ReasonSignatureInvalid {
		t.Errorf("Check(priority low) = %+v, want %s", v, ReasonSignatureInvalid)
	}
	// Wrong-length signatures are invalid without reaching Verify.
	short := withHeaders(m, DefaultSignatureHeader, base64.StdEncoding.EncodeToString(make([]byte, 63)))
	if v := policy(rule).Check(build(short, nil)); v.Reason != ReasonSignatureInvalid {
		t.Errorf("Check(63-byte signature) = %+v", v)
	}
}

// TestReasons follows the upstream reason table: the rule of A1 behind a
// disabled rule for orders.public.>.
func TestReasons(t *testing.T) {
	const sig = "dulXuBj79ahXqHrjEioA/ABP8g0Ad3Aa/U8MY+fmCq8="
	p := policy(
		Rule{Subject: "orders.public.>", Disabled: true},
		Rule{Subject: "orders.>", Algorithm: HMACSHA256, Keys: []Key{{"orders-hmac-1", k1}}, SignedFields: DefaultSignedFields},
	)
	base := withHeaders(shapestest.GoldenMessage(), DefaultAlgorithmHeader, "hmac-sha256", DefaultKeyIDHeader, "orders-hmac-1", DefaultSignatureHeader, sig)
	without := func(names ...string) intake.Message {
		m := withHeaders(base)
		for _, n := range names {
			delete(m.Header, n)
		}
		return m
	}
	sigBytes, _ := base64.StdEncoding.DecodeString(sig)
	lastByte := append([]byte(nil), sigBytes...)
	lastByte[len(lastByte)-1] ^= 1
	for _, tt := range []struct {
		name string
		m    intake.Message
		want string // "" = accepted
	}{
		{"valid", base, ""},
		{"unmatched subject", func() intake.Message { m := withHeaders(base); m.Subject = "x.unmatched"; return m }(), ReasonNotCovered},
		{"exempt subject unsigned", func() intake.Message {
			m := without(DefaultAlgorithmHeader, DefaultKeyIDHeader, DefaultSignatureHeader)
			m.Subject = "orders.public.x"
			return m
		}(), ""},
		{"no algorithm", without(DefaultAlgorithmHeader), ReasonAlgorithmMissing},
		{"no algorithm nor key id", without(DefaultAlgorithmHeader, DefaultKeyIDHeader), ReasonAlgorithmMissing},
		{"algorithm ed25519", withHeaders(base, DefaultAlgorithmHeader, "ed25519"), ReasonAlgorithmMismatch},
		{"algorithm hmacsha256", withHeaders(base, DefaultAlgorithmHeader, "hmacsha256"), ReasonAlgorithmMismatch},
		{"no key id", without(DefaultKeyIDHeader), ReasonKeyIDMissing},
		{"key id case differs", withHeaders(base, DefaultKeyIDHeader, "ORDERS-HMAC-1"), ReasonKeyIDMismatch},
		{"unknown key id", withHeaders(base, DefaultKeyIDHeader, "orders-hmac-9"), ReasonKeyIDMismatch},
		{"key id followed by NBSP", withHeaders(base, DefaultKeyIDHeader, "orders-hmac-1\u00a0"), ""},
		{"signature followed by NBSP", withHeaders(base, DefaultSignatureHeader, sig+"\u00a0"), ""},
		{"blank signature", withHeaders(base, DefaultSignatureHeader, " \u00a0"), ReasonSignatureMissing},
		{"no signature", without(DefaultSignatureHeader), ReasonSignatureMissing},
		{"signature without padding", withHeaders(base, DefaultSignatureHeader, strings.TrimRight(sig, "=")), ReasonSignatureInvalid},
		{"url-safe signature", withHeaders(base, DefaultSignatureHeader, base64.URLEncoding.EncodeToString(sigBytes)), ReasonSignatureInvalid},
		{"first 16 bytes", withHeaders(base, DefaultSignatureHeader, base64.StdEncoding.EncodeToString(sigBytes[:16])), ReasonSignatureInvalid},
		{"last byte differs", withHeaders(base, DefaultSignatureHeader, base64.StdEncoding.EncodeToString(lastByte)), ReasonSignatureInvalid},
		{"1368 A", withHeaders(base, DefaultSignatureHeader, strings.Repeat("A", 1368)), ReasonSignatureInvalid},
		{"1372 A", withHeaders(base, DefaultSignatureHeader, strings.Repeat("A", 1372)), ReasonSignatureInvalid},
		{"flipped message id", withHeaders(base, "Nats-Msg-Id", "O-1002"), ReasonSignatureInvalid},
		{"unsigned header changed", withHeaders(base, "traceparent", "00-00000000000000000000000000000001-0000000000000001-01"), ""},
		{"headers only", func() intake.Message { m := withHeaders(base, "Nats-Msg-Size", "51"); m.Data = nil; return m }(), ReasonPayloadOmitted},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := p.Check(build(tt.m, nil))
			if v.Accepted != (tt.want == "") || v.Reason != tt.want {
				t.Errorf("Check = %+v, want reason %q", v, tt.want)
			}
		})
	}
	allow := *p
	allow.AllowUnmatched = true
	m := withHeaders(base)
	m.Subject = "x.unmatched"
	if v := allow.Check(build(m, nil)); !v.Accepted || v.Verified {
		t.Errorf("Check(unmatched, allow) = %+v, want accepted unverified", v)
	}
}

func TestRejectionText(t *testing.T) {
	v := Verdict{Rule: "orders.>", Reason: ReasonKeyIDMismatch}
	const want = "message authenticity verification rejected 1 message(s); first subject='orders.created' rule='orders.>' reason=key_id_mismatch"
	if got := v.Error("orders.created").Error(); got != want {
		t.Errorf("Error = %q, want %q", got, want)
	}
}

func TestRotationOverlap(t *testing.T) {
	newKey := bytesFrom(0x80, 32)
	rule := Rule{Subject: "orders.>", Algorithm: HMACSHA256, Keys: []Key{{"k2", newKey}, {"k1", k1}}, SignedFields: DefaultSignedFields}
	for _, k := range []Key{{"k1", k1}, {"k2", newKey}} {
		e := Sign(t, shapestest.GoldenMessage(), HMACSHA256, k.ID, k.Material, DefaultSignedFields)
		if v := policy(rule).Check(e); !v.Accepted {
			t.Errorf("overlap: %s-signed = %+v, want accepted", k.ID, v)
		}
	}
	rule.Keys = rule.Keys[:1]
	if v := policy(rule).Check(Sign(t, shapestest.GoldenMessage(), HMACSHA256, "k1", k1, DefaultSignedFields)); v.Reason != ReasonKeyIDMismatch {
		t.Errorf("after removal: k1-signed = %+v, want %s", v, ReasonKeyIDMismatch)
	}
}

func TestDecodeKey(t *testing.T) {
	const src = "message_authenticity.rules[0].key_b64:"
	for _, tt := range []struct {
		alg, b64, want string
	}{
		{HMACSHA256, base64.StdEncoding.EncodeToString(k1), ""},
		{HMACSHA256, base64.StdEncoding.EncodeToString(k1[:31]), src + " must decode to 32-1024 bytes for HMAC-SHA256"},
		{HMACSHA256, base64.StdEncoding.EncodeToString(make([]byte, 1025)), src + " must decode to 32-1024 bytes for HMAC-SHA256"},
		{HMACSHA256, "AAAA==", src + " must be base64 encoded"},
		{HMACSHA256, "AAAA====", src + " must be base64 encoded"},
		{HMACSHA256, base64.StdEncoding.EncodeToString(k1)[:20] + "\n" + base64.StdEncoding.EncodeToString(k1)[20:], src + " must be base64 encoded"},
		{Ed25519, "Kay64UG8yvCyLhqU000LxzYeUm0L/hLIl5S8kyKWbdc=", ""},
		{Ed25519, base64.StdEncoding.EncodeToString(k2), src + " must decode to exactly 32 bytes for Ed25519 public keys"},
		// y = 2 is not the y coordinate of any curve point.
		{Ed25519, base64.StdEncoding.EncodeToString(append([]byte{2}, make([]byte, 31)...)), src + " is not a valid Ed25519 public key"},
	} {
		_, err := DecodeKey(src, tt.alg, tt.b64)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("DecodeKey(%s, %q) error = %q, want %q", tt.alg, tt.b64, got, tt.want)
		}
	}
	// Non-zero trailing bits are tolerated.
	if _, err := DecodeBase64("AB=="); err != nil {
		t.Errorf("DecodeBase64(AB==) = %v, want tolerated", err)
	}
}
