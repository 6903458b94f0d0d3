package mapping

import (
	"encoding/base64"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/record"
)

// Decimal is a numeric(p,s) value as exact decimal text with exactly s
// fraction digits ("42.50", "-0.05", "7").
type Decimal string

// JSONText is a json value as ascii canonical JSON text.
type JSONText string

// CivilDate is a date value (no time zone).
type CivilDate struct {
	Year  int
	Month time.Month
	Day   int
}

// String formats the date as YYYY-MM-DD.
func (d CivilDate) String() string {
	b := make([]byte, 0, 10)
	b = appendPadded(b, d.Year, 4)
	b = append(b, '-')
	b = appendPadded(b, int(d.Month), 2)
	b = append(b, '-')
	return string(appendPadded(b, d.Day, 2))
}

// Time returns midnight UTC of the date.
func (d CivilDate) Time() time.Time { return time.Date(d.Year, d.Month, d.Day, 0, 0, 0, 0, time.UTC) }

func appendPadded(b []byte, v, width int) []byte {
	s := strconv.Itoa(v)
	for range width - len(s) {
		b = append(b, '0')
	}
	return append(b, s...)
}

// epochUnit is the power of ten of nanoseconds in one unit.
type epochUnit int

var epochUnits = map[string]epochUnit{"s": 9, "ms": 6, "us": 3, "ns": 0}

// Reasons shared by several conversions (the per-message texts of the
// mapping's error contract; values are never quoted).
const (
	reasonNotInteger = "not an integer"
	reasonNoOffset   = "timestamp has no UTC offset"
	reasonNUL        = "contains U+0000"
	reasonNotUTF8    = "not valid UTF-8"
)

func outOfRange(t Type) string { return "out of range for " + t.String() }

func notValid(what string) string { return "not a valid " + what }

// jsonKind names the JSON kind of a tree value.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case jsonx.Integer, jsonx.Number, float64:
		return "number"
	case []any, []string:
		return "array"
	}
	return "object"
}

// convert converts one present, non-null input to the column's type; the
// reason, when not "", says why it cannot be.
func (c *Column) convert(v any) (any, string) {
	if r, ok := v.(receivedAt); ok {
		return c.convertReceivedAt(time.Time(r))
	}
	if labels, ok := v.([]string); ok {
		if c.Type.Kind == Text {
			return c.text(strings.Join(labels, ";"))
		}
		items := make([]any, len(labels))
		for i, l := range labels {
			items[i] = l
		}
		v = items
	}
	t := c.Type
	switch t.Kind {
	case Text:
		switch x := v.(type) {
		case string:
			return c.text(x)
		case jsonx.Integer:
			return string(x), ""
		case jsonx.Number:
			return jsonx.FormatFloat(x.Float()), ""
		case bool:
			return strconv.FormatBool(x), ""
		}
		return nil, expected("string, number or boolean", v)
	case BigInt, Integer:
		if x, ok := v.(jsonx.Integer); ok {
			// The common case, without the decimal form.
			if n, err := strconv.ParseInt(string(x), 10, 64); err == nil {
				if t.Kind == Integer && (n < math.MinInt32 || n > math.MaxInt32) {
					return nil, outOfRange(t)
				}
				return n, ""
			}
		}
		d, reason := c.number(v)
		if reason != "" {
			return nil, reason
		}
		n, integral, ok := d.int64()
		switch {
		case !integral:
			return nil, reasonNotInteger
		case !ok, t.Kind == Integer && (n < math.MinInt32 || n > math.MaxInt32):
			return nil, outOfRange(t)
		}
		return n, ""
	case Double:
		tok, reason := c.numberToken(v)
		if reason != "" {
			return nil, reason
		}
		f, ok := float(tok)
		if !ok {
			return nil, outOfRange(t)
		}
		return f, ""
	case Numeric:
		d, reason := c.number(v)
		if reason != "" {
			return nil, reason
		}
		if d.fracDigits() > t.Scale {
			return nil, "more than " + strconv.Itoa(t.Scale) + " fraction digits for " + t.String()
		}
		if d.intDigits() > t.Precision-t.Scale {
			return nil, outOfRange(t)
		}
		return Decimal(d.fixed(t.Scale)), ""
	case Boolean:
		switch x := v.(type) {
		case bool:
			return x, ""
		case string:
			if !c.lenient {
				return nil, "string not accepted for boolean (set lenient_strings)"
			}
			switch x {
			case "true":
				return true, ""
			case "false":
				return false, ""
			}
			return nil, notValid("boolean")
		}
		if c.lenient {
			return nil, expected("boolean or string", v)
		}
		return nil, expected("boolean", v)
	case Timestamp, Date:
		return c.temporal(v)
	case JSON:
		if c.prof.RejectNUL && hasNUL(v) {
			return nil, reasonNUL
		}
		return JSONText(jsonx.Marshal(v, jsonx.ASCII)), ""
	case UUID:
		s, ok := v.(string)
		if !ok {
			return nil, expected("string", v)
		}
		if !isUUID(s) {
			return nil, notValid("UUID")
		}
		return strings.ToLower(s), ""
	case Bytes:
		s, ok := v.(string)
		if !ok {
			return nil, expected("string", v)
		}
		b, err := base64.StdEncoding.Strict().DecodeString(s)
		if err != nil {
			return nil, notValid("base64 string")
		}
		if b == nil {
			b = []byte{}
		}
		return b, ""
	}
	return nil, "unsupported type"
}

