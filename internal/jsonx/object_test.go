package jsonx_test

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
)

func TestMarshalObject(t *testing.T) {
	for _, tt := range []struct {
		name   string
		in     any
		want   string
		pretty string
	}{
		{"nil", jsonx.Object(nil), `{}`, `{}`},
		{"empty", jsonx.Object{}, `{}`, `{}`},
		{"sorted", jsonx.Object{{"a", 1}, {"b", "é"}, {"c", nil}}, `{"a":1,"b":"\u00e9","c":null}`,
			"{\n  \"a\": 1,\n  \"b\": \"\\u00e9\",\n  \"c\": null\n}"},
		{"out of order falls back to sorting", jsonx.Object{{"b", 2}, {"a", 1}, {"c", 3}}, `{"a":1,"b":2,"c":3}`,
			"{\n  \"a\": 1,\n  \"b\": 2,\n  \"c\": 3\n}"},
		{"code-point order, not UTF-16", jsonx.Object{{"\U0001f600", 1}, {"\uffff", 2}, {"é", 3}, {"Z", 4}},
			`{"Z":4,"\u00e9":3,"\uffff":2,"\ud83d\ude00":1}`, ""},
		{"prefix sorts first", jsonx.Object{{"ab", 1}, {"a", 2}}, `{"a":2,"ab":1}`, ""},
		{"nested in other containers", []any{map[string]any{"m": jsonx.Object{{"y", 1}, {"x", []string{}}}}},
			`[{"m":{"x":[],"y":1}}]`, "[\n  {\n    \"m\": {\n      \"x\": [],\n      \"y\": 1\n    }\n  }\n]"},
		{"maps inside objects", jsonx.Object{{"h", map[string]string{"b": "2", "a": "1"}}, {"e", jsonx.Object{}}},
			`{"e":{},"h":{"a":"1","b":"2"}}`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(jsonx.Marshal(tt.in, jsonx.ASCII)); got != tt.want {
				t.Errorf("Marshal(%#v) = %s, want %s", tt.in, got, tt.want)
			}
			if tt.pretty == "" {
				return
			}
			if got := string(jsonx.MarshalPretty(tt.in, jsonx.ASCII)); got != tt.pretty {
				t.Errorf("MarshalPretty(%#v) =\n%s\nwant\n%s", tt.in, got, tt.pretty)
			}
		})
	}
}

// TestObjectFallbackLeavesInputAlone checks that sorting for the encoder
// works on a copy: Objects may be shared, like the envelope they describe.
func TestObjectFallbackLeavesInputAlone(t *testing.T) {
	o := jsonx.Object{{"b", 2}, {"a", 1}}
	before := slices.Clone(o)
	if got, want := string(jsonx.Append([]byte("x"), o, jsonx.UTF8)), `x{"a":1,"b":2}`; got != want {
		t.Errorf("Append = %s, want %s", got, want)
	}
	if diff := cmp.Diff(before, o); diff != "" {
		t.Errorf("encoding changed the Object (-before +after):\n%s", diff)
	}
}

// TestObjectMatchesMap encodes the same random members as an Object, in a
// shuffled order, and as a map: the bytes must be equal.
func TestObjectMatchesMap(t *testing.T) {
	for n := range 70 {
		m := map[string]any{}
		var o jsonx.Object
		for i := range n {
			k := strconv.Itoa((i * 7919) % 101)
			if _, ok := m[k]; ok {
				continue
			}
			m[k] = i
			o = append(o, jsonx.Member{Key: k, Value: i})
		}
		for _, f := range []func(any, jsonx.Flavour) []byte{jsonx.Marshal, jsonx.MarshalPretty} {
			if got, want := f(o, jsonx.UTF8), f(m, jsonx.UTF8); !bytes.Equal(got, want) {
				t.Fatalf("%d members: Object encodes as %s, map as %s", n, got, want)
			}
		}
	}
}

func TestObjectDuplicateKeyPanics(t *testing.T) {
	for _, o := range []jsonx.Object{
		{{"a", 1}, {"a", 2}},
		{{"b", 1}, {"a", 2}, {"b", 3}},
	} {
		func() {
			defer func() {
				if r, _ := recover().(string); !strings.Contains(r, "duplicate key") {
					t.Errorf("Marshal(%v) panic = %q, want a duplicate key panic", o, r)
				}
			}()
			jsonx.Marshal(o, jsonx.UTF8)
		}()
	}
}

