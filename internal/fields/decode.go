package fields

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/sink"
)

// Decode decodes tree (a value returned by jsonx.Parse) onto dst, a pointer
// to a struct that already holds its defaults. Absent keys keep their
// defaults. Every problem is added to p with its full path: path is the JSON
// path of tree itself ("" for the document root, "nats", "sink", ...).
func Decode(tree any, dst any, path string, p *Problems) {
	v := reflect.ValueOf(dst)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		panic("fields: Decode destination must be a pointer to a struct")
	}
	p.register(path, v.Elem().Type())
	decodeStruct(tree, v.Elem(), path, p)
}

// DecodeSink is the body of a sink Decoder: it parses raw strictly, decodes
// it onto dst (a pointer to the sink's Config holding its defaults, which
// must declare a `Type string json:"type"` field for the discriminator),
// and, when that found no problem, runs dst's Validate method if it
// implements Validator. It returns a *sink.ConfigError with paths relative
// to the sink object, or nil.
func DecodeSink(raw json.RawMessage, dst any) error {
	return decodeSink(raw, dst, jsonx.Parse)
}

// DecodeSinkExact is DecodeSink with numbers parsed exactly
// (jsonx.ParseExact), for sinks whose configuration holds JSON values
// converted later, such as mapping defaults: 9007199254740993.0 keeps its
// digits.
func DecodeSinkExact(raw json.RawMessage, dst any) error {
	return decodeSink(raw, dst, jsonx.ParseExact)
}

func decodeSink(raw json.RawMessage, dst any, parse func([]byte) (any, error)) error {
	var p Problems
	tree, err := parse(raw)
	if err != nil {
		if pe, ok := errors.AsType[*jsonx.PathError](err); ok {
			p.Add(pe.Path, pe.Message)
		} else {
			p.Add("", err.Error())
		}
		return &sink.ConfigError{Problems: p.List()}
	}
	Decode(tree, dst, "", &p)
	if p.Len() > 0 {
		return p.Err()
	}
	if val, ok := dst.(Validator); ok {
		return val.Validate()
	}
	return nil
}

// Join appends key to path with a dot ("" + "a" = "a").
func Join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Index appends an array index to path.
func Index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// JSONType names the JSON type of a jsonx tree value, as used in
// "expected <type> (got <json type>)".
func JSONType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case jsonx.Integer, jsonx.Number, float64, int, int64:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func decodeStruct(tree any, v reflect.Value, path string, p *Problems) {
	m, ok := tree.(map[string]any)
	if !ok {
		p.Addf(path, "expected object (got %s)", JSONType(tree))
		return
	}
	info := structInfo(v.Type())
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if info.field(k) == nil {
			p.Add(Join(path, k), unknownKey(k, info))
		}
	}
	for _, pf := range info.presence {
		_, present := m[pf.key]
		v.FieldByIndex(pf.index).SetBool(present)
	}
	for _, f := range info.fields {
		val, present := m[f.name]
		fp := Join(path, f.name)
		if !present {
			if f.required {
				p.Add(fp, "required")
			}
			continue
		}
		if f.external {
			continue
		}
		decodeField(val, v.FieldByIndex(f.index), f, fp, p)
	}
}

func unknownKey(k string, info *structFields) string {
	best, bestD := "", 3
	for _, f := range info.fields {
		if d := levenshtein(k, f.name); d < bestD {
			best, bestD = f.name, d
		}
	}
	if best == "" {
		return "unknown key"
	}
	return fmt.Sprintf("unknown key (did you mean %q)", best)
}

func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// typeName is the JSON type a Go type is declared as.
func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return typeName(t.Elem())
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice:
		return "array"
	case reflect.Interface:
		return "any JSON value"
	}
	return "object"
}

func decodeField(val any, fv reflect.Value, f *field, path string, p *Problems) {
	if val == nil {
		switch {
		case fv.Kind() == reflect.Interface:
			fv.SetZero()
		case fv.Kind() == reflect.Pointer && !f.nullReject:
			fv.SetZero()
		case f.nullEmpty:
			setEmpty(fv)
		default:
			p.Addf(path, "expected %s (got null)", typeName(fv.Type()))
		}
		return
	}
	if fv.Kind() == reflect.Pointer {
		nv := reflect.New(fv.Type().Elem())
		if fv.Type().Elem().Kind() == reflect.Struct {
			if d, ok := nv.Interface().(Defaulter); ok {
				d.SetDefaults()
			}
		}
		if s, ok := val.(string); ok && f.blanknull && strings.TrimSpace(s) == "" && nv.Elem().Kind() == reflect.String {
			fv.SetZero()
			return
		}
		if decodeValue(val, nv.Elem(), f, path, p) {
			fv.Set(nv)
		}
		return
	}
	decodeValue(val, fv, f, path, p)
}

