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

// An Opener is a sink's validated configuration. Open starts the sink (pools,
// directories, DDL, secrets) without any message I/O; the returned Sink is
// ready for WriteBatch.
type Opener interface {
	Open(ctx context.Context) (Sink, error)
}

// A Decoder validates one "sink" configuration object without any I/O and
// returns its Opener. The raw object has already passed strict JSON parsing
// and environment overrides. Problems are reported as a *ConfigError whose
// paths are relative to the sink object ("directory", not "sink.directory").
type Decoder func(raw json.RawMessage) (Opener, error)
