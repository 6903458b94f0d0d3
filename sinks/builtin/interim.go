package builtin

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/internal/broker"
	"github.com/nats-sinks/nats-sink/sink"
)

// Interim, until sink.Opener's Open takes sink.Deps: the broker sinks
// (redis, rabbitmq, mqtt) are written against that shape, and this adapter
// gives them the environment and logger the pipeline hands the other sinks
// through WithEnv and WithLogger. It goes when the pipeline passes Deps to
// every sink; then these three register their Decode directly.

// depsOpener is a broker sink's Config behind the current sink.Opener.
type depsOpener struct {
	op   broker.Opener
	deps sink.Deps
}

// decodeWithDeps wraps a broker sink's Decode as a sink.Decoder.
func decodeWithDeps(decode func(json.RawMessage) (broker.Opener, error)) sink.Decoder {
	return func(raw json.RawMessage) (sink.Opener, error) {
		op, err := decode(raw)
		if err != nil {
			return nil, err
		}
		return depsOpener{op: op}, nil
	}
}

// Open opens the sink with the dependencies gathered so far.
func (d depsOpener) Open(ctx context.Context) (sink.Sink, error) { return d.op.Open(ctx, d.deps) }

// WithEnv sets the environment the sink's *_env keys are read from.
func (d depsOpener) WithEnv(env config.Env) sink.Opener {
	d.deps.Env = env.Lookup
	return d
}

// WithLogger sets the sink's logger.
func (d depsOpener) WithLogger(l *slog.Logger) sink.Opener {
	d.deps.Logger = l
	return d
}
