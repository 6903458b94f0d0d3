package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/pipeline"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/telemetry"
)

func runRun(env *Env, args []string) int {
	// Take over SIGINT/SIGTERM first: a signal that arrives while the
	// configuration loads or the connection opens must still mean a
	// graceful stop (exit 0), not the default termination.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	fs := newFlags(env, "run", "CONFIG [--log-level LEVEL] [--dry-run]")
	logLevel := fs.String("log-level", "", "override logging.level (DEBUG, INFO, WARNING, ERROR, CRITICAL)")
	dryRun := fs.Bool("dry-run", false, "validate and stop before opening NATS or sink connections")
	pos, code := parseFlags(env, fs, args)
	if code >= 0 {
		return code
	}
	path, ok := oneConfigArg(env, fs, pos)
	if !ok {
		return exitConfig
	}
	cfg, code := loadConfig(env, path)
	if cfg == nil {
		return code
	}
	if *logLevel != "" {
		if _, err := telemetry.ParseLevel(*logLevel); err != nil {
			fmt.Fprintf(env.Stderr, "Configuration error: --log-level: must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL (got %q)\n", *logLevel)
			return exitConfig
		}
		cfg.Logging.Level = *logLevel
	}
	printSinkHeader(env, cfg)
	if *dryRun {
		fmt.Fprintln(env.Stdout, "Dry run complete; no NATS or sink connections opened.")
		return exitOK
	}

	// First SIGINT/SIGTERM: graceful drain. Second: exit 1 at once, nothing
	// further acknowledged (docs/delivery.md#shutdown).
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan int, 1)
	var shutdownRequested atomic.Bool
	go func() { done <- runProcess(ctx, env, cfg, &shutdownRequested) }()
	select {
	case code := <-done:
		return code
	case <-sigs:
	}
	shutdownRequested.Store(true)
	stop()
	select {
	case code := <-done:
		return code
	case <-sigs:
		fmt.Fprintln(env.Stderr, "Runtime error: forced shutdown")
		return exitRuntime
	}
}

// runProcess is `run` after loading: start-up (docs/delivery.md#start-up), the runner, and
// the shutdown sequence (README.md). It returns the exit code.
func runProcess(ctx context.Context, env *Env, cfg *config.Config, shutdownRequested *atomic.Bool) int {
	log := telemetry.NewLogger(env.Stderr, cfg.Logging.Format, cfg.Logging.Level)
	d := cfg.Delivery
	// live is the started pipeline, read by the HTTP endpoint's goroutines
	// and the service manager's watchdog.
	var live atomic.Pointer[pipeline.Pipeline]
	svc := startServiceNotifier(env, log, cfg, &live)
	defer svc.close()
	stopLog := context.AfterFunc(ctx, func() {
		log.Info("shutdown requested", "component", "supervisor")
		svc.stopping()
	})
	defer stopLog()

	// Step 2–3: metrics registry and the HTTP endpoint (not ready yet).
	reg := telemetry.NewRegistry()
	if cfg.Metrics.Enabled {
		if err := telemetry.RegisterBuildInfo(reg, cfg.Metrics.Namespace, Version, Commit); err != nil {
			fmt.Fprintf(env.Stderr, "Runtime error: %v\n", err)
			return exitRuntime
		}
	}
	ready := func() telemetry.Readiness {
		if p := live.Load(); p != nil {
			return p.Ready()
		}
		return telemetry.Readiness{}
	}
	if cfg.Metrics.Listen != nil {
		opts := telemetry.HandlerOptions{Ready: ready, Logger: log.With("component", "http")}
		if cfg.Metrics.Enabled {
			opts.Gatherer = reg
		}
		srv, err := telemetry.Listen(*cfg.Metrics.Listen, telemetry.NewHandler(opts))
		if err != nil {
			fmt.Fprintf(env.Stderr, "Runtime error: metrics.listen: %v\n", err)
			return exitRuntime
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			srv.Shutdown(sctx)
		}()
	}

	log.Info("starting", "component", "supervisor", "version", Version, "sink", cfg.Sink.Type,
		"stream", cfg.NATS.Stream, "consumer", cfg.NATS.Consumer, "subject", cfg.NATS.Subject,
		"durable", cfg.NATS.Durable, "mode", cfg.ConsumerManagement.Mode, "batch_size", d.BatchSize,
		"in_flight", d.MaxInFlightBatches, "dlq", cfg.DeadLetter.Enabled,
		"encryption", cfg.Encryption.Enabled || len(cfg.Encryption.Rules) > 0,
		"tracing", cfg.Tracing.Enabled, "metrics_listen", deref(cfg.Metrics.Listen))

	startCtx, cancelStart := context.WithTimeout(ctx, 2*time.Minute)
	p, err := pipeline.Start(startCtx, cfg, pipeline.Options{Env: config.Env(env.Getenv), Logger: log, Registerer: reg, Version: Version})
	cancelStart()
	if err != nil {
		if ctx.Err() != nil && shutdownRequested.Load() {
			fmt.Fprintln(env.Stdout, "Shutdown requested.")
			return exitOK
		}
		return exitCode(env, err)
	}
	live.Store(p)

	var snapshotDone chan struct{}
	snapCtx, stopSnap := context.WithCancel(context.Background())
	if cfg.Metrics.Enabled && cfg.Metrics.SnapshotFile != nil {
		w := &telemetry.SnapshotWriter{Metrics: p.Metrics(), Path: *cfg.Metrics.SnapshotFile, Logger: log.With("component", "supervisor")}
		snapshotDone = make(chan struct{})
		go func() { defer close(snapshotDone); w.Run(snapCtx) }()
	}

	// A connection that closes for good (reconnecting off, or
	// max_reconnect_attempts used up) ends the run like a fail_fast stop:
	// the same drain, then exit 1, so that a supervisor restarts a process
	// that could never become ready again (pipeline.ConnClosedError).
	log.Info("ready", "component", "supervisor")
	svc.ready(cfg) // the consumer is bound: Start returned
	runErr := p.Run(ctx)
	svc.stopping() // a fail-fast stop or a closed connection ends the run without a signal

	// Shutdown (docs/delivery.md#shutdown): the runner has drained within
	// shutdown_timeout_ms; the sink, the connection and the trace exporter
	// share a 5 s margin, at least 1 s each.
	stopSnap()
	if snapshotDone != nil {
		<-snapshotDone
	}
	p.Close(5 * time.Second)

	if runErr != nil {
		return exitCode(env, runErr)
	}
	fmt.Fprintln(env.Stdout, "Shutdown requested.")
	return exitOK
}

// exitCode prints a start-up or runtime failure and returns its exit code:
// 2 when the configuration must change (docs/delivery.md#start-up, README.md), else 1.
func exitCode(env *Env, err error) int {
	if errors.Is(err, sink.ErrConfig) {
		fmt.Fprintf(env.Stderr, "Configuration error: %v\n", err)
		return exitConfig
	}
	fmt.Fprintf(env.Stderr, "Runtime error: %v\n", err)
	return exitRuntime
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
