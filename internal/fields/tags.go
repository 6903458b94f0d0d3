// Package fields is nats-sink's one declarative configuration decoder. Every
// configuration section and every sink's Config is a plain Go struct that
// already holds its defaults; Decode fills it from a jsonx tree following the
// loading rules of docs/configuration.md#how-a-file-is-loaded (strict keys, the compatible coercions of docs/configuration.md#compatible-coercions, every
// problem with its JSON path), and Schema generates the JSON Schema from the
// same types, so validation and schema cannot drift apart (docs/configuration.md).
//
// # Struct tags
//
// A field is decoded when it has a json tag naming its key (json:"-" skips
// it). The other tags are rules for that key; for a slice or map they apply to
// each item unless noted:
//
//	doc:"text"          description for the JSON Schema
//	required:"true"     the key must be present ("required")
//	min:"1" max:"10"    inclusive range for integer and number values
//	xmin:"0"            exclusive lower bound ("must be greater than 0 ...")
//	enum:"a,b,c"        allowed values (strings, or integers for int fields)
//	pattern:"^re$"      strings must match (the regexp is anchored by the author)
//	trim:"true"         trim surrounding whitespace before the other rules
//	lower:"true"        lower-case before the other rules (upper:"true" likewise)
//	replace:"_=-"       replace every "_" with "-" before the other rules
//	nonblank:"true"     "must not be empty" (after trimming, if any)
//	nopad:"true"        "must not have surrounding whitespace"
//	nocontrol:"true"    no control characters; nocontrol:"crlf" only NUL, CR, LF
//	maxlen:"128"        at most 128 characters
//	blanknull:"true"    for *string: a blank value becomes null
//	minitems, maxitems  slice length or map size bounds (the slice itself)
//	unique:"true"       no duplicate slice items (the slice itself)
//	null:"empty"        null is accepted and means the empty value
//	null:"reject"       a pointer field that is only a presence marker: null is rejected
//	strict:"true"       numbers must be real JSON numbers (no string forms)
//	orstring:";"        a slice of strings also accepts one string, split on ";"
//	orstring:"one"      a slice of strings also accepts one string as one item
//	secret:"true"       Effective masks the value
//	presence:"key"      on a bool field with json:"-": set when key is present
//	fields:"external"   the key is known but decoded by the caller
//	after:"key"         schema order: this key comes right after key, for a
//	                    struct that embeds a block of shared keys (package
//	                    natsconfig) yet keeps the order of the document's table
//
// Decode applies the rules while it decodes a document; Check applies the
// same rules, with the same messages, to a struct value (one built in Go, or
// decoded): the normalising tags (trim, lower, upper, replace, blanknull
// aside) do not change a value there, and required is a decoding rule only,
// since a Go value has no notion of an absent key.
//
// Pointer fields are nullable ("string or null"): null and absence leave
// them nil. Slices of structs start each item from the element's defaults
// when *Elem implements Defaulter.
package fields

