package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/nats-sinks/nats-sink/internal/seal"
)

// keyFlags collects repeated --key KEY_ID=ENV flags.
type keyFlags []string

func (k *keyFlags) String() string     { return strings.Join(*k, ",") }
func (k *keyFlags) Set(v string) error { *k = append(*k, v); return nil }

// runDecrypt decrypts one encryption envelope (docs/security.md#payload-encryption-keys). Key material is
// read from environment variables and never printed.
func runDecrypt(env *Env, args []string) int {
	fs := newFlags(env, "decrypt", "[INPUT] [--key-env NAME] [--key KEY_ID=ENV]... [--output FILE]")
	keyEnv := fs.String("key-env", "NATS_SINKS_PAYLOAD_KEY_B64", "variable holding the base64 key, used for any key_id")
	output := fs.String("output", "", "write the plaintext to FILE instead of stdout: created or truncated with mode 0600; a symlink is refused")
	var keys keyFlags
	fs.Var(&keys, "key", "KEY_ID=ENV: decrypt envelopes with this key_id using the key in variable ENV (repeatable)")
	pos, code := parseFlags(env, fs, args)
	if code >= 0 {
		return code
	}
	if len(pos) > 1 {
		fs.Usage()
		return exitConfig
	}
	ring, err := decryptKeys(env, keys, *keyEnv)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Configuration error: %v\n", err)
		return exitConfig
	}

	var in io.Reader = env.Stdin
	if len(pos) == 1 && pos[0] != "-" {
		f, err := os.Open(pos[0])
		if err != nil {
			fmt.Fprintf(env.Stderr, "Runtime error: %v\n", err)
			return exitRuntime
		}
		defer f.Close()
		in = f
	}
	doc, err := io.ReadAll(io.LimitReader(in, seal.MaxInput+1))
	if err != nil {
		fmt.Fprintf(env.Stderr, "Runtime error: read input: %v\n", err)
		return exitRuntime
	}
	if len(doc) > seal.MaxInput {
		fmt.Fprintf(env.Stderr, "Runtime error: input exceeds %d bytes\n", seal.MaxInput)
		return exitRuntime
	}
	envelope, err := seal.Locate(doc)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Runtime error: %v\n", err)
		return exitRuntime
	}
	plain, err := seal.Decrypt(envelope, ring)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Runtime error: %v\n", err)
		return exitRuntime
	}
	if *output == "" {
		env.Stdout.Write(plain)
		return exitOK
	}
	if err := writePrivate(*output, plain); err != nil {
		fmt.Fprintf(env.Stderr, "Runtime error: %v\n", err)
		return exitRuntime
	}
	return exitOK
}

// writePrivate writes data to the regular file path with mode 0600:
// created 0600, or an existing regular file truncated and made 0600 (so a
// plaintext never inherits a wider mode). A symlink is refused, not
// followed (O_NOFOLLOW), and so is anything that is not a regular file;
// O_NONBLOCK keeps a FIFO from blocking the open.
func writePrivate(path string, data []byte) (err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return fmt.Errorf("--output %s is a symbolic link; refusing to follow it", path)
		}
		return fmt.Errorf("--output: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("--output: %w", cerr)
		}
	}()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("--output %s is not a regular file", path)
	}
	// Mode first, content after: the plaintext never sits in a file
	// others may read.
	if err := f.Chmod(0o600); err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	return nil
}

// decryptKeys builds the key ring: --key flags select keys by key_id,
// otherwise the --key-env key serves every key_id.
func decryptKeys(env *Env, keys keyFlags, keyEnv string) (seal.KeyRing, error) {
	load := func(name string) ([32]byte, error) {
		v, ok := env.Getenv(name)
		if !ok {
			return [32]byte{}, fmt.Errorf("environment variable %s is not set", name)
		}
		k, err := seal.ParseKey(strings.TrimSpace(v))
		if err != nil {
			return [32]byte{}, fmt.Errorf("environment variable %s: %v", name, err)
		}
		return k, nil
	}
	if len(keys) == 0 {
		k, err := load(keyEnv)
		if err != nil {
			return seal.KeyRing{}, fmt.Errorf("--key-env: %w", err)
		}
		return seal.FixedKeyRing(seal.Key{Secret: k}), nil
	}
	var ring []seal.Key
	for _, kv := range keys {
		id, name, ok := strings.Cut(kv, "=")
		if !ok || id == "" || name == "" {
			return seal.KeyRing{}, fmt.Errorf("--key: expected KEY_ID=ENV (got %q)", kv)
		}
		k, err := load(name)
		if err != nil {
			return seal.KeyRing{}, fmt.Errorf("--key %s: %w", id, err)
		}
		ring = append(ring, seal.Key{ID: id, Secret: k})
	}
	return seal.NewKeyRing(ring...)
}
