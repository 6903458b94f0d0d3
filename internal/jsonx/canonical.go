package jsonx

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// AppendCanonical validates the JSON text data and appends its compact
// encoding in flavour f with object members in order o: exactly the bytes
// AppendOrdered(dst, v, f, o) writes for v, err := ParseSorted(data), and an
// error exactly when ParseSorted returns one (the same error; dst is then
// returned unchanged, truncated to its original length).
//
// It exists for payloads that are only re-encoded, never inspected: it
// scans the text once and writes each value as it goes, with no tree and
// no per-value allocation. Each object's members are written in document
// order and, when that is not order o, rearranged once the object closes,
// so a payload whose objects are already in order o is written straight
// through. data must not share memory with dst's spare capacity: the text
// is read while the encoding is written.
func AppendCanonical(dst []byte, data []byte, f Flavour, o KeyOrder) ([]byte, error) {
	o.check()
	ascii := isASCII(f)
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) || !utf8.Valid(data) {
		return dst, ErrNotUTF8
	}
	c := canons.Get().(*canon)
	c.start(data, ascii, o)
	out, err := c.document(dst)
	c.release()
	if err == errOverBudget {
		// A document of deeply nested objects, each out of order, would
		// move its inner bytes once per level; the tree is linear.
		v, err := ParseSorted(data)
		if err != nil {
			return dst, err
		}
		return AppendOrdered(dst, v, f, o), nil
	}
	if err != nil {
		return dst, err
	}
	return out, nil
}

// errOverBudget stops the streaming path when rearranging objects has moved
// more bytes than the budget allows; AppendCanonical then encodes a tree.
var errOverBudget = errors.New("jsonx: rearranging budget exceeded")

// Budget of bytes the rearranging of out-of-order objects may move, per
// input byte and fixed. Each out-of-order object copies its encoding out
// and back, counted once here, so an input byte costs one count per
// enclosing out-of-order object: typical payloads stay far below 8, and
// only a hostile one (hundreds of nested out-of-order objects around a
// large value) would go quadratic.
const (
	budgetPerByte = 8
	budgetFixed   = 4096
)

// canon is the state of one AppendCanonical call. The parser supplies the
// input, position, depth and the error constructors, so errors are the
// parser's own; its path is filled only when a PathError is built.
type canon struct {
	parser
	ascii bool
	order KeyOrder
	// stop is the per-byte table of what a string scan must look at:
	// '"', '\\', controls and, in the ASCII flavour, bytes >= 0x7f.
	stop *[256]bool
	// members holds the members of every open object, innermost last.
	members []member
	// frames is one entry per open container: the path to the value
	// being scanned, for the PathError of a NaN or duplicate key.
	frames []frame
	// keys holds the decoded keys of the open objects' members that
	// differ from their text (escapes; non-ASCII in the ASCII flavour):
	// other keys are read from the input.
	keys   []byte
	budget int
}

// member is one object member: its decoded key and its encoding
// `"key":value` at dst[start:end].
type member struct {
	key        span
	start, end int
}

// span is a decoded key: a range of the input, or of canon.keys.
type span struct {
	off, end int
	input    bool
}

// key returns the bytes of k.
func (c *canon) key(k span) []byte {
	if k.input {
		return c.data[k.off:k.end]
	}
	return c.keys[k.off:k.end]
}

// frame is one open container: an array at element index, or an object
// (index -1) at the member whose key is key.
type frame struct {
	index int
	key   span
}

var canons = sync.Pool{New: func() any {
	return &canon{members: make([]member, 0, 32), frames: make([]frame, 0, 8), keys: make([]byte, 0, 256)}
}}

// Limits on the scratch a pooled canon keeps: one grown by a huge document
// is left to the GC.
const (
	maxPooledMembers = 4096
	maxPooledKeys    = 64 << 10
)

// start readies a pooled canon for one call.
func (c *canon) start(data []byte, ascii bool, o KeyOrder) {
	c.parser = parser{data: data}
	c.ascii, c.order = ascii, o
	c.stop = &stopUTF8
	if ascii {
		c.stop = &stopASCII
	}
	c.members, c.frames, c.keys = c.members[:0], c.frames[:0], c.keys[:0]
	c.budget = budgetPerByte*len(data) + budgetFixed
}

// release returns c to the pool without a reference to the caller's input.
func (c *canon) release() {
	c.parser = parser{}
	if cap(c.members) <= maxPooledMembers && cap(c.keys) <= maxPooledKeys && cap(c.frames) <= 2*MaxDepth {
		canons.Put(c)
	}
}

