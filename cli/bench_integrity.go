package cli

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nats-sinks/nats-sink/internal/authenticity"
	"github.com/nats-sinks/nats-sink/internal/intake"
)

// integrityVariants are the values of --integrity (docs/performance.md#how-to-reproduce):
//
//   - off: neither feature (the baseline of the others);
//   - hmac: message_authenticity with one HMAC-SHA256 rule;
//   - ed25519: message_authenticity with one Ed25519 rule;
//   - custody: custody, sha256 over payload and metadata, chained
//     (include_previous_hash, the link read from the message's header);
//   - all: Ed25519 verification and chained custody, the dearest pair.
//
// One message carries both signatures (under different header names) and
// the chain link, so every variant reads the same stream.
var integrityVariants = []string{"off", "hmac", "ed25519", "custody", "all"}

// Headers of the bench's signed messages. HMAC uses the default header
// names, Ed25519 its own, so that a message can carry both.
const (
	benchEdSignatureHeader = "Nats-Sinks-Bench-Ed25519-Signature"
	benchEdAlgorithmHeader = "Nats-Sinks-Bench-Ed25519-Algorithm"
	benchEdKeyIDHeader     = "Nats-Sinks-Bench-Ed25519-Key-Id"
	benchPreviousHeader    = "Nats-Sinks-Previous-Custody-Hash"
	benchHMACKeyID         = "bench-hmac"
	benchEdKeyID           = "bench-ed25519"
	benchHMACEnv           = "NATS_SINKS_BENCH_HMAC_KEY_B64"
	benchEdEnv             = "NATS_SINKS_BENCH_ED25519_KEY_B64"
)

// benchKeys are one run's random signing keys; nil when no variant needs
// signed messages.
type benchKeys struct {
	hmac   []byte
	edPub  ed25519.PublicKey
	edPriv ed25519.PrivateKey
}

func newBenchKeys() *benchKeys {
	k := &benchKeys{hmac: make([]byte, 32)}
	rand.Read(k.hmac)
	k.edPub, k.edPriv, _ = ed25519.GenerateKey(rand.Reader)
	return k
}

// needsKeys reports whether a variant other than off was asked for.
func needsKeys(variants []string) bool {
	for _, v := range variants {
		if v != "off" {
			return true
		}
	}
	return false
}

// lookup resolves the verification keys' environment variables, which
// only the bench's own pipelines see.
func (k *benchKeys) lookup(name string) (string, bool) {
	switch {
	case k == nil:
		return "", false
	case name == benchHMACEnv:
		return base64.StdEncoding.EncodeToString(k.hmac), true
	case name == benchEdEnv:
		return base64.StdEncoding.EncodeToString(k.edPub), true
	}
	return "", false
}

// headers returns the headers of a bench message signed as a producer signs
// it (docs/integrity.md#message-authenticity): the canonical document over
// the subject, the payload's SHA-256 and the default signed fields (subject
// and message id, which is null here), HMAC-SHA256 and Ed25519 signatures
// of it, and previous, the custody chain link the producer asserts (a
// 64-digit hex digest; the sink records it without checking it).
func (k *benchKeys) headers(subject string, data []byte, previous string) nats.Header {
	h := nats.Header{}
	if previous != "" {
		h.Set(benchPreviousHeader, previous)
	}
	e := intake.Build(intake.Message{Subject: subject, Data: data, Header: h}, nil, time.Now())
	mac := hmac.New(sha256.New, k.hmac)
	mac.Write(authenticity.Canonical(e, authenticity.HMACSHA256, benchHMACKeyID, authenticity.DefaultSignedFields))
	h.Set(authenticity.DefaultSignatureHeader, base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	h.Set(authenticity.DefaultAlgorithmHeader, authenticity.HMACSHA256)
	h.Set(authenticity.DefaultKeyIDHeader, benchHMACKeyID)
	sig := ed25519.Sign(k.edPriv, authenticity.Canonical(e, authenticity.Ed25519, benchEdKeyID, authenticity.DefaultSignedFields))
	h.Set(benchEdSignatureHeader, base64.StdEncoding.EncodeToString(sig))
	h.Set(benchEdAlgorithmHeader, authenticity.Ed25519)
	h.Set(benchEdKeyIDHeader, benchEdKeyID)
	return h
}

// chainLink is the link the bench producer puts on the message after the
// one with data: a digest of that payload, as a producer that chains its
// records would assert one.
func chainLink(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// integrityJSON returns the configuration sections of variant, to splice
// into a phase's configuration after the encryption section ("" for off).
// Every message is signed, so no rule rejects one.
func (o *benchOptions) integrityJSON(t *benchTarget, variant string) string {
	hmacRule := fmt.Sprintf(`{"enabled": true, "rules": [{"subject": %q, "algorithm": "hmac-sha256", "key_id": %q, "key_b64_env": %q}]}`,
		t.subject+".>", benchHMACKeyID, benchHMACEnv)
	edRule := fmt.Sprintf(`{"enabled": true, "signature_header": %q, "algorithm_header": %q, "key_id_header": %q,
    "rules": [{"subject": %q, "algorithm": "ed25519", "key_id": %q, "key_b64_env": %q}]}`,
		benchEdSignatureHeader, benchEdAlgorithmHeader, benchEdKeyIDHeader, t.subject+".>", benchEdKeyID, benchEdEnv)
	custody := fmt.Sprintf(`{"enabled": true, "algorithm": "sha256", "hash_payload": true, "hash_metadata": true, "include_previous_hash": true, "previous_hash_header": %q}`, benchPreviousHeader)
	var parts []string
	switch variant {
	case "hmac":
		parts = append(parts, `"message_authenticity": `+hmacRule)
	case "ed25519":
		parts = append(parts, `"message_authenticity": `+edRule)
	case "custody":
		parts = append(parts, `"custody": `+custody)
	case "all":
		parts = append(parts, `"message_authenticity": `+edRule, `"custody": `+custody)
	default:
		return ""
	}
	return "\n  " + strings.Join(parts, ",\n  ") + ","
}
