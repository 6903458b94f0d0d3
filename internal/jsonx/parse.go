package jsonx

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Reasons carried by SyntaxError. They are lower-case and never quote more
// than one character of the input: a payload or a secret-bearing config
// value must not leak through an error message.
const (
	reasonEOF        = "unexpected end of input"
	reasonValue      = "expecting a value"
	reasonKey        = "expecting a property name in double quotes"
	reasonColon      = "expecting ':' after a property name"
	reasonObjectSep  = "expecting ',' or '}'"
	reasonArraySep   = "expecting ',' or ']'"
	reasonExtra      = "unexpected data after the JSON value"
	reasonUntermStr  = "unterminated string"
	reasonControl    = "control character in string"
	reasonEscape     = "invalid escape in string"
	reasonUEscape    = "invalid \\u escape in string"
	reasonSurrogate  = "unpaired UTF-16 surrogate escape in string"
	reasonDigit      = "expecting a digit"
	reasonRange      = "number out of range"
	reasonIntDigits  = "integer has more than 4300 digits"
	reasonDepth      = "nesting deeper than 1000 levels"
	messageConstant  = "non-standard JSON constant is not allowed"
	messageDuplicate = "duplicate key "
)

// Parse parses one strict JSON document and returns its value as nil, bool,
// string, Integer, float64, []any or map[string]any.
//
// The input must be UTF-8 without a byte-order mark (else ErrNotUTF8; this is
// checked before any syntax, like decoding a file before parsing it). A
// duplicate key or a NaN/Infinity/-Infinity literal is a *PathError; every
// other problem, including the limits MaxDepth and MaxIntegerDigits, a
// non-integer number that overflows float64, raw control characters in
// strings and unpaired surrogate escapes, is a *SyntaxError.
//
// Problems are reported in document order, with one exception: a duplicate
// key is reported when its object is complete, so a syntax error or
// non-standard constant later inside the same object wins. That is what a
// parser that checks each finished object for duplicates reports, and it
// keeps the more fundamental "this is not JSON" error in front.
func Parse(data []byte) (any, error) {
	return parse(data, false)
}

// ParseSorted is Parse, except that objects are returned as Object with
// members sorted by key instead of map[string]any. It accepts and rejects
// exactly what Parse does, with the same errors. Encoding its result skips
// the per-object key sort and map lookups, which makes it the cheaper choice
// for a document that is parsed only to be re-encoded canonically (a
// message payload); a caller that looks keys up wants Parse.
func ParseSorted(data []byte) (any, error) {
	return parse(data, true)
}

// ParseExact is Parse, except that a number token with a fraction or an
// exponent is returned as Number, its text exactly as written, instead of
// float64. It accepts and rejects exactly what Parse does (a float token
// that overflows float64 is still an error), so a document is JSON for
// ParseExact when it is for Parse. Consumers that need a number's exact
// decimal value (a mapped numeric column: 9007199254740993.0 is exactly
// that integer, which no float64 holds) read it from the token.
func ParseExact(data []byte) (any, error) {
	return parseWith(data, false, true)
}

// ParseSortedExact is ParseExact with objects as Object in key order, as
// ParseSorted returns them: the cheaper form for a reader that looks up a
// few members (a mapped row's pointers) in a small document.
func ParseSortedExact(data []byte) (any, error) {
	return parseWith(data, true, true)
}

func parse(data []byte, sorted bool) (any, error) {
	return parseWith(data, sorted, false)
}

func parseWith(data []byte, sorted, exact bool) (any, error) {
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) || !utf8.Valid(data) {
		return nil, ErrNotUTF8
	}
	// One copy of the input backs every string and Integer without escapes
	// (substrings share it): one allocation instead of one per token. The
	// caller's buffer is not retained, so it may be reused at once.
	p := parser{data: data, src: string(data), sorted: sorted, exact: exact}
	p.skipSpace()
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos < len(p.data) {
		return nil, p.syntaxError(p.pos, reasonExtra)
	}
	return v, nil
}

// parser is a recursive-descent parser over input already known to be valid
// UTF-8, so string contents can be copied without re-validation.
type parser struct {
	data  []byte
	src   string // string(data)
	pos   int
	depth int
	// path locates the value being parsed; it is rendered only for a
	// PathError, so keeping it costs one slice write per member.
	path []segment
	// buf is scratch space for strings with escapes, reused across strings.
	buf []byte
	// sorted makes objects Objects in key order instead of maps.
	sorted bool
	// exact keeps float tokens as Number (ParseExact).
	exact bool
}

