package mapping

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/sink"
)

type sourceKind int

const (
	srcInvalid sourceKind = iota
	srcPointer
	srcSubject
	srcHeader
	srcPriority
	srcClassification
	srcLabels
	srcStreamSequence
	srcReceivedAt
)

// source is a parsed path: a JSON Pointer's reference tokens, or a special
// source (with the header name for $header:).
type source struct {
	kind   sourceKind
	tokens []string // srcPointer; empty = the whole payload
	header string   // srcHeader
}

// headerName is the rule for <Name> in $header:<Name> (an HTTP token).
var headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")

const sourceList = `must be "" or a JSON Pointer starting with "/", or one of $subject, $header:<Name>, $priority, $classification, $labels, $stream_sequence, $received_at`

// parseSource parses a configured path; the message, when not "", is the
// problem to report at the path.
func parseSource(path string) (source, string) {
	switch {
	case len(path) > 1024:
		return source{}, "must be at most 1024 characters"
	case strings.ContainsFunc(path, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return source{}, "must not contain control characters"
	case path == "":
		return source{kind: srcPointer}, ""
	case path[0] == '/':
		tokens, msg := ParsePointer(path)
		return source{kind: srcPointer, tokens: tokens}, msg
	case strings.HasPrefix(path, "$header:"):
		name := path[len("$header:"):]
		if !headerName.MatchString(name) {
			return source{}, fmt.Sprintf("header name must be 1 to 128 characters of an HTTP token (got %q)", name)
		}
		return source{kind: srcHeader, header: name}, ""
	}
	for k, name := range map[sourceKind]string{
		srcSubject: "$subject", srcPriority: "$priority", srcClassification: "$classification",
		srcLabels: "$labels", srcStreamSequence: "$stream_sequence", srcReceivedAt: "$received_at",
	} {
		if path == name {
			return source{kind: k}, ""
		}
	}
	return source{}, fmt.Sprintf("%s (got %q)", sourceList, path)
}

// ParsePointer splits an RFC 6901 JSON Pointer ("" or starting with "/")
// into its reference tokens, decoding ~1 to "/" and ~0 to "~". Any other
// "~" escape is the returned problem.
func ParsePointer(p string) ([]string, string) {
	if p == "" {
		return nil, ""
	}
	if p[0] != '/' {
		return nil, fmt.Sprintf("%s (got %q)", sourceList, p)
	}
	parts := strings.Split(p[1:], "/")
	for i, part := range parts {
		if !strings.Contains(part, "~") {
			continue
		}
		var b strings.Builder
		for j := 0; j < len(part); j++ {
			if part[j] != '~' {
				b.WriteByte(part[j])
				continue
			}
			if j+1 < len(part) && (part[j+1] == '0' || part[j+1] == '1') {
				b.WriteByte("~/"[part[j+1]-'0'])
				j++
				continue
			}
			esc := "~"
			if j+1 < len(part) {
				esc = part[j : j+2]
			}
			return nil, fmt.Sprintf("invalid JSON Pointer escape %q (only ~0 and ~1 are allowed)", esc)
		}
		parts[i] = b.String()
	}
	return parts, ""
}

// Lookup follows pointer tokens from v (a jsonx tree; a jsonx.Object must be
// in key order, as the sorted parsers return it). ok is false when the
// value is missing: an absent member, an index out of range or not of the
// form 0 or [1-9][0-9]*, "-", or a step into a scalar.
func Lookup(v any, tokens []string) (any, bool) {
	for _, tok := range tokens {
		switch x := v.(type) {
		case map[string]any:
			next, ok := x[tok]
			if !ok {
				return nil, false
			}
			v = next
		case jsonx.Object:
			// Objects from jsonx.ParseSorted* are in key order.
			i, ok := slices.BinarySearchFunc(x, tok, func(m jsonx.Member, k string) int { return strings.Compare(m.Key, k) })
			if !ok {
				return nil, false
			}
			v = x[i].Value
		case []any:
			i, ok := arrayIndex(tok)
			if !ok || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

func arrayIndex(tok string) (int, bool) {
	if tok == "" || len(tok) > 9 || (tok[0] == '0' && len(tok) > 1) {
		return 0, false // nine digits exceed every array the parser accepts
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return 0, false
		}
	}
	n, _ := strconv.Atoi(tok)
	return n, true
}

// stringSource reports whether the source yields a string (always converted
// with the lenient rules).
func (s source) stringSource() bool {
	switch s.kind {
	case srcSubject, srcHeader, srcPriority, srcClassification:
		return true
	}
	return false
}

// allows returns the problem with mapping this source to t, or "".
func (s source) allows(t Type) string {
	switch s.kind {
	case srcLabels:
		if t.Kind != Text && t.Kind != JSON {
			return fmt.Sprintf("$labels maps only to text or json (got %s)", t)
		}
	case srcStreamSequence:
		if !t.Kind.Numeric() && t.Kind != Text {
			return fmt.Sprintf("$stream_sequence maps only to bigint, integer, double, numeric(p,s) or text (got %s)", t)
		}
	case srcReceivedAt:
		switch t.Kind {
		case Timestamp, Date, BigInt, Text:
		default:
			return fmt.Sprintf("$received_at maps only to timestamp, date, bigint or text (got %s)", t)
		}
	}
	return ""
}

// receivedAt is the value of $received_at: the receive time, converted by
// the column's type rather than by the JSON rules.
type receivedAt time.Time

// value reads the source from e (and payload, for pointers). ok is false
// when the value is missing.
func (s source) value(e *sink.Envelope, payload any) (any, bool) {
	switch s.kind {
	case srcPointer:
		return Lookup(payload, s.tokens)
	case srcSubject:
		return e.Subject, true
	case srcHeader:
		return e.Headers.Get(s.header)
	case srcPriority:
		return e.Priority, e.Priority != ""
	case srcClassification:
		return e.Classification, e.Classification != ""
	case srcLabels:
		return e.Labels, len(e.Labels) > 0
	case srcStreamSequence:
		if e.StreamSequence == 0 {
			return nil, false
		}
		return jsonx.Integer(strconv.FormatUint(e.StreamSequence, 10)), true
	case srcReceivedAt:
		return receivedAt(e.ReceivedAt), true
	}
	return nil, false
}

// ReadsPayload reports whether a mapping item's path reads the payload (""
// or a JSON Pointer) rather than a special source such as $subject.
func ReadsPayload(path string) bool {
	return path == "" || path[0] == '/'
}
