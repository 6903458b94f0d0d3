package spool

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-sinks/nats-sink/internal/seal"
	"github.com/nats-sinks/nats-sink/internal/spoolfile"
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
)

// defaultTempMaxAge is the age beyond which temp files found at start are a
// dead writer's debris when the host gives no drain bound: twice the
// default shutdown timeout (20 s).
const defaultTempMaxAge = 40 * time.Second

// store is a started spool directory, shared by the sink and replay.
type store struct {
	cfg  Config
	dir  *spoolfile.Dir
	seal *seal.Settings // nil: plaintext records
}

// start applies the start rules: validate, expand ~, check or create the
// directory (mode 0700), resolve the record key, remove stale temp files.
// Problems of the configuration (a directory that is a file, a missing
// directory with create_directory false, an unset key variable) are a
// *sink.ConfigError with paths relative to the sink object.
func start(ctx context.Context, c Config, deps sink.Deps) (*store, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	abs, err := c.ResolvedDirectory()
	if err != nil {
		return nil, configProblem("directory", err.Error())
	}
	switch err := spoolfile.Prepare(abs, c.CreateDirectory, c.Fsync); {
	case errors.Is(err, spoolfile.ErrNotDir):
		return nil, configProblem("directory", abs+" exists and is not a directory")
	case errors.Is(err, spoolfile.ErrMissing):
		return nil, configProblem("directory", abs+" does not exist and sink.create_directory is false")
	case err != nil:
		return nil, sink.AsDestination(fmt.Errorf("spool sink directory %s: %w", abs, err))
	}
	st := &store{cfg: c}
	if c.Encryption.Enabled {
		key, err := c.Encryption.resolveKey(deps)
		if err != nil {
			return nil, err
		}
		st.seal = &seal.Settings{
			Enabled:   true,
			Algorithm: seal.NormalizeAlgorithm(c.Encryption.Algorithm),
			KeyID:     c.Encryption.KeyID,
			Key:       key,
			NonceSize: c.Encryption.NonceSizeBytes,
			TagLength: c.Encryption.TagLength,
		}
	}
	if st.dir, err = spoolfile.OpenDir(abs); err != nil {
		return nil, classify(fmt.Errorf("open spool sink directory: %w", err))
	}
	maxAge := 2 * deps.DrainTimeout
	if maxAge <= 0 {
		maxAge = defaultTempMaxAge
	}
	if err := st.dir.RemoveStaleTemps(maxAge, time.Now()); err != nil {
		st.dir.Close()
		return nil, classify(fmt.Errorf("remove stale temp files in %s: %w", abs, err))
	}
	return st, nil
}

// keys returns what replay decrypts with: the configured key, plus extra
// keys selected by key id.
func (st *store) keys(extra map[string][]byte) spoolfile.Keys {
	k := spoolfile.Keys{
		Algorithm: seal.NormalizeAlgorithm(st.cfg.Encryption.Algorithm),
		KeyID:     st.cfg.Encryption.KeyID,
		Extra:     extra,
	}
	if st.seal != nil {
		k.Key = st.seal.Key
	}
	return k
}

func configProblem(path, msg string) error {
	return &sink.ConfigError{Problems: []sink.Problem{{Path: path, Message: msg}}}
}

// resolveKey reads the record key from key_b64, the key_b64_env variable or
// the key_b64_file file. A missing variable or unreadable file is a
// configuration error naming the key, never the material.
func (e Encryption) resolveKey(deps sink.Deps) ([]byte, error) {
	const path = "encryption.key_b64"
	v, ok, err := secret.Resolve(path, e.KeyB64, e.KeyB64Env, e.KeyB64File, deps.LookupEnv)
	if err != nil {
		return nil, err
	}
	if !ok { // Validate refuses an enabled section without a key source
		return nil, configProblem("encryption", "key_b64_env or key_b64 is required because sink.encryption.enabled is true")
	}
	from := path
	switch {
	case e.KeyB64Env != nil:
		from = path + "_env"
	case e.KeyB64File != nil:
		from = path + "_file"
	}
	b64 := v.Reveal()
	key, err := seal.ParseKey(b64)
	if err != nil {
		return nil, configProblem(from, err.Error())
	}
	return key[:], nil
}
