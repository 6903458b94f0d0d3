// Package mapping is the dialect-neutral core of the mapped layout: the
// "mapping" items a SQL or ClickHouse sink is configured with (a column, a
// JSON Pointer or special source, a type), their validation with JSON paths,
// and the conversion of one message's values into typed Go values, ready for
// a dialect to bind or encode.
//
// Conversions use the exact decimal value of a number token as written in
// the payload (9007199254740993.0 is exactly that integer), never its
// float64, except for type double; nothing is rounded, wrapped, clamped or
// truncated except timestamps below the column precision. What differs per
// database (timestamp precision, earliest timestamp, U+0000 in strings,
// identifier rules) is a Profile.
//
// Converted values have these Go types, per Type.Kind:
//
//	Text      string (valid UTF-8)
//	BigInt    int64
//	Integer   int64 (within int32)
//	Double    float64 (finite)
//	Numeric   Decimal (exactly Scale fraction digits)
//	Boolean   bool
//	Timestamp time.Time (UTC, truncated to Profile.TimePrecision)
//	Date      CivilDate
//	JSON      JSONText (ascii canonical JSON text)
//	UUID      string (lower-case 8-4-4-4-12)
//	Bytes     []byte
//
// and nil for SQL NULL.
//
// A sink holds []Item in its Config (the type is sqlconfig.MappingItem, so
// public Configs can name it), decodes its object with jsonx.ParseExact so
// that defaults keep their tokens, and calls Compile with its Profile when
// it validates; Compile reports every problem at "mapping[i].<key>" and
// converts the defaults. Per message it parses the payload with Payload when
// Mapping.NeedsPayload, then takes each Column's Value (or Values for all):
// a failure is a ValidationError naming the column, the path and the
// reason, and fails that message alone. Database-specific ranges (a
// ClickHouse Date ends in 2105) are the sink's to check on the converted
// value; Column.Source tells key paths that come from the message itself
// ($subject, $header:…) from payload pointers.
package mapping

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/sqlconfig"
)

// MaxItems is the most mapping items one list may have.
const MaxItems = 256

// Item is one configured mapping item: where a column's value comes from and
// how it is converted. Default holds a jsonx tree value, decoded with
// jsonx.ParseExact so that numbers keep their exact token; nil = no default.
// The type lives in package sqlconfig so that public Configs can hold it.
type Item = sqlconfig.MappingItem

// Kind is a mapped type without its parameters.
type Kind int

// The mapped types.
const (
	Text Kind = iota + 1
	BigInt
	Integer
	Double
	Numeric
	Boolean
	Timestamp
	Date
	JSON
	UUID
	Bytes
)

var kindNames = [...]string{"", "text", "bigint", "integer", "double", "numeric", "boolean", "timestamp", "date", "json", "uuid", "bytes"}

