// Package authenticity verifies producer signatures before a message reaches
// a sink (docs/integrity.md#message-authenticity): an HMAC-SHA256 or
// Ed25519 signature over a canonical JSON document that binds the payload's
// SHA-256 and the configured metadata fields. The first rule whose subject
// pattern matches decides; a rejection names one stable reason.
//
// A Policy holds verification keys. It never prints them, and its errors
// and reasons never carry header values, signatures or key material.
package authenticity

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"filippo.io/edwards25519"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/subject"
	"github.com/nats-sinks/nats-sink/sink"
)

// Schema is the "schema" member of the canonical signed document.
const Schema = "nats_sinks.message_authenticity.v1"

// Algorithms.
const (
	HMACSHA256 = "hmac-sha256"
	Ed25519    = "ed25519"
)

// Default header names.
const (
	DefaultSignatureHeader = "Nats-Sinks-Authenticity-Signature"
	DefaultAlgorithmHeader = "Nats-Sinks-Authenticity-Algorithm"
	DefaultKeyIDHeader     = "Nats-Sinks-Authenticity-Key-Id"
)

// Rejection reasons, in the order the checks run.
const (
	ReasonNotCovered        = "subject_not_covered_by_authenticity_policy"
	ReasonPayloadOmitted    = "payload_omitted"
	ReasonAlgorithmMissing  = "algorithm_header_missing"
	ReasonAlgorithmMismatch = "algorithm_mismatch"
	ReasonKeyIDMissing      = "key_id_header_missing"
	ReasonKeyIDMismatch     = "key_id_mismatch"
	ReasonSignatureMissing  = "signature_header_missing"
	ReasonSignatureInvalid  = "signature_invalid"
	unmatchedRule           = "<unmatched>"
	maxSignatureChars       = 1368
	maxSignatureBytes       = 1024
	minHMACKey, maxHMACKey  = 32, 1024
	signatureSizeEd25519    = ed25519.SignatureSize
	publicKeySizeEd25519    = ed25519.PublicKeySize
)

// Fields a rule may sign, in sorted order.
var Fields = []string{"classification", "labels", "message_id", "mission_metadata", "priority", "security_labels", "subject"}

// DefaultSignedFields is what a rule signs when signed_fields is not set.
var DefaultSignedFields = []string{"subject", "message_id"}

// Key is one verification key: an HMAC secret or an Ed25519 public key.
type Key struct {
	ID       string
	Material []byte
}

// String never shows the material.
func (k Key) String() string { return "authenticity key " + k.ID }

// Rule is one message_authenticity rule.
type Rule struct {
	Subject string
	// Disabled makes the rule an exemption: matching subjects pass unverified.
	Disabled  bool
	Algorithm string // HMACSHA256 or Ed25519
	// Keys holds the primary key first, then the additional keys of an
	// overlap rotation; the key-id header selects one.
	Keys []Key
	// SignedFields are the metadata fields the document binds (Fields).
	SignedFields []string
}

// Policy is a loaded message_authenticity section.
type Policy struct {
	SignatureHeader, AlgorithmHeader, KeyIDHeader string
	// AllowUnmatched accepts subjects no rule matches, unverified.
	AllowUnmatched bool
	Rules          []Rule
}

// Verdict is the outcome for one message.
type Verdict struct {
	Accepted bool
	// Verified is true when a signature was checked and matched.
	Verified bool
	// Rule is the deciding rule's subject, or "<unmatched>".
	Rule string
	// Reason is the rejection reason; "" when accepted.
	Reason string
}

// Error returns the dead-letter error text of a rejection.
func (v Verdict) Error(subj string) error {
	return fmt.Errorf("message authenticity verification rejected 1 message(s); first subject='%s' rule='%s' reason=%s", subj, v.Rule, v.Reason)
}

// Check evaluates e (before encryption) against the policy.
func (p *Policy) Check(e *sink.Envelope) Verdict {
	var rule *Rule
	for i := range p.Rules {
		if subject.Match(p.Rules[i].Subject, e.Subject) {
			rule = &p.Rules[i]
			break
		}
	}
	if rule == nil {
		if p.AllowUnmatched {
			return Verdict{Accepted: true, Rule: unmatchedRule}
		}
		return Verdict{Rule: unmatchedRule, Reason: ReasonNotCovered}
	}
	v := Verdict{Rule: rule.Subject}
	if rule.Disabled {
		v.Accepted = true
		return v
	}
	reject := func(reason string) Verdict { v.Reason = reason; return v }
	if e.Payload.Omitted && e.Payload.OriginalSize != 0 {
		return reject(ReasonPayloadOmitted)
	}
	alg, ok := header(e, p.AlgorithmHeader)
	if !ok {
		return reject(ReasonAlgorithmMissing)
	}
	if NormalizeAlgorithm(alg) != rule.Algorithm {
		return reject(ReasonAlgorithmMismatch)
	}
	keyID, ok := header(e, p.KeyIDHeader)
	if !ok {
		return reject(ReasonKeyIDMissing)
	}
	var key *Key
	for i := range rule.Keys {
		if rule.Keys[i].ID == keyID {
			key = &rule.Keys[i]
			break
		}
	}
	if key == nil {
		return reject(ReasonKeyIDMismatch)
	}
	sigText, ok := header(e, p.SignatureHeader)
	if !ok {
		return reject(ReasonSignatureMissing)
	}
	if len(sigText) > maxSignatureChars {
		return reject(ReasonSignatureInvalid)
	}
	sig, err := DecodeBase64(sigText)
	if err != nil || len(sig) > maxSignatureBytes {
		return reject(ReasonSignatureInvalid)
	}
	doc := Canonical(e, rule.Algorithm, key.ID, rule.SignedFields)
	if !verify(rule.Algorithm, key.Material, doc, sig) {
		return reject(ReasonSignatureInvalid)
	}
	v.Accepted, v.Verified = true, true
	return v
}

