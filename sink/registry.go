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
}

// Lookup returns the decoder for a sink type.
func (r *Registry) Lookup(name string) (Decoder, bool) {
	d, ok := r.decoders[name]
	return d, ok
}

// Names returns the registered types, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.decoders))
	for n := range r.decoders {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// A Problem is one configuration problem at a JSON path relative to the
// object being decoded.
type Problem struct {
	Path    string
	Message string
}

// ConfigError lists every problem found in one configuration object, in
// schema order. Decoders return it; the loader prefixes the paths.
type ConfigError struct {
	Problems []Problem
}

// Error returns every problem, each prefixed with its JSON path.
func (e *ConfigError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.Path + ": " + p.Message
	}
	return strings.Join(lines, "\n")
}

// ErrConfig marks an Open error that is a configuration problem found while
// starting the sink (a missing environment variable, a root directory that
// is missing with creation disabled, a key the build cannot honour). Wrap it
// with fmt.Errorf("...: %w", sink.ErrConfig) or errors.Join; the CLI exits 2
// for it instead of 1 (spec runtime §2 step 5, README Q19).
var ErrConfig = errors.New("configuration error")
