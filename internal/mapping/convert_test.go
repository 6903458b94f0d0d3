package mapping_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/mapping"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/sink"
)

var (
	microProfile = mapping.Profile{TimePrecision: time.Microsecond}
	nanoProfile  = mapping.Profile{TimePrecision: time.Nanosecond}
	pgProfile    = mapping.Profile{TimePrecision: time.Microsecond, RejectNUL: true}
	mysqlProfile = mapping.Profile{TimePrecision: time.Microsecond, MinTime: time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)}
)

// compile builds a one-column mapping reading /v, failing the test on a
// load problem.
func compile(t testing.TB, item mapping.Item, o mapping.Options) *mapping.Column {
	t.Helper()
	if item.Column == "" {
		item.Column = "c"
	}
	if item.Path == "" {
		item.Path = "/v"
	}
	if item.EpochUnit == "" {
		item.EpochUnit = "ms"
	}
	var p fields.Problems
	m := mapping.Compile([]mapping.Item{item}, "mapping", o, &p)
	if p.Len() > 0 {
		t.Fatalf("Compile(%+v): %v", item, p.List())
	}
	return m.Columns[0]
}

// convert runs one column on the payload {"v": <input>}; input is JSON text.
func convert(t testing.TB, c *mapping.Column, input string) (any, string) {
	t.Helper()
	payload, err := jsonx.ParseExact([]byte(`{"v":` + input + `}`))
	if err != nil {
		t.Fatalf("payload %s: %v", input, err)
	}
	v, err := c.Value(&sink.Envelope{Subject: "s"}, payload)
	if err != nil {
		return nil, reasonOf(t, err)
	}
	return v, ""
}

// reasonOf strips the column prefix off a conversion error and checks that
// it is a ValidationError.
func reasonOf(t testing.TB, err error) string {
	t.Helper()
	if r := sink.Failed(err); r.Outcome != sink.Permanent || r.ErrorType != sink.ValidationError {
		t.Fatalf("error %v classifies as %v/%s, want Permanent/ValidationError", err, r.Outcome, r.ErrorType)
	}
	msg := err.Error()
	const prefix = `mapping column "c" (path "/v"): `
	if !strings.HasPrefix(msg, prefix) {
		t.Fatalf("error %q does not start with %q", msg, prefix)
	}
	return strings.TrimPrefix(msg, prefix)
}

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func date(y int, m time.Month, d int) mapping.CivilDate {
	return mapping.CivilDate{Year: y, Month: m, Day: d}
}

// floatBits makes cmp tell 0.0 from -0.0.
var floatBits = cmp.Comparer(func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) })

