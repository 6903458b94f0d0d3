package config

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/nats-sinks/nats-sink/internal/authenticity"
	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/subject"
	"github.com/nats-sinks/nats-sink/secret"
)

// MessageAuthenticity is the message_authenticity section
// (docs/integrity.md#configuration).
type MessageAuthenticity struct {
	Enabled                bool               `json:"enabled" doc:"Verify producer signatures before any sink sees a message; needs at least one rule."`
	UnmatchedSubjectAction string             `json:"unmatched_subject_action" enum:"allow,reject" doc:"Subjects no rule matches: reject (dead-letter) or allow unverified."`
	SignatureHeader        string             `json:"signature_header" trim:"true" nonblank:"true" nocontrol:"true"`
	AlgorithmHeader        string             `json:"algorithm_header" trim:"true" nonblank:"true" nocontrol:"true"`
	KeyIDHeader            string             `json:"key_id_header" trim:"true" nonblank:"true" nocontrol:"true" doc:"The three header names must differ ignoring case."`
	Rules                  []AuthenticityRule `json:"rules" doc:"Ordered; the first rule whose subject matches decides."`
}

// AuthenticityRule is one item of message_authenticity.rules.
type AuthenticityRule struct {
	Subject        string            `json:"subject" required:"true"`
	Enabled        bool              `json:"enabled" doc:"false = exemption: matching subjects pass unverified."`
	Algorithm      string            `json:"algorithm" trim:"true" lower:"true" replace:"_=-" enum:"hmac-sha256,ed25519"`
	KeyID          *string           `json:"key_id" trim:"true" nonblank:"true" maxlen:"128" nocontrol:"true" doc:"Required when the rule is enabled; compared exactly with the key-id header."`
	KeyB64         *secret.Value     `json:"key_b64" secret:"true" doc:"Standard padded base64: an HMAC secret of 32-1024 bytes or a raw 32-byte Ed25519 public key."`
	KeyB64Env      *string           `json:"key_b64_env" doc:"Environment variable holding the base64 key; read when run starts."`
	KeyB64File     *string           `json:"key_b64_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"File holding the base64 key; read when run starts."`
	SignedFields   *[]string         `json:"signed_fields" orstring:"one" trim:"true" lower:"true" replace:"-=_" enum:"classification,labels,message_id,mission_metadata,priority,security_labels,subject" doc:"null = [subject, message_id]; repeats dropped."`
	AdditionalKeys []AuthenticityKey `json:"additional_keys" maxitems:"8" doc:"Further keys of the rule's algorithm, selected by the key-id header (overlap rotation)."`
}

// SetDefaults sets a rule's defaults before its object is decoded.
func (r *AuthenticityRule) SetDefaults() {
	*r = AuthenticityRule{Enabled: true, Algorithm: authenticity.HMACSHA256, AdditionalKeys: []AuthenticityKey{}}
}

