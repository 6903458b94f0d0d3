package sink

import (
	"context"
	"encoding/json"
)

// A Sink durably writes batches of envelopes to one destination.
//
// WriteBatch may be called concurrently from several goroutines (one per
// in-flight batch); implementations must be safe for that.
type Sink interface {
	// Type returns the sink's configuration type name, such as "file".
	Type() string
	// WriteBatch returns exactly one Result per envelope, in order. Committed
	// or Duplicate means the record is durable now; the runner acknowledges
	// only those. When the outcome is unknown the result is Temporary.
	// WriteBatch honours ctx: on cancellation it aborts, rolls back, and
	// reports Temporary for everything not yet durable.
	WriteBatch(ctx context.Context, batch []*Envelope) []Result
	// Stop releases resources. The runner calls it once, after the last
	// WriteBatch has returned.
	Stop(ctx context.Context) error
}

// HealthChecker is implemented by sinks that can check their destination
// without writing a record. test-sink calls it, and the runner uses it to
// probe a destination after a Destination outcome.
type HealthChecker interface {
	Healthcheck(ctx context.Context) error
}

// An Opener is a sink's configuration, as database/sql/driver's Connector
// is a driver's: a sink package's Config implements it. Open validates the
// configuration first (a Config built in Go gets the checks a decoded one
// got), then starts the sink (pools, directories, DDL, secrets) without any
// message I/O; the returned Sink is ready for WriteBatch. Everything else a
// sink needs from its host (environment, logger, metrics, tracer, what the
// host consumes) arrives in deps, never through the sink's Config.
//
// Configuration problems, found by validation or while opening (an unset
// environment variable, a missing directory with creation disabled), are a
// *ConfigError with paths relative to the sink object, or an error wrapping
// ErrConfig when no key is to blame; the host exits 2 for both. Any other
// error (an unreachable server, refused credentials) is a runtime failure.
type Opener interface {
	Open(ctx context.Context, deps Deps) (Sink, error)
}

// A Warner is an Opener whose configuration has settings that are valid,
// accepted for compatibility, but weak (a password sent without TLS, a
// certificate that is not verified). Warnings returns one Problem per such
// setting, with a path relative to the sink object as in ConfigError and a
// message that says what is weak and what to set instead; nil when there
// are none. It makes no I/O. The host prints each when it loads the
// configuration (the CLI's validate, run and the other commands) as
// "Warning: sink.<path>: <message>"; the configuration still loads.
type Warner interface {
	Warnings() []Problem
}

// A PayloadReader is an Opener whose records are built from fields of the
// payload (a mapped column reading a JSON Pointer, a key taken from a
// payload field). Payload encryption replaces the body before any sink sees
// it, so such a sink would receive only ciphertext; decrypting inside the
// sink would hand it the key and put plaintext into columns. The loader
// therefore refuses the configuration when encryption can apply to a
// subject the process consumes. PayloadReads returns the paths, relative to
// the sink object as in ConfigError, of the settings that read the payload
// ("mapping[1].path"), in configuration order; nil when none does. It makes
// no I/O.
type PayloadReader interface {
	PayloadReads() []string
}

// A Decoder validates one "sink" configuration object without any I/O and
// returns its Opener. The raw object has already passed strict JSON parsing
// and environment overrides. Problems are reported as a *ConfigError whose
// paths are relative to the sink object ("directory", not "sink.directory").
// A sink's Decode decodes onto its Default() and then runs the Config's
// Validate method, the same checks Open runs.
type Decoder func(raw json.RawMessage) (Opener, error)
