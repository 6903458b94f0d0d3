package jsonx_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
)

// parseSeeds seed FuzzParse and FuzzAppendCanonical.
var parseSeeds = []string{
	``, `null`, `true`, `0`, `-0`, `-0.0`, `1e400`, `1e-400`, `123456789012345678901234567890`,
	`"a\"b\\c\/\b\f\n\r\t\u00e9\ud83d\ude00"`, `"\ud800"`, `"\udc00x"`,
	`{"a":1,"a":2}`, `{"a":[1,{"b":NaN}]}`, `[Infinity]`, `-Infinity`,
	`{"b":{"c":[]},"a":[1,2.5,"x",true,false,null,{}]}`, "{\n  \"a\": 1,\n  \"b\" 2\n}",
	"\xef\xbb\xbf{}", "\"\xff\"", "\"a\x01\"", `[1,]`, `{"a":1,}`, `01`, `1.`, `.5`,
	strings.Repeat("[", 1001) + strings.Repeat("]", 1001),
	`{"classification":null,"labels":["billing","eu"],"payload":{"present":true},"pending":3}`,
}

func FuzzParse(f *testing.F) {
	for _, seed := range parseSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := jsonx.Parse(data)
		var se *jsonx.SyntaxError
		var pe *jsonx.PathError
		switch {
		case err == nil:
			checkReencodes(t, v)
		case errors.Is(err, jsonx.ErrNotUTF8):
			if utf8.Valid(data) && !bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
				t.Fatalf("Parse(%q) = ErrNotUTF8 for valid UTF-8 without BOM", data)
			}
		case errors.As(err, &se):
			if se.Line < 1 || se.Column < 1 || se.Reason == "" {
				t.Fatalf("Parse(%q) = bad SyntaxError %+v", data, se)
			}
		case errors.As(err, &pe):
			if pe.Path == "" && !strings.Contains(string(data), `""`) {
				t.Fatalf("Parse(%q) = PathError with empty path", data)
			}
		default:
			t.Fatalf("Parse(%q) = unexpected error type %T: %v", data, err, err)
		}
		compareWithEncodingJSON(t, data, err)
		compareSorted(t, data, v, err)
		compareExact(t, data, v, err)
	})
}

// compareExact checks that ParseExact accepts and rejects exactly what Parse
// does, that its result encodes identically, and that every float of Parse
// is a Number token that converts to the same float64.
func compareExact(t *testing.T, data []byte, v any, err error) {
	t.Helper()
	ev, eerr := jsonx.ParseExact(data)
	if !sameError(eerr, err) {
		t.Fatalf("ParseExact(%q) error = %v, Parse error = %v", data, eerr, err)
	}
	if err != nil {
		return
	}
	if got, want := jsonx.Marshal(ev, jsonx.UTF8), jsonx.Marshal(v, jsonx.UTF8); !bytes.Equal(got, want) {
		t.Fatalf("ParseExact(%q) encodes as %q, Parse as %q", data, got, want)
	}
	sv, serr := jsonx.ParseSortedExact(data)
	if serr != nil {
		t.Fatalf("ParseSortedExact(%q) = %v, ParseExact accepted it", data, serr)
	}
	if got, want := jsonx.Marshal(sv, jsonx.UTF8), jsonx.Marshal(v, jsonx.UTF8); !bytes.Equal(got, want) {
		t.Fatalf("ParseSortedExact(%q) encodes as %q, Parse as %q", data, got, want)
	}
	if path := unsortedObject(sv, "(root)"); path != "" {
		t.Fatalf("ParseSortedExact(%q): object at %s is not in key order", data, path)
	}
}

// compareSorted checks that ParseSorted accepts and rejects exactly what
// Parse does, with the same error, and that its result encodes identically
// with every object already in key order.
func compareSorted(t *testing.T, data []byte, v any, err error) {
	t.Helper()
	sv, serr := jsonx.ParseSorted(data)
	if !sameError(serr, err) {
		t.Fatalf("ParseSorted(%q) error = %v, Parse error = %v", data, serr, err)
	}
	if err != nil {
		return
	}
	if got, want := jsonx.Marshal(sv, jsonx.UTF8), jsonx.Marshal(v, jsonx.UTF8); !bytes.Equal(got, want) {
		t.Fatalf("ParseSorted(%q) encodes as %q, Parse as %q", data, got, want)
	}
	if path := unsortedObject(sv, "(root)"); path != "" {
		t.Fatalf("ParseSorted(%q): object at %s is not in key order", data, path)
	}
}

