package jsonx

import (
	"fmt"
	"math"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// maxEncodeDepth bounds the encoder's recursion. Parsed values nest at most
// MaxDepth deep and records wrap them in a few more levels; anything deeper
// is almost certainly a cyclic map or slice, which would otherwise end in a
// fatal, unrecoverable stack overflow instead of a panic.
const maxEncodeDepth = 10 * MaxDepth

// Marshal returns the compact canonical encoding of v. v may be built from
// nil, bool, string, Integer, int, int64, uint64, float64, []any, []string,
// Object, map[string]any and map[string]string; any other type panics (a
// programming error). Floats must be finite. Objects are written in key
// order whatever their member order (see Object).
//
// *string, *int64, *uint64 and *float64 encode as the value they point to
// (null when nil). A pointer fits in an interface without the heap
// allocation that boxing a string or a large integer costs, so record
// builders point at envelope fields instead of copying them.
//
// Strings should be valid UTF-8. Should one not be, each maximal invalid
// subsequence (the rule of docs/formats.md#metadata-document) is written as U+FFFD, so the
// output is always valid JSON.
func Marshal(v any, f Flavour) []byte {
	buf := scratch.Get().(*[]byte)
	defer release(buf)
	*buf = Append((*buf)[:0], v, f)
	return detach(*buf)
}

// MarshalExact is Marshal, except that each Number is written as its token,
// not as the canonical float nearest to it. It hands a document from
// ParseExact on to a reader that needs every number as written (the
// configuration loader passing a sink object to its decoder); it is not the
// canonical encoding.
func MarshalExact(v any, f Flavour) []byte {
	buf := scratch.Get().(*[]byte)
	defer release(buf)
	e := encoder{ascii: isASCII(f), exact: true}
	*buf = e.value((*buf)[:0], v, 0)
	return detach(*buf)
}

// MarshalPretty returns the pretty canonical encoding of v: two-space indent,
// one item per line, ": " between key and value, empty containers as {} and [].
// There is no trailing newline.
func MarshalPretty(v any, f Flavour) []byte {
	buf := scratch.Get().(*[]byte)
	defer release(buf)
	*buf = AppendPretty((*buf)[:0], v, f)
	return detach(*buf)
}

// scratch holds the buffers Marshal encodes into before copying the result
// once to a slice of the exact size. A file record with metadata is 1.5–3
// KB, so growing a small buffer instead cost four allocations and copies;
// a stack array escapes (the encoder passes dst through interface values),
// so it cost a 4 KB allocation per call.
var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxScratch bounds the buffers kept in scratch: one grown by a large
// document is left to the GC.
const maxScratch = 64 << 10

func release(buf *[]byte) {
	if cap(*buf) <= maxScratch {
		scratch.Put(buf)
	}
}

// slack is spare capacity in Marshal's result, so that a caller appending a
// newline (file records, JSON lines) does not copy the record again.
const slack = 8

// detach copies b, a pooled buffer, to a new slice.
func detach(b []byte) []byte {
	return append(make([]byte, 0, len(b)+slack), b...)
}

// Append appends the compact canonical encoding of v to dst.
func Append(dst []byte, v any, f Flavour) []byte {
	e := encoder{ascii: isASCII(f)}
	return e.value(dst, v, 0)
}

// AppendPretty appends the pretty canonical encoding of v to dst (see
// MarshalPretty).
func AppendPretty(dst []byte, v any, f Flavour) []byte {
	e := encoder{ascii: isASCII(f), pretty: true}
	return e.value(dst, v, 0)
}

// AppendString appends s as a JSON string literal in flavour f.
func AppendString(dst []byte, s string, f Flavour) []byte {
	return appendString(dst, s, isASCII(f))
}

func isASCII(f Flavour) bool {
	switch f {
	case UTF8:
		return false
	case ASCII:
		return true
	}
	panic("jsonx: invalid Flavour " + strconv.Itoa(int(f)))
}

// encoder carries the per-call state: the flavour, the layout and one key
// buffer shared by every map in the value, used as a stack (each map sorts
// its keys in the region above its parent's and truncates on return). The
// buffer is allocated at the first map: a value built from Objects, the
// hot path, needs none. (A stack array does not help: it escapes.)
// order is the member order of objects: canonical except in AppendOrdered.
type encoder struct {
	ascii  bool
	pretty bool
	exact  bool // Numbers as their tokens (MarshalExact)
	order  KeyOrder
	keys   []string
}

func (e *encoder) value(dst []byte, v any, depth int) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		if x {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case string:
		return appendString(dst, x, e.ascii)
	case Integer:
		return append(dst, x...)
	case int:
		return strconv.AppendInt(dst, int64(x), 10)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case uint64:
		return strconv.AppendUint(dst, x, 10)
	case float64:
		return AppendFloat(dst, x)
	case Number:
		if e.exact {
			return append(dst, x...)
		}
		return AppendFloat(dst, x.Float())
	case *string:
		if x == nil {
			return append(dst, "null"...)
		}
		return appendString(dst, *x, e.ascii)
	case *int64:
		if x == nil {
			return append(dst, "null"...)
		}
		return strconv.AppendInt(dst, *x, 10)
	case *uint64:
		if x == nil {
			return append(dst, "null"...)
		}
		return strconv.AppendUint(dst, *x, 10)
	case *float64:
		if x == nil {
			return append(dst, "null"...)
		}
		return AppendFloat(dst, *x)
	case Raw:
		return append(dst, x...)
	case Object:
		if len(x) == 0 {
			return append(dst, "{}"...)
		}
		checkDepth(depth)
		if e.order == JSONBOrder {
			return e.jsonbObject(dst, x, depth)
		}
		x = x.canonical()
		dst = append(dst, '{')
		for i := range x {
			dst = e.key(dst, x[i].Key, i, depth)
			dst = e.value(dst, x[i].Value, depth+1)
		}
		return e.close(dst, '}', depth)
	case map[string]any:
		if len(x) == 0 {
			return append(dst, "{}"...)
		}
		start := sortedKeys(e, x, depth)
		dst = append(dst, '{')
		for i := range len(x) {
			k := e.keys[start+i] // index, not a subslice: nested maps may grow e.keys
			dst = e.key(dst, k, i, depth)
			dst = e.value(dst, x[k], depth+1)
		}
		clear(e.keys[start:])
		e.keys = e.keys[:start]
		return e.close(dst, '}', depth)
	case map[string]string:
		if len(x) == 0 {
			return append(dst, "{}"...)
		}
		start := sortedKeys(e, x, depth)
		dst = append(dst, '{')
		for i := range len(x) {
			k := e.keys[start+i]
			dst = e.key(dst, k, i, depth)
			dst = appendString(dst, x[k], e.ascii)
		}
		clear(e.keys[start:])
		e.keys = e.keys[:start]
		return e.close(dst, '}', depth)
	case []any:
		if len(x) == 0 {
			return append(dst, "[]"...)
		}
		checkDepth(depth)
		dst = append(dst, '[')
		for i, item := range x {
			dst = e.item(dst, i, depth)
			dst = e.value(dst, item, depth+1)
		}
		return e.close(dst, ']', depth)
	case []string:
		if len(x) == 0 {
			return append(dst, "[]"...)
		}
		dst = append(dst, '[')
		for i, item := range x {
			dst = e.item(dst, i, depth)
			dst = appendString(dst, item, e.ascii)
		}
		return e.close(dst, ']', depth)
	}
	panic(fmt.Sprintf("jsonx: cannot encode value of type %T", v))
}

