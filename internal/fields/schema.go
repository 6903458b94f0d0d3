package fields

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
)

// Mask replaces secret values in effective configurations (docs/security.md#secret-hygiene).
const Mask = "********"

// Effective returns v (a struct or pointer to one) as a JSON-ready tree for
// jsonx: objects keyed by the json tags, null for nil pointers, integers as
// int64, numbers as float64. Fields tagged secret:"true" are masked when
// set; external and json:"-" fields are left out.
func Effective(v any) map[string]any {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	return effectiveStruct(rv)
}

func effectiveStruct(v reflect.Value) map[string]any {
	out := map[string]any{}
	for _, f := range structInfo(v.Type()).fields {
		if f.external {
			continue
		}
		fv := v.FieldByIndex(f.index)
		ev := effectiveValue(fv)
		if f.secret && ev != nil {
			ev = Mask
		}
		out[f.name] = ev
	}
	return out
}

func effectiveValue(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return effectiveValue(v.Elem())
	case reflect.Interface:
		// An "any JSON value" key holds a jsonx tree value, which
		// encodes as it is.
		if v.IsNil() {
			return nil
		}
		return v.Interface()
	case reflect.String:
		return v.String()
	case reflect.Bool:
		return v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return v.Uint()
	case reflect.Float32, reflect.Float64:
		return v.Float()
	case reflect.Slice:
		out := make([]any, v.Len())
		for i := range v.Len() {
			out[i] = effectiveValue(v.Index(i))
		}
		return out
	case reflect.Map:
		out := map[string]any{}
		it := v.MapRange()
		for it.Next() {
			out[it.Key().String()] = effectiveValue(it.Value())
		}
		return out
	case reflect.Struct:
		return effectiveStruct(v)
	}
	panic(fmt.Sprintf("fields: unsupported type %s", v.Type()))
}

// Coercion notes for schema descriptions: the loader accepts these forms
// (docs/configuration.md#compatible-coercions) although the schema states the canonical type.
const (
	intNote    = "Also accepted (compat): a number with zero fraction (5.0) or a string holding a decimal integer (\" +1_000 \", \"5.00\")."
	numberNote = "Also accepted (compat): a string holding a finite decimal number (\"2.5\", \"1e3\")."
	boolNote   = "Also accepted (compat): the strings true/false/yes/no/on/off/t/f/y/n/1/0 (any case) and the numbers 0 and 1."
)

// Schema returns the JSON Schema (draft 2020-12) fragment for v, a struct
// or pointer to one holding its defaults: property types, defaults, enums,
// ranges, patterns, descriptions and additionalProperties false. The result
// is a jsonx-encodable tree.
func Schema(v any) map[string]any {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	return schemaStruct(rv.Type(), rv)
}

func schemaStruct(t reflect.Type, def reflect.Value) map[string]any {
	props := map[string]any{}
	var required []any
	for _, f := range structInfo(t).fields {
		if f.external {
			continue
		}
		var fd reflect.Value
		if def.IsValid() {
			fd = def.FieldByIndex(f.index)
		}
		s := schemaField(f, f.typ, fd)
		if f.required {
			required = append(required, f.name)
			delete(s, "default")
		}
		props[f.name] = s
	}
	out := map[string]any{
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	}
	if len(required) > 0 {
		out["required"] = required
	}
	return out
}

func schemaField(f *field, t reflect.Type, def reflect.Value) map[string]any {
	nullable := false
	if t.Kind() == reflect.Pointer {
		nullable = !f.nullReject
		t = t.Elem()
	}
	if f.nullEmpty {
		nullable = true
	}
	if def.IsValid() && def.Kind() == reflect.Pointer {
		if def.IsNil() {
			def = reflect.Value{}
		} else {
			def = def.Elem()
		}
	}
	s := schemaType(f, t, def)
	var notes []string
	if f.doc != "" {
		notes = append(notes, f.doc)
	}
	switch typeName(t) {
	case "integer":
		notes = append(notes, intNote)
	case "number":
		if !f.strict {
			notes = append(notes, numberNote)
		}
	case "boolean":
		notes = append(notes, boolNote)
	}
	if f.nullEmpty {
		notes = append(notes, "null means empty.")
	}
	if f.orstring != "" {
		if f.orstring == "one" {
			notes = append(notes, "A single string is accepted as one item.")
		} else {
			notes = append(notes, fmt.Sprintf("A single string is accepted and split on %q.", f.orstring))
		}
		s["type"] = []any{"array", "string"}
	}
	if nullable {
		switch ty := s["type"].(type) {
		case string:
			s["type"] = []any{ty, "null"}
		case []any:
			s["type"] = append(ty, "null")
		}
	}
	if len(notes) > 0 {
		s["description"] = strings.Join(notes, " ")
	}
	if def.IsValid() && !f.required && t.Kind() != reflect.Struct {
		ev := effectiveValue(def)
		if f.secret && ev != nil {
			ev = Mask
		}
		s["default"] = ev
	}
	return s
}

// schemaType describes a non-pointer type with the value rules of f.
func schemaType(f *field, t reflect.Type, def reflect.Value) map[string]any {
	s := map[string]any{}
	switch t.Kind() {
	case reflect.Slice:
		s["type"] = "array"
		items := map[string]any{}
		if t.Elem().Kind() == reflect.Struct {
			var zero reflect.Value
			if d, ok := reflect.New(t.Elem()).Interface().(Defaulter); ok {
				d.SetDefaults()
				zero = reflect.ValueOf(d).Elem()
			}
			items = schemaStruct(t.Elem(), zero)
		} else {
			items = schemaType(itemField(f), t.Elem(), reflect.Value{})
		}
		s["items"] = items
		if f.minitems > 0 {
			s["minItems"] = f.minitems
		}
		if f.maxitems > 0 {
			s["maxItems"] = f.maxitems
		}
		if f.unique {
			s["uniqueItems"] = true
		}
		return s
	case reflect.Map:
		s["type"] = "object"
		s["additionalProperties"] = schemaType(itemField(f), t.Elem(), reflect.Value{})
		if f.maxitems > 0 {
			s["maxProperties"] = f.maxitems
		}
		return s
	case reflect.Struct:
		return schemaStruct(t, def)
	case reflect.Interface:
		return s // any JSON value
	}
	name := typeName(t)
	s["type"] = name
	switch name {
	case "string":
		if len(f.enum) > 0 {
			s["enum"] = stringsToAny(f.enum)
		}
		if f.pattern != nil {
			s["pattern"] = f.pattern.String()
		}
		if f.maxlen > 0 {
			s["maxLength"] = f.maxlen
		}
		if f.nonblank {
			s["minLength"] = 1
		}
	case "integer", "number":
		if len(f.enum) > 0 {
			var e []any
			for _, x := range f.enum {
				e = append(e, jsonx.Integer(x))
			}
			s["enum"] = e
		}
		bound := func(key, text string) {
			if text == "" {
				return
			}
			if name == "integer" {
				s[key] = jsonx.Integer(text)
				return
			}
			x, _ := strconv.ParseFloat(text, 64)
			s[key] = x
		}
		bound("minimum", f.minText)
		bound("maximum", f.maxText)
		bound("exclusiveMinimum", f.xminText)
	}
	return s
}

func stringsToAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
