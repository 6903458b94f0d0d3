package jsonx

import (
	"bytes"
	"strings"
	"testing"
)

// TestAppendCanonicalOverBudgetFallsBackToTree: objects nested deep, each
// with its members out of order, around a large value would make the
// streaming path move the inner bytes once per level; past its budget it
// must stop, and AppendCanonical must then give the tree path's bytes.
func TestAppendCanonicalOverBudgetFallsBackToTree(t *testing.T) {
	const depth = 200
	inner := `"` + strings.Repeat("x", 20000) + `"`
	doc := inner
	for range depth {
		doc = `{"z":` + doc + `,"a":1}`
	}
	data := []byte(doc)

	c := canons.Get().(*canon)
	c.start(data, true, CanonicalOrder)
	_, err := c.document(nil)
	c.release()
	if err != errOverBudget {
		t.Fatalf("streaming path on %d nested out-of-order objects: err = %v, want errOverBudget (the test would not reach the fallback)", depth, err)
	}

	v, err := ParseSorted(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []KeyOrder{CanonicalOrder, JSONBOrder} {
		got, err := AppendCanonical(nil, data, ASCII, o)
		if err != nil {
			t.Fatalf("order %d: %v", o, err)
		}
		if want := AppendOrdered(nil, v, ASCII, o); !bytes.Equal(got, want) {
			t.Errorf("order %d: fallback output differs from the tree path (%d vs %d bytes)", o, len(got), len(want))
		}
	}
}