// sortedKeys pushes m's keys onto e.keys, sorts them in the encoder's key
// order and returns where they start.
func sortedKeys[V any](e *encoder, m map[string]V, depth int) int {
	checkDepth(depth)
	if e.keys == nil {
		e.keys = make([]string, 0, max(32, len(m)))
	}
	start := len(e.keys)
	for k := range m {
		e.keys = append(e.keys, k)
	}
	SortKeys(e.keys[start:], e.order)
	return start
}

func checkDepth(depth int) {
	if depth >= maxEncodeDepth {
		panic("jsonx: value nested deeper than " + strconv.Itoa(maxEncodeDepth) + " levels (cyclic?)")
	}
}

// item writes what precedes the i-th element of a container.
func (e *encoder) item(dst []byte, i, depth int) []byte {
	if i > 0 {
		dst = append(dst, ',')
	}
	if e.pretty {
		dst = indent(dst, depth+1)
	}
	return dst
}

// key writes what precedes the i-th member's value: separator, key and colon.
func (e *encoder) key(dst []byte, k string, i, depth int) []byte {
	dst = e.item(dst, i, depth)
	dst = appendString(dst, k, e.ascii)
	if e.pretty {
		return append(dst, ':', ' ')
	}
	return append(dst, ':')
}

func (e *encoder) close(dst []byte, c byte, depth int) []byte {
	if e.pretty {
		dst = indent(dst, depth)
	}
	return append(dst, c)
}