func TestConvert(t *testing.T) {
	long := strings.Repeat("é", 1<<20) // 2 MiB of text
	for _, tt := range []struct {
		typ     string
		input   string
		lenient bool
		unit    string
		prof    *mapping.Profile
		want    any
		reason  string
	}{
		// text
		{typ: "text", input: `"héllo"`, want: "héllo"},
		{typ: "text", input: `42.50`, want: "42.5"},
		{typ: "text", input: `123456789012345678901234567890`, want: "123456789012345678901234567890"},
		{typ: "text", input: `-0`, want: "0"},
		{typ: "text", input: `1e2`, want: "100.0"},
		{typ: "text", input: `true`, want: "true"},
		{typ: "text", input: `{"a":1}`, reason: "expected string, number or boolean (got object)"},
		{typ: "text", input: `[1]`, reason: "expected string, number or boolean (got array)"},
		{typ: "text", input: `"a\u0000b"`, want: "a\x00b"},
		{typ: "text", input: `"a\u0000b"`, prof: &pgProfile, reason: "contains U+0000"},
		{typ: "text", input: `"` + long + `"`, want: long},
		{typ: "text", input: `"NaN"`, want: "NaN"},

		// bigint
		{typ: "bigint", input: `7`, want: int64(7)},
		{typ: "bigint", input: `7.0`, want: int64(7)},
		{typ: "bigint", input: `7e2`, want: int64(700)},
		{typ: "bigint", input: `700e-2`, want: int64(7)},
		{typ: "bigint", input: `-0`, want: int64(0)},
		{typ: "bigint", input: `-0.0`, want: int64(0)},
		{typ: "bigint", input: `9223372036854775807`, want: int64(math.MaxInt64)},
		{typ: "bigint", input: `-9223372036854775808`, want: int64(math.MinInt64)},
		{typ: "bigint", input: `9223372036854775808`, reason: "out of range for bigint"},
		{typ: "bigint", input: `-9223372036854775809`, reason: "out of range for bigint"},
		{typ: "bigint", input: `99999999999999999999`, reason: "out of range for bigint"},
		{typ: "bigint", input: `9007199254740993.0`, want: int64(9007199254740993)},
		{typ: "bigint", input: `9.007199254740993e15`, want: int64(9007199254740993)},
		{typ: "bigint", input: `1e19`, reason: "out of range for bigint"},
		{typ: "bigint", input: `"1e999999999999"`, lenient: true, reason: "out of range for bigint"},
		{typ: "bigint", input: `"0e999999999999"`, lenient: true, want: int64(0)},
		{typ: "bigint", input: `1.5`, reason: "not an integer"},
		{typ: "bigint", input: `"1e-999999999999"`, lenient: true, reason: "not an integer"},
		{typ: "bigint", input: `1e-400`, reason: "not an integer"},
		{typ: "bigint", input: `"7"`, reason: "string not accepted for bigint (set lenient_strings)"},
		{typ: "bigint", input: `"7"`, lenient: true, want: int64(7)},
		{typ: "bigint", input: `"7e2"`, lenient: true, want: int64(700)},
		{typ: "bigint", input: `" 7"`, lenient: true, reason: "not a valid number"},
		{typ: "bigint", input: `"+7"`, lenient: true, reason: "not a valid number"},
		{typ: "bigint", input: `"07"`, lenient: true, reason: "not a valid number"},
		{typ: "bigint", input: `"1_000"`, lenient: true, reason: "not a valid number"},
		{typ: "bigint", input: `"0x10"`, lenient: true, reason: "not a valid number"},
		{typ: "bigint", input: `"NaN"`, lenient: true, reason: "not a valid number"},
		{typ: "bigint", input: `"Infinity"`, lenient: true, reason: "not a valid number"},
		{typ: "bigint", input: `true`, reason: "expected number (got boolean)"},
		{typ: "bigint", input: `true`, lenient: true, reason: "expected number or string (got boolean)"},

		// integer
		{typ: "integer", input: `2147483647`, want: int64(math.MaxInt32)},
		{typ: "integer", input: `-2147483648`, want: int64(math.MinInt32)},
		{typ: "integer", input: `2147483648`, reason: "out of range for integer"},
		{typ: "integer", input: `-2147483649`, reason: "out of range for integer"},

		// double
		{typ: "double", input: `1.5`, want: 1.5},
		{typ: "double", input: `9007199254740993`, want: 9007199254740992.0},
		{typ: "double", input: `9007199254740993.0`, want: 9007199254740992.0},
		{typ: "double", input: `-0.0`, want: math.Copysign(0, -1)},
		{typ: "double", input: `1e308`, want: 1e308},
		{typ: "double", input: `1e-400`, want: 0.0},
		{typ: "double", input: strings.Repeat("9", 400), reason: "out of range for double"},
		{typ: "double", input: `"1e400"`, lenient: true, reason: "out of range for double"},
		{typ: "double", input: `"NaN"`, lenient: true, reason: "not a valid number"},
		{typ: "double", input: `"2.5"`, reason: "string not accepted for double (set lenient_strings)"},

		// numeric
		{typ: "numeric(12,2)", input: `42.5`, want: mapping.Decimal("42.50")},
		{typ: "numeric(12,2)", input: `42.500`, want: mapping.Decimal("42.50")},
		{typ: "numeric(12,2)", input: `-0.05`, want: mapping.Decimal("-0.05")},
		{typ: "numeric(12,2)", input: `-0.0`, want: mapping.Decimal("0.00")},
		{typ: "numeric(12,2)", input: `9999999999.99`, want: mapping.Decimal("9999999999.99")},
		{typ: "numeric(12,2)", input: `10000000000`, reason: "out of range for numeric(12,2)"},
		{typ: "numeric(12,2)", input: `42.555`, reason: "more than 2 fraction digits for numeric(12,2)"},
		{typ: "numeric(12,2)", input: `4255.5e-2`, reason: "more than 2 fraction digits for numeric(12,2)"},
		{typ: "numeric(12,2)", input: `4255e-2`, want: mapping.Decimal("42.55")},
		{typ: "numeric(38,0)", input: `99999999999999999999999999999999999999`, want: mapping.Decimal("99999999999999999999999999999999999999")},
		{typ: "numeric(38,0)", input: `1e38`, reason: "out of range for numeric(38,0)"},
		{typ: "numeric(20,0)", input: `9007199254740993.0`, want: mapping.Decimal("9007199254740993")},
		{typ: "numeric(5,5)", input: `0.12345`, want: mapping.Decimal("0.12345")},
		{typ: "numeric(5,5)", input: `1`, reason: "out of range for numeric(5,5)"},
		{typ: "numeric(3,1)", input: `"12.3"`, lenient: true, want: mapping.Decimal("12.3")},

		// boolean
		{typ: "boolean", input: `true`, want: true},
		{typ: "boolean", input: `false`, want: false},
		{typ: "boolean", input: `1`, reason: "expected boolean (got number)"},
		{typ: "boolean", input: `"true"`, reason: "string not accepted for boolean (set lenient_strings)"},
		{typ: "boolean", input: `"true"`, lenient: true, want: true},
		{typ: "boolean", input: `"True"`, lenient: true, reason: "not a valid boolean"},
		{typ: "boolean", input: `0`, lenient: true, reason: "expected boolean or string (got number)"},

		// timestamp: strings
		{typ: "timestamp", input: `"2026-05-29T10:11:12Z"`, want: ts("2026-05-29T10:11:12Z")},
		{typ: "timestamp", input: `"2026-05-29t10:11:12z"`, want: ts("2026-05-29T10:11:12Z")},
		{typ: "timestamp", input: `"2026-05-29 10:11:12+02:00"`, want: ts("2026-05-29T08:11:12Z")},
		{typ: "timestamp", input: `"2026-05-29T00:30:00-05:30"`, want: ts("2026-05-29T06:00:00Z")},
		{typ: "timestamp", input: `"2026-05-29T10:11:12.1Z"`, want: ts("2026-05-29T10:11:12.1Z")},
		{typ: "timestamp", input: `"2026-05-29T10:11:12.123456789Z"`, want: ts("2026-05-29T10:11:12.123456Z")},
		{typ: "timestamp", input: `"2026-05-29T10:11:12.123456789Z"`, prof: &nanoProfile, want: ts("2026-05-29T10:11:12.123456789Z")},
		{typ: "timestamp", input: `"2026-05-29T10:11:12.1234567891Z"`, reason: "not a valid RFC 3339 timestamp"},
		{typ: "timestamp", input: `"2026-05-29T10:11:12."`, reason: "not a valid RFC 3339 timestamp"},
		{typ: "timestamp", input: `"2026-05-29T10:11:12"`, reason: "timestamp has no UTC offset"},
		{typ: "timestamp", input: `"2026-05-29T10:11:12.5"`, reason: "timestamp has no UTC offset"},
		{typ: "timestamp", input: `"2026-05-29T10:11:60Z"`, reason: "not a valid RFC 3339 timestamp"},
		{typ: "timestamp", input: `"2026-02-30T10:11:12Z"`, reason: "not a valid RFC 3339 timestamp"},
		{typ: "timestamp", input: `"2024-02-29T00:00:00Z"`, want: ts("2024-02-29T00:00:00Z")},
		{typ: "timestamp", input: `"2026-05-29T24:00:00Z"`, reason: "not a valid RFC 3339 timestamp"},
		{typ: "timestamp", input: `"2026-05-29T10:11:12+0200"`, reason: "not a valid RFC 3339 timestamp"},
		{typ: "timestamp", input: `"2026-05-29T10:11Z"`, reason: "not a valid RFC 3339 timestamp"},
		{typ: "timestamp", input: `"2026-05-29"`, reason: "not a valid RFC 3339 timestamp"},
		{typ: "timestamp", input: `"0001-01-01T00:00:00Z"`, want: ts("0001-01-01T00:00:00Z")},
		{typ: "timestamp", input: `"0001-01-01T00:30:00+01:00"`, reason: "out of range for timestamp"},
		{typ: "timestamp", input: `"9999-12-31T23:59:59.999999999Z"`, prof: &nanoProfile, want: ts("9999-12-31T23:59:59.999999999Z")},
		{typ: "timestamp", input: `"9999-12-31T23:30:00-01:00"`, reason: "out of range for timestamp"},
		{typ: "timestamp", input: `"0999-12-31T23:59:59Z"`, prof: &mysqlProfile, reason: "out of range for timestamp"},
		{typ: "timestamp", input: `"1000-01-01T00:00:00Z"`, prof: &mysqlProfile, want: ts("1000-01-01T00:00:00Z")},
		{typ: "timestamp", input: `true`, reason: "expected string or number (got boolean)"},

		// timestamp: epoch numbers
		{typ: "timestamp", input: `1780049472123`, want: ts("2026-05-29T10:11:12.123Z")},
		{typ: "timestamp", input: `1780049472123`, unit: "ms", want: ts("2026-05-29T10:11:12.123Z")},
		{typ: "timestamp", input: `1780049472`, unit: "s", want: ts("2026-05-29T10:11:12Z")},
		{typ: "timestamp", input: `1780049472.123456789`, unit: "s", prof: &nanoProfile, want: ts("2026-05-29T10:11:12.123456789Z")},
		{typ: "timestamp", input: `1780049472.1234567891`, unit: "s", reason: "not an integer"},
		{typ: "timestamp", input: `1780049472123456`, unit: "us", want: ts("2026-05-29T10:11:12.123456Z")},
		{typ: "timestamp", input: `1780049472123456789`, unit: "ns", prof: &nanoProfile, want: ts("2026-05-29T10:11:12.123456789Z")},
		{typ: "timestamp", input: `1780049472123456789`, unit: "ns", want: ts("2026-05-29T10:11:12.123456Z")},
		{typ: "timestamp", input: `-1`, unit: "ns", want: ts("1969-12-31T23:59:59.999999Z")},
		{typ: "timestamp", input: `1780049472123.5`, reason: "not an integer"},
		{typ: "timestamp", input: `1780049472123`, unit: "ns", want: ts("1970-01-01T00:29:40.049472Z")},
		{typ: "timestamp", input: `253402300799999`, want: ts("9999-12-31T23:59:59.999Z")},
		{typ: "timestamp", input: `253402300800000`, reason: "out of range for timestamp"},
		{typ: "timestamp", input: `-62135596800`, unit: "s", want: ts("0001-01-01T00:00:00Z")},
		{typ: "timestamp", input: `-62135596801`, unit: "s", reason: "out of range for timestamp"},
		{typ: "timestamp", input: `1e30`, reason: "out of range for timestamp"},
		{typ: "timestamp", input: `-1e30`, reason: "out of range for timestamp"},
		{typ: "timestamp", input: `"1e999999999"`, lenient: true, reason: "out of range for timestamp"},
		{typ: "timestamp", input: `-62135596800000000000`, unit: "ns", want: ts("0001-01-01T00:00:00Z")},
		{typ: "timestamp", input: `-62135596800000000001`, unit: "ns", reason: "out of range for timestamp"},
		{typ: "timestamp", input: `253402300799999999999`, unit: "ns", prof: &nanoProfile, want: ts("9999-12-31T23:59:59.999999999Z")},
		{typ: "timestamp", input: `1.5`, unit: "s", want: ts("1970-01-01T00:00:01.5Z")},
		{typ: "timestamp", input: `"1780049472123"`, reason: "not a valid RFC 3339 timestamp"},
		{typ: "timestamp", input: `"1780049472123"`, lenient: true, want: ts("2026-05-29T10:11:12.123Z")},

		// date
		{typ: "date", input: `"2026-05-29"`, want: date(2026, 5, 29)},
		{typ: "date", input: `"2026-02-30"`, reason: "not a valid date (YYYY-MM-DD)"},
		{typ: "date", input: `"2026-05-29T00:00:00Z"`, reason: "not a valid date (YYYY-MM-DD)"},
		{typ: "date", input: `"0000-12-31"`, reason: "out of range for date"},
		{typ: "date", input: `"0999-12-31"`, prof: &mysqlProfile, reason: "out of range for date"},
		{typ: "date", input: `1780049472123`, want: date(2026, 5, 29)},
		{typ: "date", input: `-1`, unit: "s", want: date(1969, 12, 31)},
		{typ: "date", input: `{}`, reason: "expected string or number (got object)"},

		// json
		{typ: "json", input: `{"b":[1,2.50,"é"],"a":{"x":null}}`, want: mapping.JSONText(`{"a":{"x":null},"b":[1,2.5,"\u00e9"]}`)},
		{typ: "json", input: `"x"`, want: mapping.JSONText(`"x"`)},
		{typ: "json", input: `0`, want: mapping.JSONText(`0`)},
		{typ: "json", input: `{"a":"\u0000"}`, prof: &pgProfile, reason: "contains U+0000"},
		{typ: "json", input: `{"\u0000":1}`, prof: &pgProfile, reason: "contains U+0000"},
		{typ: "json", input: `{"a":"\u0000"}`, want: mapping.JSONText(`{"a":"\u0000"}`)},

		// uuid
		{typ: "uuid", input: `"0189A3B4-C5D6-7E8F-9A0B-1C2D3E4F5A6B"`, want: "0189a3b4-c5d6-7e8f-9a0b-1c2d3e4f5a6b"},
		{typ: "uuid", input: `"{0189a3b4-c5d6-7e8f-9a0b-1c2d3e4f5a6b}"`, reason: "not a valid UUID"},
		{typ: "uuid", input: `"urn:uuid:0189a3b4-c5d6-7e8f-9a0b-1c2d3e4f5a6b"`, reason: "not a valid UUID"},
		{typ: "uuid", input: `"0189a3b4c5d67e8f9a0b1c2d3e4f5a6b"`, reason: "not a valid UUID"},
		{typ: "uuid", input: `"0189a3b4-c5d6-7e8f-9a0b-1c2d3e4f5a6g"`, reason: "not a valid UUID"},
		{typ: "uuid", input: `1`, reason: "expected string (got number)"},

		// bytes
		{typ: "bytes", input: `"aGVsbG8="`, want: []byte("hello")},
		{typ: "bytes", input: `""`, want: []byte{}},
		{typ: "bytes", input: `"aGVsbG8"`, reason: "not a valid base64 string"},
		{typ: "bytes", input: `"aGVsbG9="`, reason: "not a valid base64 string"},
		{typ: "bytes", input: `"aGVs bG8="`, reason: "not a valid base64 string"},
		{typ: "bytes", input: `"aGVsbG8-"`, reason: "not a valid base64 string"},
		{typ: "bytes", input: `[1]`, reason: "expected string (got array)"},
	} {
		prof := microProfile
		if tt.prof != nil {
			prof = *tt.prof
		}
		name := tt.typ + " " + tt.input
		if len(name) > 80 {
			name = name[:80]
		}
		t.Run(name, func(t *testing.T) {
			c := compile(t, mapping.Item{Type: tt.typ, EpochUnit: tt.unit}, mapping.Options{Profile: prof, Lenient: tt.lenient})
			got, reason := convert(t, c, tt.input)
			if reason != tt.reason {
				t.Fatalf("convert(%s, %s) reason = %q, want %q", tt.typ, tt.input, reason, tt.reason)
			}
			if diff := cmp.Diff(tt.want, got, floatBits); diff != "" {
				t.Errorf("convert(%s, %s) mismatch (-want +got):\n%s", tt.typ, tt.input, diff)
			}
		})
	}
}

