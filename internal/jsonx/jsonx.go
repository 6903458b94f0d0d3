// Package jsonx is nats-sink's one JSON parser and encoder: the strict parser
// of docs/formats.md#json-encoding (payloads, encryption envelopes, configuration
// files) and the canonical encoder of docs/formats.md#json-encoding (sorted keys, compact or
// pretty layout, utf8 or ascii flavour, Python-compatible float rendering).
//
// Parsed values are nil, bool, string, Integer, float64, []any and
// map[string]any (Object, members in key order, with ParseSorted; Number
// instead of float64, with ParseExact). Integers
// keep every digit, so Parse followed by Marshal is lossless for everything
// except insignificant whitespace, key order and the spelling of floats and
// escapes, which Marshal canonicalises.
//
// AppendOrdered writes the same values with another member order
// (KeyOrder): PostgreSQL's jsonb order, for text bound to jsonb columns.
// AppendCanonical goes from JSON text to its encoding without a tree, for
// payloads that are re-encoded but never inspected.
package jsonx

import (
	"errors"
	"strconv"
)

// Flavour selects how the encoder escapes strings.
type Flavour int

const (
	// UTF8 escapes only '"', '\\' and U+0000–U+001F.
	UTF8 Flavour = iota + 1
	// ASCII additionally escapes every code point >= U+007F as \uxxxx
	// (surrogate pairs above U+FFFF).
	ASCII
)

// Limits of the strict parser (docs/formats.md#json-encoding).
const (
	// MaxDepth is the deepest nesting of arrays and objects Parse accepts:
	// a document with MaxDepth nested containers is valid, one more is not.
	MaxDepth = 1000
	// MaxIntegerDigits is the most digits (sign not counted) an integer
	// token may have.
	MaxIntegerDigits = 4300
)

// Integer is an exact JSON integer as decimal text, as parsed ("-0" becomes
// "0"). The encoder writes it unchanged, so a hand-built Integer must be a
// valid JSON integer token.
type Integer string

// Number is a JSON number token with a fraction or an exponent, exactly as
// written ("42.50", "7e2", "-0.0"); ParseExact returns it where Parse
// returns float64. The encoder writes the float64 nearest to it, as it
// writes the float64 Parse would have returned, so a tree from ParseExact
// encodes exactly like one from Parse. A hand-built Number must be a valid
// JSON number token within the float64 range.
type Number string

// Float returns the float64 nearest to n (ties to even).
func (n Number) Float() float64 {
	f, _ := strconv.ParseFloat(string(n), 64)
	return f
}

// Raw is JSON text that the compact encoders (Append, Marshal) write as it
// is: a value encoded beforehand, for a document built around it, such as
// a payload from AppendCanonical. The encoder does not look inside: Raw
// must be one valid JSON value in the flavour and member order of the
// document it goes into. The pretty encoders and AppendOrdered with
// JSONBOrder would not re-indent or reorder it; do not give it to them.
type Raw []byte

// SyntaxError reports input that is not strict JSON. Error() reads
// "invalid JSON at line L column C: <reason>" (1-based line and column).
// Lines are counted by '\n'; Column counts bytes, not characters, from the
// start of the line, so a multi-byte character before the error position
// advances it by more than one.
type SyntaxError struct {
	Line, Column int
	Reason       string
}

func (e *SyntaxError) Error() string {
	return "invalid JSON at line " + strconv.Itoa(e.Line) + " column " + strconv.Itoa(e.Column) + ": " + e.Reason
}

// PathError reports a duplicate key or a NaN/Infinity constant at a
// configuration-style path: "(root)", "nats", "sink.headers.X-Tenant",
// "nats.urls[1]". Error() reads "<path>: <message>".
//
// Keys appear literally (no quoting), so a key containing "." or "[" makes
// the path ambiguous; this matches the configuration error format of
// docs/configuration.md#how-a-file-is-loaded. Elements of a root-level array have paths "[0]", "[1]"…
type PathError struct {
	Path, Message string
}

func (e *PathError) Error() string { return e.Path + ": " + e.Message }

// ErrNotUTF8 is returned for input that is not valid UTF-8 or starts with a
// byte-order mark.
var ErrNotUTF8 = errors.New("not valid UTF-8 JSON")
