package jsonx_test

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/jsonx/jsonxtest"
)

func TestAppendOrdered(t *testing.T) {
	for _, tt := range []struct {
		name  string
		in    any
		jsonb string // ASCII flavour
	}{
		{"shorter keys first", jsonx.Object{{"aa", 1}, {"b", 2}, {"c", 3}}, `{"b":2,"c":3,"aa":1}`},
		{"same length byte-wise", map[string]any{"bb": 1, "ab": 2, "Zz": 3}, `{"Zz":3,"ab":2,"bb":1}`},
		{"string maps", map[string]string{"traceparent": "t", "Nats-Msg-Id": "m", "x": "1"},
			`{"x":"1","Nats-Msg-Id":"m","traceparent":"t"}`},
		// é is 2 bytes of UTF-8 (6 escaped), 😀 is 4 (12 escaped).
		{"length in UTF-8 bytes, not escaped", jsonx.Object{{"abc", 1}, {"é", 2}, {"😀", 3}, {"a", 4}},
			`{"a":4,"\u00e9":2,"abc":1,"\ud83d\ude00":3}`},
		{"nested at every depth", jsonx.Object{{"outer", []any{map[string]any{"yy": jsonx.Object{{"bb", 1}, {"a", 2}}, "x": nil}}}, {"o", 0}},
			`{"o":0,"outer":[{"x":null,"yy":{"a":2,"bb":1}}]}`},
		{"arrays keep their order", []string{"bb", "a"}, `["bb","a"]`},
		{"empty containers", jsonx.Object{{"m", map[string]any{}}, {"s", map[string]string{}}, {"oo", jsonx.Object{}}},
			`{"m":{},"s":{},"oo":{}}`},
		{"scalars", jsonx.Integer("12345678901234567890123"), `12345678901234567890123`},
		// Each invalid byte is written as U+FFFD (3 bytes), so "\xff" sorts
		// as a 3-byte key, after "zz".
		{"invalid UTF-8 sorts as written", jsonx.Object{{"\xff", 1}, {"zz", 2}, {"zzzz", 3}},
			`{"zz":2,"\ufffd":1,"zzzz":3}`},
		{"invalid UTF-8 map keys sort as written", map[string]string{"\xff": "1", "zz": "2", "zzzz": "3"},
			`{"zz":"2","\ufffd":"1","zzzz":"3"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(jsonx.AppendOrdered(nil, tt.in, jsonx.ASCII, jsonx.JSONBOrder)); got != tt.jsonb {
				t.Errorf("AppendOrdered(%#v, ASCII, JSONBOrder) = %s, want %s", tt.in, got, tt.jsonb)
			}
			if err := jsonxtest.JSONBOrdered([]byte(tt.jsonb)); err != nil {
				t.Errorf("checker rejects %s: %v", tt.jsonb, err)
			}
			for _, f := range []jsonx.Flavour{jsonx.UTF8, jsonx.ASCII} {
				got := jsonx.AppendOrdered([]byte("x"), tt.in, f, jsonx.CanonicalOrder)
				if want := jsonx.Append([]byte("x"), tt.in, f); !bytes.Equal(got, want) {
					t.Errorf("AppendOrdered(%#v, %d, CanonicalOrder) = %s, want Append's %s", tt.in, f, got, want)
				}
			}
		})
	}
}

// TestAppendOrderedProperty checks, over random values (maps, and Objects
// with members in random order), that the canonical order writes Append's
// bytes exactly and that the JSONB order writes the same JSON value with
// every object's keys in (UTF-8 length, bytes) order.
func TestAppendOrderedProperty(t *testing.T) {
	const seed = 3
	rng := rand.New(rand.NewPCG(seed, 4))
	for i := range 2000 {
		v := randomValue(rng, 0)
		if i%2 == 1 {
			v = shuffledObjects(rng, v)
		}
		for _, f := range []jsonx.Flavour{jsonx.UTF8, jsonx.ASCII} {
			canonical := jsonx.Append(nil, v, f)
			if got := jsonx.AppendOrdered(nil, v, f, jsonx.CanonicalOrder); !bytes.Equal(got, canonical) {
				t.Fatalf("seed %d case %d flavour %d: AppendOrdered(CanonicalOrder) = %s, want %s", seed, i, f, got, canonical)
			}
			jsonb := jsonx.AppendOrdered(nil, v, f, jsonx.JSONBOrder)
			checkSameValue(t, canonical, jsonb)
			if err := jsonxtest.JSONBOrdered(jsonb); err != nil {
				t.Fatalf("seed %d case %d flavour %d: %v\n%s", seed, i, f, err, jsonb)
			}
		}
	}
}

// TestAppendOrderedLargeObjects covers Objects beyond the encoder's inline
// index (16 members), sorted, reversed and shuffled.
func TestAppendOrderedLargeObjects(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{15, 16, 17, 40, 300} {
		o := make(jsonx.Object, n)
		for i := range o {
			o[i] = jsonx.Member{Key: strings.Repeat("k", 1+i%7) + strconv.Itoa(i), Value: i}
		}
		for _, step := range []struct {
			name  string
			order func()
		}{
			{"canonical", func() { slices.SortFunc(o, func(a, b jsonx.Member) int { return strings.Compare(a.Key, b.Key) }) }},
			{"jsonb", func() {
				slices.SortFunc(o, func(a, b jsonx.Member) int { return jsonx.JSONBOrder.Compare(a.Key, b.Key) })
			}},
			{"reversed", func() { slices.Reverse(o) }},
			{"shuffled", func() { rng.Shuffle(len(o), func(i, j int) { o[i], o[j] = o[j], o[i] }) }},
		} {
			name := step.name
			step.order()
			before := slices.Clone(o)
			got := jsonx.AppendOrdered(nil, o, jsonx.UTF8, jsonx.JSONBOrder)
			if err := jsonxtest.JSONBOrdered(got); err != nil {
				t.Errorf("%d members, %s: %v\n%s", n, name, err, got)
			}
			checkSameValue(t, jsonx.Append(nil, o, jsonx.UTF8), got)
			if diff := cmp.Diff(before, o); diff != "" {
				t.Errorf("%d members, %s: encoding changed the Object (-before +after):\n%s", n, name, diff)
			}
		}
	}
}

func TestAppendOrderedDuplicateKeyPanics(t *testing.T) {
	for _, n := range []int{2, 16, 17, 100} {
		o := make(jsonx.Object, n)
		for i := range o {
			o[i] = jsonx.Member{Key: strconv.Itoa(i)}
		}
		o[n-1].Key = o[n/2-1].Key
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), "duplicate key") {
					t.Errorf("%d members: AppendOrdered(JSONBOrder) with a duplicate key: recovered %v, want a duplicate key panic", n, r)
				}
			}()
			jsonx.AppendOrdered(nil, o, jsonx.UTF8, jsonx.JSONBOrder)
		}()
	}
}

func TestKeyOrderCompare(t *testing.T) {
	for _, tt := range []struct {
		a, b             string
		canonical, jsonb int
	}{
		{"a", "a", 0, 0},
		{"a", "b", -1, -1},
		{"b", "aa", 1, -1},
		{"é", "ab", 1, 1},    // 2 bytes each: byte-wise, 0xc3 > 'a'
		{"é", "abc", 1, -1},  // 2 bytes < 3
		{"😀", "abc", 1, 1},   // 4 bytes > 3
		{"\xff", "zz", 1, 1}, // written as U+FFFD: 3 bytes
		{"\xff", "\xfe", 1, 1},
	} {
		if got := jsonx.CanonicalOrder.Compare(tt.a, tt.b); sign(got) != tt.canonical {
			t.Errorf("CanonicalOrder.Compare(%q, %q) = %d, want sign %d", tt.a, tt.b, got, tt.canonical)
		}
		if got := jsonx.JSONBOrder.Compare(tt.a, tt.b); sign(got) != tt.jsonb {
			t.Errorf("JSONBOrder.Compare(%q, %q) = %d, want sign %d", tt.a, tt.b, got, tt.jsonb)
		}
		if got := jsonx.JSONBOrder.Compare(tt.b, tt.a); sign(got) != -tt.jsonb {
			t.Errorf("JSONBOrder.Compare(%q, %q) = %d, want sign %d", tt.b, tt.a, got, -tt.jsonb)
		}
	}
}

func TestAppendOrderedInvalidOrderPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Errorf("AppendOrdered with KeyOrder 7 did not panic")
		}
	}()
	jsonx.AppendOrdered(nil, 1, jsonx.UTF8, 7)
}

// TestAppendOrderedAllocations checks that reordering an Object of up to 16
// members costs no allocation: the index lives on the stack.
func TestAppendOrderedAllocations(t *testing.T) {
	o := make(jsonx.Object, 16)
	for i := range o {
		o[i] = jsonx.Member{Key: strings.Repeat("k", 16-i), Value: jsonx.Object{{"bb", true}, {"a", nil}}}
	}
	var v any = o // boxing a slice allocates; do it once, outside the count
	buf := make([]byte, 0, 4096)
	if n := testing.AllocsPerRun(100, func() { jsonx.AppendOrdered(buf[:0], v, jsonx.ASCII, jsonx.JSONBOrder) }); n != 0 {
		t.Errorf("AppendOrdered(16-member Object, JSONBOrder) allocates %v times, want 0", n)
	}
}

// shuffledObjects returns v with every map turned into an Object whose
// members are in random order (sorted now and then, for the fast paths).
func shuffledObjects(rng *rand.Rand, v any) any {
	switch x := v.(type) {
	case map[string]any:
		o := make(jsonx.Object, 0, len(x))
		for k, item := range x {
			o = append(o, jsonx.Member{Key: k, Value: shuffledObjects(rng, item)})
		}
		switch rng.IntN(3) {
		case 0:
			slices.SortFunc(o, func(a, b jsonx.Member) int { return strings.Compare(a.Key, b.Key) })
		case 1:
			slices.SortFunc(o, func(a, b jsonx.Member) int { return jsonx.JSONBOrder.Compare(a.Key, b.Key) })
		}
		return o
	case []any:
		out := make([]any, len(x))
		for i, item := range x {
			out[i] = shuffledObjects(rng, item)
		}
		return out
	}
	return v
}

// checkSameValue fails unless two encodings parse to the same value.
func checkSameValue(t *testing.T, want, got []byte) {
	t.Helper()
	w, err := jsonx.Parse(want)
	if err != nil {
		t.Fatalf("Parse(%s): %v", want, err)
	}
	g, err := jsonx.Parse(got)
	if err != nil {
		t.Fatalf("Parse(%s): %v", got, err)
	}
	if !sameValue(w, g) {
		t.Fatalf("encodings differ in value:\nwant %s\ngot  %s", want, got)
	}
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}
