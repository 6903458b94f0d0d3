package clickhouse

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nats-sinks/nats-sink/internal/mapping"
)

// ddlType returns the type auto_create and auto_evolve give c (without
// Nullable).
func (c *column) ddlType(f features) string {
	if c.mc == nil {
		return auditTypes[c.field].typ
	}
	t := c.mc.Type
	switch t.Kind {
	case mapping.Text, mapping.JSON, mapping.Bytes:
		return "String"
	case mapping.BigInt:
		return "Int64"
	case mapping.Integer:
		return "Int32"
	case mapping.Double:
		return "Float64"
	case mapping.Numeric:
		return "Decimal(" + strconv.Itoa(t.Precision) + ", " + strconv.Itoa(t.Scale) + ")"
	case mapping.Boolean:
		return "UInt8"
	case mapping.Timestamp:
		if f.dateTime64 {
			return "DateTime64(9, 'UTC')"
		}
		return "DateTime('UTC')"
	case mapping.Date:
		return "Date"
	case mapping.UUID:
		return "UUID"
	}
	return "String"
}

// columnDDL returns "`name` Type" for CREATE TABLE.
func (c *column) columnDDL(f features) string {
	t := c.ddlType(f)
	if !c.plain {
		t = "Nullable(" + t + ")"
	}
	return quote(c.name) + " " + t
}

// baseType strips Nullable(…) and LowCardinality(…) and every space from a
// system.columns type ("Nullable(Decimal(12, 2))" → "Decimal(12,2)").
func baseType(t string) string {
	t = strings.ReplaceAll(t, " ", "")
	for {
		switch {
		case strings.HasPrefix(t, "Nullable(") && strings.HasSuffix(t, ")"):
			t = t[len("Nullable(") : len(t)-1]
		case strings.HasPrefix(t, "LowCardinality(") && strings.HasSuffix(t, ")"):
			t = t[len("LowCardinality(") : len(t)-1]
		default:
			return t
		}
	}
}

var (
	fixedString = regexp.MustCompile(`^FixedString\([0-9]+\)$`)
	decimalType = regexp.MustCompile(`^Decimal\(([0-9]+),([0-9]+)\)$`)
	dateTimeTZ  = regexp.MustCompile(`^DateTime(\('[^']*'\))?$`)
	dateTime64  = regexp.MustCompile(`^DateTime64\(([0-9])(,'[^']*')?\)$`)
)

// encoding is how a column's value is written in a JSONEachRow row, chosen
// from the column's type on the server.
type encoding int

const (
	encAudit      encoding = iota + 1 // audit value: nil, string or int64
	encString                         // string, JSONText
	encInt                            // int64
	encFloat                          // float64
	encDecimal                        // mapping.Decimal, unquoted
	encBoolUInt8                      // bool as 1/0
	encBool                           // bool as true/false
	encDateTime                       // time.Time as epoch seconds (floor)
	encDateTime64                     // time.Time as ticks of the scale
	encDate                           // mapping.CivilDate as "YYYY-MM-DD"
	encDate32                         // same, Date32 range
	encBytes                          // []byte as its base64 text
)

// encoder is a column's encoding and, for DateTime64, its scale.
type encoder struct {
	enc   encoding
	scale int
}

// accept returns the encoder for a column of mapped type t found with base
// type found, or ok false when the type is not compatible.
func accept(t mapping.Type, found string) (encoder, bool) {
	switch t.Kind {
	case mapping.Text:
		if found == "String" || fixedString.MatchString(found) {
			return encoder{enc: encString}, true
		}
	case mapping.JSON:
		if found == "String" {
			return encoder{enc: encString}, true
		}
	case mapping.Bytes:
		if found == "String" {
			return encoder{enc: encBytes}, true
		}
	case mapping.BigInt:
		if found == "Int64" {
			return encoder{enc: encInt}, true
		}
	case mapping.Integer:
		if found == "Int32" || found == "Int64" {
			return encoder{enc: encInt}, true
		}
	case mapping.Double:
		if found == "Float64" {
			return encoder{enc: encFloat}, true
		}
	case mapping.Numeric:
		if m := decimalType.FindStringSubmatch(found); m != nil {
			p, _ := strconv.Atoi(m[1])
			s, _ := strconv.Atoi(m[2])
			if p >= t.Precision && s == t.Scale {
				return encoder{enc: encDecimal}, true
			}
		}
	case mapping.Boolean:
		switch found {
		case "UInt8":
			return encoder{enc: encBoolUInt8}, true
		case "Bool":
			return encoder{enc: encBool}, true
		}
	case mapping.Timestamp:
		if dateTimeTZ.MatchString(found) {
			return encoder{enc: encDateTime}, true
		}
		if m := dateTime64.FindStringSubmatch(found); m != nil {
			p, _ := strconv.Atoi(m[1])
			return encoder{enc: encDateTime64, scale: p}, true
		}
	case mapping.Date:
		switch found {
		case "Date":
			return encoder{enc: encDate}, true
		case "Date32":
			return encoder{enc: encDate32}, true
		}
	case mapping.UUID:
		if found == "UUID" || found == "String" {
			return encoder{enc: encString}, true
		}
	}
	return encoder{}, false
}

// Value ranges of the ClickHouse types the sink range-checks itself: the
// server silently wraps or zeroes values outside them. DateTime64 and
// Date32 use the narrowest range of the server versions that have them.
var (
	dateMin       = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	dateMax       = time.Date(2105, 12, 31, 0, 0, 0, 0, time.UTC)
	dateTimeMax   = time.Date(2105, 12, 31, 23, 59, 59, 999999999, time.UTC)
	dateTime64Min = time.Date(1925, 1, 1, 0, 0, 0, 0, time.UTC)
	dateTime64Max = time.Unix(0, 1<<63-1).UTC() // 2262-04-11T23:47:16.854775807Z
	date32Max     = time.Date(2283, 11, 11, 0, 0, 0, 0, time.UTC)
)

// rangeProblem returns the reason a converted value cannot be stored in a
// column with encoder e, or "".
func (e encoder) rangeProblem(v any) string {
	switch e.enc {
	case encDateTime:
		t := v.(time.Time)
		if t.Before(dateMin) || t.After(dateTimeMax) {
			return "out of range for ClickHouse DateTime"
		}
	case encDateTime64:
		t := v.(time.Time)
		if t.Before(dateTime64Min) || t.After(dateTime64Max) {
			return "out of range for ClickHouse DateTime64(" + strconv.Itoa(e.scale) + ")"
		}
	case encDate:
		d := v.(mapping.CivilDate).Time()
		if d.Before(dateMin) || d.After(dateMax) {
			return "out of range for ClickHouse Date"
		}
	case encDate32:
		d := v.(mapping.CivilDate).Time()
		if d.Before(dateTime64Min) || d.After(date32Max) {
			return "out of range for ClickHouse Date32"
		}
	}
	return ""
}