// segment is one step of a path: an object key, or an array index when
// index >= 0.
type segment struct {
	key   string
	index int
}

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value() (any, error) {
	if p.pos >= len(p.data) {
		return nil, p.syntaxError(p.pos, reasonEOF)
	}
	switch c := p.data[p.pos]; c {
	case '{':
		return p.object()
	case '[':
		return p.array()
	case '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return s, nil
	case 't':
		return p.literal("true", true)
	case 'f':
		return p.literal("false", false)
	case 'n':
		return p.literal("null", nil)
	case 'N':
		return nil, p.constant("NaN")
	case 'I':
		return nil, p.constant("Infinity")
	case '-':
		if p.pos+1 < len(p.data) && p.data[p.pos+1] == 'I' {
			return nil, p.constant("-Infinity")
		}
		return p.number()
	default:
		if c >= '0' && c <= '9' {
			return p.number()
		}
		return nil, p.unexpected(reasonValue)
	}
}

func (p *parser) literal(word string, v any) (any, error) {
	if !bytes.HasPrefix(p.data[p.pos:], []byte(word)) {
		return nil, p.unexpected(reasonValue)
	}
	p.pos += len(word)
	return v, nil
}

// constant reports NaN, Infinity or -Infinity at the current path, or a
// syntax error when the input only starts like one.
func (p *parser) constant(word string) error {
	if !bytes.HasPrefix(p.data[p.pos:], []byte(word)) {
		return p.unexpected(reasonValue)
	}
	return &PathError{Path: p.pathString(), Message: messageConstant}
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxDepth {
		return p.syntaxError(p.pos, reasonDepth)
	}
	return nil
}

func (p *parser) object() (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	if p.sorted {
		return p.objectSorted()
	}
	p.pos++ // '{'
	m := make(map[string]any)
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		p.depth--
		return m, nil
	}
	p.path = append(p.path, segment{index: -1})
	top := len(p.path) - 1
	dup, dupKey := false, ""
	for {
		key, v, err := p.member(top)
		if err != nil {
			return nil, err
		}
		// One map operation detects the duplicate: the size stays the same.
		// Overwriting is harmless because the document is rejected anyway.
		n := len(m)
		m[key] = v
		if len(m) == n && !dup {
			dup, dupKey = true, key
		}
		more, err := p.objectSep()
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
	}
	p.path = p.path[:top]
	p.depth--
	if dup {
		return nil, &PathError{Path: p.pathString(), Message: messageDuplicate + `"` + dupKey + `"`}
	}
	return m, nil
}

// member parses `"key": value` at p.pos, recording key as path segment top
// while the value is parsed.
func (p *parser) member(top int) (string, any, error) {
	if p.pos >= len(p.data) {
		return "", nil, p.syntaxError(p.pos, reasonEOF)
	}
	if p.data[p.pos] != '"' {
		return "", nil, p.unexpected(reasonKey)
	}
	key, err := p.str()
	if err != nil {
		return "", nil, err
	}
	p.skipSpace()
	if p.pos >= len(p.data) {
		return "", nil, p.syntaxError(p.pos, reasonEOF)
	}
	if p.data[p.pos] != ':' {
		return "", nil, p.unexpected(reasonColon)
	}
	p.pos++
	p.skipSpace()
	p.path[top].key = key
	v, err := p.value()
	if err != nil {
		return "", nil, err
	}
	return key, v, nil
}

// objectSep consumes what follows a member: ',' (more is true) or '}'.
func (p *parser) objectSep() (more bool, err error) { return p.separator('}', reasonObjectSep) }

// separator consumes what follows a container's item: ',' (more is true,
// and the space after it) or the container's closing byte; anything else
// is a syntax error with reason.
func (p *parser) separator(closing byte, reason string) (more bool, err error) {
	p.skipSpace()
	if p.pos >= len(p.data) {
		return false, p.syntaxError(p.pos, reasonEOF)
	}
	switch p.data[p.pos] {
	case ',':
		p.pos++
		p.skipSpace()
		return true, nil
	case closing:
		p.pos++
		return false, nil
	}
	return false, p.unexpected(reason)
}

// insertLimit is the largest object objectSorted keeps sorted by insertion.
// Insertion costs O(n) per out-of-order key, so a large object in random
// key order (a hostile payload of 100k keys) switches to a map for the
// duplicate check and one sort at the end.
const insertLimit = 32