// checkReencodes asserts that an accepted value encodes in both flavours to
// bytes that parse back to an equal value and re-encode identically.
func checkReencodes(t *testing.T, v any) {
	t.Helper()
	for _, f := range []jsonx.Flavour{jsonx.UTF8, jsonx.ASCII} {
		enc := jsonx.Marshal(v, f)
		back, err := jsonx.Parse(enc)
		if err != nil {
			t.Fatalf("Parse(Marshal(v, %d)) error %v for %q", f, err, enc)
		}
		// sameValue, not cmp.Equal: go-cmp's time doubles with every level
		// of nesting, and the fuzzer reaches depth 1000 (a hang found by
		// the fuzzer itself, kept in testdata/fuzz).
		if !sameValue(v, back) {
			t.Fatalf("round trip changed the value: %.200q became %.200q", jsonx.Marshal(v, jsonx.UTF8), jsonx.Marshal(back, jsonx.UTF8))
		}
		if again := jsonx.Marshal(back, f); !bytes.Equal(again, enc) {
			t.Fatalf("encoding not idempotent:\n%q\n%q", enc, again)
		}
		pretty := jsonx.MarshalPretty(v, f)
		back, err = jsonx.Parse(pretty)
		if err != nil {
			t.Fatalf("Parse(MarshalPretty(v, %d)) error %v for %q", f, err, pretty)
		}
		if again := jsonx.Marshal(back, f); !bytes.Equal(again, enc) {
			t.Fatalf("pretty and compact encodings disagree:\n%q\n%q", enc, again)
		}
	}
}

// compareWithEncodingJSON checks that, for ASCII input, we accept exactly
// what encoding/json's syntax check accepts, except where docs/formats.md#json-encoding is
// deliberately stricter than it: duplicate keys, lone surrogate escapes
// (which it turns into U+FFFD), float overflow, integer digits and depth
// (json.Valid checks none of these).
func compareWithEncodingJSON(t *testing.T, data []byte, err error) {
	t.Helper()
	if bytes.ContainsFunc(data, func(r rune) bool { return r >= utf8.RuneSelf || r == utf8.RuneError }) {
		return
	}
	var pe *jsonx.PathError
	if errors.As(err, &pe) && strings.HasPrefix(pe.Message, "duplicate key") {
		return
	}
	var se *jsonx.SyntaxError
	if errors.As(err, &se) {
		switch se.Reason {
		case "unpaired UTF-16 surrogate escape in string", "number out of range",
			"integer has more than 4300 digits", "nesting deeper than 1000 levels":
			return
		}
	}
	if ours, theirs := err == nil, json.Valid(data); ours != theirs {
		t.Fatalf("Parse(%q) accepted=%v (err %v), json.Valid=%v", data, ours, err, theirs)
	}
}

func FuzzMarshalString(f *testing.F) {
	for _, seed := range []string{
		"", "plain", "a\"b\\c", "\x00\x1f\x7f", "\n\r\t\b\f", "/<>&", "café", "\u2028\u2029",
		"😀", "\U0010ffff", "\ufffd", "\xff", "a\xe2\x82b", "\xed\xa0\x80", "\xf0\x9f\x98",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, fl := range []jsonx.Flavour{jsonx.UTF8, jsonx.ASCII} {
			enc := jsonx.AppendString(nil, s, fl)
			v, err := jsonx.Parse(enc)
			if err != nil {
				t.Fatalf("Parse(AppendString(%q, %d)) = %q: %v", s, fl, enc, err)
			}
			got, ok := v.(string)
			if !ok {
				t.Fatalf("Parse(AppendString(%q, %d)) = %T, want string", s, fl, v)
			}
			if utf8.ValidString(s) && got != s {
				t.Fatalf("Parse(AppendString(%q, %d)) = %q", s, fl, got)
			}
			if !utf8.ValidString(got) {
				t.Fatalf("AppendString(%q, %d) decodes to invalid UTF-8 %q", s, fl, got)
			}
			// An independent decoder agrees.
			var std string
			if err := json.Unmarshal(enc, &std); err != nil || std != got {
				t.Fatalf("encoding/json decodes %q as %q (%v), we decode %q", enc, std, err, got)
			}
			for _, b := range enc {
				if b < 0x20 || (fl == jsonx.ASCII && b >= 0x7f) {
					t.Fatalf("AppendString(%q, %d) = %q contains byte %#x", s, fl, enc, b)
				}
			}
		}
	})
}

// sameValue reports whether two parsed values are equal, telling 0.0 from
// -0.0 and NaN from nothing; linear in the size of the values.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case float64:
		y, ok := b.(float64)
		return ok && math.Float64bits(x) == math.Float64bits(y)
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameValue(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !sameValue(xv, yv) {
				return false
			}
		}
		return true
	case nil, bool, string, jsonx.Integer:
		return a == b
	}
	panic(fmt.Sprintf("sameValue: unexpected type %T", a))
}