func expected(kinds string, v any) string { return "expected " + kinds + " (got " + jsonKind(v) + ")" }

// text checks a string for a text column.
func (c *Column) text(s string) (any, string) {
	switch {
	case !utf8.ValidString(s):
		return nil, reasonNotUTF8
	case c.prof.RejectNUL && strings.IndexByte(s, 0) >= 0:
		return nil, reasonNUL
	}
	return s, ""
}

// numberToken returns the number token of a number input, or of a string
// input under the lenient rules.
func (c *Column) numberToken(v any) (string, string) {
	switch x := v.(type) {
	case jsonx.Integer:
		return string(x), ""
	case jsonx.Number:
		return string(x), ""
	case float64: // a hand-built tree
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return "", notValid("number")
		}
		return strconv.FormatFloat(x, 'g', -1, 64), ""
	case string:
		if !c.lenient {
			return "", "string not accepted for " + c.Type.String() + " (set lenient_strings)"
		}
		if !isNumberLiteral(x) {
			return "", notValid("number")
		}
		return x, ""
	}
	if c.lenient {
		return "", expected("number or string", v)
	}
	return "", expected("number", v)
}

func (c *Column) number(v any) (decimal, string) {
	tok, reason := c.numberToken(v)
	if reason != "" {
		return decimal{}, reason
	}
	return parseDecimal(tok), ""
}

// temporal converts input for timestamp and date columns.
func (c *Column) temporal(v any) (any, string) {
	t := c.Type
	var ts time.Time
	switch x := v.(type) {
	case string:
		if c.lenient && isNumberLiteral(x) {
			return c.temporal(jsonx.Number(x))
		}
		if t.Kind == Date {
			d, ok := parseDate(x)
			if !ok {
				return nil, notValid("date (YYYY-MM-DD)")
			}
			if d.Year < 1 || d.Time().Before(c.prof.minTime()) {
				return nil, outOfRange(t)
			}
			return d, ""
		}
		var reason string
		ts, reason = parseTimestamp(x)
		if reason != "" {
			return nil, reason
		}
	case jsonx.Integer, jsonx.Number, float64:
		d, reason := c.number(v)
		if reason != "" {
			return nil, reason
		}
		if ts, reason = epochTime(d, c.unit, t); reason != "" {
			return nil, reason
		}
	default:
		return nil, expected("string or number", v)
	}
	if ts.Before(c.prof.minTime()) || ts.After(maxTime) {
		return nil, outOfRange(t)
	}
	ts = ts.Truncate(c.prof.precision())
	if t.Kind == Date {
		y, m, d := ts.Date()
		return CivilDate{y, m, d}, ""
	}
	return ts, ""
}

var (
	bigBillion = big.NewInt(1e9)
	// rangeNS bounds the epoch-ns magnitudes worth converting: beyond it
	// every value is outside 0001..9999 (about ±2.5e20 ns).
	rangeNS = new(big.Int).Exp(big.NewInt(10), big.NewInt(21), nil)
)

// epochTime converts a count of unit since the epoch. The count must be an
// integer, except that seconds may have up to nine fraction digits. The
// reason, when not "", is not an integer or out of range.
func epochTime(d decimal, unit epochUnit, t Type) (time.Time, string) {
	if d.exp < 0 && (unit != 9 || d.exp < -9) {
		return time.Time{}, reasonNotInteger
	}
	if n, _, ok := d.scaledInt(int(unit)); ok {
		return time.Unix(0, n).UTC(), ""
	}
	// Beyond the int64 nanoseconds (years 1678..2262): exact arithmetic.
	e := d.exp + int(unit)
	if len(d.coef)+e > 22 {
		return time.Time{}, outOfRange(t)
	}
	n, _ := new(big.Int).SetString(d.coef+strings.Repeat("0", e), 10)
	if d.neg {
		n.Neg(n)
	}
	if new(big.Int).Abs(n).Cmp(rangeNS) > 0 {
		return time.Time{}, outOfRange(t)
	}
	sec, nsec := new(big.Int).DivMod(n, bigBillion, new(big.Int))
	return time.Unix(sec.Int64(), nsec.Int64()).UTC(), ""
}

