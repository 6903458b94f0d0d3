package fields

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Check applies the rules of v's struct tags to the value v holds (a
// pointer to a struct, decoded or built in Go), adding every problem to p
// with its full path (path is v's own JSON path, "" for the root). The
// messages are Decode's. A value that passes Decode passes Check, so
// running both on a decoded value reports nothing twice.
//
// The normalising tags do not change the value: a Go-built Method "post"
// fails enum:"POST,PUT,PATCH" even though Decode would have upper-cased it.
// required is not checked (a Go value has no absent keys); a nil pointer
// is null and skips the rules of its field, and so does a blank *string
// tagged blanknull.
func Check(v any, path string, p *Problems) {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		panic("fields: Check needs a struct or a pointer to one")
	}
	p.register(path, rv.Type())
	checkStruct(rv, path, p)
}

// Validate is the body of a configuration's Validate method: it checks v
// (a pointer to the struct) against its tags (Check) and, when that found
// nothing, runs rules for the checks between keys that tags cannot express.
// Like Decode, it stops before the cross-key rules when a key is already
// wrong, so that a loaded configuration and a Go-built one with the same
// values get the same problems. It returns them as a *sink.ConfigError with
// paths relative to v, in schema order, or nil.
func Validate(v any, rules func(p *Problems)) error {
	var p Problems
	Check(v, "", &p)
	if p.Len() == 0 && rules != nil {
		rules(&p)
	}
	return p.Err()
}

func checkStruct(v reflect.Value, path string, p *Problems) {
	for _, f := range structInfo(v.Type()).fields {
		if f.external {
			continue
		}
		checkValue(v.FieldByIndex(f.index), f, Join(path, f.name), p)
	}
}

func checkValue(v reflect.Value, f *field, path string, p *Problems) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return
		}
		e := v.Elem()
		if f.blanknull && e.Kind() == reflect.String && strings.TrimSpace(e.String()) == "" {
			return
		}
		checkValue(e, f, path, p)
	case reflect.String:
		stringRules(v.String(), v.String(), f, path, p)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n := v.Int()
		if checkRange(float64(n), strconv.FormatInt(n, 10), f, path, p) {
			checkIntEnum(n, f, path, p)
		}
	case reflect.Float32, reflect.Float64:
		x := v.Float()
		checkRange(x, strconv.FormatFloat(x, 'g', -1, 64), f, path, p)
	case reflect.Slice:
		checkItems(v.Len(), f, path, p)
		item := itemField(f)
		seen := map[any]int{}
		for i := range v.Len() {
			ip := Index(path, i)
			before := p.Len()
			checkValue(v.Index(i), item, ip, p)
			if f.unique && p.Len() == before {
				checkUnique(v.Index(i), ip, i, seen, p)
			}
		}
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			panic("fields: map keys must be strings at " + path)
		}
		checkEntries(v.Len(), f, path, p)
		keys := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			keys = append(keys, k.String())
		}
		slices.Sort(keys)
		item := itemField(f)
		for _, k := range keys {
			checkValue(v.MapIndex(reflect.ValueOf(k).Convert(v.Type().Key())), item, Join(path, k), p)
		}
	case reflect.Struct:
		checkStruct(v, path, p)
	case reflect.Bool:
	default:
		panic(fmt.Sprintf("fields: unsupported type %s at %s", v.Type(), path))
	}
}