func TestObjectGetAndSorted(t *testing.T) {
	o := jsonx.Object{{"a", 1}, {"b", nil}}
	if v, ok := o.Get("a"); v != 1 || !ok {
		t.Errorf(`Get("a") = %v, %v; want 1, true`, v, ok)
	}
	if v, ok := o.Get("b"); v != nil || !ok {
		t.Errorf(`Get("b") = %v, %v; want nil, true`, v, ok)
	}
	if v, ok := o.Get("c"); v != nil || ok {
		t.Errorf(`Get("c") = %v, %v; want nil, false`, v, ok)
	}
	for _, tt := range []struct {
		o    jsonx.Object
		want bool
	}{
		{nil, true},
		{jsonx.Object{{"a", 1}}, true},
		{o, true},
		{jsonx.Object{{"b", 1}, {"a", 1}}, false},
		{jsonx.Object{{"a", 1}, {"a", 1}}, false},
	} {
		if got := tt.o.Sorted(); got != tt.want {
			t.Errorf("%v.Sorted() = %v, want %v", tt.o, got, tt.want)
		}
	}
}

// manyKeys returns an object of n members whose keys arrive in the order
// given by next, plus extra raw members appended at the end.
func manyKeys(n int, next func(i int) int, extra string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k` + strconv.Itoa(1000+next(i)) + `":` + strconv.Itoa(i))
	}
	b.WriteString(extra)
	b.WriteByte('}')
	return b.String()
}

// parseSortedInputs are documents that exercise ParseSorted's ordering and
// duplicate detection; the AppendCanonical tests share them.
func parseSortedInputs() []string {
	ascending := func(i int) int { return i }
	descending := func(i int) int { return 1000 - i }
	shuffled := func(i int) int { return (i * 37) % 101 }
	return []string{
		`{}`, `{"b":1,"a":{"d":[{"z":1,"y":2}],"c":{}}}`, `[{"x":1},{"x":2}]`, `"s"`, `1.5`,
		// Duplicates: the first repeated key in document order is named,
		// and an error later in the same object wins.
		`{"a":1,"a":2}`, `{"b":1,"a":2,"b":3,"a":4}`, `{"a":1,"b":2,"b":3,"a":4}`,
		`{"a":1,"a":2,"b":NaN}`, `{"a":1,"a":2,"b":tru}`, `{"x":{"a":1,"a":2}}`, `[{"q":1},{"q":1,"q":2}]`,
		manyKeys(40, ascending, ""), manyKeys(40, descending, ""), manyKeys(101, shuffled, ""),
		manyKeys(40, ascending, `,"k1005":0`), manyKeys(40, descending, `,"k0":1,"k0":2`),
		manyKeys(101, shuffled, `,"k1005":0`), manyKeys(101, shuffled, `,"zz":1,"k1000":0`),
		manyKeys(31, descending, `,"k1985":0`), manyKeys(31, descending, `,"k1500":0`),
		`{"a":1,`, `{"a" 1}`, `{"a":1 "b":2}`, `{1:2}`,
	}
}

func TestParseSortedAgreesWithParse(t *testing.T) {
	for _, in := range parseSortedInputs() {
		want, wantErr := jsonx.Parse([]byte(in))
		got, err := jsonx.ParseSorted([]byte(in))
		if !sameError(err, wantErr) {
			t.Errorf("ParseSorted(%.50s…) error = %v, Parse error = %v", in, err, wantErr)
			continue
		}
		if err != nil {
			continue
		}
		if g, w := jsonx.Marshal(got, jsonx.UTF8), jsonx.Marshal(want, jsonx.UTF8); !bytes.Equal(g, w) {
			t.Errorf("ParseSorted(%.50s…) encodes as %s, Parse as %s", in, g, w)
		}
		if path := unsortedObject(got, "(root)"); path != "" {
			t.Errorf("ParseSorted(%.50s…): object at %s is not in key order", in, path)
		}
	}
}

// sameError reports whether two parse errors are equal in type and text.
func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	var pa, pb *jsonx.PathError
	var sa, sb *jsonx.SyntaxError
	switch {
	case errors.As(a, &pa) && errors.As(b, &pb):
		return *pa == *pb
	case errors.As(a, &sa) && errors.As(b, &sb):
		return *sa == *sb
	}
	return errors.Is(a, b)
}

// unsortedObject returns the path of the first Object in v whose keys are not
// strictly ascending, or "" when there is none. Maps are reported too:
// ParseSorted must not return any.
func unsortedObject(v any, path string) string {
	switch x := v.(type) {
	case jsonx.Object:
		if !x.Sorted() {
			return path
		}
		for _, m := range x {
			if p := unsortedObject(m.Value, path+"."+m.Key); p != "" {
				return p
			}
		}
	case map[string]any:
		return path + " (a map)"
	case []any:
		for i, item := range x {
			if p := unsortedObject(item, path+"["+strconv.Itoa(i)+"]"); p != "" {
				return p
			}
		}
	}
	return ""
}