// convertReceivedAt converts $received_at (microsecond precision).
func (c *Column) convertReceivedAt(t time.Time) (any, string) {
	t = record.Micro(t).UTC()
	switch c.Type.Kind {
	case Timestamp:
		return t.Truncate(c.prof.precision()), ""
	case Date:
		y, m, d := t.Date()
		return CivilDate{y, m, d}, ""
	case BigInt:
		if t.Year() < 1678 || t.Year() > 2261 {
			return nil, outOfRange(c.Type)
		}
		return t.UnixNano(), ""
	case Text:
		return record.ISO(t), ""
	}
	return nil, "unsupported type"
}

// hasNUL reports whether any string or key in v contains U+0000.
func hasNUL(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.IndexByte(x, 0) >= 0
	case []any:
		for _, it := range x {
			if hasNUL(it) {
				return true
			}
		}
	case map[string]any:
		for k, it := range x {
			if strings.IndexByte(k, 0) >= 0 || hasNUL(it) {
				return true
			}
		}
	case jsonx.Object:
		for _, m := range x {
			if strings.IndexByte(m.Key, 0) >= 0 || hasNUL(m.Value) {
				return true
			}
		}
	}
	return false
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !isHex(c) {
				return false
			}
		}
	}
	return true
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// parseDate parses exactly YYYY-MM-DD with a valid calendar date.
func parseDate(s string) (CivilDate, bool) {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return CivilDate{}, false
	}
	y, ok1 := digitsAt(s, 0, 4)
	m, ok2 := digitsAt(s, 5, 2)
	d, ok3 := digitsAt(s, 8, 2)
	if !ok1 || !ok2 || !ok3 || m < 1 || m > 12 || d < 1 || d > daysIn(y, m) {
		return CivilDate{}, false
	}
	return CivilDate{y, time.Month(m), d}, true
}

// parseTimestamp parses YYYY-MM-DD(T|t| )HH:MM:SS[.F](Z|z|±HH:MM), F one
// to nine digits, into a UTC instant.
func parseTimestamp(s string) (time.Time, string) {
	bad := notValid("RFC 3339 timestamp")
	if len(s) < 19 {
		return time.Time{}, bad
	}
	date, ok := parseDate(s[:10])
	if !ok || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || s[13] != ':' || s[16] != ':' {
		return time.Time{}, bad
	}
	hh, ok1 := digitsAt(s, 11, 2)
	mm, ok2 := digitsAt(s, 14, 2)
	ss, ok3 := digitsAt(s, 17, 2)
	if !ok1 || !ok2 || !ok3 || hh > 23 || mm > 59 || ss > 59 {
		return time.Time{}, bad
	}
	i := 19
	nanos := 0
	if i < len(s) && s[i] == '.' {
		j := skipDigits(s, i+1)
		n := j - i - 1
		if n < 1 || n > 9 {
			return time.Time{}, bad
		}
		nanos, _ = strconv.Atoi(s[i+1 : j])
		for range 9 - n {
			nanos *= 10
		}
		i = j
	}
	offset := 0
	switch {
	case i == len(s):
		return time.Time{}, reasonNoOffset
	case s[i] == 'Z' || s[i] == 'z':
		i++
	case s[i] == '+' || s[i] == '-':
		if len(s) != i+6 || s[i+3] != ':' {
			return time.Time{}, bad
		}
		oh, ok1 := digitsAt(s, i+1, 2)
		om, ok2 := digitsAt(s, i+4, 2)
		if !ok1 || !ok2 || oh > 23 || om > 59 {
			return time.Time{}, bad
		}
		offset = (oh*60 + om) * 60
		if s[i] == '-' {
			offset = -offset
		}
		i += 6
	default:
		return time.Time{}, bad
	}
	if i != len(s) {
		return time.Time{}, bad
	}
	t := time.Date(date.Year, date.Month, date.Day, hh, mm, ss, nanos, time.UTC)
	return t.Add(-time.Duration(offset) * time.Second), ""
}

func digitsAt(s string, i, n int) (int, bool) {
	v := 0
	for k := i; k < i+n; k++ {
		if s[k] < '0' || s[k] > '9' {
			return 0, false
		}
		v = v*10 + int(s[k]-'0')
	}
	return v, true
}

func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