// document is parse's body: one value, surrounded by optional whitespace.
func (c *canon) document(dst []byte) ([]byte, error) {
	p := &c.parser
	p.skipSpace()
	dst, err := c.value(dst)
	if err != nil {
		return dst, err
	}
	p.skipSpace()
	if p.pos < len(p.data) {
		return dst, p.syntaxError(p.pos, reasonExtra)
	}
	return dst, nil
}

// value is parser.value, writing the value instead of returning it.
func (c *canon) value(dst []byte) ([]byte, error) {
	p := &c.parser
	if p.pos >= len(p.data) {
		return dst, p.syntaxError(p.pos, reasonEOF)
	}
	switch ch := p.data[p.pos]; ch {
	case '{':
		return c.object(dst)
	case '[':
		return c.array(dst)
	case '"':
		dst, _, err := c.str(dst, false)
		return dst, err
	case 't':
		return c.literal(dst, "true")
	case 'f':
		return c.literal(dst, "false")
	case 'n':
		return c.literal(dst, "null")
	case 'N':
		return dst, c.constant("NaN")
	case 'I':
		return dst, c.constant("Infinity")
	case '-':
		if p.pos+1 < len(p.data) && p.data[p.pos+1] == 'I' {
			return dst, c.constant("-Infinity")
		}
		return c.number(dst)
	default:
		if ch >= '0' && ch <= '9' {
			return c.number(dst)
		}
		return dst, p.unexpected(reasonValue)
	}
}

func (c *canon) literal(dst []byte, word string) ([]byte, error) {
	p := &c.parser
	if !bytes.HasPrefix(p.data[p.pos:], []byte(word)) {
		return dst, p.unexpected(reasonValue)
	}
	p.pos += len(word)
	return append(dst, word...), nil
}

// constant is parser.constant, with the path taken from c.frames.
func (c *canon) constant(word string) error {
	p := &c.parser
	if !bytes.HasPrefix(p.data[p.pos:], []byte(word)) {
		return p.unexpected(reasonValue)
	}
	return &PathError{Path: c.path(), Message: messageConstant}
}

// path renders the open containers as parser.pathString does. It allocates,
// which is fine: it runs only to build an error.
func (c *canon) path() string {
	p := &c.parser
	p.path = make([]segment, len(c.frames))
	for i, f := range c.frames {
		p.path[i] = segment{index: f.index, key: string(c.key(f.key))}
	}
	return p.pathString()
}

// array is parser.array.
func (c *canon) array(dst []byte) ([]byte, error) {
	p := &c.parser
	if err := p.enter(); err != nil {
		return dst, err
	}
	p.pos++ // '['
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		p.depth--
		return append(dst, "[]"...), nil
	}
	c.frames = append(c.frames, frame{})
	top := len(c.frames) - 1
	dst = append(dst, '[')
	for n := 0; ; n++ {
		if n > 0 {
			dst = append(dst, ',')
		}
		c.frames[top].index = n
		var err error
		if dst, err = c.value(dst); err != nil {
			return dst, err
		}
		more, err := p.arraySep()
		if err != nil {
			return dst, err
		}
		if !more {
			break
		}
	}
	c.frames = c.frames[:top]
	p.depth--
	return append(dst, ']'), nil
}

// object is parser.objectSorted, writing members as they come. A member
// whose key does not follow its predecessor's in order o marks the object
// for rearranging when it closes. Duplicates are found as objectSorted
// finds them: the key reported is the first, in document order, seen
// before in the same object, and only once the object is complete.
func (c *canon) object(dst []byte) ([]byte, error) {
	p := &c.parser
	if err := p.enter(); err != nil {
		return dst, err
	}
	p.pos++ // '{'
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		p.depth--
		return append(dst, "{}"...), nil
	}
	open, base, keysBase := len(dst), len(c.members), len(c.keys)
	c.frames = append(c.frames, frame{index: -1})
	top := len(c.frames) - 1
	inOrder, dup := true, -1 // dup: index in c.members of the first repeated key found
	dst = append(dst, '{')
	for {
		if len(c.members) > base {
			dst = append(dst, ',')
		}
		start := len(dst)
		key, out, err := c.member(dst, top)
		dst = out
		if err != nil {
			return dst, err
		}
		c.members = append(c.members, member{key: key, start: start, end: len(dst)})
		if n := len(c.members); inOrder && dup < 0 && n-1 > base {
			switch cmp := c.compare(c.members[n-2].key, key); {
			case cmp == 0:
				dup = n - 1
			case cmp > 0:
				inOrder = false
			}
		}
		more, err := p.objectSep()
		if err != nil {
			return dst, err
		}
		if !more {
			break
		}
	}
	c.frames = c.frames[:top]
	p.depth--
	ms := c.members[base:]
	if !inOrder && dup < 0 {
		c.sort(ms)
		dup = c.firstRepeat(ms)
		if dup >= 0 {
			dup += base
		}
	}
	if dup >= 0 {
		k := c.members[dup].key
		return dst, &PathError{Path: c.path(), Message: messageDuplicate + `"` + string(c.key(k)) + `"`}
	}
	if inOrder {
		dst = append(dst, '}')
	} else {
		var err error
		if dst, err = c.rearrange(dst, open, ms); err != nil {
			return dst, err
		}
	}
	c.members, c.keys = c.members[:base], c.keys[:keysBase]
	return dst, nil
}

