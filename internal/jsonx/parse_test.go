package jsonx_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
)

// floatBits makes cmp tell 0.0 from -0.0.
var floatBits = cmp.Comparer(func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) })

// parseValueCase is a valid document and the value Parse returns for it.
type parseValueCase struct {
	name string
	in   string
	want any
}

// parseValueCases are shared with the AppendCanonical tests.
func parseValueCases() []parseValueCase {
	return []parseValueCase{
		{"null", "null", nil},
		{"true with whitespace", " \t\r\n true \n", true},
		{"false", "false", false},
		{"integer", "42", jsonx.Integer("42")},
		{"zero", "0", jsonx.Integer("0")},
		{"negative zero integer is zero", "-0", jsonx.Integer("0")},
		{"negative integer", "-17", jsonx.Integer("-17")},
		{"30-digit integer exact", "123456789012345678901234567890", jsonx.Integer("123456789012345678901234567890")},
		{"integer beyond float64 range", "1" + strings.Repeat("0", 400), jsonx.Integer("1" + strings.Repeat("0", 400))},
		{"4300 digits", strings.Repeat("9", 4300), jsonx.Integer(strings.Repeat("9", 4300))},
		{"minus and 4300 digits", "-" + strings.Repeat("9", 4300), jsonx.Integer("-" + strings.Repeat("9", 4300))},
		{"float", "42.50", 42.5},
		{"exponent makes a float", "1e2", 100.0},
		{"upper-case exponent", "1E+2", 100.0},
		{"negative exponent", "-1.5e-3", -0.0015},
		{"negative zero float", "-0.0", math.Copysign(0, -1)},
		{"underflow is zero", "1e-400", 0.0},
		{"subnormal", "5e-324", 5e-324},
		{"max float", "1.7976931348623157e308", math.MaxFloat64},
		{"float with many digits", "0." + strings.Repeat("1", 5000), 0.1111111111111111},
		{"escapes", `"\"\\\/\b\f\n\r\t\u00e9\u0000\u00E9"`, "\"\\/\b\f\n\r\t\u00e9\x00\u00e9"},
		{"surrogate pair", `"\ud83d\ude00\uD83D\uDE00"`, "😀😀"},
		{"raw non-ASCII and DEL", "\"café\x7f\u2028\"", "café\x7f\u2028"},
		{"escape after text", `"abc\ndef"`, "abc\ndef"},
		{"object", `{"b": [1, 2.5, "x", true, false, null, {}], "a": {"c": []}}`, map[string]any{
			"b": []any{jsonx.Integer("1"), 2.5, "x", true, false, nil, map[string]any{}},
			"a": map[string]any{"c": []any{}},
		}},
		{"same key in different objects", `{"a":{"a":1},"b":{"a":2}}`, map[string]any{
			"a": map[string]any{"a": jsonx.Integer("1")}, "b": map[string]any{"a": jsonx.Integer("2")},
		}},
	}
}

