package pipeline

import (
	"context"
	"log/slog"

	"github.com/nats-io/nats.go"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sinks/file"
	natssink "github.com/nats-sinks/nats-sink/sinks/nats"
	"github.com/nats-sinks/nats-sink/telemetry"
)

// OpenSink opens the sink cfg configures, passing it the settings it needs
// from other sections (the file sink's temp-file age, the republish sink's
// source connection and filters), the metrics it reports to and a logger.
// m, log, nc and env may be nil; nc is needed only by a nats sink whose
// connection is null (it reuses the source connection); env resolves the
// sink's *_env keys (nil: the process environment).
func OpenSink(ctx context.Context, cfg *config.Config, m *telemetry.Metrics, log *slog.Logger, nc *nats.Conn, env config.Env) (sink.Sink, error) {
	var op sink.Opener
	switch c := cfg.Sink.Opener.(type) {
	case natssink.Config:
		// connection null reuses the source connection; the loop check
		// needs the source consumer's filters.
		c.Source = nc
		c.SourceDomain, c.SourceAPIPrefix = cfg.NATS.Domain, cfg.NATS.APIPrefix
		c.SourceFilters = cfg.ConsumerManagement.FilterSubjects
		if len(c.SourceFilters) == 0 {
			c.SourceFilters = []string{cfg.NATS.Subject}
		}
		op = c
	case file.Config:
		// Stale temp files are only removed when older than twice the drain
		// bound, so another live process's temp file is never touched.
		c.TempMaxAge = 2 * ms(max(cfg.Delivery.ShutdownTimeoutMS, 1000))
		op = c
	default:
		op = c
	}
	if wm, ok := op.(interface {
		WithMetrics(*telemetry.Metrics) sink.Opener
	}); ok {
		op = wm.WithMetrics(m)
	}
	if we, ok := op.(interface {
		WithEnv(config.Env) sink.Opener
	}); ok {
		op = we.WithEnv(env)
	}
	if wl, ok := op.(interface {
		WithLogger(*slog.Logger) sink.Opener
	}); ok {
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		op = wl.WithLogger(log.With("component", "sink"))
	}
	return op.Open(ctx)
}
