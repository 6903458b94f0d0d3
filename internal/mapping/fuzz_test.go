package mapping_test

import (
	"math/big"
	"regexp"
	"strconv"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/mapping"
	"github.com/nats-sinks/nats-sink/sink"
)

var fuzzTypes = []string{"text", "bigint", "integer", "double", "numeric(12,2)", "numeric(38,10)", "boolean",
	"timestamp", "date", "json", "uuid", "bytes"}

// smallExponent limits the exact cross-check to numbers big.Rat can hold
// cheaply.
var smallExponent = regexp.MustCompile(`^-?[0-9.]{1,60}([eE][+-]?[0-9]{1,3})?$`)

// FuzzConvert converts arbitrary JSON values with every type: no panic,
// and every accepted number keeps its exact value.
func FuzzConvert(f *testing.F) {
	for _, seed := range []string{`1`, `-0`, `-0.0`, `9007199254740993.0`, `1e400`, `"1e3"`, `"2026-05-29T10:11:12.5+02:00"`,
		`"2026-02-30"`, `{"a":[1,"x"]}`, `"aGVsbG8="`, `"0189a3b4-c5d6-7e8f-9a0b-1c2d3e4f5a6b"`, `true`, `null`, `1e-7`,
		`253402300799999`, `-62135596800001`, `"\u0000"`} {
		for i := range fuzzTypes {
			f.Add(seed, uint8(i), false, uint8(0))
			f.Add(seed, uint8(i), true, uint8(3))
		}
	}
	f.Fuzz(func(t *testing.T, input string, typ uint8, lenient bool, unit uint8) {
		payload, err := jsonx.ParseExact([]byte(`{"v":` + input + `}`))
		if err != nil {
			return
		}
		tname := fuzzTypes[int(typ)%len(fuzzTypes)]
		units := []string{"s", "ms", "us", "ns"}
		var p fields.Problems
		m := mapping.Compile([]mapping.Item{{Column: "c", Path: "/v", Type: tname, EpochUnit: units[int(unit)%4]}}, "mapping",
			mapping.Options{Profile: mapping.Profile{TimePrecision: time.Microsecond, RejectNUL: lenient}, Lenient: lenient}, &p)
		if p.Len() > 0 {
			t.Fatalf("Compile(%s): %v", tname, p.List())
		}
		v, err := m.Columns[0].Value(&sink.Envelope{}, payload)
		if err != nil {
			if r := sink.Failed(err); r.ErrorType != sink.ValidationError {
				t.Fatalf("%s %s: error %v is not a ValidationError", tname, input, err)
			}
			return
		}
		in := payload.(map[string]any)["v"]
		tok := ""
		switch x := in.(type) {
		case jsonx.Integer:
			tok = string(x)
		case jsonx.Number:
			tok = string(x)
		case string:
			if lenient {
				tok = x
			}
		}
		exact := func(got string) {
			if tok == "" || !smallExponent.MatchString(tok) {
				return
			}
			want, ok1 := new(big.Rat).SetString(tok)
			have, ok2 := new(big.Rat).SetString(got)
			if ok1 && ok2 && want.Cmp(have) != 0 {
				t.Fatalf("%s %s = %s, not the exact value", tname, input, got)
			}
		}
		switch x := v.(type) {
		case int64:
			exact(strconv.FormatInt(x, 10))
		case mapping.Decimal:
			exact(string(x))
		case string:
			if !utf8.ValidString(x) {
				t.Fatalf("%s %s: invalid UTF-8 result", tname, input)
			}
		case time.Time:
			if x.Year() < 1 || x.Year() > 9999 || !x.Equal(x.Truncate(time.Microsecond)) {
				t.Fatalf("%s %s = %v, outside the range or precision", tname, input, x)
			}
		}
	})
}

// FuzzPointer checks that any path either loads or is refused with a
// message, and that a pointer never panics on lookup.
func FuzzPointer(f *testing.F) {
	for _, s := range []string{"", "/", "/a~1b/~0", "/a~2", "$header:X", "$labels", "/0/01/-"} {
		f.Add(s)
	}
	doc, _ := jsonx.ParseExact([]byte(`{"a":[1,{"b":2}],"":{"":3}}`))
	f.Fuzz(func(t *testing.T, path string) {
		tokens, msg := mapping.ParsePointer(path)
		if msg == "" {
			mapping.Lookup(doc, tokens)
		}
	})
}