// indent starts a new line indented two spaces per level.
func indent(dst []byte, level int) []byte {
	dst = append(dst, '\n')
	for range level {
		dst = append(dst, ' ', ' ')
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// appendString writes s quoted. Runs of bytes that need no escaping are
// copied in one append; that is nearly every byte of typical data.
func appendString(dst []byte, s string, ascii bool) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		// Skip eight plain bytes at a time: subjects, digests, base64 and
		// most payload text are long runs of them.
		for i+8 <= len(s) && plain8(s[i:i+8]) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < 0x7f {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			if c == 0x7f && !ascii {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = appendU(dst, rune(c))
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			if ascii {
				dst = appendU(dst, utf8.RuneError)
			} else {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			}
			i += maximalSubpart(s[i:])
			start = i
			continue
		}
		if !ascii {
			i += size
			continue
		}
		dst = append(dst, s[start:i]...)
		if r > 0xffff {
			hi, lo := utf16.EncodeRune(r)
			dst = appendU(appendU(dst, hi), lo)
		} else {
			dst = appendU(dst, r)
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// SWAR constants: every byte 0x01, every byte 0x80.
const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// plain8 reports whether none of the 8 bytes of s needs attention from
// appendString: no control character, '"', '\\', DEL or non-ASCII byte.
// It tests all eight at once on one 64-bit word (the byte loads combine
// into one): a byte b < n sets its high bit in (x - n*lsb) &^ x, exact for
// n <= 0x80 when no byte has its high bit set, which x&msb rules out first.
func plain8(s string) bool {
	_ = s[7]
	x := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
	if x&msb != 0 {
		return false
	}
	hasZero := func(v uint64) uint64 { return (v - lsb) &^ v & msb }
	return (x-0x20*lsb)&^x&msb|hasZero(x^('"'*lsb))|hasZero(x^('\\'*lsb))|hasZero(x^(0x7f*lsb)) == 0
}

// appendU writes r (<= U+FFFF) as \uxxxx with lower-case hex.
func appendU(dst []byte, r rune) []byte {
	return append(dst, '\\', 'u',
		hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
}

// maximalSubpart returns the length of the maximal subpart of an ill-formed
// UTF-8 sequence at the start of s (Unicode docs/formats.md#metadata-document, "U+FFFD substitution of
// maximal subparts"): the longest prefix that could begin a well-formed
// sequence, or 1. s must start with an invalid sequence.
func maximalSubpart(s string) int {
	lo, hi := byte(0x80), byte(0xbf)
	need := 0
	switch c := s[0]; {
	case c >= 0xc2 && c <= 0xdf:
		need = 1
	case c == 0xe0:
		need, lo = 2, 0xa0
	case c == 0xed:
		need, hi = 2, 0x9f
	case c >= 0xe1 && c <= 0xef:
		need = 2
	case c == 0xf0:
		need, lo = 3, 0x90
	case c == 0xf4:
		need, hi = 3, 0x8f
	case c >= 0xf1 && c <= 0xf3:
		need = 3
	default:
		return 1
	}
	n := 1
	for n <= need && n < len(s) && s[n] >= lo && s[n] <= hi {
		lo, hi = 0x80, 0xbf
		n++
	}
	return n
}

// FormatFloat renders f like Python's repr (docs/formats.md#json-encoding): "0.0", "42.5",
// "1e-05", "1e+16". It panics if f is NaN or infinite.
func FormatFloat(f float64) string {
	var buf [32]byte
	return string(AppendFloat(buf[:0], f))
}

// AppendFloat appends FormatFloat(f) to dst.
func AppendFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		panic("jsonx: cannot encode non-finite float " + strconv.FormatFloat(f, 'g', -1, 64))
	}
	if f == 0 {
		if math.Signbit(f) {
			return append(dst, "-0.0"...)
		}
		return append(dst, "0.0"...)
	}
	// Shortest round-trip digits in exponent form: [-]d[.ddd]e±dd[d].
	// Go writes at least two exponent digits with a sign, which is exactly
	// Python's exponent form, so only the fixed range needs rewriting.
	var buf [32]byte
	b := strconv.AppendFloat(buf[:0], f, 'e', -1, 64)
	if b[0] == '-' {
		dst = append(dst, '-')
		b = b[1:]
	}
	ei := len(b) - 4 // 'e' is followed by a sign and two or three digits
	if b[ei] != 'e' {
		ei--
	}
	exp := 0
	for _, c := range b[ei+2:] {
		exp = exp*10 + int(c-'0')
	}
	if b[ei+1] == '-' {
		exp = -exp
	}
	if exp < -4 || exp >= 16 {
		return append(dst, b...)
	}
	// Mantissa digits without the point: b[0] and b[2:ei] when there is a
	// fraction.
	var digs [20]byte
	d := append(digs[:0], b[0])
	if ei > 1 {
		d = append(d, b[2:ei]...)
	}
	point := exp + 1 // digits before the decimal point
	switch {
	case point <= 0:
		dst = append(dst, '0', '.')
		for range -point {
			dst = append(dst, '0')
		}
		return append(dst, d...)
	case point >= len(d):
		dst = append(dst, d...)
		for range point - len(d) {
			dst = append(dst, '0')
		}
		return append(dst, '.', '0')
	default:
		dst = append(dst, d[:point]...)
		dst = append(dst, '.')
		return append(dst, d[point:]...)
	}
}
