package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/pipeline"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/telemetry"
)

func runTestSink(env *Env, args []string) int {
	fs := newFlags(env, "test-sink", "CONFIG [--dry-run]")
	dryRun := fs.Bool("dry-run", false, "validate and construct the sink without opening it")
	sinkName := fs.String("sink-name", "", "test the named sink NAME instead of the active sink")
	allNamed := fs.Bool("all-named-sinks", false, "test every named sink")
	pos, code := parseFlags(env, fs, args)
	if code >= 0 {
		return code
	}
	path, ok := oneConfigArg(env, fs, pos)
	if !ok {
		return exitConfig
	}
	if *sinkName != "" && *allNamed {
		fmt.Fprintln(env.Stderr, "Configuration error: use --sink-name or --all-named-sinks, not both")
		return exitConfig
	}
	cfg, code := loadConfig(env, path)
	if cfg == nil {
		return code
	}
	// Which sinks to test: the active one, one named sink, every named
	// sink, or, for an active fanout sink, every target it uses.
	var names []string
	switch {
	case *sinkName != "":
		ns, ok := cfg.Sinks[*sinkName]
		if !ok {
			avail := strings.Join(cfg.NamedSinkNames(), ", ")
			if avail == "" {
				avail = "none configured"
			}
			fmt.Fprintf(env.Stderr, "Configuration error: unknown named sink '%s'; available named sinks: %s\n", *sinkName, avail)
			return exitConfig
		}
		fmt.Fprintf(env.Stdout, "Named sink selected: %s (%s)\n", ns.Name, ns.Type)
		fmt.Fprintln(env.Stdout, "ACK policy: commit-then-acknowledge")
		names = []string{ns.Name}
	case *allNamed:
		names = cfg.NamedSinksInFileOrder()
		if len(names) == 0 {
			fmt.Fprintln(env.Stderr, "Configuration error: no named sinks are configured")
			return exitConfig
		}
		fmt.Fprintf(env.Stdout, "Named sinks selected: %s\n", strings.Join(names, ", "))
		fmt.Fprintln(env.Stdout, "ACK policy: commit-then-acknowledge")
	default:
		printSinkHeader(env, cfg)
		if cfg.Sink.Type == "fanout" {
			pol := cfg.Routing.Policy()
			names = pol.Used()
		}
	}
	if *dryRun {
		fmt.Fprintln(env.Stdout, "Dry run complete; sink was not opened.")
		return exitOK
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A sink that reuses the source connection (the NATS republish sink
	// with connection null) asks for it while it opens.
	var nc *nats.Conn
	var connErr error
	connect := func() (*nats.Conn, error) {
		if nc != nil || connErr != nil {
			return nc, connErr
		}
		m, _ := telemetry.NewMetrics(nil, cfg.Metrics.Namespace)
		opts, err := pipeline.NATSOptions(&cfg.NATS, config.Env(env.Getenv), telemetry.NewLogger(env.Stderr, cfg.Logging.Format, "ERROR"), m)
		if err != nil {
			connErr = err
			return nil, err
		}
		if nc, err = nats.Connect(strings.Join(cfg.NATS.Servers(), ","), opts...); err != nil {
			connErr = fmt.Errorf("connect to NATS: %w", err)
			return nil, connErr
		}
		return nc, nil
	}
	defer func() {
		if nc != nil {
			nc.Close()
		}
	}()
	log := telemetry.NewLogger(env.Stderr, cfg.Logging.Format, "WARNING")
	if names == nil {
		s, err := pipeline.OpenSink(ctx, cfg, nil, log, connect, config.Env(env.Getenv))
		if connErr != nil {
			err = connErr // the sink could not get the connection: report that
		}
		if err != nil {
			return sinkOpenFailure(env, err, "Sink test failed")
		}
		if err := checkAndStop(ctx, s); err != nil {
			fmt.Fprintf(env.Stderr, "Sink test failed: %v\n", err)
			return exitRuntime
		}
		fmt.Fprintln(env.Stdout, "Sink test succeeded.")
		return exitOK
	}
	for _, n := range names {
		s, err := pipeline.OpenNamedSink(ctx, cfg, n, nil, log, connect, config.Env(env.Getenv))
		if connErr != nil {
			err = connErr
		}
		if err == nil {
			err = checkAndStop(ctx, s)
		}
		if err != nil {
			if errors.Is(err, sink.ErrConfig) {
				fmt.Fprintf(env.Stderr, "Configuration error: %v\n", err)
				return exitConfig
			}
			fmt.Fprintf(env.Stderr, "Sink test failed: sinks.%s: %v\n", n, err)
			return exitRuntime
		}
		fmt.Fprintf(env.Stdout, "Sink test succeeded for %s.\n", n)
	}
	fmt.Fprintln(env.Stdout, "Sink test succeeded.")
	return exitOK
}

// checkAndStop runs s's Healthcheck, when it has one, and stops it.
func checkAndStop(ctx context.Context, s sink.Sink) error {
	if hc, ok := s.(sink.HealthChecker); ok {
		if err := hc.Healthcheck(ctx); err != nil {
			s.Stop(ctx)
			return err
		}
	}
	return s.Stop(ctx)
}

// sinkOpenFailure prints an Open error: configuration problems (missing env
// var, invalid root directory, key the build cannot honour) are exit 2,
// everything else exit 1 with the given prefix (docs/delivery.md#start-up step 5, Q19).
func sinkOpenFailure(env *Env, err error, prefix string) int {
	if errors.Is(err, sink.ErrConfig) {
		fmt.Fprintf(env.Stderr, "Configuration error: %v\n", err)
		return exitConfig
	}
	fmt.Fprintf(env.Stderr, "%s: %v\n", prefix, err)
	return exitRuntime
}
