// Package secret holds credentials read from a configuration: Value, which
// cannot be printed by accident, and Resolve, which reads one from the
// configuration value itself, an environment variable or a file when a
// connection is about to open (never while a configuration is validated).
//
// It imports only the standard library and package sink (for the error
// type), so that the configuration loader and every sink share one secret
// type without a sink importing the loader.
package secret

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/nats-sinks/nats-sink/sink"
)

// Mask is what a Value prints as, everywhere.
const Mask = "********"

// A Value is a credential: a password, a token, key material. fmt (%v, %s,
// %q, %x, %#v), log/slog and encoding/json all print Mask; Reveal is the one
// way to read it, so every use of the real value can be found with grep.
type Value string

// String returns Mask.
func (Value) String() string { return Mask }

// GoString returns Mask, so that %#v does not leak either.
func (Value) GoString() string { return Mask }

// LogValue returns Mask for log/slog.
func (Value) LogValue() slog.Value { return slog.StringValue(Mask) }

// MarshalJSON encodes Mask.
func (Value) MarshalJSON() ([]byte, error) { return []byte(`"` + Mask + `"`), nil }

// Reveal returns the secret itself. It is the one greppable way to read it.
func (v Value) Reveal() string { return string(v) }

// Resolve resolves one secret that may come from the configuration value
// itself (value), from the environment variable named by *envName, or from
// the file named by *fileName; at most one of them is set (validation
// rejects more). path names the secret's key as the error should show it
// ("nats.password", or "password" relative to a sink object); the variable
// and file sources are reported at path+"_env" and path+"_file". lookup
// reads the environment; nil means os.LookupEnv. A file loses one trailing
// line ending (\n or \r\n). ok is false when no source is set.
//
// A variable that is not set or a file that cannot be read is a
// *sink.ConfigError (errors.Is(err, sink.ErrConfig)). Errors never contain
// the value or the file's content.
func Resolve(path string, value *Value, envName, fileName *string, lookup func(name string) (string, bool)) (v Value, ok bool, err error) {
	switch {
	case value != nil:
		return *value, true, nil
	case envName != nil:
		if lookup == nil {
			lookup = os.LookupEnv
		}
		s, found := lookup(*envName)
		if !found {
			return "", false, problem(path+"_env", fmt.Sprintf("environment variable %s is not set", *envName))
		}
		return Value(s), true, nil
	case fileName != nil:
		data, err := os.ReadFile(*fileName)
		if err != nil {
			// The os error names the path and the failing operation, never content.
			return "", false, problem(path+"_file", fmt.Sprintf("cannot read secret file: %v", err))
		}
		s := strings.TrimSuffix(string(data), "\n")
		return Value(strings.TrimSuffix(s, "\r")), true, nil
	}
	return "", false, nil
}

func problem(path, msg string) error {
	return &sink.ConfigError{Problems: []sink.Problem{{Path: path, Message: msg}}}
}
