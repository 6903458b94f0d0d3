// Package config loads the nats-sink configuration file (docs/configuration.md):
// strict parsing, environment overrides, the docs/configuration.md#compatible-coercions compat coercions, every
// problem reported at once in schema order, and the sink section handed to
// the sink type's Decoder. The sections are plain structs decoded onto the
// defaults by internal/fields, which also generates the JSON Schema from
// them.
//
// Secrets named by *_env and *_file keys are not read while loading; they
// are resolved when a connection is opened (package secret).
package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/sink"
)

// MaxFileSize is the configuration file size limit (docs/configuration.md#how-a-file-is-loaded).
const MaxFileSize = 1 << 20

// Problem is one configuration problem: a JSON path and a message.
type Problem = sink.Problem

// Error is a configuration error (exit 2). Its text is what the CLI prints
// after "Configuration error: " (docs/configuration.md#how-a-file-is-loaded).
type Error struct {
	// File is the configuration file as named on the command line.
	File string
	// Problems are in schema order.
	Problems []Problem
}

// Error returns "<path>: <message>" for one problem, else
// "<n> problems in <file>" followed by one indented line per problem.
func (e *Error) Error() string {
	if len(e.Problems) == 1 {
		return e.Problems[0].Path + ": " + e.Problems[0].Message
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems in %s", len(e.Problems), e.File)
	for _, p := range e.Problems {
		b.WriteString("\n  " + p.Path + ": " + p.Message)
	}
	return b.String()
}

// Is reports whether target is sink.ErrConfig: every Error is a
// configuration error.
func (e *Error) Is(target error) bool { return target == sink.ErrConfig }

func fileError(file, msg string) *Error {
	return &Error{File: file, Problems: []Problem{{Path: file, Message: msg}}}
}

// Load reads and parses the configuration file at path. Every failure is a
// *Error.
func Load(path string, reg *sink.Registry, env Env) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fileError(path, "cannot read configuration file: "+err.Error())
	}
	defer f.Close()
	// Read one byte past the limit to tell "exactly at the limit" from "over".
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fileError(path, "cannot read configuration file: "+err.Error())
	}
	return Parse(data, path, reg, env)
}

// Parse parses a configuration document; name is the file name used in
// messages. env supplies environment overrides (nil = os.LookupEnv). Every
// failure is a *Error.
func Parse(data []byte, name string, reg *sink.Registry, env Env) (*Config, error) {
	if len(data) > MaxFileSize {
		return nil, fileError(name, fmt.Sprintf("configuration file exceeds the %d byte limit", MaxFileSize))
	}
	// Exact numbers: a sink may need a number as written (a mapping
	// default 9007199254740993.5 into numeric(20,1)); the sections decode
	// them like floats.
	tree, err := jsonx.ParseExact(data)
	if err != nil {
		if pe, ok := errors.AsType[*jsonx.PathError](err); ok {
			return nil, &Error{File: name, Problems: []Problem{{Path: pe.Path, Message: pe.Message}}}
		}
		if se, ok := errors.AsType[*jsonx.SyntaxError](err); ok {
			return nil, fileError(name, se.Error())
		}
		if jsonx.ErrNotUTF8 != nil && errors.Is(err, jsonx.ErrNotUTF8) {
			return nil, fileError(name, "configuration file is not valid UTF-8 JSON")
		}
		return nil, fileError(name, err.Error())
	}
	root, ok := tree.(map[string]any)
	if !ok {
		return nil, &Error{File: name, Problems: []Problem{{Path: "(root)", Message: "configuration root must be a JSON object"}}}
	}
	cfg := Default()
	var p fields.Problems
	applyOverrides(root, env, &p)
	rp := rewriteCompact(root, &p)
	cfg.Warnings = unsupportedSections(root, &p)
	sinksTree, hasSinks := root["sinks"]
	routingTree := root["routing"]
	delete(root, "sinks")
	delete(root, "routing")
	fields.Decode(root, &cfg, "", &p)
	cfg.decodeSink(root, reg, &p)
	cfg.decodeNamedSinks(sinksTree, hasSinks, rp.sinks, reg, &p)
	cfg.namedOrder = objectKeys(data, strings.Split(rp.sinks, ".")...)
	cfg.decodeRouting(routingTree, rp, &p)
	cfg.validate(&p)
	cfg.resolveRouting(rp, cfg.Delivery.PermanentFailureIsolation, &p)
	if p.Len() > 0 {
		return nil, &Error{File: name, Problems: p.List()}
	}
	if cfg.Metrics.Enabled && cfg.Metrics.SnapshotFile == nil && cfg.Metrics.Listen == nil {
		cfg.Warnings = append(cfg.Warnings, "metrics.enabled: no exporter configured (set metrics.listen or metrics.snapshot_file)")
	}
	cfg.Warnings = append(cfg.Warnings, cfg.Encryption.warnings()...)
	cfg.Warnings = append(cfg.Warnings, cfg.MessageAuthenticity.warnings()...)
	if w, ok := cfg.Sink.Opener.(sink.Warner); ok {
		for _, pr := range w.Warnings() {
			path := "sink"
			if pr.Path != "" && pr.Path != "(root)" {
				path = fields.Join("sink", pr.Path)
			}
			cfg.Warnings = append(cfg.Warnings, path+": "+pr.Message)
		}
	}
	return &cfg, nil
}