// member is parser.member: it writes `"key":value`, records the key in
// frame top while the value is scanned, and returns the decoded key.
func (c *canon) member(dst []byte, top int) (span, []byte, error) {
	p := &c.parser
	if p.pos >= len(p.data) {
		return span{}, dst, p.syntaxError(p.pos, reasonEOF)
	}
	if p.data[p.pos] != '"' {
		return span{}, dst, p.unexpected(reasonKey)
	}
	dst, key, err := c.str(dst, true)
	if err != nil {
		return span{}, dst, err
	}
	p.skipSpace()
	if p.pos >= len(p.data) {
		return span{}, dst, p.syntaxError(p.pos, reasonEOF)
	}
	if p.data[p.pos] != ':' {
		return span{}, dst, p.unexpected(reasonColon)
	}
	p.pos++
	p.skipSpace()
	c.frames[top].key = key
	dst = append(dst, ':')
	dst, err = c.value(dst)
	return key, dst, err
}

// compare orders two decoded keys in c.order. Decoded keys are valid UTF-8
// (the input is, and escapes decode to whole characters), so this is the
// comparison the encoder makes between the same keys.
func (c *canon) compare(a, b span) int {
	x, y := c.key(a), c.key(b)
	if c.order == JSONBOrder && len(x) != len(y) {
		if len(x) < len(y) {
			return -1
		}
		return 1
	}
	return bytes.Compare(x, y)
}

// compareMembers orders members by key, then by position: equal keys stay
// in document order, which firstRepeat relies on.
func (c *canon) compareMembers(a, b member) int {
	if r := c.compare(a.key, b.key); r != 0 {
		return r
	}
	return a.start - b.start
}

func (c *canon) sort(ms []member) {
	if len(ms) > 16 {
		slices.SortFunc(ms, c.compareMembers)
		return
	}
	// Insertion sort: objects are small, and often nearly in order.
	for i := 1; i < len(ms); i++ {
		for j := i; j > 0 && c.compareMembers(ms[j-1], ms[j]) > 0; j-- {
			ms[j-1], ms[j] = ms[j], ms[j-1]
		}
	}
}

// firstRepeat returns the index in ms (sorted) of the repeated key that
// comes first in the document, or -1. Within a run of equal keys, the
// second member is the earliest repeat.
func (c *canon) firstRepeat(ms []member) int {
	first := -1
	for i := 1; i < len(ms); i++ {
		if c.compare(ms[i-1].key, ms[i].key) == 0 && (first < 0 || ms[i].start < ms[first].start) {
			first = i
		}
	}
	return first
}

// rearrange rewrites the object at dst[open:], whose members ms are sorted,
// with its members in that order: it writes the sorted object after the
// current end and moves it back over the original (same length).
func (c *canon) rearrange(dst []byte, open int, ms []member) ([]byte, error) {
	size := len(dst) - open + 1 // with the closing brace
	if c.budget -= size; c.budget < 0 {
		return dst, errOverBudget
	}
	at := len(dst)
	dst = append(dst, '{')
	for i, m := range ms {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, dst[m.start:m.end]...)
	}
	dst = append(dst, '}')
	copy(dst[open:], dst[at:])
	return dst[:open+size], nil
}

