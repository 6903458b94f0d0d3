package jsonx_test

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
)

func TestAppendStringEscaping(t *testing.T) {
	for _, tt := range []struct {
		name      string
		in        string
		wantUTF8  string
		wantASCII string
	}{
		{"plain", "hello world", `"hello world"`, `"hello world"`},
		{"empty", "", `""`, `""`},
		{"quote and backslash", `a"b\c`, `"a\"b\\c"`, `"a\"b\\c"`},
		{"short escapes", "\n\r\t\b\f", `"\n\r\t\b\f"`, `"\n\r\t\b\f"`},
		{"other controls lower-case hex", "\x00\x01\x0b\x1a\x1f", `"\u0000\u0001\u000b\u001a\u001f"`, `"\u0000\u0001\u000b\u001a\u001f"`},
		{"html and slash stay literal", "/<>&'", `"/<>&'"`, `"/<>&'"`},
		{"space and tilde literal", " ~", `" ~"`, `" ~"`},
		{"DEL", "a\x7fb", "\"a\x7fb\"", `"a\u007fb"`},
		{"U+0080", "\u0080", "\"\u0080\"", `"\u0080"`},
		{"latin", "café", `"café"`, `"caf\u00e9"`},
		{"line and paragraph separators", "\u2028\u2029", "\"\u2028\u2029\"", `"\u2028\u2029"`},
		{"BMP top", "\uffff", "\"\uffff\"", `"\uffff"`},
		{"replacement char itself", "\ufffd", "\"\ufffd\"", `"\ufffd"`},
		{"emoji as surrogate pair", "😀", `"😀"`, `"\ud83d\ude00"`},
		{"last code point", "\U0010ffff", "\"\U0010ffff\"", `"\udbff\udfff"`},
		{"mixed runs", "a\"é\n😀z", "\"a\\\"é\\n😀z\"", `"a\"\u00e9\n\ud83d\ude00z"`},
		// Go strings may hold invalid UTF-8; the output must stay valid JSON.
		// Each maximal subpart becomes one U+FFFD.
		{"invalid byte", "a\xffb", "\"a\ufffdb\"", `"a\ufffdb"`},
		{"truncated 3-byte sequence is one subpart", "a\xe2\x82b", "\"a\ufffdb\"", `"a\ufffdb"`},
		{"truncated emoji is one subpart", "\xf0\x9f\x98", "\"\ufffd\"", `"\ufffd"`},
		{"encoded surrogate is three subparts", "\xed\xa0\x80", "\"\ufffd\ufffd\ufffd\"", `"\ufffd\ufffd\ufffd"`},
		{"overlong is two subparts", "\xc0\xaf", "\"\ufffd\ufffd\"", `"\ufffd\ufffd"`},
		{"above U+10FFFF", "\xf4\x90\x80\x80", "\"\ufffd\ufffd\ufffd\ufffd\"", `"\ufffd\ufffd\ufffd\ufffd"`},
		{"lone continuation bytes", "\x80\xbf", "\"\ufffd\ufffd\"", `"\ufffd\ufffd"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(jsonx.AppendString(nil, tt.in, jsonx.UTF8)); got != tt.wantUTF8 {
				t.Errorf("AppendString(%q, UTF8) = %s, want %s", tt.in, got, tt.wantUTF8)
			}
			if got := string(jsonx.AppendString(nil, tt.in, jsonx.ASCII)); got != tt.wantASCII {
				t.Errorf("AppendString(%q, ASCII) = %s, want %s", tt.in, got, tt.wantASCII)
			}
			// Marshal of a bare string is the same encoding.
			if got := string(jsonx.Marshal(tt.in, jsonx.ASCII)); got != tt.wantASCII {
				t.Errorf("Marshal(%q, ASCII) = %s, want %s", tt.in, got, tt.wantASCII)
			}
		})
	}
}

func TestFormatFloat(t *testing.T) {
	for _, tt := range []struct {
		in   float64
		want string
	}{
		{0, "0.0"},
		{math.Copysign(0, -1), "-0.0"},
		{42.5, "42.5"},
		{100, "100.0"},
		{0.0001, "0.0001"},
		{1e15, "1000000000000000.0"},
		{1e-5, "1e-05"},
		{1.5e-7, "1.5e-07"},
		{1e16, "1e+16"},
		{1.2345678901234568e+17, "1.2345678901234568e+17"},
		{1e22, "1e+22"},
		{5e-324, "5e-324"},
		{1.7976931348623157e+308, "1.7976931348623157e+308"},
		{-1.7976931348623157e+308, "-1.7976931348623157e+308"},
		{0.1, "0.1"},
		{-2.5, "-2.5"},
		{123456789.125, "123456789.125"},
		{1, "1.0"},
		{-1, "-1.0"},
		{12, "12.0"},
		{0.5, "0.5"},
		{0.75, "0.75"},
		{0.8, "0.8"},
		{0.00012345, "0.00012345"},
		{-0.0001, "-0.0001"},
		{9.999e-5, "9.999e-05"},
		{9999999999999998, "9999999999999998.0"},
		{1234567890123456.8, "1234567890123456.8"},
		{-1e-7, "-1e-07"},
		{1e100, "1e+100"},
		{2.5e-300, "2.5e-300"},
		{1.0 / 3, "0.3333333333333333"},
		{2.0 / 3, "0.6666666666666666"},
		{float64(1 << 53), "9007199254740992.0"},
		{1e21, "1e+21"},
	} {
		if got := jsonx.FormatFloat(tt.in); got != tt.want {
			t.Errorf("FormatFloat(%v) = %s, want %s", tt.in, got, tt.want)
		}
		if got := string(jsonx.Marshal(tt.in, jsonx.UTF8)); got != tt.want {
			t.Errorf("Marshal(%v) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestFormatFloatRoundTrips(t *testing.T) {
	// Every rendering must parse back to the same bits: shortest digits are
	// not allowed to lose precision in the fixed-notation rewrite.
	for _, f := range []float64{
		math.SmallestNonzeroFloat64, math.MaxFloat64, 1e-4, 9.99999999999999e-5, 1e16 - 2, 1e16,
		123.456, 0.1 + 0.2, math.Pi * 1e15, math.Pi * 1e-4, -math.E * 1e-5, 4.35e-12,
	} {
		s := jsonx.FormatFloat(f)
		back, err := strconv.ParseFloat(s, 64)
		if err != nil || math.Float64bits(back) != math.Float64bits(f) {
			t.Errorf("FormatFloat(%v) = %s, parses back as %v (%v)", f, s, back, err)
		}
	}
}

func TestAppendFloatPanicsOnNonFinite(t *testing.T) {
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		t.Run(strconv.FormatFloat(f, 'g', -1, 64), func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("Marshal(%v) did not panic", f)
				}
			}()
			jsonx.Marshal([]any{f}, jsonx.UTF8)
		})
	}
}

func TestMarshalScalarsAndContainers(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   any
		want string
	}{
		{"null", nil, "null"},
		{"true", true, "true"},
		{"false", false, "false"},
		{"int", -42, "-42"},
		{"int64 min", int64(math.MinInt64), "-9223372036854775808"},
		{"uint64 max", uint64(math.MaxUint64), "18446744073709551615"},
		{"Integer kept exact", jsonx.Integer("123456789012345678901234567890"), "123456789012345678901234567890"},
		{"empty object", map[string]any{}, "{}"},
		{"nil object", map[string]any(nil), "{}"},
		{"empty array", []any{}, "[]"},
		{"nil []string", []string(nil), "[]"},
		{"[]string", []string{"a", "é"}, `["a","\u00e9"]`},
		{"map[string]string sorted", map[string]string{"b": "2", "a": "1", "A": "0"}, `{"A":"0","a":"1","b":"2"}`},
		{"nested", map[string]any{"z": []any{1, 2.5, nil}, "a": map[string]any{"y": true, "x": "s"}},
			`{"a":{"x":"s","y":true},"z":[1,2.5,null]}`},
		// Code-point order: ASCII < U+00E9 < U+FFFF < U+1F600. UTF-16 order
		// would put U+1F600 (a surrogate pair) before U+FFFF.
		{"keys by code point", map[string]any{"\U0001f600": 1, "\uffff": 2, "é": 3, "z": 4, "Z": 5, "": 6, "a b": 7, "ab": 8},
			`{"":6,"Z":5,"a b":7,"ab":8,"z":4,"\u00e9":3,"\uffff":2,"\ud83d\ude00":1}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(jsonx.Marshal(tt.in, jsonx.ASCII)); got != tt.want {
				t.Errorf("Marshal(%#v) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestAppendKeepsPrefix(t *testing.T) {
	dst := []byte("prefix:")
	got := string(jsonx.Append(dst, map[string]any{"b": 1, "a": []any{}}, jsonx.UTF8))
	if want := `prefix:{"a":[],"b":1}`; got != want {
		t.Errorf("Append = %s, want %s", got, want)
	}
}

func TestMarshalManyNestedKeys(t *testing.T) {
	// More keys than the encoder's initial key buffer, at several depths,
	// so the shared key stack must grow while outer maps are iterating.
	// encoding/json also sorts map keys and agrees with us on plain ASCII
	// keys and integer values, so it serves as the oracle here.
	outer := map[string]any{}
	for i := range 100 {
		inner := map[string]any{}
		for j := range 50 {
			inner["k"+strconv.Itoa((j*37)%50)] = map[string]any{"z": j, "a": i, strconv.Itoa(j): []any{map[string]any{"q": 1, "p": 2}}}
		}
		outer["key"+strconv.Itoa((i*7)%100)] = inner
	}
	want, err := json.Marshal(outer)
	if err != nil {
		t.Fatal(err)
	}
	if got := jsonx.Marshal(outer, jsonx.UTF8); !bytes.Equal(got, want) {
		t.Errorf("Marshal differs from encoding/json:\n got %.200s\nwant %.200s", got, want)
	}
}

func TestMarshalPretty(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   any
		want string
	}{
		{"scalar", 1.5, "1.5"},
		{"empty containers", map[string]any{"o": map[string]any{}, "a": []any{}, "s": []string{}, "m": map[string]string{}},
			"{\n  \"a\": [],\n  \"m\": {},\n  \"o\": {},\n  \"s\": []\n}"},
		{"nesting", map[string]any{"b": []any{1, map[string]any{"d": nil, "c": "é"}}, "a": true},
			"{\n  \"a\": true,\n  \"b\": [\n    1,\n    {\n      \"c\": \"\\u00e9\",\n      \"d\": null\n    }\n  ]\n}"},
		{"top-level array", []any{[]any{}, "x"}, "[\n  [],\n  \"x\"\n]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(jsonx.MarshalPretty(tt.in, jsonx.ASCII)); got != tt.want {
				t.Errorf("MarshalPretty(%#v) =\n%s\nwant\n%s", tt.in, got, tt.want)
			}
		})
	}
}

func TestMarshalPanics(t *testing.T) {
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	for _, tt := range []struct {
		name string
		f    func()
		want string
	}{
		{"unsupported type", func() { jsonx.Marshal(map[string]any{"a": int32(1)}, jsonx.UTF8) }, "cannot encode value of type int32"},
		{"unsupported struct", func() { jsonx.Marshal(struct{}{}, jsonx.UTF8) }, "cannot encode value of type struct {}"},
		{"zero Flavour", func() { jsonx.Marshal("x", 0) }, "invalid Flavour 0"},
		{"cycle", func() { jsonx.Marshal(cyclic, jsonx.UTF8) }, "nested deeper than"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, tt.want) {
					t.Errorf("panic = %v, want one containing %q", r, tt.want)
				}
			}()
			tt.f()
		})
	}
}