// objectSorted is object for ParseSorted: members go into an Object kept in
// key order. Keys that arrive ascending (canonical producers, and most
// hand-written JSON up to a few keys) are appended; others are inserted by
// binary search, which also finds duplicates. The duplicate reported is the
// same as object's: the first key, in document order, seen before.
func (p *parser) objectSorted() (any, error) {
	p.pos++ // '{'
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		p.depth--
		return Object{}, nil
	}
	o := make(Object, 0, 8)
	var seen map[string]struct{} // set once o outgrows insertLimit out of order
	unsorted := false            // o has an unsorted tail (only with seen)
	p.path = append(p.path, segment{index: -1})
	top := len(p.path) - 1
	dup, dupKey := false, ""
	for {
		key, v, err := p.member(top)
		if err != nil {
			return nil, err
		}
		// A duplicate breaks out of the switch without storing the member:
		// the document is rejected once the object is complete.
		switch n := len(o); {
		case seen != nil:
			if _, ok := seen[key]; ok {
				if !dup {
					dup, dupKey = true, key
				}
				break
			}
			seen[key] = struct{}{}
			o = append(o, Member{key, v})
			unsorted = true
		case n == 0 || o[n-1].Key < key:
			o = append(o, Member{key, v})
		case n < insertLimit:
			i, found := slices.BinarySearchFunc(o, key, func(m Member, k string) int { return strings.Compare(m.Key, k) })
			if found {
				if !dup {
					dup, dupKey = true, key
				}
				break
			}
			o = slices.Insert(o, i, Member{key, v})
		default:
			seen = make(map[string]struct{}, 2*n)
			for _, m := range o {
				seen[m.Key] = struct{}{}
			}
			if _, ok := seen[key]; ok {
				if !dup {
					dup, dupKey = true, key
				}
				break
			}
			seen[key] = struct{}{}
			o = append(o, Member{key, v})
			unsorted = true
		}
		more, err := p.objectSep()
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
	}
	p.path = p.path[:top]
	p.depth--
	if dup {
		return nil, &PathError{Path: p.pathString(), Message: messageDuplicate + `"` + dupKey + `"`}
	}
	if unsorted {
		slices.SortFunc(o, compareMembers)
	}
	return o, nil
}

func (p *parser) array() (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.pos++ // '['
	a := make([]any, 0, 4)
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		p.depth--
		return a, nil
	}
	p.path = append(p.path, segment{})
	top := len(p.path) - 1
	for {
		p.path[top].index = len(a)
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		more, err := p.arraySep()
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
	}
	p.path = p.path[:top]
	p.depth--
	return a, nil
}

// arraySep reads what follows an array item: ',' (more items follow) or
// ']' (the array ends).
func (p *parser) arraySep() (more bool, err error) { return p.separator(']', reasonArraySep) }

// str parses the string starting at the opening quote at p.pos. Strings
// without escapes, the common case, are sliced and converted once.
func (p *parser) str() (string, error) {
	start := p.pos
	for i := start + 1; i < len(p.data); i++ {
		switch c := p.data[i]; {
		case c == '"':
			p.pos = i + 1
			return p.src[start+1 : i], nil
		case c == '\\':
			return p.strEscaped(start, i)
		case c < 0x20:
			return "", p.syntaxError(i, reasonControl)
		}
	}
	return "", p.syntaxError(start, reasonUntermStr)
}

// strEscaped continues str from the first backslash at i.
func (p *parser) strEscaped(start, i int) (string, error) {
	buf := append(p.buf[:0], p.data[start+1:i]...)
	defer func() { p.buf = buf[:0] }()
	for i < len(p.data) {
		c := p.data[i]
		switch {
		case c == '"':
			p.pos = i + 1
			return string(buf), nil
		case c < 0x20:
			return "", p.syntaxError(i, reasonControl)
		case c != '\\':
			buf = append(buf, c)
			i++
			continue
		}
		r, n, err := p.escape(start, i)
		if err != nil {
			return "", err
		}
		buf = utf8.AppendRune(buf, r)
		i += n
	}
	return "", p.syntaxError(start, reasonUntermStr)
}

// escape decodes the escape sequence at data[i] (a backslash) of the
// string starting at start: the rune it stands for and its length (2, 6,
// or 12 for a surrogate pair). A high surrogate must be followed at once by
// an escaped low surrogate; a lone one is an error.
func (p *parser) escape(start, i int) (rune, int, error) {
	if i+1 >= len(p.data) {
		return 0, 0, p.syntaxError(start, reasonUntermStr)
	}
	switch p.data[i+1] {
	case '"', '\\', '/':
		return rune(p.data[i+1]), 2, nil
	case 'b':
		return '\b', 2, nil
	case 'f':
		return '\f', 2, nil
	case 'n':
		return '\n', 2, nil
	case 'r':
		return '\r', 2, nil
	case 't':
		return '\t', 2, nil
	case 'u':
		r, ok := p.hex4(i + 2)
		if !ok {
			return 0, 0, p.syntaxError(i, reasonUEscape)
		}
		if !utf16.IsSurrogate(r) {
			return r, 6, nil
		}
		lo, ok := rune(0), false
		if r < 0xdc00 && i+7 < len(p.data) && p.data[i+6] == '\\' && p.data[i+7] == 'u' {
			lo, ok = p.hex4(i + 8)
		}
		if !ok || lo < 0xdc00 || lo > 0xdfff {
			return 0, 0, p.syntaxError(i, reasonSurrogate)
		}
		return utf16.DecodeRune(r, lo), 12, nil
	}
	return 0, 0, p.syntaxError(i, reasonEscape)
}

