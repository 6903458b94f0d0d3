// Package subject validates and matches NATS subject patterns (spec
// runtime.md §11). Message-metadata rules, encryption rules, table routes,
// filter validation and the DLQ-loop check all use it; everywhere the first
// matching pattern in configuration order wins.
package subject

import (
	"errors"
	"strings"
)

// Validate returns nil when pattern is a valid subject pattern: non-empty,
// no surrounding whitespace, no empty token, no whitespace inside tokens,
// '>' only as the last token, and '*' or '>' never inside a longer token.
func Validate(pattern string) error {
	if pattern == "" {
		return errors.New("must not be empty")
	}
	if strings.TrimSpace(pattern) != pattern {
		return errors.New("must not have surrounding whitespace")
	}
	tokens := strings.Split(pattern, ".")
	for i, t := range tokens {
		switch {
		case t == "":
			return errors.New("must not contain empty tokens")
		case strings.ContainsFunc(t, isSpaceOrControl):
			return errors.New("must not contain whitespace or control characters")
		case t == ">" && i != len(tokens)-1:
			return errors.New("'>' is only allowed as the last token")
		case len(t) > 1 && strings.ContainsAny(t, "*>"):
			return errors.New("wildcards must be whole tokens")
		}
	}
	return nil
}

func isSpaceOrControl(r rune) bool {
	return r <= ' ' || r == 0x7f
}

// IsLiteral reports whether s is a valid subject without wildcards.
func IsLiteral(s string) bool {
	if Validate(s) != nil {
		return false
	}
	for _, t := range strings.Split(s, ".") {
		if t == "*" || t == ">" {
			return false
		}
	}
	return true
}

// Match reports whether subject (a literal) matches pattern: '*' matches
// exactly one token, a final '>' one or more remaining tokens, other tokens
// match exactly.
func Match(pattern, subject string) bool {
	for {
		pt, prest, pmore := strings.Cut(pattern, ".")
		st, srest, smore := strings.Cut(subject, ".")
		switch {
		case pt == ">":
			return st != ""
		case pt != "*" && pt != st:
			return false
		case !pmore || !smore:
			return pmore == smore
		}
		pattern, subject = prest, srest
	}
}

// Contains reports, conservatively, whether every subject matched by inner
// is also matched by outer. It is used to check that consumer filters lie
// inside nats.subject and that the DLQ subject is outside them.
func Contains(outer, inner string) bool {
	o := strings.Split(outer, ".")
	in := strings.Split(inner, ".")
	for i, ot := range o {
		if ot == ">" {
			return i < len(in)
		}
		if i >= len(in) {
			return false
		}
		it := in[i]
		switch {
		case it == ">":
			return false // only an outer '>' contains a candidate '>'
		case ot == "*":
			// contains any single token, including an inner '*'
		case it == "*" || ot != it:
			return false
		}
	}
	return len(o) == len(in)
}

// Overlap reports whether some literal subject is matched by both patterns
// a and b. It is used to decide whether an encryption rule can apply to a
// subject a consumer filter selects.
func Overlap(a, b string) bool {
	at := strings.Split(a, ".")
	bt := strings.Split(b, ".")
	for i := 0; ; i++ {
		switch {
		case i == len(at) || i == len(bt):
			// Both ended together: the same number of tokens, each pair
			// compatible. One ended first: the other's remaining tokens
			// need at least one more literal token.
			return len(at) == len(bt)
		case at[i] == ">" || bt[i] == ">":
			return true // '>' takes this and any further tokens
		case at[i] != "*" && bt[i] != "*" && at[i] != bt[i]:
			return false
		}
	}
}
