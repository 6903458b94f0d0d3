package sqlmodel

import (
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
)

// ResolveSecret resolves a SQL sink's secret from key, key_env or key_file
// (value, env and file; at most one is set) when the sink starts, never
// during validation (docs/configuration.md#how-a-file-is-loaded), through secret.Resolve: a file
// loses one trailing newline. It returns the value and the key it came
// from, "" when no source is set. Errors are a *sink.ConfigError (exit 2 in
// the CLI) naming that key, never the value or the file's content. The
// dialect checks the value itself, with its own wording.
func ResolveSecret(key string, value *secret.Value, env, file *string, lookup func(string) (string, bool)) (v, from string, err error) {
	s, ok, err := secret.Resolve(key, value, env, file, lookup)
	if err != nil || !ok {
		return "", "", err
	}
	switch {
	case value != nil:
		from = key
	case env != nil:
		from = key + "_env"
	default:
		from = key + "_file"
	}
	return s.Reveal(), from, nil
}

// SecretProblems returns the problems of one secret's sources (key,
// key_env, key_file): more than one set, or none set when required. (That
// key_env names an environment variable is its pattern tag's rule.)
func SecretProblems(key string, required bool, value *secret.Value, env, file *string) []sink.Problem {
	var out []sink.Problem
	add := func(path, msg string) { out = append(out, sink.Problem{Path: path, Message: msg}) }
	n := 0
	for _, set := range []bool{value != nil, env != nil, file != nil} {
		if set {
			n++
		}
	}
	sources := key + ", " + key + "_env, " + key + "_file"
	switch {
	case n == 0 && required:
		add(key, "one of "+sources+" is required")
	case n > 1:
		add(key, "set only one of "+sources)
	}
	return out
}