func setEmpty(fv reflect.Value) {
	switch fv.Kind() {
	case reflect.Slice:
		fv.Set(reflect.MakeSlice(fv.Type(), 0, 0))
	case reflect.Map:
		fv.Set(reflect.MakeMap(fv.Type()))
	default:
		fv.SetZero()
	}
}

// decodeValue decodes one non-null value onto fv and reports whether it was
// accepted.
func decodeValue(val any, fv reflect.Value, f *field, path string, p *Problems) bool {
	switch fv.Kind() {
	case reflect.String:
		s, ok := val.(string)
		if !ok {
			p.Addf(path, "expected string (got %s)", JSONType(val))
			return false
		}
		s, ok = checkString(s, f, path, p)
		if ok {
			fv.SetString(s)
		}
		return ok
	case reflect.Bool:
		b, ok := coerceBool(val)
		if !ok {
			p.Addf(path, "expected boolean (got %s)", JSONType(val))
			return false
		}
		fv.SetBool(b)
		return true
	case reflect.Int, reflect.Int64, reflect.Int32:
		n, text, ok := coerceInt(val, f.strict)
		if !ok {
			p.Addf(path, "expected integer (got %s)", JSONType(val))
			return false
		}
		if !checkRange(float64(n), text, f, path, p) || !checkIntEnum(n, f, path, p) {
			return false
		}
		fv.SetInt(n)
		return true
	case reflect.Float64:
		x, ok := coerceNumber(val, f.strict)
		if !ok {
			p.Addf(path, "expected number (got %s)", JSONType(val))
			return false
		}
		if !checkRange(x, strconv.FormatFloat(x, 'g', -1, 64), f, path, p) {
			return false
		}
		fv.SetFloat(x)
		return true
	case reflect.Slice:
		return decodeSlice(val, fv, f, path, p)
	case reflect.Map:
		return decodeMap(val, fv, f, path, p)
	case reflect.Struct:
		before := p.Len()
		decodeStruct(val, fv, path, p)
		return p.Len() == before
	case reflect.Interface:
		// An "any JSON value" key (a mapping default): the tree value as
		// parsed, for its owner to interpret.
		fv.Set(reflect.ValueOf(val))
		return true
	}
	panic(fmt.Sprintf("fields: unsupported type %s at %s", fv.Type(), path))
}

func decodeSlice(val any, fv reflect.Value, f *field, path string, p *Problems) bool {
	items, ok := val.([]any)
	if s, isStr := val.(string); !ok && isStr && f.orstring != "" {
		ok = true
		if f.orstring == "one" {
			items = []any{s}
		} else {
			for _, part := range strings.Split(s, f.orstring) {
				items = append(items, part)
			}
		}
	}
	if !ok {
		p.Addf(path, "expected array (got %s)", JSONType(val))
		return false
	}
	before := p.Len()
	checkItems(len(items), f, path, p)
	et := fv.Type().Elem()
	out := reflect.MakeSlice(fv.Type(), 0, len(items))
	seen := map[any]int{}
	for i, item := range items {
		ip := Index(path, i)
		ev := reflect.New(et)
		if d, ok := ev.Interface().(Defaulter); ok {
			d.SetDefaults()
		}
		ok := item != nil || et.Kind() == reflect.Pointer
		if item == nil && !ok {
			p.Addf(ip, "expected %s (got null)", typeName(et))
		}
		if ok && decodeValue(item, ev.Elem(), itemField(f), ip, p) && f.unique {
			checkUnique(ev.Elem(), ip, i, seen, p)
		}
		// Keep every item, even one with problems, so that indices still
		// match the document when Validate methods report on later items.
		out = reflect.Append(out, ev.Elem())
	}
	fv.Set(out)
	return p.Len() == before
}

// checkItems applies minitems and maxitems to a slice of n items.
func checkItems(n int, f *field, path string, p *Problems) {
	if f.minitems > 0 && n < f.minitems {
		if f.minitems == 1 {
			p.Add(path, "must not be empty")
		} else {
			p.Addf(path, "must have at least %d items (got %d)", f.minitems, n)
		}
	}
	if f.maxitems > 0 && n > f.maxitems {
		p.Addf(path, "must have at most %d items (got %d)", f.maxitems, n)
	}
}

