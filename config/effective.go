package config

import (
	"reflect"
	"slices"
	"strings"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
)

// Effective renders the configuration for show-effective-config
// (cli.md §3): defaults filled, overrides applied, unsupported sections
// omitted, redacted per config.md §10, as canonical utf8 pretty JSON plus a
// newline. It never reads secret environment variables or files.
//
// The sink section is the Opener rendered through its struct tags when it
// is a fields-tagged struct (so sink defaults show), else the sink object as
// written.
func (c *Config) Effective() ([]byte, error) {
	tree := fields.Effective(c)
	tree["sink"] = c.sinkEffective()
	redactObject(tree, "")
	return append(jsonx.MarshalPretty(tree, jsonx.UTF8), '\n'), nil
}

func (c *Config) sinkEffective() map[string]any {
	if t := taggedStruct(c.Sink.Opener); t {
		if m, ok := effectiveOf(c.Sink.Opener); ok {
			m["type"] = c.Sink.Type
			return m
		}
	}
	if c.sinkTree == nil {
		return map[string]any{"type": c.Sink.Type}
	}
	// Round-trip through the encoder's input types only; the tree is
	// already jsonx-shaped, so a shallow copy keeps Effective side-effect free.
	return deepCopy(c.sinkTree).(map[string]any)
}

// taggedStruct reports whether v is a struct (or pointer to one) with at
// least one json-tagged exported field, i.e. something fields can render.
func taggedStruct(v any) bool {
	if v == nil {
		return false
	}
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" && t.Field(i).IsExported() {
			return true
		}
	}
	return false
}

// effectiveOf renders an Opener through fields.Effective, reporting false
// when the struct holds a type fields cannot render (then the raw sink
// object is shown instead).
func effectiveOf(v any) (m map[string]any, ok bool) {
	defer func() {
		if recover() != nil {
			m, ok = nil, false
		}
	}()
	return fields.Effective(v), true
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

// secretWords mark keys whose values are masked (config.md §10).
var secretWords = []string{"password", "token", "secret", "private_key", "credentials", "creds", "cert_file", "key_file", "nkey_seed", "key_b64", "key_material"}

// isSecretKey reports whether a key's value is masked: its lower-cased
// name contains a secret word and it does not end in "_env" (those hold
// variable names, which are shown: quirk fix Q16).
func isSecretKey(key string) bool {
	lower := strings.ToLower(key)
	if strings.HasSuffix(lower, "_env") {
		return false
	}
	return slices.ContainsFunc(secretWords, func(w string) bool { return strings.Contains(lower, w) })
}

func isURLKey(key string) bool {
	lower := strings.ToLower(key)
	return lower == "url" || lower == "dsn" || lower == "urls" || strings.HasSuffix(lower, "_url") || strings.HasSuffix(lower, "_dsn")
}

// redactObject masks values in m in place; path is m's JSON path.
func redactObject(m map[string]any, path string) {
	for k, v := range m {
		kp := fields.Join(path, k)
		switch {
		case strings.HasSuffix(strings.ToLower(k), "_env"):
			// *_env values and maps hold variable names: shown as written.
		case kp == "nats.websocket_headers":
			if hm, ok := v.(map[string]any); ok {
				for name := range hm {
					hm[name] = fields.Mask
				}
			}
		case isSecretKey(k):
			if v != nil {
				m[k] = fields.Mask
			}
		case isURLKey(k):
			m[k] = maskURLs(v)
		default:
			redactValue(v, kp)
		}
	}
}

func redactValue(v any, path string) {
	switch x := v.(type) {
	case map[string]any:
		redactObject(x, path)
	case []any:
		for i, e := range x {
			redactValue(e, fields.Index(path, i))
		}
	}
}

// maskURLs masks a URL or DSN string holding "@" (user-info), or each such
// item of an array.
func maskURLs(v any) any {
	switch x := v.(type) {
	case string:
		if strings.Contains(x, "@") {
			return fields.Mask
		}
	case []any:
		for i, e := range x {
			x[i] = maskURLs(e)
		}
	}
	return v
}

// unsupportedSchema describes the unsupported upstream sections for the
// schema: they load only when disabled and are then ignored.
const unsupportedDoc = "Upstream section that nats-sink does not support (config.md §9): accepted only when enabled is absent or false, then ignored with a warning."

// Schema returns the JSON Schema (draft 2020-12) of the whole configuration
// file, 2-space indented with a trailing newline. sinks maps each sink type
// to a prototype: a pointer to that sink's default Config (a fields-tagged
// struct); "sink" is a union discriminated by "type".
func Schema(sinks map[string]any) ([]byte, error) {
	def := Default()
	root := fields.Schema(&def)
	props := root["properties"].(map[string]any)

	names := make([]string, 0, len(sinks))
	for n := range sinks {
		names = append(names, n)
	}
	slices.Sort(names)
	variants := make([]any, 0, len(names))
	for _, n := range names {
		s := map[string]any{"type": "object"}
		if taggedStruct(sinks[n]) {
			s = fields.Schema(sinks[n])
		}
		sp, _ := s["properties"].(map[string]any)
		if sp == nil {
			sp = map[string]any{}
			s["properties"] = sp
		}
		sp["type"] = map[string]any{"const": n, "description": "Sink type; trimmed and lower-cased by the loader."}
		req, _ := s["required"].([]any)
		if !slices.Contains(req, any("type")) {
			s["required"] = append([]any{"type"}, req...)
		}
		s["title"] = n
		variants = append(variants, s)
	}
	props["sink"] = map[string]any{
		"type":        "object",
		"description": "The destination; \"type\" selects the variant (sinks.md). Upstream-only types are rejected.",
		"oneOf":       variants,
	}
	req, _ := root["required"].([]any)
	root["required"] = append(req, "sink")
	for _, u := range unsupportedOrder {
		props[u.key] = map[string]any{"type": "object", "description": unsupportedDoc}
	}
	props["sinks"] = map[string]any{"type": "object", "maxProperties": 0, "description": "Named sinks are not supported; only an empty object is accepted (ignored with a warning)."}

	root["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	root["title"] = "nats-sink configuration"
	root["description"] = "Generated from the Go types that drive validation. The loader is authoritative: it also accepts the compat coercions described on each key (config.md §1.3), applies NATS_SINKS_* environment overrides (§1.4) and checks the cross-field rules named in descriptions."
	return append(jsonx.MarshalPretty(root, jsonx.UTF8), '\n'), nil
}
