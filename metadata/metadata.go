// Package metadata resolves a message's priority, classification and labels
// from its headers, subject rules and defaults (docs/formats.md#metadata-document,
// docs/configuration.md#priority-classification-and-labels). Pure functions, no I/O.
package metadata

import (
	"slices"
	"strings"
	"unicode"

	"github.com/nats-sinks/nats-sink/internal/subject"
	"github.com/nats-sinks/nats-sink/sink"
)

// Default header names used when a Field or LabelsField leaves Header empty
// (docs/configuration.md#message_metadata).
const (
	DefaultPriorityHeader       = "Nats-Sinks-Priority"
	DefaultClassificationHeader = "Nats-Sinks-Classification"
	DefaultLabelsHeader         = "Nats-Sinks-Labels"
)

// Field configures one of priority and classification.
type Field struct {
	Header  string // header name, looked up case-insensitively; "" = the default name
	Default string // "" = null
}

// LabelsField configures labels.
type LabelsField struct {
	Header  string   // "" = DefaultLabelsHeader
	Default []string // already normalised
}

// Rule supplies values for subjects matching Subject. A nil pointer means the
// rule does not set that field; a pointer to "" (or to an empty slice) is an
// explicit null, which counts as set.
type Rule struct {
	Subject        string
	Priority       *string
	Classification *string
	Labels         *[]string
}

// Resolver resolves metadata for messages. The zero value uses the default
// header names (Nats-Sinks-Priority, Nats-Sinks-Classification,
// Nats-Sinks-Labels) with no defaults and no rules. A Resolver is read-only
// once built and safe for concurrent use.
type Resolver struct {
	Priority       Field
	Classification Field
	Labels         LabelsField
	Rules          []Rule
}

// Resolve returns priority and classification ("" = null) and labels (never
// nil). For each field independently (docs/formats.md#metadata-document): a present header wins
// with its trimmed value, even when that is empty (null, defaults not
// applied); otherwise the first matching rule that sets the field; otherwise
// the default.
func (r *Resolver) Resolve(subj string, h sink.Headers) (priority, classification string, labels []string) {
	if r == nil {
		r = &Resolver{}
	}
	priority = r.resolveString(subj, h, r.Priority, DefaultPriorityHeader, func(rl *Rule) *string { return rl.Priority })
	classification = r.resolveString(subj, h, r.Classification, DefaultClassificationHeader, func(rl *Rule) *string { return rl.Classification })

	name := r.Labels.Header
	if name == "" {
		name = DefaultLabelsHeader
	}
	if v, ok := h.Get(name); ok {
		return priority, classification, NormaliseLabels(v)
	}
	for i := range r.Rules {
		rl := &r.Rules[i]
		if rl.Labels != nil && subject.Match(rl.Subject, subj) {
			return priority, classification, cloneLabels(*rl.Labels)
		}
	}
	return priority, classification, cloneLabels(r.Labels.Default)
}

func (r *Resolver) resolveString(subj string, h sink.Headers, f Field, defaultHeader string, pick func(*Rule) *string) string {
	name := f.Header
	if name == "" {
		name = defaultHeader
	}
	if v, ok := h.Get(name); ok {
		return TrimSpace(v)
	}
	for i := range r.Rules {
		rl := &r.Rules[i]
		if p := pick(rl); p != nil && subject.Match(rl.Subject, subj) {
			return *p
		}
	}
	return f.Default
}

// cloneLabels copies a configured list so that envelopes never share a
// backing array with the configuration (sinks must not modify envelopes, but
// a copy keeps one misbehaving sink from corrupting every later message).
func cloneLabels(l []string) []string {
	if len(l) == 0 {
		return []string{}
	}
	return slices.Clone(l)
}

// NormaliseLabels splits on ';', trims items, drops empty items and
// duplicates (keeping the first occurrence). The result is never nil.
func NormaliseLabels(values ...string) []string {
	out := []string{}
	for _, v := range values {
		for item := range strings.SplitSeq(v, ";") {
			item = TrimSpace(item)
			if item != "" && !slices.Contains(out, item) {
				out = append(out, item)
			}
		}
	}
	return out
}

// TrimSpace removes leading and trailing whitespace as Python's str.strip()
// does, which is what upstream applied to header values and labels: Unicode
// white space plus the information separators U+001C–U+001F, which Python
// counts as whitespace and Go's unicode.IsSpace does not.
func TrimSpace(s string) string {
	return strings.TrimFunc(s, IsPySpace)
}

// IsPySpace reports whether Python's str.isspace() is true for r.
func IsPySpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}
