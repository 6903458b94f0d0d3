// Package broker holds what the message-broker sinks (redis, rabbitmq,
// mqtt) do alike with their shared configuration (package brokerconfig):
// build a message's record — its body, its idempotency key and the metadata
// set every broker record carries (subject, stream, sequence, key,
// priority, classification, labels, trace context) —, render destination
// templates, resolve the password and build the TLS settings.
//
// It imports package sink, brokerconfig, secret and leaf helpers only, so
// the three sinks share one set of rules and none imports another.
package broker

import (
	"fmt"
	"strings"

	"github.com/nats-sinks/nats-sink/brokerconfig"
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
)

// ResolvePassword reads the configured password source: the value itself,
// the environment variable (through lookup), or the file with one trailing
// newline removed. ok is false when no source is set. A variable that is
// not set or empty, or a file that cannot be read or is empty, is a
// *sink.ConfigError naming the key (the host exits 2); the error never
// carries the secret.
func ResolvePassword(a *brokerconfig.Auth, lookup func(string) (string, bool)) (pw string, ok bool, err error) {
	v, ok, err := secret.Resolve("password", a.Password, a.PasswordEnv, a.PasswordFile, lookup)
	if err != nil || !ok {
		return "", ok, err
	}
	if v.Reveal() == "" {
		switch {
		case a.PasswordEnv != nil:
			return "", false, ConfigError("password_env", fmt.Sprintf("environment variable %s is empty", *a.PasswordEnv))
		case a.PasswordFile != nil:
			return "", false, ConfigError("password_file", fmt.Sprintf("secret file %s is empty", *a.PasswordFile))
		}
		return "", false, ConfigError("password", "must not be empty")
	}
	return v.Reveal(), true, nil
}

// ConfigError is one configuration problem at path (relative to the sink
// object) found when the sink starts; the host exits 2 for it.
func ConfigError(path, msg string) error {
	return &sink.ConfigError{Problems: []sink.Problem{{Path: path, Message: msg}}}
}

// Checker collects a sink's rules between keys, in the order they are
// found; its problems go into the sink's Validate.
type Checker struct{ ps []sink.Problem }

// Add records a problem at path.
func (c *Checker) Add(path, msg string) { c.ps = append(c.ps, sink.Problem{Path: path, Message: msg}) }

// Addf records a problem at path with a formatted message.
func (c *Checker) Addf(path, format string, args ...any) {
	c.Add(path, fmt.Sprintf(format, args...))
}

// Enum checks that got is one of allowed.
func (c *Checker) Enum(path, got string, allowed ...string) {
	for _, a := range allowed {
		if got == a {
			return
		}
	}
	c.Addf(path, "must be one of %s (got %q)", strings.Join(allowed, ", "), got)
}

// Append adds problems found elsewhere.
func (c *Checker) Append(ps []sink.Problem) { c.ps = append(c.ps, ps...) }

// Problems returns what was found.
func (c *Checker) Problems() []sink.Problem { return c.ps }
