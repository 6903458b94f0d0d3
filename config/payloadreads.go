package config

import (
	"fmt"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/subject"
	"github.com/nats-sinks/nats-sink/sink"
)

// checkPayloadReads refuses a sink that builds its records from fields of
// the payload (sink.PayloadReader: mapped columns with JSON Pointers, a
// payload_field key) when payload encryption can apply to a subject the
// process consumes. Encryption replaces the body before the sink sees it,
// so such a sink would get only ciphertext, and decrypting inside the sink
// would put the key into it and plaintext into columns. Special sources
// ($subject, $header:…) and included audit columns are not affected.
func (c *Config) checkPayloadReads(p *fields.Problems) {
	r, ok := c.Sink.Opener.(sink.PayloadReader)
	if !ok {
		return
	}
	reads := r.PayloadReads()
	if len(reads) == 0 {
		return
	}
	if where := c.Encryption.appliesTo(c.consumedFilters()); where != "" {
		p.Addf(fields.Join("sink", reads[0]), "cannot map the payload of encrypted subjects: %s; the sink receives only ciphertext", where)
	}
}

// consumedFilters returns the subject filters the consumer selects: each
// consumer_management.filter_subjects entry, else nats.subject. Invalid
// patterns are left out (their own problems are reported).
func (c *Config) consumedFilters() []string {
	filters := c.ConsumerManagement.FilterSubjects
	if len(filters) == 0 {
		filters = []string{c.NATS.Subject}
	}
	var out []string
	for _, f := range filters {
		if f != "" && subject.Validate(f) == nil {
			out = append(out, f)
		}
	}
	return out
}

// appliesTo reports where encryption can apply to a subject matched by one
// of filters, as `encryption applies to "<subject>" (<key>)`, or "" when it
// cannot. For each filter the rules are scanned in order, as the runner
// picks the first matching rule for a message: a rule containing the
// filter decides for all of it (enabled: encrypted; an exemption: not); an
// enabled rule that only overlaps it encrypts part of it; an overlapping
// exemption leaves the rest to the later rules. After the rules the top
// level decides.
func (e *Encryption) appliesTo(filters []string) string {
filter:
	for _, f := range filters {
		for i := range e.Rules {
			r := &e.Rules[i]
			if r.Subject == "" || subject.Validate(r.Subject) != nil {
				continue
			}
			switch {
			case subject.Contains(r.Subject, f):
				if r.Enabled {
					return fmt.Sprintf("encryption applies to %q (%s)", r.Subject, fields.Index("encryption.rules", i))
				}
				continue filter
			case subject.Overlap(r.Subject, f) && r.Enabled:
				return fmt.Sprintf("encryption applies to %q (%s)", r.Subject, fields.Index("encryption.rules", i))
			}
		}
		if e.Enabled {
			return fmt.Sprintf("encryption applies to %q (encryption.enabled)", f)
		}
	}
	return ""
}
