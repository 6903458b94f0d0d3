package pipeline

import (
	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/internal/authenticity"
	"github.com/nats-sinks/nats-sink/internal/custody"
	"github.com/nats-sinks/nats-sink/runner"
	"github.com/nats-sinks/nats-sink/sink"
)

// integrity holds the runner hooks of message_authenticity and custody;
// nil fields leave the features off.
type integrity struct {
	authenticate func(*sink.Envelope) (reject, err error)
	custody      func(*sink.Envelope) error
}

// apply sets the hooks on r.
func (h integrity) apply(r *runner.Runner) {
	r.Authenticate, r.Custody = h.authenticate, h.custody
}

// integrityHooks builds the hooks, reading verification keys from their
// environment variables and files now (start-up step 4). A missing or bad
// key is a configuration error (exit 2).
func integrityHooks(cfg *config.Config, env config.Env) (integrity, error) {
	var h integrity
	if ma := &cfg.MessageAuthenticity; ma.Enabled {
		p, err := AuthenticityPolicy(ma, env)
		if err != nil {
			return h, err
		}
		h.authenticate = func(e *sink.Envelope) (error, error) {
			v := p.Check(e)
			if v.Accepted {
				return nil, nil
			}
			return v.Error(e.Subject), nil
		}
	}
	if c := &cfg.Custody; c.Enabled {
		s := CustodySettings(c)
		h.custody = func(e *sink.Envelope) error {
			doc, err := s.Compute(e)
			if err != nil {
				return err
			}
			e.Custody = doc
			return nil
		}
	}
	return h, nil
}

// AuthenticityPolicy maps message_authenticity onto a verification policy,
// resolving every enabled rule's keys.
func AuthenticityPolicy(ma *config.MessageAuthenticity, env config.Env) (*authenticity.Policy, error) {
	p := &authenticity.Policy{
		SignatureHeader: ma.SignatureHeader, AlgorithmHeader: ma.AlgorithmHeader, KeyIDHeader: ma.KeyIDHeader,
		AllowUnmatched: ma.UnmatchedSubjectAction == "allow",
	}
	for i := range ma.Rules {
		r := &ma.Rules[i]
		rule := authenticity.Rule{Subject: r.Subject, Disabled: !r.Enabled, Algorithm: r.Algorithm, SignedFields: r.Fields()}
		if r.Enabled {
			keys, err := ma.AuthenticityKeys(i, env)
			if err != nil {
				return nil, configFailure(err)
			}
			rule.Keys = keys
		}
		p.Rules = append(p.Rules, rule)
	}
	return p, nil
}

// CustodySettings maps the custody section.
func CustodySettings(c *config.Custody) *custody.Settings {
	s := &custody.Settings{
		Algorithm: c.Algorithm, HashPayload: c.HashPayload, HashMetadata: c.HashMetadata,
		IncludePreviousHash: c.IncludePreviousHash, PreviousHashHeader: c.PreviousHashHeader,
		MaxHashInputBytes: c.MaxHashInputBytes,
	}
	if c.KeyID != nil {
		s.KeyID = *c.KeyID
	}
	return s
}