// checkUnique reports item i at path when an earlier item had its value.
func checkUnique(v reflect.Value, path string, i int, seen map[any]int, p *Problems) {
	if !v.Comparable() {
		return
	}
	k := v.Interface()
	if _, dup := seen[k]; dup {
		p.Addf(path, "duplicate value %s", quoteValue(k))
	}
	seen[k] = i
}

// checkEntries applies maxitems to a map of n entries.
func checkEntries(n int, f *field, path string, p *Problems) {
	if f.maxitems > 0 && n > f.maxitems {
		p.Addf(path, "must have at most %d entries (got %d)", f.maxitems, n)
	}
}

// itemField returns the rules that apply to each item of a slice or map
// value: everything but the slice-level ones.
func itemField(f *field) *field {
	c := *f
	c.minitems, c.maxitems, c.unique, c.orstring, c.required = 0, 0, false, "", false
	return &c
}

func quoteValue(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

func decodeMap(val any, fv reflect.Value, f *field, path string, p *Problems) bool {
	m, ok := val.(map[string]any)
	if !ok {
		p.Addf(path, "expected object (got %s)", JSONType(val))
		return false
	}
	if fv.Type().Key().Kind() != reflect.String {
		panic("fields: map keys must be strings at " + path)
	}
	before := p.Len()
	checkEntries(len(m), f, path, p)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := reflect.MakeMapWithSize(fv.Type(), len(m))
	for _, k := range keys {
		ev := reflect.New(fv.Type().Elem())
		kp := Join(path, k)
		item := m[k]
		if item == nil {
			p.Addf(kp, "expected %s (got null)", typeName(fv.Type().Elem()))
			continue
		}
		if decodeValue(item, ev.Elem(), itemField(f), kp, p) {
			out.SetMapIndex(reflect.ValueOf(k).Convert(fv.Type().Key()), ev.Elem())
		}
	}
	// Entries with problems are left out; the others stay so that Validate
	// methods can still check them.
	fv.Set(out)
	return p.Len() == before
}

// checkString normalises s per the field's tags and applies its string
// rules in a fixed order, reporting the first that fails.
func checkString(s string, f *field, path string, p *Problems) (string, bool) {
	n := normalise(s, f)
	return n, stringRules(n, s, f, path, p)
}

// normalise applies trim, lower, upper and replace.
func normalise(s string, f *field) string {
	if f.trim {
		s = strings.TrimSpace(s)
	}
	if f.lower {
		s = strings.ToLower(s)
	}
	if f.upper {
		s = strings.ToUpper(s)
	}
	if f.replaceOld != "" {
		s = strings.ReplaceAll(s, f.replaceOld, f.replaceNew)
	}
	return s
}

// stringRules applies the string rules to s, the normalised value, and
// reports the first that fails; orig, the value as written, is what
// messages quote.
func stringRules(s, orig string, f *field, path string, p *Problems) bool {
	switch {
	case f.nonblank && strings.TrimSpace(s) == "":
		p.Add(path, "must not be empty")
	case f.nopad && strings.TrimSpace(s) != s:
		p.Add(path, "must not have surrounding whitespace")
	case f.nocontrol == "true" && HasControl(s):
		p.Add(path, "must not contain control characters")
	case f.nocontrol == "crlf" && strings.ContainsAny(s, "\x00\r\n"):
		p.Add(path, "must not contain control characters")
	case f.maxlen > 0 && len([]rune(s)) > f.maxlen:
		p.Addf(path, "must be at most %d characters", f.maxlen)
	case f.pattern != nil && !f.pattern.MatchString(s):
		if f.secret {
			p.Addf(path, "must match %s", f.pattern)
		} else {
			p.Addf(path, "must match %s (got %q)", f.pattern, orig)
		}
	case len(f.enum) > 0 && !slices.Contains(f.enum, s):
		p.Addf(path, "must be one of %s (got %q)", strings.Join(f.enum, ", "), strings.TrimSpace(orig))
	default:
		return true
	}
	return false
}

// HasControl reports whether s contains a C0 control character or DEL.
func HasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

func checkRange(x float64, text string, f *field, path string, p *Problems) bool {
	switch {
	case f.xmin != nil && f.max != nil && (x <= *f.xmin || x > *f.max):
		p.Addf(path, "must be greater than %s and at most %s (got %s)", f.xminText, f.maxText, text)
	case f.xmin != nil && f.max == nil && x <= *f.xmin:
		p.Addf(path, "must be greater than %s (got %s)", f.xminText, text)
	case f.min != nil && f.max != nil && (x < *f.min || x > *f.max):
		p.Addf(path, "must be between %s and %s (got %s)", f.minText, f.maxText, text)
	case f.min != nil && f.max == nil && x < *f.min:
		p.Addf(path, "must be at least %s (got %s)", f.minText, text)
	case f.min == nil && f.xmin == nil && f.max != nil && x > *f.max:
		p.Addf(path, "must be at most %s (got %s)", f.maxText, text)
	default:
		return true
	}
	return false
}

func checkIntEnum(n int64, f *field, path string, p *Problems) bool {
	if len(f.enum) == 0 || slices.Contains(f.enum, strconv.FormatInt(n, 10)) {
		return true
	}
	p.Addf(path, "must be one of %s (got %d)", strings.Join(f.enum, ", "), n)
	return false
}

var (
	intString    = regexp.MustCompile(`^[+-]?[0-9]+(?:_[0-9]+)*(?:\.0*)?$`)
	numberString = regexp.MustCompile(`^[+-]?(?:[0-9]+(?:_[0-9]+)*(?:\.(?:[0-9]+(?:_[0-9]+)*)?)?|\.[0-9]+(?:_[0-9]+)*)(?:[eE][+-]?[0-9]+(?:_[0-9]+)*)?$`)
)

// asciiSpace is the whitespace docs/configuration.md#compatible-coercions trims from numeric strings.
const asciiSpace = " \t\n\r\v\f"

// coerceInt applies the integer coercions of docs/configuration.md#compatible-coercions. text is the
// value as shown in range messages; a value outside int64 is clamped so the
// range check fails with its original text.
func coerceInt(val any, strict bool) (int64, string, bool) {
	switch v := val.(type) {
	case jsonx.Integer:
		return parseIntText(string(v))
	case jsonx.Number:
		return coerceInt(v.Float(), strict)
	case float64:
		if v != math.Trunc(v) || math.IsInf(v, 0) || math.IsNaN(v) {
			return 0, "", false
		}
		text := strconv.FormatFloat(v, 'f', -1, 64)
		if v >= math.MaxInt64 {
			return math.MaxInt64, text, true
		}
		if v <= math.MinInt64 {
			return math.MinInt64, text, true
		}
		return int64(v), text, true
	case string:
		if strict {
			return 0, "", false
		}
		s := strings.Trim(v, asciiSpace)
		if !intString.MatchString(s) {
			return 0, "", false
		}
		s, _, _ = strings.Cut(s, ".")
		return parseIntText(strings.ReplaceAll(s, "_", ""))
	}
	return 0, "", false
}

func parseIntText(s string) (int64, string, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			if strings.HasPrefix(s, "-") {
				return math.MinInt64, s, true
			}
			return math.MaxInt64, strings.TrimPrefix(s, "+"), true
		}
		return 0, "", false
	}
	return n, strconv.FormatInt(n, 10), true
}