import (
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A Defaulter sets the defaults of a struct used as a slice item, before the
// item's object is decoded onto it.
type Defaulter interface {
	SetDefaults()
}

// A Validator is a configuration that validates itself: every problem, with
// paths relative to it, as a *sink.ConfigError (see Validate). DecodeSink
// calls it after a clean decode; a sink's Open calls it first, so that a
// Config built in Go gets the checks a decoded one gets.
type Validator interface {
	Validate() error
}

type field struct {
	name     string
	index    []int // struct field index path (embedded structs are flattened)
	pos      int   // position among decoded keys (schema order)
	typ      reflect.Type
	tag      reflect.StructTag
	doc      string
	required bool
	external bool
	secret   bool
	strict   bool

	min, max, xmin *float64
	minText        string
	maxText        string
	xminText       string
	enum           []string
	pattern        *regexp.Regexp
	trim           bool
	lower, upper   bool
	replaceOld     string
	replaceNew     string
	nonblank       bool
	nopad          bool
	nocontrol      string
	maxlen         int
	blanknull      bool
	minitems       int
	maxitems       int
	unique         bool
	nullEmpty      bool
	nullReject     bool
	orstring       string
}

type presenceField struct {
	index []int
	key   string
}

type structFields struct {
	fields   []*field
	byName   map[string]*field
	presence []presenceField
}

func (s *structFields) field(name string) *field { return s.byName[name] }

// structInfo reads the tags of t. It is recomputed on every call rather than
// cached in a package variable: configuration is decoded a handful of times
// per process, and the package keeps no global state.
func structInfo(t reflect.Type) *structFields {
	s := &structFields{byName: map[string]*field{}}
	s.add(t, nil)
	s.order(t)
	return s
}

// order moves the fields tagged after:"key" right behind key, in
// declaration order (so a run of them keeps its own order), and numbers the
// schema positions.
func (s *structFields) order(t reflect.Type) {
	for _, f := range slices.Clone(s.fields) {
		key := f.tag.Get("after")
		if key == "" {
			continue
		}
		i := slices.Index(s.fields, f)
		s.fields = slices.Delete(s.fields, i, i+1)
		j := slices.IndexFunc(s.fields, func(g *field) bool { return g.name == key })
		if j < 0 {
			panic("fields: after:" + strconv.Quote(key) + " names no key of " + t.String())
		}
		s.fields = slices.Insert(s.fields, j+1, f)
	}
	for i, f := range s.fields {
		f.pos = i
	}
}

// add appends the fields of t, whose value sits at index path prefix in the
// outermost struct. An embedded struct without a json tag (or tagged
// json:",inline") is flattened: its keys belong to the enclosing object, in
// the position of the embedding field, so that a sink's Config can embed a
// block of shared keys (internal/sqlmodel) and keep schema order.
func (s *structFields) add(t reflect.Type, prefix []int) {
	for i := range t.NumField() {
		sf := t.Field(i)
		index := append(slices.Clip(prefix), i)
		name, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if sf.Anonymous && sf.Type.Kind() == reflect.Struct && name == "" && (opts == "" || opts == "inline") {
			s.add(sf.Type, index)
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if key := sf.Tag.Get("presence"); key != "" {
			s.presence = append(s.presence, presenceField{index: index, key: key})
			continue
		}
		if name == "" || name == "-" {
			continue
		}
		if _, dup := s.byName[name]; dup {
			panic("fields: duplicate key " + strconv.Quote(name) + " in " + t.String())
		}
		f := parseField(sf)
		f.index = index
		s.fields = append(s.fields, f)
		s.byName[name] = f
	}
}

func parseField(sf reflect.StructField) *field {
	tag := sf.Tag
	name, _, _ := strings.Cut(tag.Get("json"), ",")
	f := &field{
		name:      name,
		typ:       sf.Type,
		tag:       tag,
		doc:       tag.Get("doc"),
		required:  tag.Get("required") == "true",
		external:  tag.Get("fields") == "external",
		secret:    tag.Get("secret") == "true",
		strict:    tag.Get("strict") == "true",
		trim:      tag.Get("trim") == "true",
		lower:     tag.Get("lower") == "true",
		upper:     tag.Get("upper") == "true",
		nonblank:  tag.Get("nonblank") == "true",
		nopad:     tag.Get("nopad") == "true",
		nocontrol: tag.Get("nocontrol"),
		blanknull: tag.Get("blanknull") == "true",
		unique:    tag.Get("unique") == "true",
		orstring:  tag.Get("orstring"),
	}
	switch tag.Get("null") {
	case "empty":
		f.nullEmpty = true
	case "reject":
		f.nullReject = true
	}
	f.min, f.minText = floatTag(tag, "min")
	f.max, f.maxText = floatTag(tag, "max")
	f.xmin, f.xminText = floatTag(tag, "xmin")
	if e := tag.Get("enum"); e != "" {
		f.enum = strings.Split(e, ",")
	}
	if p := tag.Get("pattern"); p != "" {
		f.pattern = regexp.MustCompile(p) // a bad pattern is a programming error
	}
	if r := tag.Get("replace"); r != "" {
		f.replaceOld, f.replaceNew, _ = strings.Cut(r, "=")
	}
	f.maxlen = intTag(tag, "maxlen")
	f.minitems = intTag(tag, "minitems")
	f.maxitems = intTag(tag, "maxitems")
	return f
}

func floatTag(tag reflect.StructTag, key string) (*float64, string) {
	s := tag.Get(key)
	if s == "" {
		return nil, ""
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		panic("fields: bad " + key + " tag " + strconv.Quote(s))
	}
	return &v, s
}

func intTag(tag reflect.StructTag, key string) int {
	s := tag.Get(key)
	if s == "" {
		return 0
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		panic("fields: bad " + key + " tag " + strconv.Quote(s))
	}
	return v
}