func verify(alg string, key, doc, sig []byte) bool {
	switch alg {
	case HMACSHA256:
		mac := hmac.New(sha256.New, key)
		mac.Write(doc)
		// Constant time: the comparison must not reveal how many leading
		// bytes of a forged signature were right.
		return hmac.Equal(mac.Sum(nil), sig)
	case Ed25519:
		if len(sig) != signatureSizeEd25519 || len(key) != publicKeySizeEd25519 {
			return false
		}
		return ed25519.Verify(ed25519.PublicKey(key), doc, sig)
	}
	return false
}

// Canonical returns the bytes producers sign: the canonical JSON document
// (sorted keys, compact, UTF-8) binding the algorithm, the key id, the
// SHA-256 of the payload as received and the signed metadata fields.
func Canonical(e *sink.Envelope, alg, keyID string, signed []string) []byte {
	sum := sha256.Sum256(e.Data)
	meta := make(map[string]any, len(signed))
	for _, f := range signed {
		meta[f] = fieldValue(e, f)
	}
	return jsonx.Marshal(map[string]any{
		"schema":         Schema,
		"version":        1,
		"algorithm":      alg,
		"key_id":         keyID,
		"payload_sha256": hex.EncodeToString(sum[:]),
		"metadata":       meta,
	}, jsonx.UTF8)
}

func fieldValue(e *sink.Envelope, f string) any {
	orNull := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	switch f {
	case "subject":
		return e.Subject
	case "message_id":
		return orNull(e.MessageID)
	case "priority":
		return orNull(e.Priority)
	case "classification":
		return orNull(e.Classification)
	case "labels":
		labels := record.Labels(e)
		out := make([]any, len(labels))
		for i, l := range labels {
			out[i] = l
		}
		return out
	}
	return nil // mission_metadata, security_labels: not produced
}

// header returns the trimmed value of name; empty after trimming is absent.
func header(e *sink.Envelope, name string) (string, bool) {
	v, ok := e.Headers.Get(name)
	if !ok {
		return "", false
	}
	v = Trim(v)
	return v, v != ""
}

// Trim removes the characters Python's str.isspace accepts (Unicode
// White_Space and U+001C–U+001F) from both ends, as upstream producers and
// verifiers trim header values.
func Trim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) })
}

// NormalizeAlgorithm lower-cases s and replaces "_" with "-".
func NormalizeAlgorithm(s string) string {
	return strings.ReplaceAll(strings.ToLower(s), "_", "-")
}

// NormalizeField normalises one signed_fields item: trimmed, lower-cased,
// "-" replaced with "_".
func NormalizeField(s string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "-", "_")
}

// ErrBase64 is returned for text outside the accepted base64 grammar.
var ErrBase64 = errors.New("must be base64 encoded")

// DecodeBase64 decodes standard, padded base64: a length that is a multiple
// of 4, at most two "=" and only at the end, no whitespace. Non-zero
// trailing bits are tolerated, as upstream's decoder tolerates them.
func DecodeBase64(s string) ([]byte, error) {
	if len(s)%4 != 0 {
		return nil, ErrBase64
	}
	body := strings.TrimSuffix(s, "=")
	body = strings.TrimSuffix(body, "=")
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/') {
			return nil, ErrBase64
		}
	}
	// The alphabet is checked above: StdEncoding would otherwise skip CR
	// and LF.
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, ErrBase64
	}
	return b, nil
}

// DecodeKey decodes base64 key material for alg. src names the key's source
// as errors show it ("message_authenticity.rules[0].key_b64:" or
// "message_authenticity.rules[0].key_b64_env: environment variable NAME").
// Errors never contain key material.
func DecodeKey(src, alg, b64 string) ([]byte, error) {
	key, err := DecodeBase64(b64)
	if err != nil {
		return nil, fmt.Errorf("%s must be base64 encoded", src)
	}
	switch alg {
	case HMACSHA256:
		if len(key) < minHMACKey || len(key) > maxHMACKey {
			return nil, fmt.Errorf("%s must decode to 32-1024 bytes for HMAC-SHA256", src)
		}
	case Ed25519:
		if len(key) != publicKeySizeEd25519 {
			return nil, fmt.Errorf("%s must decode to exactly 32 bytes for Ed25519 public keys", src)
		}
		if !validPoint(key) {
			return nil, fmt.Errorf("%s is not a valid Ed25519 public key", src)
		}
	}
	return key, nil
}

// validPoint reports whether key is the encoding of a point on the curve:
// ed25519.Verify would fail every message for a key that is not, and the
// failure would look like a forged signature.
func validPoint(key []byte) bool {
	_, err := new(edwards25519.Point).SetBytes(key)
	return err == nil
}
