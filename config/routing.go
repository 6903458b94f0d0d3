package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-sinks/nats-sink/internal/backoff"
	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/metadata"
	"github.com/nats-sinks/nats-sink/routing"
	"github.com/nats-sinks/nats-sink/sink"
)

// Limits of the sinks and routing sections (docs/routing.md#limits).
const (
	MaxNamedSinks   = 64
	MaxRoutes       = 128
	MaxTargets      = 64
	MaxMatchValues  = 64
	MaxValueLength  = 512
	MaxLabelLength  = 128
	MaxHeaderRules  = 16
	MaxMinimumWait  = 60000
	MaxTargetWindow = 300000
)

// NamedSink is one entry of the sinks section: a complete sink object
// stored under a name.
type NamedSink struct {
	Name string
	// Type is the entry's sink type, trimmed and lower-cased.
	Type string
	// Opener is what the type's Decoder returned.
	Opener sink.Opener

	tree map[string]any
}

// Routing is the routing section, normalised: defaults applied, the
// compact form of a fanout sink already moved here, optional-target
// windows filled from target_sink_types where the rules ask for it. The
// json tags give problems their schema order.
type Routing struct {
	Enabled         bool              `json:"enabled"`
	Mode            string            `json:"mode"`
	NoMatch         string            `json:"no_match"`
	TargetSinkTypes map[string]string `json:"target_sink_types"`
	DefaultTargets  []routing.Target  `json:"default_targets"`
	Routes          []routing.Route   `json:"routes"`
}

// Policy returns the route policy the fanout sink carries out.
func (r *Routing) Policy() routing.Policy {
	return routing.Policy{Mode: r.Mode, NoMatch: r.NoMatch, Routes: r.Routes, DefaultTargets: r.DefaultTargets}
}

func defaultRouting() Routing {
	return Routing{Mode: routing.ModeFirst, NoMatch: routing.NoMatchReject, TargetSinkTypes: map[string]string{},
		DefaultTargets: []routing.Target{}, Routes: []routing.Route{}}
}