// Fields returns the rule's normalised signed fields.
func (r *AuthenticityRule) Fields() []string {
	if r.SignedFields == nil {
		return authenticity.DefaultSignedFields
	}
	var out []string
	for _, f := range *r.SignedFields {
		if !contains(out, f) {
			out = append(out, f)
		}
	}
	if out == nil {
		out = []string{}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// AuthenticityKey is one item of a rule's additional_keys.
type AuthenticityKey struct {
	KeyID      *string       `json:"key_id" required:"true" trim:"true" nonblank:"true" maxlen:"128" nocontrol:"true"`
	KeyB64     *secret.Value `json:"key_b64" secret:"true"`
	KeyB64Env  *string       `json:"key_b64_env"`
	KeyB64File *string       `json:"key_b64_file" nonblank:"true" nopad:"true" nocontrol:"true"`
}

// Custody is the custody section (docs/integrity.md#chain-of-custody).
type Custody struct {
	Enabled             bool    `json:"enabled" doc:"Attach a custody hash document to every stored record; needs hash_payload or hash_metadata."`
	Algorithm           string  `json:"algorithm" trim:"true" lower:"true" replace:"_=" enum:"sha256,sha512"`
	HashPayload         bool    `json:"hash_payload"`
	HashMetadata        bool    `json:"hash_metadata"`
	IncludePreviousHash bool    `json:"include_previous_hash" doc:"Record the chain link the producer names in previous_hash_header."`
	PreviousHashHeader  string  `json:"previous_hash_header" trim:"true" nonblank:"true" nocontrol:"crlf"`
	KeyID               *string `json:"key_id" trim:"true" blanknull:"true" doc:"A label stored in the document; hashing is never keyed. Blank = null."`
	MaxHashInputBytes   int     `json:"max_hash_input_bytes" min:"1024" max:"1073741824" doc:"Limit per canonical hash input."`
}

func defaultAuthenticity() MessageAuthenticity {
	return MessageAuthenticity{
		UnmatchedSubjectAction: "reject",
		SignatureHeader:        authenticity.DefaultSignatureHeader,
		AlgorithmHeader:        authenticity.DefaultAlgorithmHeader,
		KeyIDHeader:            authenticity.DefaultKeyIDHeader,
		Rules:                  []AuthenticityRule{},
	}
}

func defaultCustody() Custody {
	return Custody{
		Algorithm:          "sha256",
		HashPayload:        true,
		HashMetadata:       true,
		PreviousHashHeader: "Nats-Sinks-Previous-Custody-Hash",
		MaxHashInputBytes:  16777216,
	}
}

var upperEnvName = regexp.MustCompile(`^[A-Z_][A-Z0-9_]{0,127}$`)

func (m *MessageAuthenticity) validate(p *fields.Problems) {
	const path = "message_authenticity"
	if m.Enabled && len(m.Rules) == 0 {
		p.Add(path+".rules", "must not be empty when message_authenticity.enabled is true")
	}
	if m.SignatureHeader != "" && m.AlgorithmHeader != "" && m.KeyIDHeader != "" {
		s, a, k := fold(m.SignatureHeader), fold(m.AlgorithmHeader), fold(m.KeyIDHeader)
		if s == a || s == k || a == k {
			p.Add(path, "signature_header, algorithm_header and key_id_header must be distinct")
		}
	}
	for i := range m.Rules {
		r := &m.Rules[i]
		rp := fields.Index(path+".rules", i)
		{
			if err := subject.Validate(r.Subject); err != nil {
				p.Addf(rp+".subject", "must be a valid subject pattern (got %q)", r.Subject)
			}
		}
		if r.Enabled && r.KeyID == nil {
			p.Add(rp+".key_id", "required when the rule is enabled")
		}
		checkAuthKey(rp, r.Algorithm, r.Enabled, r.KeyB64, r.KeyB64Env, r.KeyB64File, p)
		ids := map[string]bool{}
		if r.KeyID != nil {
			ids[*r.KeyID] = true
		}
		for j := range r.AdditionalKeys {
			k := &r.AdditionalKeys[j]
			kp := fields.Index(rp+".additional_keys", j)
			checkAuthKey(kp, r.Algorithm, r.Enabled, k.KeyB64, k.KeyB64Env, k.KeyB64File, p)
			if k.KeyID != nil {
				if ids[*k.KeyID] {
					p.Addf(kp+".key_id", "duplicate key_id %q", *k.KeyID)
				}
				ids[*k.KeyID] = true
			}
		}
	}
}

// fold is Unicode simple case folding for the header-name comparison.
func fold(s string) string { return strings.ToLower(strings.ToUpper(s)) }

// checkAuthKey checks one key's sources: at most one; one when the rule is
// enabled; a direct key decodes for alg (never echoed); env names are
// upper-case variable names.
func checkAuthKey(path, alg string, enabled bool, value *secret.Value, envName, fileName *string, p *fields.Problems) {
	switch n := countSet(value != nil, envName != nil, fileName != nil); {
	case n > 1:
		p.Add(path, "set only one of key_b64, key_b64_env, key_b64_file")
	case n == 0 && enabled:
		p.Add(path, "key_b64, key_b64_env or key_b64_file is required when the rule is enabled")
	}
	if value != nil && enabled && (alg == authenticity.HMACSHA256 || alg == authenticity.Ed25519) {
		if _, err := authenticity.DecodeKey(path+".key_b64:", alg, value.Reveal()); err != nil {
			p.Add(path+".key_b64", strings.TrimPrefix(err.Error(), path+".key_b64: "))
		}
	}
	if envName != nil && !upperEnvName.MatchString(*envName) {
		p.Add(path+".key_b64_env", `must use uppercase letters, digits or "_"`)
	}
}

func (m *MessageAuthenticity) warnings() []string {
	var out []string
	for i := range m.Rules {
		if sf := m.Rules[i].SignedFields; sf != nil && len(*sf) == 0 {
			out = append(out, fields.Index("message_authenticity.rules", i)+".signed_fields: empty; signatures are not bound to subject or message id")
		}
	}
	return out
}

func (c *Custody) validate(p *fields.Problems) {
	if c.Enabled && !c.HashPayload && !c.HashMetadata {
		p.Add("custody", "enabled requires hash_payload or hash_metadata")
	}
	if c.KeyID != nil {
		switch {
		case utf8.RuneCountInString(*c.KeyID) > 128:
			p.Add("custody.key_id", "must not exceed 128 characters")
		case fields.HasControl(*c.KeyID):
			p.Add("custody.key_id", "must not contain control characters")
		}
	}
}

// VerificationKey is one resolved message-authenticity key: an HMAC secret
// or a raw Ed25519 public key. It never prints its material.
type VerificationKey struct {
	ID       string
	Material []byte
}

// String shows the key id only.
func (k VerificationKey) String() string { return "verification key " + k.ID }

// AuthenticityKeys resolves rule i's keys (primary first, then the
// additional keys), reading key_b64_env and key_b64_file now. Errors name
// the source and never contain key material; they are configuration
// errors (exit 2).
func (m *MessageAuthenticity) AuthenticityKeys(i int, env Env) ([]VerificationKey, error) {
	r := &m.Rules[i]
	rp := fields.Index("message_authenticity.rules", i)
	one := func(path, id string, value *secret.Value, envName, fileName *string) (VerificationKey, error) {
		v, _, err := secret.Resolve(path+".key_b64", value, envName, fileName, env)
		if err != nil {
			return VerificationKey{}, err
		}
		src := path + ".key_b64:"
		switch {
		case envName != nil:
			src = fmt.Sprintf("%s.key_b64_env: environment variable %s", path, *envName)
		case fileName != nil:
			src = fmt.Sprintf("%s.key_b64_file: file %s", path, *fileName)
		}
		key, err := authenticity.DecodeKey(src, r.Algorithm, v.Reveal())
		if err != nil {
			return VerificationKey{}, keyProblem(path, err)
		}
		return VerificationKey{ID: id, Material: key}, nil
	}
	var keys []VerificationKey
	k, err := one(rp, deref(r.KeyID), r.KeyB64, r.KeyB64Env, r.KeyB64File)
	if err != nil {
		return nil, err
	}
	keys = append(keys, k)
	for j := range r.AdditionalKeys {
		a := &r.AdditionalKeys[j]
		k, err := one(fields.Index(rp+".additional_keys", j), deref(a.KeyID), a.KeyB64, a.KeyB64Env, a.KeyB64File)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// keyProblem turns "<path>: <message>" from authenticity.DecodeKey into a
// configuration error at that path.
func keyProblem(path string, err error) error {
	pp, msg, ok := strings.Cut(err.Error(), ": ")
	if !ok {
		pp, msg = path, err.Error()
	}
	return &Error{Problems: []Problem{{Path: strings.TrimSuffix(pp, ":"), Message: msg}}}
}
