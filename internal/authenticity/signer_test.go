package authenticity

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/sink"
)

// This file is an independent producer: it builds the signed document from
// the documented text (docs/integrity.md) with the standard library only
// (encoding/json sorts map keys), never with this package's encoder.

// canonicalText is the document of the producer: keys sorted, compact,
// UTF-8 unescaped, over the envelope's received data and resolved values.
func canonicalText(t testing.TB, e *sink.Envelope, alg, keyID string, fields []string) string {
	t.Helper()
	sum := sha256.Sum256(e.Data)
	meta := map[string]any{}
	for _, f := range fields {
		switch f {
		case "subject":
			meta[f] = e.Subject
		case "message_id":
			meta[f] = nullable(e.MessageID)
		case "priority":
			meta[f] = nullable(e.Priority)
		case "classification":
			meta[f] = nullable(e.Classification)
		case "labels":
			l := e.Labels
			if l == nil {
				l = []string{}
			}
			meta[f] = l
		default:
			meta[f] = nil
		}
	}
	doc := map[string]any{
		"schema": "nats_sinks.message_authenticity.v1", "version": 1, "algorithm": alg, "key_id": keyID,
		"payload_sha256": hex.EncodeToString(sum[:]), "metadata": meta,
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		t.Fatal(err)
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func independentHMAC(key []byte, doc string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(doc))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Sign returns the envelope of m signed by an independent producer with
// the given algorithm and key (an HMAC secret or an Ed25519 seed).
func Sign(t testing.TB, m intake.Message, alg, keyID string, key []byte, fields []string) *sink.Envelope {
	t.Helper()
	e := intake.Build(m, nil, shapestest.Received)
	doc := canonicalText(t, e, alg, keyID, fields)
	var sig string
	switch alg {
	case HMACSHA256:
		sig = independentHMAC(key, doc)
	case Ed25519:
		sig = base64.StdEncoding.EncodeToString(ed25519.Sign(ed25519.NewKeyFromSeed(key), []byte(doc)))
	}
	return intake.Build(withHeaders(m, DefaultAlgorithmHeader, alg, DefaultKeyIDHeader, keyID, DefaultSignatureHeader, sig), nil, shapestest.Received)
}

func TestIndependentSignerAccepted(t *testing.T) {
	pub := ed25519.NewKeyFromSeed(edSeed).Public().(ed25519.PublicKey)
	all := []string{"classification", "labels", "message_id", "mission_metadata", "priority", "security_labels", "subject"}
	for _, tt := range []struct {
		name   string
		alg    string
		sign   []byte
		verify []byte
		fields []string
	}{
		{"hmac default fields", HMACSHA256, k1, k1, DefaultSignedFields},
		{"hmac all fields", HMACSHA256, k2, k2, all},
		{"ed25519 all fields", Ed25519, edSeed, pub, all},
		{"ed25519 no fields", Ed25519, edSeed, pub, []string{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rule := Rule{Subject: ">", Algorithm: tt.alg, Keys: []Key{{"k", tt.verify}}, SignedFields: tt.fields}
			e := Sign(t, shapestest.GoldenMessage(), tt.alg, "k", tt.sign, tt.fields)
			if v := policy(rule).Check(e); !v.Accepted || !v.Verified {
				t.Errorf("Check = %+v, want verified", v)
			}
		})
	}
}