func TestParseValues(t *testing.T) {
	for _, tt := range parseValueCases() {
		t.Run(tt.name, func(t *testing.T) {
			got, err := jsonx.Parse([]byte(tt.in))
			if err != nil {
				t.Fatalf("Parse(%.60q) error: %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got, floatBits); diff != "" {
				t.Errorf("Parse(%.60q) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestParseMaxDepth(t *testing.T) {
	// cmp.Diff is far too slow on a 1000-deep tree, so walk it instead.
	for _, in := range []string{
		strings.Repeat("[", jsonx.MaxDepth) + strings.Repeat("]", jsonx.MaxDepth),
		strings.Repeat(`{"a":`, jsonx.MaxDepth-1) + "[]" + strings.Repeat("}", jsonx.MaxDepth-1),
	} {
		v, err := jsonx.Parse([]byte(in))
		if err != nil {
			t.Fatalf("Parse(%.20q…) error: %v", in, err)
		}
		if got := string(jsonx.Marshal(v, jsonx.UTF8)); got != in {
			t.Errorf("Marshal(Parse(%.20q…)) = %.20q…, want the input", in, got)
		}
		depth := 0
		for v != nil {
			depth++
			switch x := v.(type) {
			case []any:
				v = nil
				if len(x) == 1 {
					v = x[0]
				}
			case map[string]any:
				v = x["a"]
			default:
				t.Fatalf("Parse(%.20q…): unexpected %T at depth %d", in, v, depth)
			}
		}
		if depth != jsonx.MaxDepth {
			t.Errorf("Parse(%.20q…) nests %d deep, want %d", in, depth, jsonx.MaxDepth)
		}
	}
}

// parseErrorCase is an invalid document and the error Parse returns for it.
type parseErrorCase struct {
	name string
	in   string
	want error
}

// parseErrorCases are shared with the AppendCanonical tests.
func parseErrorCases() []parseErrorCase {
	syn := func(line, col int, reason string) error {
		return &jsonx.SyntaxError{Line: line, Column: col, Reason: reason}
	}
	constant := func(path string) error {
		return &jsonx.PathError{Path: path, Message: "non-standard JSON constant is not allowed"}
	}
	dup := func(path, key string) error {
		return &jsonx.PathError{Path: path, Message: `duplicate key "` + key + `"`}
	}
	const (
		eof       = "unexpected end of input"
		control   = "control character in string"
		surrogate = "unpaired UTF-16 surrogate escape in string"
		rng       = "number out of range"
		depth     = "nesting deeper than 1000 levels"
		digit     = "expecting a digit"
	)
	return []parseErrorCase{
		// Duplicate keys: the path is the object holding the key.
		{"duplicate at root", `{"a":1,"a":2}`, dup("(root)", "a")},
		{"duplicate nested", `{"nats":{"urls":["x"],"stream":"s","urls":[]}}`, dup("nats", "urls")},
		{"duplicate in array element", `{"a":[{},{"k":1,"k":1}]}`, dup("a[1]", "k")},
		{"duplicate in root array", `[{"k":1,"k":1}]`, dup("[0]", "k")},
		{"duplicate under map key", `{"sink":{"headers":{"X-Tenant":{"z":1,"z":2}}}}`, dup("sink.headers.X-Tenant", "z")},
		{"duplicate via escape", `{"a":1,"\u0061":2}`, dup("(root)", "a")},
		{"first duplicate reported", `{"b":1,"a":1,"a":2,"b":2}`, dup("(root)", "a")},
		{"inner duplicate wins over later error", `{"x":{"a":1,"a":2},"y":}`, dup("x", "a")},
		// NaN and infinities: the path is the value's own path.
		{"NaN at root", `NaN`, constant("(root)")},
		{"NaN member", `{"a":NaN}`, constant("a")},
		{"Infinity in array", `{"nats":{"urls":["u",Infinity]}}`, constant("nats.urls[1]")},
		{"-Infinity in root array", `[-Infinity]`, constant("[0]")},
		{"deep NaN", `{"a":{"b":[[1, NaN]]}}`, constant("a.b[0][1]")},
		{"constant before enclosing duplicate", `{"a":1,"a":2,"b":NaN}`, constant("b")},
		{"NaN in key-like position is syntax", `{NaN:1}`, syn(1, 2, "unexpected character 'N', expecting a property name in double quotes")},
		{"Nan is not NaN", `Nan`, syn(1, 1, "unexpected character 'N', expecting a value")},
		{"-Inf prefix", `-Inf`, syn(1, 1, "unexpected character '-', expecting a value")},
		// Encoding.
		{"BOM", "\xef\xbb\xbf{}", jsonx.ErrNotUTF8},
		{"invalid UTF-8 in string", "\"\xff\"", jsonx.ErrNotUTF8},
		{"invalid UTF-8 outside strings", "{}\xff", jsonx.ErrNotUTF8},
		{"invalid UTF-8 after a syntax error", "{x\xc3", jsonx.ErrNotUTF8},
		{"UTF-8 encoded surrogate", "\"\xed\xa0\x80\"", jsonx.ErrNotUTF8},
		{"overlong encoding", "\"\xc0\xaf\"", jsonx.ErrNotUTF8},
		{"UTF-16 input", "\xff\xfe{\x00}\x00", jsonx.ErrNotUTF8},
		// Raw control characters in strings.
		{"raw control char", "\"a\x01\"", syn(1, 3, control)},
		{"raw tab", "\"\t\"", syn(1, 2, control)},
		{"raw newline", "[\"a\nb\"]", syn(1, 4, control)},
		{"raw NUL after escape", "\"\\n\x00\"", syn(1, 4, control)},
		// Depth.
		{"1001 arrays", strings.Repeat("[", 1001) + strings.Repeat("]", 1001), syn(1, 1001, depth)},
		{"1001 mixed", strings.Repeat(`{"a":[`, 500) + "{", syn(1, 3001, depth)},
		// Numbers.
		{"float overflow", "1e400", syn(1, 1, rng)},
		{"negative float overflow", "[-1.8e308]", syn(1, 2, rng)},
		{"4301 digits", strings.Repeat("9", 4301), syn(1, 1, "integer has more than 4300 digits")},
		{"minus and 4301 digits", "[-" + strings.Repeat("1", 4301) + "]", syn(1, 2, "integer has more than 4300 digits")},
		{"leading zero", "01", syn(1, 2, "unexpected data after the JSON value")},
		{"leading zero in array", "[01]", syn(1, 3, "unexpected character '1', expecting ',' or ']'")},
		{"missing fraction", "1.", syn(1, 3, eof)},
		{"missing fraction digit", "[1.e5]", syn(1, 4, digit)},
		{"missing exponent", "1e+", syn(1, 4, eof)},
		{"missing exponent digit", "[1ex]", syn(1, 4, digit)},
		{"leading dot", ".5", syn(1, 1, "unexpected character '.', expecting a value")},
		{"plus sign", "+1", syn(1, 1, "unexpected character '+', expecting a value")},
		{"lone minus", "[-]", syn(1, 3, digit)},
		{"hex", "0x10", syn(1, 2, "unexpected data after the JSON value")},
		// Surrogate escapes.
		{"lone high surrogate", `"\ud800"`, syn(1, 2, surrogate)},
		{"lone low surrogate", `"ab\udc00"`, syn(1, 4, surrogate)},
		{"high then BMP escape", `"\ud800\u0041"`, syn(1, 2, surrogate)},
		{"high then text", `"\ud800x"`, syn(1, 2, surrogate)},
		{"two highs", `"\ud83d\ud83d"`, syn(1, 2, surrogate)},
		{"reversed pair", `"\ude00\ud83d"`, syn(1, 2, surrogate)},
		{"high at end of input", `"\ud83d`, syn(1, 2, surrogate)},
		// Other syntax.
		{"empty", "", syn(1, 1, eof)},
		{"only whitespace", " \n ", syn(2, 2, eof)},
		{"unclosed object", "{", syn(1, 2, eof)},
		{"unclosed array", "[1", syn(1, 3, eof)},
		{"trailing comma in array", "[1,]", syn(1, 4, "unexpected character ']', expecting a value")},
		{"trailing comma in object", `{"a":1,}`, syn(1, 8, "unexpected character '}', expecting a property name in double quotes")},
		{"missing comma", "[1 2]", syn(1, 4, "unexpected character '2', expecting ',' or ']'")},
		{"missing colon", `{"a" 1}`, syn(1, 6, "unexpected character '1', expecting ':' after a property name")},
		{"missing value", `{"a":}`, syn(1, 6, "unexpected character '}', expecting a value")},
		{"unquoted key", `{a:1}`, syn(1, 2, "unexpected character 'a', expecting a property name in double quotes")},
		{"single quotes", `'a'`, syn(1, 1, `unexpected character '\'', expecting a value`)},
		{"bad escape", `"\x"`, syn(1, 2, "invalid escape in string")},
		{"bad unicode escape", `"\u12G4"`, syn(1, 2, `invalid \u escape in string`)},
		{"short unicode escape", `"\u12"`, syn(1, 2, `invalid \u escape in string`)},
		{"unterminated string", "[\n  \"abc", syn(2, 3, "unterminated string")},
		{"unterminated after escape", `"a\`, syn(1, 1, "unterminated string")},
		{"truncated literal", "tru", syn(1, 1, "unexpected character 't', expecting a value")},
		{"capitalised literal", "True", syn(1, 1, "unexpected character 'T', expecting a value")},
		{"two values", "{} {}", syn(1, 4, "unexpected data after the JSON value")},
		{"comment", "// c\n{}", syn(1, 1, "unexpected character '/', expecting a value")},
		{"NUL outside strings", "[1\x00]", syn(1, 3, "unexpected character '\\x00', expecting ',' or ']'")},
		{"form feed is not whitespace", "\f1", syn(1, 1, "unexpected character '\\f', expecting a value")},
		{"no-break space is not whitespace", "\u00a01", syn(1, 1, "unexpected character '\\u00a0', expecting a value")},
	}
}

func TestParseErrors(t *testing.T) {
	for _, tt := range parseErrorCases() {
		t.Run(tt.name, func(t *testing.T) {
			got, err := jsonx.Parse([]byte(tt.in))
			if err == nil {
				t.Fatalf("Parse(%.60q) = %v, want error %v", tt.in, got, tt.want)
			}
			if got != nil {
				t.Errorf("Parse(%.60q) returned value %v with error", tt.in, got)
			}
			if tt.want == jsonx.ErrNotUTF8 {
				if !errors.Is(err, jsonx.ErrNotUTF8) {
					t.Errorf("Parse(%.60q) error = %v, want ErrNotUTF8", tt.in, err)
				}
				return
			}
			if diff := cmp.Diff(tt.want, err); diff != "" {
				t.Errorf("Parse(%.60q) error mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestSyntaxErrorLocation(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   string
		want string
	}{
		{"third line", "{\n  \"a\": 1,\n  \"b\" 2\n}",
			"invalid JSON at line 3 column 7: unexpected character '2', expecting ':' after a property name"},
		{"blank lines", "[1,\n\n   x]", "invalid JSON at line 3 column 4: unexpected character 'x', expecting a value"},
		// Columns count bytes: "é" is two bytes, so 'x' is at byte column 6
		// although it is the fifth character.
		{"column in bytes", `"é" x`, "invalid JSON at line 1 column 6: unexpected data after the JSON value"},
		{"CRLF counts one line", "{\r\n\"a\" 1}", "invalid JSON at line 2 column 5: unexpected character '1', expecting ':' after a property name"},
		{"end of input on last line", "{\"a\":\n[1,\n2", "invalid JSON at line 3 column 2: unexpected end of input"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := jsonx.Parse([]byte(tt.in))
			var se *jsonx.SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse(%q) error = %v, want a *SyntaxError", tt.in, err)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("Parse(%q) error = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestErrorTexts(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{&jsonx.PathError{Path: "sink.headers.X-Tenant", Message: `duplicate key "a"`}, `sink.headers.X-Tenant: duplicate key "a"`},
		{&jsonx.SyntaxError{Line: 2, Column: 9, Reason: "unexpected end of input"}, "invalid JSON at line 2 column 9: unexpected end of input"},
		{jsonx.ErrNotUTF8, "not valid UTF-8 JSON"},
	} {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestParseDoesNotRetainInput(t *testing.T) {
	// Callers reuse message buffers: parsed strings must be copies.
	data := []byte(`{"key":"value","k2":"a\nb"}`)
	v, err := jsonx.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range data {
		data[i] = 'X'
	}
	want := map[string]any{"key": "value", "k2": "a\nb"}
	if diff := cmp.Diff(want, v); diff != "" {
		t.Errorf("value changed with its input (-want +got):\n%s", diff)
	}
}

func TestParseExactKeepsNumberTokens(t *testing.T) {
	v, err := jsonx.ParseExact([]byte(`{"a":9007199254740993.0,"b":[42.50,7e2,-0.0,-0,12],"c":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"a": jsonx.Number("9007199254740993.0"),
		"b": []any{jsonx.Number("42.50"), jsonx.Number("7e2"), jsonx.Number("-0.0"), jsonx.Integer("0"), jsonx.Integer("12")},
		"c": "x",
	}
	if diff := cmp.Diff(want, v); diff != "" {
		t.Errorf("ParseExact mismatch (-want +got):\n%s", diff)
	}
	if got, want := string(jsonx.Marshal(v, jsonx.UTF8)), `{"a":9007199254740992.0,"b":[42.5,700.0,-0.0,0,12],"c":"x"}`; got != want {
		t.Errorf("Marshal(ParseExact) = %s, want %s", got, want)
	}
	if got, want := string(jsonx.MarshalExact(v, jsonx.UTF8)), `{"a":9007199254740993.0,"b":[42.50,7e2,-0.0,0,12],"c":"x"}`; got != want {
		t.Errorf("MarshalExact(ParseExact) = %s, want %s", got, want)
	}
	if _, err := jsonx.ParseExact([]byte(`[1e400]`)); err == nil {
		t.Error("ParseExact accepted a float beyond the float64 range, which Parse rejects")
	}
}