var (
	routeName     = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.:-]{0,127}$`)
	nameRuleText  = `name must start with a letter and contain only letters, digits, ".", "_", ":" or "-" (at most 128 characters)`
	secretHeaders = []string{"authorization", "cookie", "proxy-authorization", "x-api-key", "x-auth-token"}
	// protocolOwnedHeaders are the header names docs/configuration.md reserves for the
	// WebSocket handshake; a route must not match on them either.
	protocolOwnedHeaders = []string{"connection", "content-length", "host", "sec-websocket-accept", "sec-websocket-extensions", "sec-websocket-key", "sec-websocket-protocol", "sec-websocket-version", "transfer-encoding", "upgrade"}
	// routableTypes are the values target_sink_types accepts.
	routableTypes = []string{"file", "http", "mysql", "oracle", "s3", "coherence", "oracle_nosql", "spool",
		"postgres", "sqlite", "kafka", "nats", "clickhouse", "segments", "redis", "rabbitmq", "mqtt"}
	// unavailableNamedTypes are upstream sink types nats-sink does not
	// provide, refused as named sinks whether referenced or not.
	unavailableNamedTypes = []string{"coherence", "oracle_nosql", "foundry", "gotham"}
)

// windowDefaults returns the optional-target window of a sink type.
func windowDefaults(t string) (minimumWaitMS, timeoutMS int, ok bool) {
	switch t {
	case "file", "spool", "sqlite", "segments":
		return 100, 1000, true
	case "oracle", "mysql", "http", "s3", "coherence", "oracle_nosql",
		"postgres", "kafka", "nats", "clickhouse", "redis", "rabbitmq", "mqtt":
		return 1000, 5000, true
	}
	return 0, 0, false
}

// routingPaths names where the user wrote each routing key: under routing,
// or, for the compact form, inside sink.
type routingPaths struct {
	compact bool
	sinks   string // "sinks" or "sink.sinks"
}

func (rp routingPaths) key(k string) string {
	if !rp.compact {
		return "routing." + k
	}
	if k == "mode" {
		return "sink.route_match_mode"
	}
	return "sink." + k
}

// compactKeys are the routing fields a compact fanout sink may hold, with
// the routing key each becomes.
var compactKeys = []struct{ from, to string }{
	{"routes", "routes"}, {"route_match_mode", "mode"}, {"no_match", "no_match"},
	{"default_targets", "default_targets"}, {"target_sink_types", "target_sink_types"},
}

// rewriteCompact moves the routing fields and named sinks written inside a
// fanout sink object to the top level (the compact form) and reports where
// the user wrote them. It runs after the environment overrides.
func rewriteCompact(root map[string]any, p *fields.Problems) routingPaths {
	rp := routingPaths{sinks: "sinks"}
	s, ok := root["sink"].(map[string]any)
	if !ok {
		return rp
	}
	t, ok := s["type"].(string)
	if !ok || strings.ToLower(strings.TrimSpace(t)) != "fanout" {
		return rp
	}
	if v, has := s["sinks"]; has {
		delete(s, "sinks")
		if v != nil {
			if _, top := root["sinks"]; top {
				p.Add("sink.sinks", `sink.type "fanout" must not define both sink.sinks and top-level sinks`)
			} else {
				root["sinks"] = v
				rp.sinks = "sink.sinks"
			}
		}
	}
	moved := map[string]any{"enabled": true}
	movedAny := false
	for _, k := range compactKeys {
		v, has := s[k.from]
		if !has {
			continue
		}
		delete(s, k.from)
		if v != nil {
			moved[k.to] = v
			movedAny = true
		}
	}
	if movedAny {
		if _, top := root["routing"]; top {
			p.Add("sink", `sink.type "fanout" must not define both sink routing fields and top-level routing`)
		} else {
			root["routing"] = moved
			rp.compact = true
		}
	}
	return rp
}

// decodeNamedSinks decodes the sinks section: each entry is validated as
// the top-level sink is, without I/O.
func (c *Config) decodeNamedSinks(v any, has bool, base string, reg *sink.Registry, p *fields.Problems) {
	c.Sinks = map[string]*NamedSink{}
	if !has || v == nil {
		return
	}
	m, ok := v.(map[string]any)
	if !ok {
		p.Addf(base, "expected object (got %s)", fields.JSONType(v))
		return
	}
	if len(m) > MaxNamedSinks {
		p.Addf(base, "at most %d named sinks (got %d)", MaxNamedSinks, len(m))
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		path := base + "." + name
		if !routeName.MatchString(name) {
			p.Add(path, nameRuleText)
			continue
		}
		obj, ok := m[name].(map[string]any)
		if !ok {
			p.Addf(path, "expected object (got %s)", fields.JSONType(m[name]))
			continue
		}
		ns := &NamedSink{Name: name, tree: obj}
		ns.Type, ns.Opener = decodeSinkObject(obj, path, reg, true, p)
		if ns.Type == "" {
			continue
		}
		c.Sinks[name] = ns
		if w, ok := ns.Opener.(sink.Warner); ok {
			for _, pr := range w.Warnings() {
				wp := path
				if pr.Path != "" && pr.Path != "(root)" {
					wp = fields.Join(path, pr.Path)
				}
				c.Warnings = append(c.Warnings, wp+": "+pr.Message)
			}
		}
	}
}

// NamedSinkNames returns the names of the named sinks, ascending.
func (c *Config) NamedSinkNames() []string {
	names := make([]string, 0, len(c.Sinks))
	for n := range c.Sinks {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// NamedSinksInFileOrder returns the names of the named sinks in the order
// the configuration file wrote them; names the file did not write (an
// override, a Go-built configuration) follow, ascending.
func (c *Config) NamedSinksInFileOrder() []string {
	names := make([]string, 0, len(c.Sinks))
	for _, n := range c.namedOrder {
		if _, ok := c.Sinks[n]; ok && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, n := range c.NamedSinkNames() {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

// objectKeys returns the member names, in document order, of the object
// at path (member names from the root) in the JSON document data; nil when
// there is none. The decoded tree is a map and keeps no order.
func objectKeys(data []byte, path ...string) []string {
	raw := json.RawMessage(data)
	for _, k := range path {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return nil
		}
		next, ok := m[k]
		if !ok {
			return nil
		}
		raw = next
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return keys
		}
		key, _ := t.(string)
		keys = append(keys, key)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return keys
		}
	}
	return keys
}

// decodeRouting decodes the routing section onto its defaults.
func (c *Config) decodeRouting(v any, rp routingPaths, p *fields.Problems) {
	c.Routing = defaultRouting()
	if v == nil {
		return
	}
	m, ok := v.(map[string]any)
	if !ok {
		p.Addf("routing", "expected object (got %s)", fields.JSONType(v))
		return
	}
	r := &c.Routing
	known := []string{"enabled", "mode", "no_match", "target_sink_types", "default_targets", "routes"}
	for k := range m {
		if !slices.Contains(known, k) {
			p.Add(rp.key(k), "unknown key")
		}
	}
	if e, has := m["enabled"]; has && e != nil {
		b, ok := fields.CoerceBool(e)
		if !ok {
			p.Addf(rp.key("enabled"), "expected boolean (got %s)", fields.JSONType(e))
		}
		r.Enabled = b
	}
	exact := func(key string, into *string, allowed ...string) {
		val, has := m[key]
		if !has || val == nil {
			return
		}
		s, ok := val.(string)
		if !ok {
			p.Addf(rp.key(key), "expected string (got %s)", fields.JSONType(val))
			return
		}
		if !slices.Contains(allowed, s) {
			p.Addf(rp.key(key), "must be one of %s (got %q)", strings.Join(allowed, ", "), s)
			return
		}
		*into = s
	}
	exact("mode", &r.Mode, routing.ModeFirst, routing.ModeAll)
	exact("no_match", &r.NoMatch, routing.NoMatchReject, routing.NoMatchIgnore, routing.NoMatchDefault)

	if val, has := m["target_sink_types"]; has && val != nil {
		path := rp.key("target_sink_types")
		tm, ok := val.(map[string]any)
		if !ok {
			p.Addf(path, "expected object or null (got %s)", fields.JSONType(val))
		}
		for _, k := range sortedAnyKeys(tm) {
			kp := path + "." + k
			if !routeName.MatchString(k) {
				p.Add(kp, nameRuleText)
				continue
			}
			s, ok := tm[k].(string)
			if !ok {
				p.Addf(kp, "expected string (got %s)", fields.JSONType(tm[k]))
				continue
			}
			s = strings.ToLower(strings.TrimSpace(s))
			if !slices.Contains(routableTypes, s) {
				p.Addf(kp, "must be one of %s (got %q)", strings.Join(routableTypes, ", "), s)
				continue
			}
			r.TargetSinkTypes[k] = s
		}
	}
	if val, has := m["default_targets"]; has && val != nil {
		r.DefaultTargets = decodeTargets(val, rp.key("default_targets"), p)
	}
	if val, has := m["routes"]; has && val != nil {
		path := rp.key("routes")
		arr, ok := val.([]any)
		if !ok {
			p.Addf(path, "expected array (got %s)", fields.JSONType(val))
			return
		}
		if len(arr) > MaxRoutes {
			p.Addf(path, "at most %d routes (got %d)", MaxRoutes, len(arr))
		}
		seen := map[string]bool{}
		for i, item := range arr {
			// Kept even when invalid, so that later rules name the right
			// index; the load fails anyway.
			rt, _ := decodeRoute(item, fields.Index(path, i), seen, p)
			r.Routes = append(r.Routes, rt)
		}
	}
}

func sortedAnyKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// checkKeys reports keys of m outside known, each as "unknown key".
func checkKeys(m map[string]any, path string, known []string, p *fields.Problems) {
	for _, k := range sortedAnyKeys(m) {
		if !slices.Contains(known, k) {
			p.Add(path+"."+k, "unknown key")
		}
	}
}

// strictName reads a strict string that must follow the name rule.
func strictName(v any, path string, p *fields.Problems) (string, bool) {
	s, ok := v.(string)
	if !ok {
		p.Addf(path, "expected string (got %s)", fields.JSONType(v))
		return "", false
	}
	if !routeName.MatchString(s) {
		p.Add(path, nameRuleText)
		return "", false
	}
	return s, true
}

func decodeRoute(v any, path string, seen map[string]bool, p *fields.Problems) (routing.Route, bool) {
	var rt routing.Route
	m, ok := v.(map[string]any)
	if !ok {
		p.Addf(path, "expected object (got %s)", fields.JSONType(v))
		return rt, false
	}
	checkKeys(m, path, []string{"name", "match", "targets"}, p)
	good := true
	if n, has := m["name"]; !has {
		p.Add(path+".name", "required")
		good = false
	} else if name, ok := strictName(n, path+".name", p); ok {
		if seen[name] {
			p.Addf(path+".name", "duplicate route name %q", name)
			good = false
		}
		seen[name] = true
		rt.Name = name
	} else {
		good = false
	}
	if mv, has := m["match"]; !has {
		p.Add(path+".match", "required")
		good = false
	} else if mt, ok := decodeMatch(mv, path+".match", p); ok {
		rt.Match = mt
	} else {
		good = false
	}
	if tv, has := m["targets"]; !has {
		p.Add(path+".targets", "required")
		good = false
	} else {
		rt.Targets = decodeTargets(tv, path+".targets", p)
		if len(rt.Targets) == 0 && !isEmptyErrored(tv) {
			p.Add(path+".targets", "must not be empty")
			good = false
		}
	}
	return rt, good
}

// isEmptyErrored reports whether a target list value already drew a type
// error (then "must not be empty" would only repeat it).
func isEmptyErrored(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case string, map[string]any:
		return true // a valid single target, or its own error
	case []any:
		return len(x) > 0
	}
	return true
}

func decodeTargets(v any, path string, p *fields.Problems) []routing.Target {
	// A single target is reported as item 0, as after the list
	// normalisation: later rules name targets by index.
	var items []any
	switch x := v.(type) {
	case nil:
		return []routing.Target{}
	case string, map[string]any:
		items = []any{x}
	case []any:
		items = x
	default:
		p.Addf(path, "expected string, object or array (got %s)", fields.JSONType(v))
		return []routing.Target{}
	}
	if len(items) > MaxTargets {
		p.Addf(path, "at most %d targets (got %d)", MaxTargets, len(items))
	}
	out := []routing.Target{}
	seen := map[string]bool{}
	for k, item := range items {
		ip := fields.Index(path, k)
		t := routing.Target{Required: true}
		switch x := item.(type) {
		case string:
			name, ok := strictName(x, ip, p)
			if !ok {
				continue
			}
			t.Sink = name
		case map[string]any:
			checkKeys(x, ip, []string{"sink", "required", "minimum_wait_ms", "timeout_ms"}, p)
			sv, has := x["sink"]
			if !has {
				p.Add(ip+".sink", "required")
				continue
			}
			name, ok := strictName(sv, ip+".sink", p)
			if !ok {
				continue
			}
			t.Sink = name
			if rv, has := x["required"]; has && rv != nil {
				b, ok := fields.CoerceBool(rv)
				if !ok {
					p.Addf(ip+".required", "expected boolean (got %s)", fields.JSONType(rv))
					continue
				}
				t.Required = b
			}
			t.MinimumWaitMS = strictInt(x, "minimum_wait_ms", ip, MaxMinimumWait, p)
			t.TimeoutMS = strictInt(x, "timeout_ms", ip, MaxTargetWindow, p)
			if t.Required && (t.MinimumWaitMS != nil || t.TimeoutMS != nil) {
				p.Add(ip, "minimum_wait_ms and timeout_ms are only valid when required is false")
				t.MinimumWaitMS, t.TimeoutMS = nil, nil
			}
		default:
			p.Add(ip, "expected string or object")
			continue
		}
		if seen[t.Sink] {
			p.Addf(ip, "duplicate target %q", t.Sink)
			continue
		}
		seen[t.Sink] = true
		out = append(out, t)
	}
	return out
}

// strictInt reads a wait key: a real JSON integer (no 5.0, "500" or true)
// between 0 and limit, or null.
func strictInt(m map[string]any, key, path string, limit int, p *fields.Problems) *int {
	v, has := m[key]
	if !has || v == nil {
		return nil
	}
	kp := path + "." + key
	i, ok := v.(jsonx.Integer)
	if !ok {
		p.Addf(kp, "expected integer (got %s)", fields.JSONType(v))
		return nil
	}
	n, err := strconv.Atoi(string(i))
	if err != nil || n < 0 || n > limit {
		p.Addf(kp, "must be between 0 and %d (got %s)", limit, string(i))
		return nil
	}
	return &n
}

func decodeMatch(v any, path string, p *fields.Problems) (routing.Match, bool) {
	var mt routing.Match
	m, ok := v.(map[string]any)
	if !ok {
		p.Addf(path, "expected object (got %s)", fields.JSONType(v))
		return mt, false
	}
	checkKeys(m, path, []string{"subject", "priority", "classification", "labels_all", "labels_any", "labels_none", "headers"}, p)
	before := p.Len()
	if sv, has := m["subject"]; has && sv != nil {
		s, ok := sv.(string)
		switch {
		case !ok:
			p.Addf(path+".subject", "expected string or null (got %s)", fields.JSONType(sv))
		case checkPattern(path+".subject", s, p):
			mt.Subject = &s
		}
	}
	mt.Priority = matchValues(m["priority"], path+".priority", p)
	mt.Classification = matchValues(m["classification"], path+".classification", p)
	mt.LabelsAll = matchLabels(m["labels_all"], path+".labels_all", p)
	mt.LabelsAny = matchLabels(m["labels_any"], path+".labels_any", p)
	mt.LabelsNone = matchLabels(m["labels_none"], path+".labels_none", p)
	mt.Headers = []routing.HeaderMatch{}
	if hv, has := m["headers"]; has {
		mt.Headers = matchHeaders(hv, path+".headers", p)
	}
	for _, l := range mt.LabelsNone {
		if slices.Contains(mt.LabelsAll, l) {
			p.Addf(path+".labels_none", "must not overlap labels_all (%q)", l)
			break
		}
	}
	if len(mt.LabelsAny) > 0 && len(mt.LabelsNone) > 0 && !slices.ContainsFunc(mt.LabelsAny, func(l string) bool { return !slices.Contains(mt.LabelsNone, l) }) {
		p.Add(path+".labels_any", "every value is excluded by labels_none")
	}
	if mt.Subject == nil && len(mt.Priority)+len(mt.Classification)+len(mt.LabelsAll)+len(mt.LabelsAny)+len(mt.LabelsNone)+len(mt.Headers) == 0 && p.Len() == before {
		p.Add(path, "must contain at least one criterion")
	}
	return mt, p.Len() == before
}

// matchValues normalises a priority, classification or header values list:
// a string or an array of strings, each trimmed and non-empty, duplicates
// dropped.
func matchValues(v any, path string, p *fields.Problems) []string {
	out := []string{}
	var items []any
	single := false
	switch x := v.(type) {
	case nil:
		return out
	case string:
		items, single = []any{x}, true
	case []any:
		items = x
	default:
		p.Addf(path, "expected string or array of strings (got %s)", fields.JSONType(v))
		return out
	}
	for j, item := range items {
		ip := fields.Index(path, j)
		if single {
			ip = path
		}
		s, ok := item.(string)
		if !ok {
			p.Addf(ip, "expected string (got %s)", fields.JSONType(item))
			continue
		}
		s = metadata.TrimSpace(s)
		switch {
		case s == "":
			p.Add(ip, "must not be empty")
		case fields.HasControl(s):
			p.Add(ip, "must not contain control characters")
		case utf8.RuneCountInString(s) > MaxValueLength:
			p.Addf(ip, "must be at most %d characters", MaxValueLength)
		case !slices.Contains(out, s):
			out = append(out, s)
		}
	}
	if len(out) > MaxMatchValues {
		p.Addf(path, "at most %d values (got %d)", MaxMatchValues, len(out))
	}
	return out
}

// matchLabels normalises a labels_* list as message labels are normalised.
func matchLabels(v any, path string, p *fields.Problems) []string {
	var raw []string
	switch x := v.(type) {
	case nil:
		return []string{}
	case string:
		raw = []string{x}
	case []any:
		for j, item := range x {
			ip := fields.Index(path, j)
			s, ok := item.(string)
			if !ok {
				p.Addf(ip, "expected string (got %s)", fields.JSONType(item))
				continue
			}
			if strings.Contains(s, ";") {
				p.Add(ip, `must not contain ";"`)
				continue
			}
			raw = append(raw, s)
		}
	default:
		p.Addf(path, "expected string or array of strings (got %s)", fields.JSONType(v))
		return []string{}
	}
	out := metadata.NormaliseLabels(raw...)
	kept := out[:0]
	for _, l := range out {
		switch {
		case fields.HasControl(l):
			p.Addf(path, "label %q must not contain control characters", l)
		case utf8.RuneCountInString(l) > MaxLabelLength:
			p.Addf(path, "each label must be at most %d characters", MaxLabelLength)
		default:
			kept = append(kept, l)
		}
	}
	if len(kept) > MaxMatchValues {
		p.Addf(path, "at most %d labels (got %d)", MaxMatchValues, len(kept))
	}
	return kept
}

func matchHeaders(v any, path string, p *fields.Problems) []routing.HeaderMatch {
	out := []routing.HeaderMatch{}
	arr, ok := v.([]any)
	if !ok {
		p.Addf(path, "expected array (got %s)", fields.JSONType(v))
		return out
	}
	if len(arr) > MaxHeaderRules {
		p.Addf(path, "at most %d headers (got %d)", MaxHeaderRules, len(arr))
	}
	seen := map[string]bool{}
	for j, item := range arr {
		ip := fields.Index(path, j)
		m, ok := item.(map[string]any)
		if !ok {
			p.Addf(ip, "expected object (got %s)", fields.JSONType(item))
			continue
		}
		checkKeys(m, ip, []string{"name", "values"}, p)
		nv, has := m["name"]
		if !has {
			p.Add(ip+".name", "required")
			continue
		}
		name, ok := nv.(string)
		np := ip + ".name"
		lower := strings.ToLower(name)
		switch {
		case !ok:
			p.Addf(np, "expected string (got %s)", fields.JSONType(nv))
			continue
		case strings.TrimSpace(name) != name:
			p.Add(np, "must not have surrounding whitespace")
			continue
		case !headerName.MatchString(name):
			p.Addf(np, "must match %s", headerName)
			continue
		case slices.Contains(protocolOwnedHeaders, lower):
			p.Addf(np, "must not match protocol-owned header %q", lower)
			continue
		case slices.Contains(secretHeaders, lower):
			p.Addf(np, "must not match secret-bearing header %q; publish a non-secret routing hint instead", lower)
			continue
		case seen[lower]:
			p.Addf(np, "duplicate header %q", name)
			continue
		}
		seen[lower] = true
		vv, has := m["values"]
		if !has {
			p.Add(ip+".values", "required")
			continue
		}
		vals := matchValues(vv, ip+".values", p)
		if len(vals) == 0 {
			if vv == nil || isEmptyList(vv) {
				p.Add(ip+".values", "must not be empty")
			}
			continue
		}
		out = append(out, routing.HeaderMatch{Name: name, Values: vals})
	}
	return out
}

func isEmptyList(v any) bool {
	a, ok := v.([]any)
	return ok && len(a) == 0
}

// resolveRouting applies the reference rules between routing and the named
// sinks, the optional-target defaults, and the requirements of an active
// fanout sink.
func (c *Config) resolveRouting(rp routingPaths, isolation string, p *fields.Problems) {
	r := &c.Routing
	if len(c.Sinks) > 0 || rp.sinks != "sinks" {
		r.resolveReferences(c.Sinks, rp, p)
	}
	if r.Enabled && len(r.Routes) == 0 {
		p.Add(rp.key("routes"), "must not be empty when routing.enabled is true")
	}
	if r.Enabled || len(r.DefaultTargets) > 0 {
		r.applyWindows(rp, p)
	}
	switch {
	case r.NoMatch == routing.NoMatchDefault && len(r.DefaultTargets) == 0:
		p.Add(rp.key("default_targets"), "required when no_match is default_route")
	case r.NoMatch != routing.NoMatchDefault && len(r.DefaultTargets) > 0:
		p.Add(rp.key("default_targets"), "only valid when no_match is default_route")
	}
	if c.Sink.Type != "fanout" {
		if r.Enabled {
			c.Warnings = append(c.Warnings, `routing: enabled but sink.type is not "fanout"; routes do not affect delivery`)
		}
		return
	}
	if len(c.Sinks) == 0 {
		p.Add("sinks", `must not be empty when sink.type is "fanout"`)
	}
	if !r.Enabled {
		p.Add("routing.enabled", `must be true when sink.type is "fanout"`)
	}
	if p.Len() > 0 {
		return
	}
	d := c.Delivery
	probe := backoff.Policy{Base: time.Duration(d.RetryBackoffMS) * time.Millisecond, Max: time.Duration(d.RetryBackoffMaxMS) * time.Millisecond,
		Mode: d.RetryBackoffMode, Multiplier: d.RetryBackoffMultiplier, Jitter: d.RetryJitter}
	fo := &routing.Fanout{Policy: r.Policy(), Targets: map[string]sink.Opener{}, Isolation: isolation,
		ProbeBackoff: func(n int) time.Duration { return probe.Delay(n, backoff.Draw()) }}
	for _, n := range fo.Policy.Used() {
		fo.Targets[n] = c.Sinks[n].Opener
	}
	c.Sink.Opener = fo
	c.warnFanout(rp)
}

// resolveReferences fills target_sink_types from the named sinks and
// checks that every used name and every target_sink_types key names one.
func (r *Routing) resolveReferences(sinks map[string]*NamedSink, rp routingPaths, p *fields.Problems) {
	check := func(ts []routing.Target, path string) {
		for k, t := range ts {
			ns, ok := sinks[t.Sink]
			tp := fields.Index(path, k)
			if !ok {
				p.Addf(tp, "unknown named sink %q", t.Sink)
				continue
			}
			if _, explicit := r.TargetSinkTypes[t.Sink]; !explicit && slices.Contains(routableTypes, ns.Type) {
				r.TargetSinkTypes[t.Sink] = ns.Type
			}
		}
	}
	for i, rt := range r.Routes {
		check(rt.Targets, fields.Index(rp.key("routes"), i)+".targets")
	}
	check(r.DefaultTargets, rp.key("default_targets"))
	for _, k := range sortedKeys(r.TargetSinkTypes) {
		ns, ok := sinks[k]
		kp := rp.key("target_sink_types") + "." + k
		if !ok {
			p.Add(kp, "unknown named sink")
			continue
		}
		if v := r.TargetSinkTypes[k]; v != ns.Type {
			p.Addf(kp, "%q does not match the named sink's type %q", v, ns.Type)
		}
	}
}

// applyWindows fills the unset window values of optional targets from the
// defaults of their target_sink_types entry.
func (r *Routing) applyWindows(rp routingPaths, p *fields.Problems) {
	fill := func(ts []routing.Target, path string) {
		for k := range ts {
			t := &ts[k]
			if t.Required {
				continue
			}
			tp := fields.Index(path, k)
			if t.MinimumWaitMS == nil || t.TimeoutMS == nil {
				typ, ok := r.TargetSinkTypes[t.Sink]
				w, to, known := windowDefaults(typ)
				if !ok || !known {
					p.Addf(tp, "optional target %q needs routing.target_sink_types or explicit minimum_wait_ms and timeout_ms", t.Sink)
					continue
				}
				if t.MinimumWaitMS == nil {
					t.MinimumWaitMS = &w
				}
				if t.TimeoutMS == nil {
					t.TimeoutMS = &to
				}
			}
			if *t.TimeoutMS < *t.MinimumWaitMS {
				p.Addf(tp+".timeout_ms", "must be at least minimum_wait_ms (got %d < %d)", *t.TimeoutMS, *t.MinimumWaitMS)
			}
		}
	}
	for i := range r.Routes {
		fill(r.Routes[i].Targets, fields.Index(rp.key("routes"), i)+".targets")
	}
	fill(r.DefaultTargets, rp.key("default_targets"))
}

// warnFanout adds the load warnings of an active fanout sink: duplicate
// models that dead-letter redeliveries, and target lists with no required
// entry.
func (c *Config) warnFanout(rp routingPaths) {
	pol := c.Routing.Policy()
	for _, n := range pol.Used() {
		ns := c.Sinks[n]
		for _, kv := range [][2]string{{"duplicate_policy", "fail"}, {"mode", "insert"}, {"mode", "append"}, {"duplicate_policy", "fail_existing"}} {
			if v, ok := ns.tree[kv[0]].(string); ok && strings.ToLower(strings.TrimSpace(v)) == kv[1] {
				if kv[1] == "fail" && ns.Type != "file" || kv[1] == "fail_existing" && ns.Type != "s3" || kv[0] == "mode" && !isSQLType(ns.Type) {
					continue
				}
				c.Warnings = append(c.Warnings, fmt.Sprintf("sinks.%s: %s %q dead-letters fan-out redeliveries", n, kv[0], kv[1]))
			}
		}
	}
	allOptional := func(ts []routing.Target) bool {
		return len(ts) > 0 && !slices.ContainsFunc(ts, func(t routing.Target) bool { return t.Required })
	}
	for i, rt := range c.Routing.Routes {
		if allOptional(rt.Targets) {
			c.Warnings = append(c.Warnings, fields.Index(rp.key("routes"), i)+".targets: every target is optional; matching messages are acknowledged even when no copy is written")
		}
	}
	if allOptional(c.Routing.DefaultTargets) {
		c.Warnings = append(c.Warnings, rp.key("default_targets")+": every target is optional; matching messages are acknowledged even when no copy is written")
	}
}

func isSQLType(t string) bool {
	return slices.Contains([]string{"postgres", "mysql", "sqlite", "oracle", "clickhouse"}, t)
}
