package config

import (
	"net/url"
	"reflect"
	"slices"
	"strings"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/routing"
)

// Effective renders the configuration for show-effective-config
// (docs/configuration.md): defaults filled, overrides applied, unsupported sections
// omitted, redacted per docs/security.md#secret-hygiene, as canonical utf8 pretty JSON plus a
// newline. It never reads secret environment variables or files.
//
// The sink section is the Opener rendered through its struct tags when it
// is a fields-tagged struct (so sink defaults show), else the sink object as
// written.
func (c *Config) Effective() ([]byte, error) {
	tree := fields.Effective(c)
	tree["sink"] = c.sinkEffective()
	redactObject(tree, "")
	// Names of named sinks are configuration names, never masked: only the
	// objects they hold are redacted.
	named := map[string]any{}
	for name, ns := range c.Sinks {
		obj := namedEffective(ns)
		redactObject(obj, "sinks."+name)
		named[name] = obj
	}
	tree["sinks"] = named
	tree["routing"] = c.Routing.effective()
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

func namedEffective(ns *NamedSink) map[string]any {
	if taggedStruct(ns.Opener) {
		if m, ok := effectiveOf(ns.Opener); ok {
			m["type"] = ns.Type
			return m
		}
	}
	return deepCopy(ns.tree).(map[string]any)
}

// effective renders the routing section fully normalised: every key, every
// target as an object with its window (null while unset), every match with
// all seven conditions.
func (r *Routing) effective() map[string]any {
	types := map[string]any{}
	for k, v := range r.TargetSinkTypes {
		types[k] = v
	}
	routes := make([]any, 0, len(r.Routes))
	for _, rt := range r.Routes {
		m := rt.Match
		var subj any
		if m.Subject != nil {
			subj = *m.Subject
		}
		headers := make([]any, 0, len(m.Headers))
		for _, h := range m.Headers {
			headers = append(headers, map[string]any{"name": h.Name, "values": strs(h.Values)})
		}
		routes = append(routes, map[string]any{
			"name": rt.Name,
			"match": map[string]any{
				"subject": subj, "priority": strs(m.Priority), "classification": strs(m.Classification),
				"labels_all": strs(m.LabelsAll), "labels_any": strs(m.LabelsAny), "labels_none": strs(m.LabelsNone),
				"headers": headers,
			},
			"targets": targetsEffective(rt.Targets),
		})
	}
	return map[string]any{
		"enabled":           r.Enabled,
		"mode":              r.Mode,
		"no_match":          r.NoMatch,
		"target_sink_types": types,
		"default_targets":   targetsEffective(r.DefaultTargets),
		"routes":            routes,
	}
}

func targetsEffective(ts []routing.Target) []any {
	out := make([]any, 0, len(ts))
	for _, t := range ts {
		out = append(out, map[string]any{"sink": t.Sink, "required": t.Required,
			"minimum_wait_ms": intOrNil(t.MinimumWaitMS), "timeout_ms": intOrNil(t.TimeoutMS)})
	}
	return out
}

func intOrNil(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

func strs(v []string) []any {
	out := make([]any, len(v))
	for i, s := range v {
		out[i] = s
	}
	return out
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

// secretWords mark keys whose values are masked (docs/security.md#secret-hygiene).
var secretWords = []string{"password", "token", "secret", "private_key", "credentials", "creds", "cert_file", "key_file", "nkey_seed", "key_b64", "key_material"}

// isSecretKey reports whether a key's value is masked: its lower-cased
// name contains a secret word and it does not end in "_env" (those hold
// variable names, which are shown: docs/migrating.md Q16).
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
		case isHeaderMapKey(k):
			// Header values carry API keys and tokens: every value is
			// masked, the names are kept.
			hm, ok := v.(map[string]any)
			if !ok {
				redactValue(v, kp) // not a map: routing's match.headers list
				continue
			}
			for name := range hm {
				hm[name] = fields.Mask
			}
		case isSecretKey(k):
			if v != nil {
				m[k] = fields.Mask
			}
		case k == "url" && m["type"] == "http":
			m[k] = maskEndpointURL(v)
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

// isHeaderMapKey reports whether a key holds a map of header values:
// nats.websocket_headers, a connection's websocket_headers inside a sink
// object, the HTTP sink's headers, and any other "headers" or "*_headers"
// key (the *_env maps are handled before, and shown).
func isHeaderMapKey(key string) bool {
	lower := strings.ToLower(key)
	return lower == "headers" || strings.HasSuffix(lower, "_headers")
}

// maskEndpointURL shows an HTTP sink's endpoint as scheme://host[:port],
// followed by "/********" when it has a path other than "/" (webhook
// tokens live in paths), or masks it whole when it holds user-info or does
// not parse.
func maskEndpointURL(v any) any {
	raw, ok := v.(string)
	if !ok || raw == "" {
		return v
	}
	u, err := url.Parse(raw)
	if err != nil || u.User != nil || strings.Contains(raw, "@") || u.Host == "" {
		return fields.Mask
	}
	out := u.Scheme + "://" + u.Host
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		out += "/" + fields.Mask
	}
	return out
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
const unsupportedDoc = "Upstream section that nats-sink does not support (docs/configuration.md#upstream-sections-that-nats-sink-does-not-provide): accepted only when enabled is absent or false, then ignored with a warning."

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
	named := map[string]any{"oneOf": slices.Clone(variants)}
	variants = append(variants, fanoutSchema())
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
	props["sinks"] = map[string]any{
		"type":                 []any{"object", "null"},
		"maxProperties":        MaxNamedSinks,
		"propertyNames":        map[string]any{"pattern": routeName.String()},
		"additionalProperties": named,
		"description":          "Named sinks (docs/routing.md): each a complete sink object of any type but fanout. An active fanout sink writes to those its routes use; otherwise they are validated only.",
	}
	props["routing"] = routingSchema()

	root["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	root["title"] = "nats-sink configuration"
	root["description"] = "Generated from the Go types that drive validation. The loader is authoritative: it also accepts the compat coercions described on each key (docs/configuration.md#compatible-coercions), applies NATS_SINKS_* environment overrides (docs/configuration.md#environment-overrides) and checks the cross-field rules named in descriptions."
	return append(jsonx.MarshalPretty(root, jsonx.UTF8), '\n'), nil
}

func fanoutSchema() map[string]any {
	return map[string]any{
		"title":       "fanout",
		"type":        "object",
		"description": "Routes each message to named sinks (docs/routing.md). The compact form may hold sinks, routes, route_match_mode, no_match, default_targets and target_sink_types, which the loader moves to the top level.",
		"required":    []any{"type"},
		"properties": map[string]any{
			"type":              map[string]any{"const": "fanout", "description": "Sink type; trimmed and lower-cased by the loader."},
			"sinks":             map[string]any{"type": []any{"object", "null"}, "description": "Compact form of the top-level sinks."},
			"routes":            map[string]any{"type": []any{"array", "null"}, "description": "Compact form of routing.routes."},
			"route_match_mode":  map[string]any{"enum": []any{"first", "all", nil}, "description": "Compact form of routing.mode."},
			"no_match":          map[string]any{"enum": []any{"reject", "ignore", "default_route", nil}},
			"default_targets":   map[string]any{"description": "Compact form of routing.default_targets."},
			"target_sink_types": map[string]any{"type": []any{"object", "null"}},
		},
		"additionalProperties": false,
	}
}

func stringList(desc string) map[string]any {
	return map[string]any{"description": desc, "oneOf": []any{
		map[string]any{"type": "string"}, map[string]any{"type": "null"},
		map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "maxItems": MaxMatchValues},
	}}
}

func routingSchema() map[string]any {
	name := map[string]any{"type": "string", "pattern": routeName.String()}
	target := map[string]any{"oneOf": []any{name, map[string]any{
		"type": "object", "additionalProperties": false, "required": []any{"sink"},
		"properties": map[string]any{
			"sink":            name,
			"required":        map[string]any{"type": "boolean", "default": true, "description": "Required targets decide the acknowledgement."},
			"minimum_wait_ms": map[string]any{"type": []any{"integer", "null"}, "minimum": 0, "maximum": MaxMinimumWait, "description": "Optional targets only: grace after the required copies are durable. Real JSON integers only; default by sink type."},
			"timeout_ms":      map[string]any{"type": []any{"integer", "null"}, "minimum": 0, "maximum": MaxTargetWindow, "description": "Optional targets only: cap since the batch's writes started, never before the required copies are durable; at least minimum_wait_ms."},
		},
	}}}
	targets := map[string]any{"description": "One name, one target object, or an array of them (at most 64, names unique).",
		"oneOf": []any{name, target["oneOf"].([]any)[1], map[string]any{"type": "array", "maxItems": MaxTargets, "items": target}}}
	header := map[string]any{"type": "object", "additionalProperties": false, "required": []any{"name", "values"},
		"properties": map[string]any{
			"name":   map[string]any{"type": "string", "pattern": headerName.String(), "description": "Looked up ignoring case; not a protocol-owned or secret-bearing header."},
			"values": stringList("Exact values (case-sensitive), trimmed, at least one."),
		}}
	match := map[string]any{"type": "object", "additionalProperties": false,
		"description": "All conditions must hold; at least one condition.",
		"properties": map[string]any{
			"subject":        map[string]any{"type": []any{"string", "null"}, "description": "Subject pattern."},
			"priority":       stringList("Resolved priority equals one of these exactly."),
			"classification": stringList("Resolved classification equals one of these exactly."),
			"labels_all":     stringList("Every label present; a string is split on ';'."),
			"labels_any":     stringList("At least one label present."),
			"labels_none":    stringList("None of the labels present; disjoint from labels_all."),
			"headers":        map[string]any{"type": "array", "maxItems": MaxHeaderRules, "items": header},
		}}
	route := map[string]any{"type": "object", "additionalProperties": false, "required": []any{"name", "match", "targets"},
		"properties": map[string]any{"name": name, "match": match, "targets": targets}}
	types := make([]any, len(routableTypes))
	for i, t := range routableTypes {
		types[i] = t
	}
	return map[string]any{
		"type":                 []any{"object", "null"},
		"additionalProperties": false,
		"description":          "Route policy of the fanout sink (docs/routing.md). With another active sink it is validated only.",
		"properties": map[string]any{
			"enabled":           map[string]any{"type": "boolean", "default": false, "description": "true needs at least one route; required by an active fanout sink."},
			"mode":              map[string]any{"enum": []any{"first", "all"}, "default": "first"},
			"no_match":          map[string]any{"enum": []any{"reject", "ignore", "default_route"}, "default": "reject"},
			"target_sink_types": map[string]any{"type": []any{"object", "null"}, "propertyNames": map[string]any{"pattern": routeName.String()}, "additionalProperties": map[string]any{"enum": types}, "description": "Selects optional-target window defaults; filled from the named sinks."},
			"default_targets":   targets,
			"routes":            map[string]any{"type": "array", "maxItems": MaxRoutes, "items": route},
		},
	}
}