// TestInvalidUTF8Header checks that a header value that is not UTF-8 (NATS
// headers are bytes) is refused rather than altered.
func TestInvalidUTF8Header(t *testing.T) {
	c := compile(t, mapping.Item{Path: "$header:X-Name", Type: "text"}, mapping.Options{Profile: microProfile})
	_, err := c.Value(&sink.Envelope{Headers: sink.Headers{"X-Name": "a\xffb"}}, nil)
	if err == nil || !strings.HasSuffix(err.Error(), ": not valid UTF-8") {
		t.Fatalf("Value(invalid UTF-8 header) error = %v, want not valid UTF-8", err)
	}
}

func TestMissingNullDefault(t *testing.T) {
	for _, tt := range []struct {
		name    string
		item    mapping.Item
		payload string
		want    any
		reason  string
	}{
		{"missing, no default", mapping.Item{Type: "bigint"}, `{}`, nil, ""},
		{"missing, default", mapping.Item{Type: "numeric(5,2)", Default: jsonx.Number("1.5")}, `{}`, mapping.Decimal("1.50"), ""},
		{"null ignores the default", mapping.Item{Type: "bigint", Default: jsonx.Integer("3")}, `{"v":null}`, nil, ""},
		{"missing, required", mapping.Item{Type: "bigint", Required: true}, `{}`, nil, "required value is missing"},
		{"null, required", mapping.Item{Type: "bigint", Required: true}, `{"v":null}`, nil, "required value is null"},
		{"step into a scalar is missing", mapping.Item{Type: "text", Path: "/v/x", Default: "d"}, `{"v":1}`, "d", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := compile(t, tt.item, mapping.Options{Profile: microProfile})
			payload, _ := jsonx.ParseExact([]byte(tt.payload))
			got, err := c.Value(&sink.Envelope{}, payload)
			reason := ""
			if err != nil {
				reason = err.Error()[strings.Index(err.Error(), "): ")+3:]
			}
			if reason != tt.reason {
				t.Fatalf("Value reason = %q, want %q", reason, tt.reason)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Value mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPointer(t *testing.T) {
	doc, _ := jsonx.ParseExact([]byte(`{"a/b":{"m~n":[10,{"":"empty"}]},"arr":[0,1,2],"01":"zero-one","-":"dash"}`))
	for _, tt := range []struct {
		path string
		want any
		ok   bool
	}{
		{"", doc, true},
		{"/a~1b/m~0n/0", jsonx.Integer("10"), true},
		{"/a~1b/m~0n/1/", "empty", true},
		{"/arr/2", jsonx.Integer("2"), true},
		{"/arr/3", nil, false},
		{"/arr/-", nil, false},
		{"/arr/01", nil, false},
		{"/arr/+1", nil, false},
		{"/01", "zero-one", true},
		{"/-", "dash", true},
		{"/arr/0/x", nil, false},
		{"/missing", nil, false},
		{"/A~1B", nil, false},
	} {
		tokens, msg := mapping.ParsePointer(tt.path)
		if msg != "" {
			t.Fatalf("ParsePointer(%q) = %s", tt.path, msg)
		}
		got, ok := mapping.Lookup(doc, tokens)
		if ok != tt.ok || !cmp.Equal(got, tt.want) {
			t.Errorf("Lookup(%q) = %v, %v; want %v, %v", tt.path, got, ok, tt.want, tt.ok)
		}
	}
	for _, bad := range []string{"/a~2", "/a~", "/~x/b"} {
		if _, msg := mapping.ParsePointer(bad); !strings.Contains(msg, "invalid JSON Pointer escape") {
			t.Errorf("ParsePointer(%q) problem = %q, want an escape problem", bad, msg)
		}
	}
}

func TestSpecialSources(t *testing.T) {
	recv := time.Date(2026, 5, 29, 10, 11, 12, 123456789, time.UTC)
	e := &sink.Envelope{
		Subject: "orders.eu.42", Headers: sink.Headers{"X-Tenant": "acme", "X-Qty": "12"},
		Priority: "high", Labels: []string{"billing", "eu"}, StreamSequence: 18446744073709551615,
		ReceivedAt: recv,
	}
	bare := &sink.Envelope{Subject: "s", ReceivedAt: recv}
	for _, tt := range []struct {
		path, typ string
		e         *sink.Envelope
		want      any
		reason    string
	}{
		{"$subject", "text", e, "orders.eu.42", ""},
		{"$header:x-tenant", "text", e, "acme", ""},
		{"$header:X-Qty", "integer", e, int64(12), ""}, // string sources are lenient
		{"$header:X-Missing", "text", e, nil, ""},
		{"$priority", "text", e, "high", ""},
		{"$classification", "text", e, nil, ""},
		{"$labels", "text", e, "billing;eu", ""},
		{"$labels", "json", e, mapping.JSONText(`["billing","eu"]`), ""},
		{"$labels", "text", bare, nil, ""},
		{"$stream_sequence", "numeric(20,0)", e, mapping.Decimal("18446744073709551615"), ""},
		{"$stream_sequence", "text", e, "18446744073709551615", ""},
		{"$stream_sequence", "bigint", e, nil, "out of range for bigint"},
		{"$stream_sequence", "bigint", bare, nil, ""},
		{"$received_at", "timestamp", e, recv.Truncate(time.Microsecond), ""},
		{"$received_at", "date", e, date(2026, 5, 29), ""},
		{"$received_at", "bigint", e, recv.Truncate(time.Microsecond).UnixNano(), ""},
		{"$received_at", "text", e, "2026-05-29T10:11:12.123456+00:00", ""},
	} {
		c := compile(t, mapping.Item{Path: tt.path, Type: tt.typ}, mapping.Options{Profile: nanoProfile})
		got, err := c.Value(tt.e, nil)
		reason := ""
		if err != nil {
			reason = err.Error()[strings.Index(err.Error(), "): ")+3:]
		}
		if reason != tt.reason || !cmp.Equal(got, tt.want) {
			t.Errorf("%s as %s = %v, %q; want %v, %q", tt.path, tt.typ, got, reason, tt.want, tt.reason)
		}
	}
}

func TestPayload(t *testing.T) {
	for _, tt := range []struct {
		name string
		e    sink.Envelope
		mode string
		want string
		typ  string
	}{
		{"array", sink.Envelope{Data: []byte(`[1]`)}, "json_or_envelope", "payload is not a JSON object (got array)", sink.ValidationError},
		{"number", sink.Envelope{Data: []byte(`1`)}, "json_or_envelope", "payload is not a JSON object (got number)", sink.ValidationError},
		{"null", sink.Envelope{Data: []byte(`null`)}, "json_or_envelope", "payload is not a JSON object (got null)", sink.ValidationError},
		{"text", sink.Envelope{Data: []byte(`hello`)}, "json_or_envelope", "payload is not a JSON object (got text)", sink.ValidationError},
		{"bytes", sink.Envelope{Data: []byte("\xff")}, "json_or_envelope", "payload is not a JSON object (got bytes)", sink.ValidationError},
		{"headers-only", sink.Envelope{Payload: sink.PayloadPresence{Omitted: true}}, "json_or_envelope", "payload omitted (headers-only delivery)", sink.ValidationError},
		{"json_only text", sink.Envelope{Subject: "s", Data: []byte(`hello`)}, "json_only", "message payload for subject 's' is not valid JSON", sink.SerializationError},
	} {
		_, err := mapping.Payload(&tt.e, record.PayloadMode(tt.mode))
		r := sink.Failed(err)
		if err == nil || err.Error() != tt.want || r.ErrorType != tt.typ {
			t.Errorf("%s: Payload error = %v (%s), want %q (%s)", tt.name, err, r.ErrorType, tt.want, tt.typ)
		}
	}
	obj, err := mapping.Payload(&sink.Envelope{Data: []byte(`{"n":9007199254740993.0}`)}, "json_only")
	if n, _ := obj.Get("n"); err != nil || n != jsonx.Number("9007199254740993.0") {
		t.Errorf("Payload(object) = %v, %v; want the exact number token", obj, err)
	}
}

func TestCompileProblems(t *testing.T) {
	ident := func(name string) string {
		if strings.ContainsAny(name, " -") {
			return "must match ^[A-Za-z_][A-Za-z0-9_]*$"
		}
		return ""
	}
	items := []mapping.Item{
		{Column: "amount", Path: "/a", Type: "numeric(12,2)", EpochUnit: "ms"},
		{Column: "id", Path: "order.id", Type: "bigint", EpochUnit: "ms"},
		{Column: "AMOUNT", Path: "/b", Type: "text", EpochUnit: "ms"},
		{Column: "x", Path: "/c", Type: "int64", EpochUnit: "ms"},
		{Column: "y", Path: "/d", Type: "numeric(40,2)", EpochUnit: "ms"},
		{Column: "z", Path: "/e", Type: "bigint", Default: jsonx.Number("1.5"), EpochUnit: "ms"},
		{Column: "bad name", Path: "/f", Type: "text", EpochUnit: "ms"},
		{Column: "w", Path: "/g~2", Type: "text", EpochUnit: "ms"},
		{Column: "l", Path: "$labels", Type: "bigint", EpochUnit: "ms"},
		{Column: "h", Path: "$header:bad name", Type: "text", EpochUnit: "ms"},
		{Column: "r", Path: "/r", Type: "text", Required: true, Default: "x", EpochUnit: "ms"},
		{Column: "u", Path: "/u", Type: "timestamp", EpochUnit: "min"},
		{Column: "q", Path: "/q", Type: " Numeric(5,5) ", Default: jsonx.Number("0.5"), EpochUnit: "ms"},
		{Column: "v", Path: "/v", Type: "numeric(5,6)", EpochUnit: "ms"},
	}
	var p fields.Problems
	m := mapping.Compile(items, "mapping", mapping.Options{Profile: mapping.Profile{CheckColumn: ident}}, &p)
	want := []sink.Problem{
		{Path: "mapping[1].path", Message: `must be "" or a JSON Pointer starting with "/", or one of $subject, $header:<Name>, $priority, $classification, $labels, $stream_sequence, $received_at (got "order.id")`},
		{Path: "mapping[2].column", Message: `duplicate column "AMOUNT" (also used by mapping[0].column)`},
		{Path: "mapping[3].type", Message: `must be one of text, bigint, integer, double, numeric(p,s), boolean, timestamp, date, json, uuid, bytes (got "int64")`},
		{Path: "mapping[4].type", Message: "numeric needs 1 <= p <= 38 and 0 <= s <= min(p, 30) (got numeric(40,2))"},
		{Path: "mapping[5].default", Message: "cannot convert to bigint: not an integer"},
		{Path: "mapping[6].column", Message: "must match ^[A-Za-z_][A-Za-z0-9_]*$"},
		{Path: "mapping[7].path", Message: `invalid JSON Pointer escape "~2" (only ~0 and ~1 are allowed)`},
		{Path: "mapping[8].type", Message: "$labels maps only to text or json (got bigint)"},
		{Path: "mapping[9].path", Message: `header name must be 1 to 128 characters of an HTTP token (got "bad name")`},
		{Path: "mapping[10].default", Message: "must not be set with required: true"},
		{Path: "mapping[11].epoch_unit", Message: `must be one of s, ms, us, ns (got "min")`},
		{Path: "mapping[13].type", Message: "numeric needs 1 <= p <= 38 and 0 <= s <= min(p, 30) (got numeric(5,6))"},
	}
	if diff := cmp.Diff(want, p.List()); diff != "" {
		t.Errorf("Compile problems mismatch (-want +got):\n%s", diff)
	}
	if got := m.Columns[12].Default; got != mapping.Decimal("0.50000") {
		t.Errorf("numeric(5,5) default = %v, want 0.50000", got)
	}
	var q fields.Problems
	mapping.Compile(make([]mapping.Item, 257), "mapping", mapping.Options{}, &q)
	if l := q.List(); len(l) == 0 || l[0] != (sink.Problem{Path: "mapping", Message: "must have at most 256 items (got 257)"}) {
		t.Errorf("257 items: first problem = %v", l[:min(1, len(l))])
	}
}

func TestValuesStopsAtFirstFailure(t *testing.T) {
	var p fields.Problems
	m := mapping.Compile([]mapping.Item{
		{Column: "a", Path: "/a", Type: "bigint", EpochUnit: "ms"},
		{Column: "b", Path: "/b", Type: "bigint", Required: true, EpochUnit: "ms"},
		{Column: "c", Path: "/c", Type: "uuid", EpochUnit: "ms"},
	}, "mapping", mapping.Options{}, &p)
	if p.Len() > 0 {
		t.Fatal(p.List())
	}
	payload, _ := jsonx.ParseExact([]byte(`{"a":1,"c":"bad"}`))
	_, err := m.Values(nil, &sink.Envelope{}, payload)
	if err == nil || err.Error() != `mapping column "b" (path "/b"): required value is missing` {
		t.Fatalf("Values error = %v", err)
	}
	var pe interface{ Unwrap() error }
	if !errors.As(err, &pe) {
		t.Fatalf("Values error %T does not wrap", err)
	}
}