// str scans the string at p.pos and writes it as appendString writes its
// decoded text: escapes are decoded and each character re-escaped in the
// canonical spelling. With key, it also returns the decoded text: a range
// of the input when that is the text as it is, else one of c.keys. Errors
// and their positions are those of parser.str and parser.strEscaped.
func (c *canon) str(dst []byte, key bool) ([]byte, span, error) {
	p := &c.parser
	data, stop := p.data, c.stop
	start := p.pos
	dst = append(dst, '"')
	i := start + 1
	run := i // start of the bytes copied as they are
	off := len(c.keys)
	for {
		// Skip eight plain bytes at a time, then find the stop byte in
		// the word that has one.
		if c.ascii {
			for i+8 <= len(data) && stop8ASCII(binary.LittleEndian.Uint64(data[i:])) == 0 {
				i += 8
			}
		} else {
			for i+8 <= len(data) && stop8UTF8(binary.LittleEndian.Uint64(data[i:])) == 0 {
				i += 8
			}
		}
		for i < len(data) && !stop[data[i]] {
			i++
		}
		if i >= len(data) {
			return dst, span{}, p.syntaxError(start, reasonUntermStr)
		}
		ch := data[i]
		dst = append(dst, data[run:i]...)
		if ch == '"' {
			p.pos = i + 1
			k := span{off: run, end: i, input: true}
			if key && run > start+1 {
				c.keys = append(c.keys, data[run:i]...)
				k = span{off: off, end: len(c.keys)}
			}
			return append(dst, '"'), k, nil
		}
		if key {
			c.keys = append(c.keys, data[run:i]...)
		}
		switch {
		case ch == '\\':
			r, n, err := c.parser.escape(start, i)
			if err != nil {
				return dst, span{}, err
			}
			dst = appendRune(dst, r, c.ascii)
			if key {
				c.keys = utf8.AppendRune(c.keys, r)
			}
			i += n
		case ch < 0x20:
			return dst, span{}, p.syntaxError(i, reasonControl)
		default: // ASCII flavour: DEL or a non-ASCII character
			r, n := utf8.DecodeRune(data[i:])
			dst = appendRune(dst, r, true)
			if key {
				c.keys = append(c.keys, data[i:i+n]...)
			}
			i += n
		}
		run = i
	}
}

// stop8UTF8 is non-zero when one of the 8 bytes in x (little-endian) is a
// stop byte of the UTF-8 flavour: a control, '"' or '\\'. As in plain8, a
// byte b < n sets its high bit in (x - n*lsb) &^ x; bytes >= 0x80 never
// do (&^ x clears it), and a borrow only follows a byte that matched, so
// the test as a whole is exact. A byte equal to c is a zero byte of x ^ c.
func stop8UTF8(x uint64) uint64 {
	q, b := x^('"'*lsb), x^('\\'*lsb)
	return ((x-0x20*lsb)&^x | (q-lsb)&^q | (b-lsb)&^b) & msb
}

// stop8ASCII is stop8UTF8 for the ASCII flavour, which also stops at DEL
// and every byte >= 0x80.
func stop8ASCII(x uint64) uint64 {
	d := x ^ (0x7f * lsb)
	return stop8UTF8(x) | x&msb | (d-lsb)&^d&msb
}

// The stop bytes of a string scan, per flavour (see canon.stop).
var stopUTF8, stopASCII = stopTable(false), stopTable(true)

func stopTable(ascii bool) [256]bool {
	var t [256]bool
	for b := range t {
		t[b] = b < 0x20 || b == '"' || b == '\\' || ascii && b >= 0x7f
	}
	return t
}

// appendRune writes r as appendString writes it inside a string: the
// encoder escapes character by character, so a string written this way,
// one character at a time, matches appendString of the whole.
func appendRune(dst []byte, r rune, ascii bool) []byte {
	switch {
	case r >= 0x20 && r < 0x7f && r != '"' && r != '\\':
		return append(dst, byte(r))
	case r == '"', r == '\\':
		return append(dst, '\\', byte(r))
	case r == '\n':
		return append(dst, '\\', 'n')
	case r == '\r':
		return append(dst, '\\', 'r')
	case r == '\t':
		return append(dst, '\\', 't')
	case r == '\b':
		return append(dst, '\\', 'b')
	case r == '\f':
		return append(dst, '\\', 'f')
	case r < 0x20:
		return appendU(dst, r)
	case !ascii:
		return utf8.AppendRune(dst, r)
	case r > 0xffff:
		hi, lo := utf16.EncodeRune(r)
		return appendU(appendU(dst, hi), lo)
	}
	return appendU(dst, r)
}

// number is parser.number, writing integers as they are (but "-0" as "0")
// and floats in AppendFloat's spelling.
func (c *canon) number(dst []byte) ([]byte, error) {
	p := &c.parser
	start := p.pos
	i, isFloat, err := p.scanNumber()
	if err != nil {
		return dst, err
	}
	if !isFloat {
		p.pos = i
		if p.isNegativeZero(start, i) {
			return append(dst, '0'), nil
		}
		return append(dst, p.data[start:i]...), nil
	}
	f, err := p.float(start, i)
	if err != nil {
		return dst, err
	}
	p.pos = i
	return AppendFloat(dst, f), nil
}
