package jsonx

import (
	"slices"
	"strings"
)

// Member is one key/value pair of an Object.
type Member struct {
	Key   string
	Value any
}

// Object is a JSON object as a slice of members. It exists for speed: the
// records nats-sink writes per message are built as Object literals with
// their keys already in canonical order, and the encoder then writes them
// as they are, with no map, no key collection and no sort.
//
// Canonical output never depends on the builder getting the order right:
// the encoder checks that adjacent keys are strictly ascending by code
// point (one string comparison per member) and, if they are not, encodes a
// sorted copy instead. Duplicate keys have no canonical encoding, so
// encoding an Object with a repeated key panics (a programming error, like
// an unsupported type). A nil or empty Object encodes as {}.
type Object []Member

// Get returns the value of key and whether the object has it. It scans the
// members: objects are small, and Get is meant for tests and occasional
// reads, not for the hot path.
func (o Object) Get(key string) (any, bool) {
	for _, m := range o {
		if m.Key == key {
			return m.Value, true
		}
	}
	return nil, false
}

// Sorted reports whether o's keys are strictly ascending by code point,
// which is the order the encoder writes without sorting.
func (o Object) Sorted() bool {
	for i := 1; i < len(o); i++ {
		if o[i-1].Key >= o[i].Key {
			return false
		}
	}
	return true
}

// canonical returns o when its keys are strictly ascending, else a sorted
// copy (o itself stays untouched: it may be shared, like the envelope's
// data). It panics on a duplicate key.
func (o Object) canonical() Object {
	if o.Sorted() {
		return o
	}
	c := slices.Clone(o)
	slices.SortFunc(c, compareMembers)
	for i := 1; i < len(c); i++ {
		if c[i-1].Key == c[i].Key {
			// The key is left out: it might come from a payload.
			panic("jsonx: duplicate key in Object")
		}
	}
	return c
}

// compareMembers orders members by key. Go's string order is UTF-8 byte
// order, which is code-point order.
func compareMembers(a, b Member) int { return strings.Compare(a.Key, b.Key) }
