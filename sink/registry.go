package sink

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// A Registry maps sink.type names to their Decoders. Built-ins are listed
// explicitly in package sinks/builtin; there is no init-time registration.
type Registry struct {
	decoders map[string]Decoder
	names    []string // in registration order
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{decoders: map[string]Decoder{}} }

// Register adds a sink type. It panics on an empty or duplicate name, which
// is a programming error in the list of built-ins.
func (r *Registry) Register(name string, d Decoder) {
	if name == "" || d == nil {
		panic("sink: Register with empty name or nil decoder")
	}
	if _, dup := r.decoders[name]; dup {
		panic(fmt.Sprintf("sink: Register called twice for %q", name))
	}
	r.decoders[name] = d
	r.names = append(r.names, name)
}

// Lookup returns the decoder for a sink type.
func (r *Registry) Lookup(name string) (Decoder, bool) {
	d, ok := r.decoders[name]
	return d, ok
}

// Names returns the registered types in the order they were registered
// (sinks/builtin registers them in the order of the documentation), for
// messages that list them.
func (r *Registry) Names() []string { return slices.Clone(r.names) }

// A Problem is one configuration problem at a JSON path relative to the
// object being decoded.
type Problem struct {
	Path    string
	Message string
}

// ConfigError lists every problem found in one configuration object, in
// schema order, with paths relative to that object ("directory", not
// "sink.directory"). Decoders, Validate methods and Open return it; the host
// puts the object's own path in front (At). errors.Is(err, ErrConfig)
// reports true for it.
type ConfigError struct {
	Problems []Problem
}

// Error returns every problem, each prefixed with its JSON path, one per
// line.
func (e *ConfigError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.Path + ": " + p.Message
	}
	return strings.Join(lines, "\n")
}

// Is reports whether target is ErrConfig: every ConfigError is a
// configuration error.
func (e *ConfigError) Is(target error) bool { return target == ErrConfig }

// At returns a copy of e with path put in front of every problem's path:
// At("sink") turns "directory" into "sink.directory", and a problem about
// the object itself ("(root)" or "") into "sink".
func (e *ConfigError) At(path string) *ConfigError {
	out := &ConfigError{Problems: make([]Problem, len(e.Problems))}
	for i, p := range e.Problems {
		switch {
		case path == "":
		case p.Path == "" || p.Path == "(root)":
			p.Path = path
		case strings.HasPrefix(p.Path, "["):
			p.Path = path + p.Path
		default:
			p.Path = path + "." + p.Path
		}
		out.Problems[i] = p
	}
	return out
}

// ErrConfig marks an error that means the configuration, or what it points
// at (a secret, a directory, the consumer's settings), must be fixed:
// retrying without a change cannot succeed. The CLI exits 2 for it instead
// of 1. Test for it with errors.Is(err, ErrConfig): *ConfigError and the
// loader's error satisfy it, and a sink marks any other configuration
// problem it finds while opening with fmt.Errorf("...: %w", ErrConfig).
// Prefer a *ConfigError when the problem belongs to a key: it carries the
// key's JSON path.
var ErrConfig = errors.New("configuration error")
