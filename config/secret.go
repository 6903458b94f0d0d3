package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
)

// Secret holds a credential. fmt, %v, %#v, slog and encoding/json print the
// mask of spec config.md §10; Reveal is the one way out.
type Secret string

const mask = "********"

// String returns the mask.
func (Secret) String() string { return mask }

// GoString returns the mask, so %#v does not leak either.
func (Secret) GoString() string { return mask }

// LogValue returns the mask for log/slog.
func (Secret) LogValue() slog.Value { return slog.StringValue(mask) }

// MarshalJSON encodes the mask.
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + mask + `"`), nil }

// Reveal returns the secret value. It is the one greppable way to read it.
func (s Secret) Reveal() string { return string(s) }

// Env looks up an environment variable; nil means os.LookupEnv.
type Env func(name string) (string, bool)

// Lookup returns the variable's value and whether it is set.
func (e Env) Lookup(name string) (string, bool) {
	if e == nil {
		return os.LookupEnv(name)
	}
	return e(name)
}

// ResolveSecret resolves one secret that may come from the configuration
// value itself, from the environment variable named by envName, or from the
// file named by fileName (config.md §3 [ext] secrets from files; the loader
// has already rejected more than one source). path names the secret's key
// ("nats.password") for error messages, which never include the value or
// the file's content. ok is false when no source is configured.
//
// Environment variables and files are read here, at connection time, never
// during validation (config.md §1.2).
func ResolveSecret(path string, value *Secret, envName, fileName *string, env Env) (s Secret, ok bool, err error) {
	switch {
	case value != nil:
		return *value, true, nil
	case envName != nil:
		v, found := env.Lookup(*envName)
		if !found {
			return "", false, &Error{Problems: []Problem{{Path: path + "_env", Message: fmt.Sprintf("environment variable %s is not set", *envName)}}}
		}
		return Secret(v), true, nil
	case fileName != nil:
		data, err := os.ReadFile(*fileName)
		if err != nil {
			// The os error names the path and the failing operation, never content.
			return "", false, &Error{Problems: []Problem{{Path: path + "_file", Message: fmt.Sprintf("cannot read secret file: %v", err)}}}
		}
		v := strings.TrimSuffix(string(data), "\n")
		return Secret(strings.TrimSuffix(v, "\r")), true, nil
	}
	return "", false, nil
}

// errKeySize is returned by DecodeKey for key material that is not 32 bytes.
var errKeySize = errors.New("must decode to exactly 32 bytes for AES-256")

// DecodeKey decodes base64 key material (standard alphabet, padding
// required) into an AES-256 key. Its errors never include the material.
func DecodeKey(b64 Secret) ([]byte, error) {
	key, err := base64.StdEncoding.Strict().DecodeString(b64.Reveal())
	if err != nil {
		return nil, errors.New("must be standard base64 with padding")
	}
	if len(key) != 32 {
		return nil, errKeySize
	}
	return key, nil
}

// EncryptionKey resolves the top-level encryption key, reading key_b64_env
// or key_b64_file when configured. ok is false when no key source is set.
func (e *Encryption) EncryptionKey(env Env) (key []byte, ok bool, err error) {
	return resolveKey("encryption.key_b64", e.KeyB64, e.KeyB64Env, e.KeyB64File, env)
}

// RuleKey resolves the key for rule i: the rule's own source when it has
// one (never mixed with the top level), else the top-level key.
func (e *Encryption) RuleKey(i int, env Env) (key []byte, ok bool, err error) {
	r := &e.Rules[i]
	if !r.HasKey() {
		return e.EncryptionKey(env)
	}
	return resolveKey(fmt.Sprintf("encryption.rules[%d].key_b64", i), r.KeyB64, r.KeyB64Env, r.KeyB64File, env)
}

func resolveKey(path string, value *Secret, envName, fileName *string, env Env) ([]byte, bool, error) {
	s, ok, err := ResolveSecret(path, value, envName, fileName, env)
	if err != nil || !ok {
		return nil, ok, err
	}
	key, err := DecodeKey(s)
	if err != nil {
		src := path
		switch {
		case envName != nil && value == nil:
			src = path + "_env"
		case fileName != nil && value == nil:
			src = path + "_file"
		}
		return nil, false, &Error{Problems: []Problem{{Path: src, Message: err.Error()}}}
	}
	return key, true, nil
}
