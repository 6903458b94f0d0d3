package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"

	"github.com/nats-sinks/nats-sink/secret"
)

// Env looks up an environment variable; nil means os.LookupEnv.
type Env func(name string) (string, bool)

// Lookup returns the variable's value and whether it is set.
func (e Env) Lookup(name string) (string, bool) {
	if e == nil {
		return os.LookupEnv(name)
	}
	return e(name)
}

// errKeySize is returned by DecodeKey for key material that is not 32 bytes.
var errKeySize = errors.New("must decode to exactly 32 bytes for AES-256")

// DecodeKey decodes base64 key material (standard alphabet, padding
// required) into an AES-256 key. Its errors never include the material.
func DecodeKey(b64 secret.Value) ([]byte, error) {
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

func resolveKey(path string, value *secret.Value, envName, fileName *string, env Env) ([]byte, bool, error) {
	s, ok, err := secret.Resolve(path, value, envName, fileName, env)
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
