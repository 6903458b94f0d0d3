package segments

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/mapping"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/sink"
)

// Mapped payload columns (format parquet): the SQL sinks' mapping model
// (package mapping), with the types Parquet readers agree on. A segment
// keeps the whole message in its fixed columns, so a payload that is not a
// JSON object only makes its pointer columns missing; a required pointer
// column then rejects the message.

var mappedColumn = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Parquet timestamps are INT64 nanoseconds since the epoch.
var (
	minParquetTime = time.Unix(0, -1<<63).UTC()
	maxParquetTime = time.Unix(0, 1<<63-1).UTC()
)

// fixedColumns are the names of the fixed Parquet columns.
var fixedColumns = func() []string {
	var out []string
	for _, f := range rowSchema.Fields() {
		out = append(out, f.Name())
	}
	return out
}()

func mappingProfile() mapping.Profile {
	return mapping.Profile{
		TimePrecision: time.Nanosecond,
		MinTime:       minParquetTime,
		CheckColumn: func(name string) string {
			switch {
			case !mappedColumn.MatchString(name):
				return fmt.Sprintf("must match %s (got %q)", mappedColumn, name)
			case slices.Contains(fixedColumns, name):
				return fmt.Sprintf("%q is a fixed column of every segment", name)
			}
			return ""
		},
	}
}

// compileMapping validates mapping and lenient_strings into p.
func compileMapping(c *Config, p *fields.Problems) *mapping.Mapping {
	before := p.Len()
	m := mapping.Compile(c.Mapping, "mapping", mapping.Options{Profile: mappingProfile(), Lenient: c.LenientStrings}, p)
	if p.Len() != before {
		return nil
	}
	for _, col := range m.Columns {
		switch col.Type.Kind {
		case mapping.Text, mapping.BigInt, mapping.Double, mapping.Boolean, mapping.Timestamp:
		default:
			p.Addf(fields.Index("mapping", col.Item)+".type", "segments supports text, bigint, double, boolean, timestamp (got %q)", col.Type.String())
		}
	}
	if p.Len() != before {
		return nil
	}
	return m
}

// mappedSchema is a Parquet row type of the fixed columns followed by the
// mapped ones, built at start.
type mappedSchema struct {
	m      *mapping.Mapping
	typ    reflect.Type
	schema *parquet.Schema
	nfixed int
	json   string // canonical JSON of the mapping, for the footer
}

func newMappedSchema(c *Config, m *mapping.Mapping) *mappedSchema {
	rt := reflect.TypeFor[row]()
	var fs []reflect.StructField
	for i := range rt.NumField() {
		f := rt.Field(i)
		fs = append(fs, reflect.StructField{Name: f.Name, Type: f.Type, Tag: f.Tag})
	}
	for i, col := range m.Columns {
		var t reflect.Type
		tag := col.Name
		switch col.Type.Kind {
		case mapping.Text:
			t = reflect.TypeFor[string]()
		case mapping.BigInt:
			t = reflect.TypeFor[int64]()
		case mapping.Double:
			t = reflect.TypeFor[float64]()
		case mapping.Boolean:
			t = reflect.TypeFor[bool]()
		case mapping.Timestamp:
			t = reflect.TypeFor[int64]()
			tag += ",timestamp(nanosecond:utc)"
		}
		if !col.Required {
			t = reflect.PointerTo(t)
			tag += ",optional"
		}
		fs = append(fs, reflect.StructField{Name: fmt.Sprintf("Mapped%d", i), Type: t, Tag: reflect.StructTag(`parquet:"` + tag + `"`)})
	}
	typ := reflect.StructOf(fs)
	return &mappedSchema{
		m: m, typ: typ, schema: parquet.SchemaOf(reflect.New(typ).Interface()), nfixed: rt.NumField(),
		json: mappingJSON(c.Mapping),
	}
}

// mappingJSON is the canonical JSON of the configured mapping items.
func mappingJSON(items any) string {
	b, err := json.Marshal(items)
	if err != nil {
		return "[]"
	}
	v, err := jsonx.ParseExact(b)
	if err != nil {
		return string(b)
	}
	return string(jsonx.Append(nil, v, jsonx.UTF8))
}

// values converts e's mapped columns; a failure is Permanent
// (ValidationError) for this message alone.
func (ms *mappedSchema) values(e *sink.Envelope, mode record.PayloadMode) ([]any, error) {
	var payload any
	var perr error
	if ms.m.NeedsPayload {
		obj, err := mapping.Payload(e, mode)
		if err != nil {
			perr = err
		} else {
			payload = obj
		}
	}
	out := make([]any, len(ms.m.Columns))
	for i, col := range ms.m.Columns {
		var v any
		var err error
		if pointer, _ := col.Source(); pointer && perr != nil {
			if col.Required {
				err = perr
			} else {
				v = col.Default
			}
		} else {
			v, err = col.Value(e, payload)
		}
		if err == nil {
			if t, ok := v.(time.Time); ok && (t.Before(minParquetTime) || t.After(maxParquetTime)) {
				err = sink.AsPermanentType(sink.ValidationError,
					fmt.Errorf("mapping column %q (path %q): out of range for timestamp", col.Name, col.Path))
			}
		}
		if err != nil {
			if sink.Failed(err).Outcome != sink.Permanent {
				err = sink.AsPermanentType(sink.ValidationError, err)
			}
			return nil, fmt.Errorf("segments row for subject %s (stream seq %d): %w", e.Subject, e.StreamSequence, err)
		}
		out[i] = v
	}
	return out, nil
}

// value builds the Parquet row value of r and its mapped values.
func (ms *mappedSchema) value(r *row, vals []any) any {
	v := reflect.New(ms.typ).Elem()
	rv := reflect.ValueOf(r).Elem()
	for i := range ms.nfixed {
		v.Field(i).Set(rv.Field(i))
	}
	for i, x := range vals {
		f := v.Field(ms.nfixed + i)
		if x == nil {
			continue
		}
		var g reflect.Value
		switch x := x.(type) {
		case time.Time:
			g = reflect.ValueOf(x.UnixNano())
		default:
			g = reflect.ValueOf(x)
		}
		if f.Kind() == reflect.Pointer {
			p := reflect.New(f.Type().Elem())
			p.Elem().Set(g)
			f.Set(p)
		} else {
			f.Set(g)
		}
	}
	return v.Addr().Interface()
}
