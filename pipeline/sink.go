package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/telemetry"
	"github.com/nats-sinks/nats-sink/tracing"
)

// SinkDeps returns what the pipeline hands the configured sink (sink.Deps):
// env for its *_env keys (nil: the process environment), log with
// component "sink" (nil: discarded), m for its own metrics (nil: none),
// the tracing adapter (spans only while tracing is enabled, since they are
// children of the runner's message spans), the source it must not loop
// into or may publish over (nats.stream, the consumer's filter subjects —
// consumer_management.filter_subjects, else nats.subject —, nats.domain,
// nats.api_prefix, and conn, which returns the source connection, making it
// if need be; nil: none), and delivery.shutdown_timeout_ms as the drain
// bound.
func SinkDeps(cfg *config.Config, m *telemetry.Metrics, log *slog.Logger, conn func() (*nats.Conn, error), env config.Env) sink.Deps {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	filters := cfg.ConsumerManagement.FilterSubjects
	if len(filters) == 0 {
		filters = []string{cfg.NATS.Subject}
	}
	src := sink.Source{Stream: cfg.NATS.Stream, FilterSubjects: filters,
		Domain: deref(cfg.NATS.Domain), APIPrefix: deref(cfg.NATS.APIPrefix)}
	if conn != nil {
		src.Conn = func() (any, error) {
			nc, err := conn()
			if nc == nil || err != nil {
				return nil, err // an untyped nil: no *nats.Conn(nil) in an interface
			}
			return nc, nil
		}
	}
	return sink.Deps{
		Env:          env,
		Logger:       log.With("component", "sink"),
		Metrics:      m.ForSinks(),
		Tracer:       tracing.ForSinks(),
		Source:       src,
		DrainTimeout: ms(cfg.Delivery.ShutdownTimeoutMS),
	}
}

// OpenSink opens the sink cfg configures with SinkDeps(cfg, m, log, conn,
// env). A configuration problem the sink finds while opening (an unset
// environment variable, a directory that cannot be used) comes back as a
// *config.Error whose paths start at the document root
// ("sink.password_env"), as the loader reports problems; any other error
// is the sink's own.
func OpenSink(ctx context.Context, cfg *config.Config, m *telemetry.Metrics, log *slog.Logger, conn func() (*nats.Conn, error), env config.Env) (sink.Sink, error) {
	s, err := cfg.Sink.Opener.Open(ctx, SinkDeps(cfg, m, log, conn, env))
	if ce, ok := errors.AsType[*sink.ConfigError](err); ok && cfg.Sink.Type == "fanout" {
		// A fanout sink names the target: "sinks.<name>.<key>".
		return nil, &config.Error{File: "the sink settings", Problems: ce.Problems}
	}
	if ce, ok := errors.AsType[*sink.ConfigError](err); ok {
		// File names the settings for the multi-problem header ("2
		// problems in the sink settings"); a single problem prints alone.
		return nil, &config.Error{File: "the sink settings", Problems: ce.At("sink").Problems}
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// OpenNamedSink opens the named sink name of cfg (a key of cfg.Sinks) with
// SinkDeps. A configuration problem comes back as a *config.Error whose
// paths start at "sinks.<name>".
func OpenNamedSink(ctx context.Context, cfg *config.Config, name string, m *telemetry.Metrics, log *slog.Logger, conn func() (*nats.Conn, error), env config.Env) (sink.Sink, error) {
	ns, ok := cfg.Sinks[name]
	if !ok || ns.Opener == nil {
		return nil, fmt.Errorf("%w: unknown named sink %q", sink.ErrConfig, name)
	}
	deps := SinkDeps(cfg, m, log, conn, env)
	deps.Logger = deps.Logger.With("target", name)
	s, err := ns.Opener.Open(ctx, deps)
	if ce, ok := errors.AsType[*sink.ConfigError](err); ok {
		return nil, &config.Error{File: "the settings of sinks." + name, Problems: ce.At("sinks." + name).Problems}
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}