// String returns the kind's configuration name ("numeric" for Numeric).
func (k Kind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Numeric reports whether k is one of the number types.
func (k Kind) Numeric() bool { return k == BigInt || k == Integer || k == Double || k == Numeric }

// Type is a mapped column type: a Kind, and for Numeric its precision and
// scale.
type Type struct {
	Kind             Kind
	Precision, Scale int
}

// String returns the type as configured: "bigint", "numeric(12,2)".
func (t Type) String() string {
	if t.Kind == Numeric {
		return "numeric(" + strconv.Itoa(t.Precision) + "," + strconv.Itoa(t.Scale) + ")"
	}
	return t.Kind.String()
}

const typeList = "text, bigint, integer, double, numeric(p,s), boolean, timestamp, date, json, uuid, bytes"

var numericType = regexp.MustCompile(`^numeric\(([0-9]{1,3}),([0-9]{1,3})\)$`)

// ParseType parses a trimmed, lower-cased type name. The message, when not
// "", is the problem to report at the type's path.
func ParseType(s string) (Type, string) {
	for k := Text; k <= Bytes; k++ {
		if k != Numeric && s == k.String() {
			return Type{Kind: k}, ""
		}
	}
	m := numericType.FindStringSubmatch(s)
	if m == nil {
		return Type{}, fmt.Sprintf("must be one of %s (got %q)", typeList, s)
	}
	p, _ := strconv.Atoi(m[1])
	sc, _ := strconv.Atoi(m[2])
	if p < 1 || p > 38 || sc > min(p, 30) {
		return Type{}, fmt.Sprintf("numeric needs 1 <= p <= 38 and 0 <= s <= min(p, 30) (got %s)", s)
	}
	return Type{Kind: Numeric, Precision: p, Scale: sc}, ""
}

// Profile is what differs between databases.
type Profile struct {
	// TimePrecision is the timestamp column precision: time.Microsecond
	// or time.Nanosecond. Timestamps are truncated toward the past to it.
	TimePrecision time.Duration
	// MinTime is the earliest accepted timestamp or date; the zero value
	// means 0001-01-01T00:00:00Z (MySQL: 1000-01-01).
	MinTime time.Time
	// RejectNUL rejects U+0000 in text and in every string of json values
	// (PostgreSQL).
	RejectNUL bool
	// CheckColumn returns the problem with a column name under the
	// database's identifier rule, or ""; nil accepts every name.
	CheckColumn func(name string) string
	// Fold returns a column name as the database stores it; nil keeps it.
	Fold func(name string) string
}

var (
	minTime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
)

func (p *Profile) minTime() time.Time {
	if p.MinTime.IsZero() {
		return minTime
	}
	return p.MinTime
}

func (p *Profile) precision() time.Duration {
	if p.TimePrecision <= 0 {
		return time.Nanosecond
	}
	return p.TimePrecision
}

// Column is one compiled mapping item.
type Column struct {
	// Name is the folded column name.
	Name string
	// Item is the item's index in its mapping list, for error paths.
	Item int
	// Path is the item's path as configured.
	Path string
	Type Type
	// Required columns never convert to NULL.
	Required bool
	// Default is the converted default (nil with HasDefault = NULL, the
	// default of every column without one).
	Default    any
	HasDefault bool

	src     source
	lenient bool
	unit    epochUnit
	prof    *Profile
}

// Source reports whether the column reads the payload (a JSON Pointer) and,
// if not, the special source's name ("$subject", "$header:X-Tenant").
func (c *Column) Source() (pointer bool, special string) {
	if c.src.kind == srcPointer {
		return true, ""
	}
	return false, c.Path
}

// Mapping is a compiled mapping list, in configured order. It is immutable
// and safe for concurrent use.
type Mapping struct {
	Columns []*Column
	// NeedsPayload is true when a column reads the payload.
	NeedsPayload bool
}

// Lookup returns the column whose name equals name ignoring case.
func (m *Mapping) Lookup(name string) (*Column, bool) {
	for _, c := range m.Columns {
		if strings.EqualFold(c.Name, name) {
			return c, true
		}
	}
	return nil, false
}

// Options are the sink keys that apply to every column.
type Options struct {
	Profile Profile
	// Lenient is lenient_strings.
	Lenient bool
}

// Compile validates items (decoded from the mapping array at path) and
// returns the compiled mapping. Every problem goes to p with a path under
// path ("mapping[2].type"); the result is meaningful only when p got none
// from this call. Column names are checked for duplicates among the items;
// the caller checks them against the row's other columns with Lookup.
func Compile(items []Item, path string, o Options, p *fields.Problems) *Mapping {
	prof := o.Profile
	m := &Mapping{}
	if len(items) > MaxItems {
		p.Addf(path, "must have at most %d items (got %d)", MaxItems, len(items))
	}
	seen := map[string]int{}
	for i, it := range items {
		ip := fields.Index(path, i)
		before := p.Len()
		c := &Column{Item: i, Path: it.Path, Required: it.Required, prof: &prof}
		switch {
		case strings.TrimSpace(it.Column) == "":
			p.Add(ip+".column", "must not be empty")
		case prof.CheckColumn != nil && prof.CheckColumn(it.Column) != "":
			p.Add(ip+".column", prof.CheckColumn(it.Column))
		default:
			c.Name = it.Column
			if prof.Fold != nil {
				c.Name = prof.Fold(it.Column)
			}
			key := strings.ToLower(it.Column)
			if j, dup := seen[key]; dup {
				p.Addf(ip+".column", "duplicate column %q (also used by %s.column)", it.Column, fields.Index(path, j))
			} else {
				seen[key] = i
			}
		}
		src, msg := parseSource(it.Path)
		if msg != "" {
			p.Add(ip+".path", msg)
		}
		c.src = src
		t, msg := ParseType(strings.ToLower(strings.TrimSpace(it.Type)))
		if msg != "" {
			p.Add(ip+".type", msg)
		} else if msg := src.allows(t); msg != "" && src.kind != srcInvalid {
			p.Add(ip+".type", msg)
		}
		c.Type = t
		switch it.EpochUnit {
		case "s", "ms", "us", "ns":
			c.unit = epochUnits[it.EpochUnit]
		case "":
			c.unit = epochUnits["ms"]
		default:
			p.Addf(ip+".epoch_unit", "must be one of s, ms, us, ns (got %q)", it.EpochUnit)
		}
		c.lenient = o.Lenient || src.stringSource()
		if it.Default != nil {
			switch {
			case it.Required:
				p.Add(ip+".default", "must not be set with required: true")
			case p.Len() == before:
				v, reason := c.convert(it.Default)
				if reason != "" {
					p.Addf(ip+".default", "cannot convert to %s: %s", t, reason)
				}
				c.Default, c.HasDefault = v, true
			}
		}
		if src.kind == srcPointer {
			m.NeedsPayload = true
		}
		m.Columns = append(m.Columns, c)
	}
	return m
}

// KeyKinds are the types a key column (strategy mapping) may have.
func KeyKinds() []Kind { return []Kind{Text, BigInt, Integer, Numeric, UUID, Date, Timestamp} }

// KeyProblem returns the problem with using c as a key column, or "":
// it must be required and of a KeyKinds type.
func (c *Column) KeyProblem() string {
	if !c.Required {
		return fmt.Sprintf("mapping column %q used as a key must have required: true", c.Name)
	}
	for _, k := range KeyKinds() {
		if c.Type.Kind == k {
			return ""
		}
	}
	return fmt.Sprintf("mapping column %q used as a key must have type text, bigint, integer, numeric(p,s), uuid, date or timestamp (got %s)", c.Name, c.Type)
}