// coerceNumber applies the number coercions of docs/configuration.md#compatible-coercions.
func coerceNumber(val any, strict bool) (float64, bool) {
	switch v := val.(type) {
	case jsonx.Integer:
		x, err := strconv.ParseFloat(string(v), 64)
		return x, err == nil
	case jsonx.Number:
		return v.Float(), true
	case float64:
		return v, !math.IsInf(v, 0) && !math.IsNaN(v)
	case string:
		if strict {
			return 0, false
		}
		s := strings.Trim(v, asciiSpace)
		if !numberString.MatchString(s) {
			return 0, false
		}
		x, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
		if err != nil || math.IsInf(x, 0) {
			return 0, false
		}
		return x, true
	}
	return 0, false
}

// CoerceBool applies the boolean coercions of docs/configuration.md#compatible-coercions to a tree
// value: JSON booleans, the strings true/false/yes/no/on/off/t/f/y/n/1/0
// (any case, no padding) and the numbers 0 and 1.
func CoerceBool(val any) (value, ok bool) { return coerceBool(val) }

func coerceBool(val any) (bool, bool) {
	switch v := val.(type) {
	case bool:
		return v, true
	case string:
		switch strings.ToLower(v) {
		case "true", "yes", "on", "t", "y", "1":
			return true, true
		case "false", "no", "off", "f", "n", "0":
			return false, true
		}
	case jsonx.Integer:
		switch v {
		case "0":
			return false, true
		case "1":
			return true, true
		}
	case jsonx.Number:
		return coerceBool(v.Float())
	case float64:
		switch v {
		case 0:
			return false, true
		case 1:
			return true, true
		}
	}
	return false, false
}