// override is one row of the environment override table (docs/configuration.md#environment-overrides).
type override struct {
	name string
	path []string
}

func overrides() []override {
	o := func(name string, path ...string) override { return override{"NATS_SINKS_" + name, path} }
	return []override{
		o("NATS_URL", "nats", "url"),
		o("NATS_STREAM", "nats", "stream"),
		o("NATS_CONSUMER", "nats", "consumer"),
		o("NATS_SUBJECT", "nats", "subject"),
		o("NATS_NO_ECHO", "nats", "no_echo"),
		o("CONSUMER_MANAGEMENT_MODE", "consumer_management", "mode"),
		o("DELIVERY_MAX_IN_FLIGHT_BATCHES", "delivery", "max_in_flight_batches"),
		o("LOG_LEVEL", "logging", "level"),
		o("METRICS_LISTEN", "metrics", "listen"),
		o("PRIORITY_HEADER", "message_metadata", "priority", "header"),
		o("PRIORITY_DEFAULT", "message_metadata", "priority", "default"),
		o("CLASSIFICATION_HEADER", "message_metadata", "classification", "header"),
		o("CLASSIFICATION_DEFAULT", "message_metadata", "classification", "default"),
		o("LABELS_HEADER", "message_metadata", "labels", "header"),
		o("LABELS_DEFAULT", "message_metadata", "labels", "default"),
		o("ENCRYPTION_ENABLED", "encryption", "enabled"),
		o("ENCRYPTION_ALGORITHM", "encryption", "algorithm"),
		o("ENCRYPTION_KEY_ID", "encryption", "key_id"),
		o("ENCRYPTION_KEY_B64_ENV", "encryption", "key_b64_env"),
		o("TRACING_ENABLED", "tracing", "enabled"),
		o("TRACING_EXPORTER", "tracing", "exporter"),
		o("TRACING_ENDPOINT", "tracing", "endpoint"),
		o("SINK_TYPE", "sink", "type"),
		o("ADVISORIES_ENABLED", "advisories", "enabled"),
		o("MISSION_METADATA_ENABLED", "mission_metadata", "enabled"),
		o("MISSION_METADATA_HEADER", "mission_metadata", "header"),
		o("SECURITY_LABELS_ENABLED", "security_labels", "enabled"),
		o("SECURITY_LABELS_HEADER", "security_labels", "header"),
		o("MESSAGE_AUTHENTICITY_ENABLED", "message_authenticity", "enabled"),
		o("MESSAGE_AUTHENTICITY_SIGNATURE_HEADER", "message_authenticity", "signature_header"),
		o("MESSAGE_AUTHENTICITY_ALGORITHM_HEADER", "message_authenticity", "algorithm_header"),
		o("MESSAGE_AUTHENTICITY_KEY_ID_HEADER", "message_authenticity", "key_id_header"),
		o("CUSTODY_ENABLED", "custody", "enabled"),
		o("CUSTODY_ALGORITHM", "custody", "algorithm"),
		o("CUSTODY_KEY_ID", "custody", "key_id"),
	}
}

// OverrideVariables returns the names of every environment variable that
// overrides a configuration key, in table order (docs/configuration.md#environment-overrides).
func OverrideVariables() []string {
	var names []string
	for _, o := range overrides() {
		names = append(names, o.name)
	}
	return names
}

// applyOverrides sets every override variable that is set (even to "") at
// its path, creating missing intermediate objects. Values stay strings; the
// docs/configuration.md#compatible-coercions coercions turn them into the declared types.
func applyOverrides(root map[string]any, env Env, p *fields.Problems) {
	for _, o := range overrides() {
		v, ok := env.Lookup(o.name)
		if !ok {
			continue
		}
		obj := root
		path := ""
		blocked := false
		for _, k := range o.path[:len(o.path)-1] {
			path = fields.Join(path, k)
			next, exists := obj[k]
			if !exists || next == nil {
				m := map[string]any{}
				obj[k] = m
				obj = m
				continue
			}
			m, isObj := next.(map[string]any)
			if !isObj {
				p.Addf(path, "cannot apply environment override %s", o.name)
				blocked = true
				break
			}
			obj = m
		}
		if !blocked {
			obj[o.path[len(o.path)-1]] = v
		}
	}
}