// hex4 decodes the four hex digits at i.
func (p *parser) hex4(i int) (rune, bool) {
	if i+4 > len(p.data) {
		return 0, false
	}
	var r rune
	for _, c := range p.data[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// number parses a number token. Tokens without '.', 'e' or 'E' are kept
// exactly as Integer; the others become float64.
func (p *parser) number() (any, error) {
	start := p.pos
	i, isFloat, err := p.scanNumber()
	if err != nil {
		return nil, err
	}
	if !isFloat {
		if p.isNegativeZero(start, i) {
			p.pos = i
			return Integer("0"), nil
		}
		p.pos = i
		return Integer(p.src[start:i]), nil
	}
	f, err := p.float(start, i)
	if err != nil {
		return nil, err
	}
	p.pos = i
	if p.exact {
		return Number(p.src[start:i]), nil
	}
	return f, nil
}

// scanNumber checks the number token at p.pos against the JSON grammar and
// returns its end and whether it is a float (has '.', 'e' or 'E'). An
// integer longer than MaxIntegerDigits digits is an error. It does not
// move p.pos.
func (p *parser) scanNumber() (end int, isFloat bool, err error) {
	data := p.data
	start, i := p.pos, p.pos
	if data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && data[i] >= '1' && data[i] <= '9':
		i = digits(data, i)
	default:
		return 0, false, p.digitError(i)
	}
	if i < len(data) && data[i] == '.' {
		isFloat = true
		i++
		if i >= len(data) || data[i] < '0' || data[i] > '9' {
			return 0, false, p.digitError(i)
		}
		i = digits(data, i)
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		isFloat = true
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) || data[i] < '0' || data[i] > '9' {
			return 0, false, p.digitError(i)
		}
		i = digits(data, i)
	}
	if !isFloat {
		n := i - start
		if data[start] == '-' {
			n--
		}
		if n > MaxIntegerDigits {
			return 0, false, p.syntaxError(start, reasonIntDigits)
		}
	}
	return i, isFloat, nil
}

// isNegativeZero reports whether the integer token data[start:end] is
// "-0", which is kept as 0.
func (p *parser) isNegativeZero(start, end int) bool {
	return end-start == 2 && p.data[start] == '-' && p.data[start+1] == '0'
}

// float converts the float token data[start:end]. Underflow rounds to zero
// or a subnormal without error, as in every mainstream JSON reader; only
// overflow to ±Inf is rejected.
func (p *parser) float(start, end int) (float64, error) {
	var f float64
	var err error
	if p.src != "" {
		f, err = strconv.ParseFloat(p.src[start:end], 64)
	} else {
		// AppendCanonical's parser has no string copy of its input; a
		// short token converts on the stack.
		f, err = strconv.ParseFloat(string(p.data[start:end]), 64)
	}
	if err != nil || math.IsInf(f, 0) {
		return 0, p.syntaxError(start, reasonRange)
	}
	return f, nil
}

func digits(data []byte, i int) int {
	for i < len(data) && data[i] >= '0' && data[i] <= '9' {
		i++
	}
	return i
}

func (p *parser) digitError(i int) error {
	if i >= len(p.data) {
		return p.syntaxError(i, reasonEOF)
	}
	return p.syntaxError(i, reasonDigit)
}

// unexpected reports the character at p.pos (or the end of input) and what
// was expected instead.
func (p *parser) unexpected(expecting string) error {
	if p.pos >= len(p.data) {
		return p.syntaxError(p.pos, reasonEOF)
	}
	r, _ := utf8.DecodeRune(p.data[p.pos:])
	return p.syntaxError(p.pos, "unexpected character "+strconv.QuoteRune(r)+", "+expecting)
}

// syntaxError locates byte offset pos as a 1-based line and byte column.
func (p *parser) syntaxError(pos int, reason string) *SyntaxError {
	before := p.data[:pos]
	return &SyntaxError{
		Line:   1 + bytes.Count(before, []byte("\n")),
		Column: pos - bytes.LastIndexByte(before, '\n'),
		Reason: reason,
	}
}

// pathString renders p.path as "(root)", "a.b[2].c" or "[0].x".
func (p *parser) pathString() string {
	if len(p.path) == 0 {
		return "(root)"
	}
	var b []byte
	for i, s := range p.path {
		if s.index >= 0 {
			b = append(b, '[')
			b = strconv.AppendInt(b, int64(s.index), 10)
			b = append(b, ']')
			continue
		}
		if i > 0 {
			b = append(b, '.')
		}
		b = append(b, s.key...)
	}
	return string(b)
}
