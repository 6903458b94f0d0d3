package seal

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"

	"github.com/nats-sinks/nats-sink/internal/subject"
	"github.com/nats-sinks/nats-sink/sink"
)

// Field is a set of the settings a Rule sets itself; the others are
// inherited from the top level (runtime.md §13).
type Field uint8

// The fields a rule may set. Enabled is not among them: a rule's enabled
// flag is always its own (config.md §7.4 defaults it to true).
const (
	SetAlgorithm Field = 1 << iota
	SetKeyID
	// SetKey means the rule has its own key source (key_b64 or
	// key_b64_env). Such a rule uses only that key and never the top
	// level's, whichever of the two sources either of them used.
	SetKey
	SetNonceSize
	SetTagLength
	SetEnvelopeVersion
)

// A Rule is one entry of encryption.rules.
type Rule struct {
	// Subject is the NATS subject pattern the rule applies to.
	Subject string
	// Settings holds the rule's values. Enabled is the rule's own flag,
	// after the configuration default (true): false exempts matching
	// subjects from encryption. The other fields count only when Set
	// names them.
	Settings Settings
	// Set names the fields the rule sets itself.
	Set Field
}

// A Policy decides per subject whether a payload is encrypted and with
// which settings: the first rule whose subject matches decides, a disabled
// rule exempts, and a subject no rule matches follows the top level
// (runtime.md §13). A Policy is safe for concurrent use.
type Policy struct {
	// Rand supplies nonces; nil means crypto/rand.Reader. Set it before the
	// first Seal. A replacement must be safe for concurrent use if Seal is
	// called concurrently.
	Rand io.Reader

	top   *sealer // nil: subjects without a matching rule stay plaintext
	rules []ruleSealer
}

type ruleSealer struct {
	subject string
	sl      *sealer // nil: exemption
}

// NewPolicy validates the configuration and expands every key it needs
// once. top is the encryption section's top level; it must be complete only
// when it is enabled or a rule inherits from it. Problems are reported all
// at once, each prefixed by its configuration path ("encryption.rules[1].
// nonce_size_bytes: …"), never with key material. The policy keeps no copy
// of the key bytes.
func NewPolicy(top Settings, rules []Rule) (*Policy, error) {
	top.Algorithm = NormalizeAlgorithm(top.Algorithm)
	p := &Policy{}
	var problems []error
	if top.Enabled {
		sl, err := newSealer(top)
		if err != nil {
			problems = append(problems, prefixed("encryption", err))
		}
		p.top = sl
	}
	for i, r := range rules {
		path := fmt.Sprintf("encryption.rules[%d]", i)
		if err := subject.Validate(r.Subject); err != nil {
			problems = append(problems, fmt.Errorf("%s.subject: %w", path, err))
		}
		rs := ruleSealer{subject: r.Subject}
		if r.Settings.Enabled {
			if r.Set&SetKey == 0 && len(top.Key) == 0 {
				problems = append(problems, fmt.Errorf(
					"%s.key_b64_env or key_b64 is required because no top-level encryption key is configured", path))
			} else {
				sl, err := newSealer(effective(top, r))
				if err != nil {
					problems = append(problems, prefixed(path, err))
				}
				rs.sl = sl
			}
		}
		p.rules = append(p.rules, rs)
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	return p, nil
}

// effective returns a rule's settings with every field it does not set
// taken from the top level.
func effective(top Settings, r Rule) Settings {
	s := top
	s.Enabled = r.Settings.Enabled
	if r.Set&SetAlgorithm != 0 {
		s.Algorithm = NormalizeAlgorithm(r.Settings.Algorithm)
	}
	if r.Set&SetKeyID != 0 {
		s.KeyID = r.Settings.KeyID
	}
	if r.Set&SetKey != 0 {
		s.Key = r.Settings.Key
	}
	if r.Set&SetNonceSize != 0 {
		s.NonceSize = r.Settings.NonceSize
	}
	if r.Set&SetTagLength != 0 {
		s.TagLength = r.Settings.TagLength
	}
	if r.Set&SetEnvelopeVersion != 0 {
		s.EnvelopeVersion = r.Settings.EnvelopeVersion
	}
	return s
}

// prefixed puts path in front of each problem joined in err.
func prefixed(path string, err error) error {
	var list []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	} else {
		list = []error{err}
	}
	out := make([]error, len(list))
	for i, e := range list {
		out[i] = fmt.Errorf("%s.%w", path, e)
	}
	return errors.Join(out...)
}

// sealerFor returns the sealer for a subject, nil when it stays plaintext.
func (p *Policy) sealerFor(subj string) *sealer {
	for _, r := range p.rules {
		if subject.Match(r.subject, subj) {
			return r.sl
		}
	}
	return p.top
}

// Active reports whether any subject can be encrypted: the top level is
// enabled or some rule is. A nil Policy is inactive.
func (p *Policy) Active() bool {
	if p == nil {
		return false
	}
	if p.top != nil {
		return true
	}
	for _, r := range p.rules {
		if r.sl != nil {
			return true
		}
	}
	return false
}

// Algorithm returns the algorithm payloads on subj are encrypted with, and
// false when they stay plaintext.
func (p *Policy) Algorithm(subj string) (string, bool) {
	if p == nil {
		return "", false
	}
	if sl := p.sealerFor(subj); sl != nil {
		return sl.alg, true
	}
	return "", false
}

// Seal encrypts e.Data in place when the policy covers e.Subject: e.Data
// becomes the envelope bytes, and nothing else in e changes (subject,
// headers, metadata and the original payload size stay as received). A
// message whose payload was omitted (headers-only) is never encrypted:
// there is no producer payload to protect, and encrypting the empty body
// would pretend there was (README Q14). A nil Policy seals nothing.
//
// Errors name the subject only. They happen when the random source fails
// or the payload is too long for CCM's length field.
func (p *Policy) Seal(e *sink.Envelope) error {
	if p == nil || e.Payload.Omitted {
		return nil
	}
	sl := p.sealerFor(e.Subject)
	if sl == nil {
		return nil
	}
	random := p.Rand
	if random == nil {
		random = rand.Reader
	}
	data, err := sl.sealMessage(e.Data, Message{Subject: e.Subject, Stream: e.Stream, Sequence: e.StreamSequence}, random)
	if err != nil {
		return fmt.Errorf("encrypt payload on subject %q: %w", e.Subject, err)
	}
	e.Data = data
	return nil
}
