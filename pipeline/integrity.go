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
		p, err := authenticityPolicy(ma, env)
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
	h.custody = CustodyHook(&cfg.Custody)
	return h, nil
}

// CustodyHook returns the function that attaches the custody document of
// c to an envelope, or nil when custody is disabled. Its errors are
// permanent validation failures of that message (a malformed chain link,
// an input over max_hash_input_bytes).
func CustodyHook(c *config.Custody) func(*sink.Envelope) error {
	if !c.Enabled {
		return nil
	}
	s := custodySettings(c)
	return func(e *sink.Envelope) error {
		doc, err := s.Compute(e)
		if err != nil {
			return err
		}
		e.Custody = doc
		return nil
	}
}

// authenticityPolicy maps message_authenticity onto a verification policy,
// resolving every enabled rule's keys.
func authenticityPolicy(ma *config.MessageAuthenticity, env config.Env) (*authenticity.Policy, error) {
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
			for _, k := range keys {
				rule.Keys = append(rule.Keys, authenticity.Key{ID: k.ID, Material: k.Material})
			}
		}
		p.Rules = append(p.Rules, rule)
	}
	return p, nil
}

// custodySettings maps the custody section.
func custodySettings(c *config.Custody) *custody.Settings {
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