// TestAppendStringWordBoundaries puts each byte class that needs attention
// at every offset of a string long enough for the 8-byte fast path, and
// checks the result equals escaping the pieces separately.
func TestAppendStringWordBoundaries(t *testing.T) {
	unquote := func(b []byte) string { return string(b[1 : len(b)-1]) }
	for _, special := range []string{"\x00", "\x1f", " ", "\"", "\\", "\x7f", "\x80", "é", "\xe2\x82", "😀", "~"} {
		for _, f := range []jsonx.Flavour{jsonx.UTF8, jsonx.ASCII} {
			for pos := range 20 {
				prefix, suffix := strings.Repeat("a", pos), strings.Repeat("b", 19-pos)
				got := string(jsonx.AppendString(nil, prefix+special+suffix, f))
				want := `"` + prefix + unquote(jsonx.AppendString(nil, special, f)) + suffix + `"`
				if got != want {
					t.Errorf("AppendString(%q at %d, %d) = %s, want %s", special, pos, f, got, want)
				}
			}
		}
	}
}

func TestMarshalPointers(t *testing.T) {
	s, i, u, f := "é", int64(-3), uint64(math.MaxUint64), 0.5
	in := jsonx.Object{
		{"f", &f}, {"i", &i}, {"nf", (*float64)(nil)}, {"ni", (*int64)(nil)}, {"ns", (*string)(nil)},
		{"nu", (*uint64)(nil)}, {"s", &s}, {"u", &u},
	}
	want := `{"f":0.5,"i":-3,"nf":null,"ni":null,"ns":null,"nu":null,"s":"\u00e9","u":18446744073709551615}`
	if got := string(jsonx.Marshal(in, jsonx.ASCII)); got != want {
		t.Errorf("Marshal = %s, want %s", got, want)
	}
}
