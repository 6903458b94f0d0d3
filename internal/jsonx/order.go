package jsonx

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// KeyOrder is the order in which an encoder writes object members.
type KeyOrder int

const (
	// CanonicalOrder is code-point order of keys: what Marshal writes
	// (docs/formats.md#json-encoding).
	CanonicalOrder KeyOrder = iota
	// JSONBOrder is PostgreSQL jsonb's storage order: shorter keys (in
	// UTF-8 bytes) first, then byte-wise. PostgreSQL sorts every object
	// it parses into this order; text already in it makes that sort a
	// linear pass. The JSON value is the same as in CanonicalOrder, so
	// this is a performance hint, not a format: only SQL text bound to a
	// jsonb column should use it, never a canonical document.
	JSONBOrder
)

// AppendOrdered appends the compact encoding of v to dst, with the types and
// rules of Append, except that object members (Object, map[string]any,
// map[string]string, at every depth) are written in order o. With
// CanonicalOrder it writes exactly what Append writes.
func AppendOrdered(dst []byte, v any, f Flavour, o KeyOrder) []byte {
	o.check()
	e := encoder{ascii: isASCII(f), order: o}
	return e.value(dst, v, 0)
}

// Compare compares two object keys in order o: negative when a is written
// before b, 0 when they are equal, positive otherwise.
//
// JSONBOrder compares keys as the encoder writes them: a key that is not
// valid UTF-8 is written with U+FFFD for each maximal invalid subsequence,
// and sorts by that spelling (ties between different raw keys with the same
// spelling fall back to the raw bytes, so the order stays total).
// CanonicalOrder compares the raw bytes, as Marshal always has. For valid
// UTF-8, which every key nats-sink produces is, the two readings agree.
func (o KeyOrder) Compare(a, b string) int {
	switch o {
	case CanonicalOrder:
		return strings.Compare(a, b)
	case JSONBOrder:
		return compareJSONB(a, b)
	}
	panic(invalidOrder(o))
}

func (o KeyOrder) check() {
	if o != CanonicalOrder && o != JSONBOrder {
		panic(invalidOrder(o))
	}
}

func invalidOrder(o KeyOrder) string {
	return "jsonx: invalid KeyOrder " + strconv.Itoa(int(o))
}

// compareJSONB orders keys the way PostgreSQL's jsonb stores them
// (lengthCompareJsonbStringValue): by byte length, then by bytes, of the
// keys as the encoder writes them.
func compareJSONB(a, b string) int {
	if !utf8.ValidString(a) || !utf8.ValidString(b) {
		// Rare (payload keys are valid by parsing, header names by
		// normalisation): allocating here is fine.
		if c := compareValidJSONB(validUTF8(a), validUTF8(b)); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	}
	return compareValidJSONB(a, b)
}

// compareValidJSONB is compareJSONB for keys known to be valid UTF-8, which
// the encoder writes as they are. Sorts check validity once per key and
// then use this: checking it in every comparison doubled the cost of
// writing a metadata tree in JSONB order.
func compareValidJSONB(a, b string) int {
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

// validUTF8 returns s with each maximal invalid subsequence replaced by
// U+FFFD: the key appendString writes, unescaped.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
			i += maximalSubpart(s[i:])
			continue
		}
		b = append(b, s[i:i+size]...)
		i += size
	}
	return string(b)
}

// inlineMembers is the largest Object whose JSONB member order is sorted in
// an index on the encoder's stack; larger ones allocate the index. The
// objects of the metadata document have at most 14 members; the JSONB
// order is meant for SQL columns, which hold no larger built object.
const inlineMembers = 16

// jsonbObject writes a non-empty Object with its members in JSONB order,
// sorting an index rather than the members (the Object may be shared, and
// must not be reordered). It panics on a duplicate key, as the canonical
// path does.
func (e *encoder) jsonbObject(dst []byte, x Object, depth int) []byte {
	compare := compareJSONB
	if validKeys(x) {
		compare = compareValidJSONB
	}
	var inline [inlineMembers]int
	var idx []int
	if !inJSONBOrder(x, compare) {
		idx = jsonbIndex(x, compare, inline[:0])
	}
	dst = append(dst, '{')
	for i := range x {
		m := &x[i]
		if idx != nil {
			m = &x[idx[i]]
		}
		dst = e.key(dst, m.Key, i, depth)
		dst = e.value(dst, m.Value, depth+1)
	}
	return e.close(dst, '}', depth)
}

// inJSONBOrder reports whether x's keys are strictly ascending in JSONB
// order, so that it can be written as it is. This is the fast path for
// objects built in that order.
func inJSONBOrder(x Object, compare func(a, b string) int) bool {
	for i := 1; i < len(x); i++ {
		if compare(x[i-1].Key, x[i].Key) >= 0 {
			return false
		}
	}
	return true
}

// jsonbIndex returns the positions of x's members in JSONB order of their
// keys, in buf when it has room (the caller's stack array), else in a new
// slice. It panics on a duplicate key.
func jsonbIndex(x Object, compare func(a, b string) int, buf []int) []int {
	var idx []int
	if len(x) <= cap(buf) {
		idx = buf[:len(x)]
	} else {
		idx = make([]int, len(x))
	}
	for i := range idx {
		idx[i] = i
	}
	if len(idx) <= inlineMembers {
		// Insertion sort: few members, and often nearly in order.
		for i := 1; i < len(idx); i++ {
			for j := i; j > 0 && compare(x[idx[j-1]].Key, x[idx[j]].Key) > 0; j-- {
				idx[j-1], idx[j] = idx[j], idx[j-1]
			}
		}
	} else {
		slices.SortFunc(idx, func(a, b int) int { return compare(x[a].Key, x[b].Key) })
	}
	// Equal keys compare equal, so a duplicate ends up adjacent.
	for i := 1; i < len(idx); i++ {
		if x[idx[i-1]].Key == x[idx[i]].Key {
			panic("jsonx: duplicate key in Object")
		}
	}
	return idx
}

// validKeys reports whether every key of x is valid UTF-8.
func validKeys(x Object) bool {
	for i := range x {
		if !utf8.ValidString(x[i].Key) {
			return false
		}
	}
	return true
}

// SortKeys sorts distinct keys (a map's) into order o: the order in which
// AppendOrdered writes the members of a map with these keys. It is for
// callers that write an object member by member.
func SortKeys(keys []string, o KeyOrder) {
	o.check()
	if len(keys) < 2 {
		return
	}
	if o == JSONBOrder {
		compare := compareValidJSONB
		for _, k := range keys {
			if !utf8.ValidString(k) {
				compare = compareJSONB
				break
			}
		}
		slices.SortFunc(keys, compare)
		return
	}
	// Go's string order is UTF-8 byte order, which is code-point order.
	slices.Sort(keys)
}