// unsupportedOrder names the upstream sections nats-sink does not
// provide, in docs/configuration.md#key-reference order, with the feature named in messages.
var unsupportedOrder = []struct{ key, feature string }{
	{"push_consumer", "push consumer delivery"},
	{"advisories", "the JetStream advisories monitor"},
	{"mission_metadata", "mission metadata"},
	{"security_labels", "security-label profiles"},
	{"size_policy", "size policy"},
	{"pre_sink_policy", "pre-sink policy"},
	{"plugins", "plugins"},
}

// unsupportedSections checks and removes the unsupported upstream sections
// (docs/configuration.md#upstream-sections-that-nats-sink-does-not-provide) and returns the warnings for those accepted.
func unsupportedSections(root map[string]any, p *fields.Problems) []string {
	var warnings []string
	ignored := func(key string) {
		warnings = append(warnings, key+": ignored (feature not supported; section is disabled)")
	}
	for _, u := range unsupportedOrder {
		v, ok := root[u.key]
		if !ok {
			continue
		}
		delete(root, u.key)
		m, isObj := v.(map[string]any)
		if !isObj {
			p.Addf(u.key, "expected object (got %s)", fields.JSONType(v))
			continue
		}
		enabled := false
		if e, has := m["enabled"]; has {
			b, valid := fields.CoerceBool(e)
			if !valid {
				p.Addf(u.key+".enabled", "expected boolean (got %s)", fields.JSONType(e))
				continue
			}
			enabled = b
		}
		if enabled {
			p.Addf(u.key+".enabled", "%s is not supported by nats-sink; remove the section or disable it", u.feature)
			continue
		}
		ignored(u.key)
	}
	return warnings
}

// upstreamSinkTypes are upstream sink types nats-sink does not provide.
var upstreamSinkTypes = []string{"coherence", "oracle_nosql", "foundry", "gotham"}

// decodeSink checks sink.type and hands the sink object to the registered
// Decoder, prefixing its problems with "sink.". A fanout sink holds only
// its type once the compact form has been rewritten; its Opener is built
// from the routing section.
func (c *Config) decodeSink(root map[string]any, reg *sink.Registry, p *fields.Problems) {
	v, ok := root["sink"]
	if !ok {
		return // "sink: required" comes from the struct decode
	}
	m, isObj := v.(map[string]any)
	if !isObj {
		p.Addf("sink", "expected object (got %s)", fields.JSONType(v))
		return
	}
	c.sinkTree = m
	c.Sink.Type, c.Sink.Opener = decodeSinkObject(m, "sink", reg, false, p)
}

// decodeSinkObject validates one sink object at path (the active sink or
// a named sink) without I/O and returns its type and Opener. The type is
// "" when it could not be read; the Opener is nil on any problem.
func decodeSinkObject(m map[string]any, path string, reg *sink.Registry, named bool, p *fields.Problems) (string, sink.Opener) {
	t, has := m["type"]
	if !has {
		p.Add(path+".type", "required")
		return "", nil
	}
	ts, isStr := t.(string)
	if !isStr {
		p.Addf(path+".type", "expected string (got %s)", fields.JSONType(t))
		return "", nil
	}
	ts = strings.ToLower(strings.TrimSpace(ts))
	m["type"] = ts
	if ts == "fanout" {
		if named {
			p.Add(path+".type", "fanout may only be the active sink")
			return "", nil
		}
		for _, k := range sortedAnyKeys(m) {
			if k != "type" {
				p.Add(path+"."+k, "unknown key")
			}
		}
		return ts, nil
	}
	for _, u := range upstreamSinkTypes {
		if ts == u {
			p.Addf(path+".type", "%q is an upstream sink type that nats-sink does not provide", ts)
			return "", nil
		}
	}
	var dec sink.Decoder
	ok := false
	if reg != nil {
		dec, ok = reg.Lookup(ts)
	}
	if !ok {
		// The registry lists its types in the order they were registered:
		// sinks/builtin follows the documentation (sinks.md).
		if reg == nil || len(reg.Names()) == 0 {
			p.Addf(path+".type", "unknown sink type %q (no sink types are registered)", ts)
		} else {
			p.Addf(path+".type", "unknown sink type %q (expected one of %s)", ts, strings.Join(reg.Names(), ", "))
		}
		return "", nil
	}
	opener, err := dec(jsonx.MarshalExact(m, jsonx.UTF8))
	if err != nil {
		if ce, ok := errors.AsType[*sink.ConfigError](err); ok {
			for _, pr := range ce.Problems {
				pp := pr.Path
				if pp == "(root)" {
					pp = ""
				}
				p.Add(fields.Join(path, pp), pr.Message)
			}
			return ts, nil
		}
		p.Add(path, err.Error())
		return ts, nil
	}
	return ts, opener
}
