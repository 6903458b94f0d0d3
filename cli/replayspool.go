package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/internal/seal"
	"github.com/nats-sinks/nats-sink/pipeline"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sinks/file"
	"github.com/nats-sinks/nats-sink/sinks/mysql"
	"github.com/nats-sinks/nats-sink/sinks/oracle"
	"github.com/nats-sinks/nats-sink/sinks/postgres"
	s3sink "github.com/nats-sinks/nats-sink/sinks/s3"
	"github.com/nats-sinks/nats-sink/sinks/spool"
	"github.com/nats-sinks/nats-sink/sinks/sqlite"
	"github.com/nats-sinks/nats-sink/telemetry"
)

const replaySpoolUsage = "SPOOL_CONFIG TARGET_CONFIG [--max-records N] [--dry-run] [--key KEY_ID=ENV]... [--batch-size N] [--quarantine]"

// runReplaySpool drains a spool directory into the sink of a second
// configuration (docs/spool.md): at least once, in drain order, deleting a
// spool file only after the target committed its record. It never talks to
// the source NATS and acknowledges nothing.
func runReplaySpool(env *Env, args []string) (code int) {
	fs := newFlags(env, "replay-spool", replaySpoolUsage)
	maxRecords := fs.Int("max-records", 0, "replay at most the first N planned records")
	dryRun := fs.Bool("dry-run", false, "plan only: read wrappers, decrypt nothing, open no target, change nothing")
	batchSize := fs.Int("batch-size", 1, "records per target write, 1..1000")
	quarantine := fs.Bool("quarantine", false, "move records the target rejects permanently to <directory>/quarantine/ and go on")
	var keys keyFlags
	fs.Var(&keys, "key", "KEY_ID=ENV: also decrypt records with this key_id using the key in variable ENV (repeatable)")
	pos, code := parseFlags(env, fs, args)
	if code >= 0 {
		return code
	}
	if len(pos) != 2 {
		fmt.Fprintf(env.Stderr, "%s replay-spool: expected SPOOL_CONFIG and TARGET_CONFIG\n", env.Program)
		fs.Usage()
		return exitConfig
	}
	if flagSet(fs, "max-records") && *maxRecords < 1 {
		fmt.Fprintln(env.Stderr, "Configuration error: --max-records must be greater than zero")
		return exitConfig
	}
	if *batchSize < 1 || *batchSize > 1000 {
		fmt.Fprintf(env.Stderr, "Configuration error: --batch-size must be between 1 and 1000 (got %d)\n", *batchSize)
		return exitConfig
	}

	spoolCfg, code := loadConfig(env, pos[0])
	if spoolCfg == nil {
		return code
	}
	sc, ok := spool.ConfigOf(spoolCfg.Sink.Opener)
	if spoolCfg.Sink.Type != "spool" || !ok {
		fmt.Fprintln(env.Stderr, "Configuration error: first config must use sink.type 'spool'")
		return exitConfig
	}
	targetCfg, code := loadConfig(env, pos[1])
	if targetCfg == nil {
		return code
	}
	if msg := checkReplayTarget(targetCfg, sc); msg != "" {
		fmt.Fprintf(env.Stderr, "Configuration error: %s\n", msg)
		return exitConfig
	}
	if typ, ok := duplicatesStored(targetCfg); !ok {
		fmt.Fprintf(env.Stderr, "Warning: target sink %s does not absorb duplicates; a record replayed twice will fail or be stored twice\n", typ)
	}
	extra, err := replayKeys(env, keys)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Configuration error: %v\n", err)
		return exitConfig
	}
	opts := spool.ReplayOptions{
		MaxRecords: *maxRecords,
		BatchSize:  *batchSize,
		Quarantine: *quarantine,
		Keys:       extra,
		Prepare:    replayCustody(targetCfg),
		OnQuarantine: func(file string, r sink.Result) {
			fmt.Fprintf(env.Stderr, "Quarantined %s: %s: %v\n", file, r.ErrorType, r.Err)
		},
	}

	ctx, stop := env.Signals(context.Background())
	defer stop()
	if *dryRun {
		n, err := sc.DryRun(ctx, opts)
		if err != nil {
			return replayStartFailure(env, err, false)
		}
		fmt.Fprintf(env.Stdout, "Dry run complete; %d committed spool record(s) eligible.\n", n)
		return exitOK
	}

	deps := pipeline.SinkDeps(spoolCfg, nil, nil, nil, config.Env(env.Getenv))
	r, err := sc.StartReplay(ctx, deps, opts)
	if err != nil {
		return replayStartFailure(env, err, true)
	}
	defer r.Close()

	target, closeTarget, err := openReplayTarget(ctx, env, targetCfg)
	if err != nil {
		return sinkOpenFailure(env, err, "Replay failed")
	}
	defer closeTarget()
	defer func() {
		// An internal error must not leave the command without an answer;
		// every file not yet deleted is still in the spool.
		if v := recover(); v != nil {
			fmt.Fprintf(env.Stderr, "Unexpected replay failure: %T\n", v)
			code = exitRuntime
		}
	}()
	sum, runErr := r.Run(ctx, target)
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := target.Stop(stopCtx); err != nil && runErr == nil {
		runErr = fmt.Errorf("stop target sink: %w", err)
	}
	line := fmt.Sprintf("scanned=%d replayed=%d deleted=%d failed=%d", sum.Scanned, sum.Replayed, sum.Deleted, sum.Failed)
	if runErr == nil && sum.Failed == 0 {
		fmt.Fprintf(env.Stdout, "Replay complete: %s\n", line)
		return exitOK
	}
	fmt.Fprintf(env.Stdout, "Replay incomplete: %s\n", line)
	if runErr != nil {
		fmt.Fprintf(env.Stderr, "Replay failed: %v\n", runErr)
	}
	return exitRuntime
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// checkReplayTarget returns the configuration problem of a target, or "".
func checkReplayTarget(cfg *config.Config, sc spool.Config) string {
	switch cfg.Sink.Type {
	case "spool":
		return "target config must not use sink.type 'spool'"
	case "fanout":
		return "TARGET sink: replay-spool cannot write to a fanout or holding segments target"
	case "segments":
		if h, ok := cfg.Sink.Opener.(interface{ Holding() bool }); ok && h.Holding() {
			return "TARGET sink: replay-spool cannot write to a fanout or holding segments target"
		}
	case "file":
		if fc, ok := cfg.Sink.Opener.(file.Config); ok && sameDirectory(fc.Directory, sc) {
			return "target sink directory is the spool directory"
		}
	}
	return ""
}

// sameDirectory reports whether a file sink directory resolves to the spool
// directory (symlinks followed where the paths exist).
func sameDirectory(target string, sc spool.Config) bool {
	spoolDir, err := sc.ResolvedDirectory()
	if err != nil {
		return false
	}
	tc := sc
	tc.Directory = target
	targetDir, err := tc.ResolvedDirectory()
	if err != nil {
		return false
	}
	resolve := func(p string) string {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		return p
	}
	return resolve(spoolDir) == resolve(targetDir)
}

// duplicatesStored reports whether the target absorbs a repeated record
// (false for file "fail", SQL insert and append, S3 fail_existing), with
// its type.
func duplicatesStored(cfg *config.Config) (string, bool) {
	switch c := cfg.Sink.Opener.(type) {
	case file.Config:
		return "file", c.DuplicatePolicy != "fail"
	case s3sink.Config:
		return "s3", c.DuplicatePolicy != "fail_existing"
	case postgres.Config:
		return "postgres", c.Mode != "insert"
	case sqlite.Config:
		return "sqlite", c.Mode != "insert"
	case mysql.Config:
		return "mysql", c.Mode != "insert" && c.Mode != "append"
	case oracle.Config:
		return "oracle", c.Mode != "insert" && c.Mode != "append"
	}
	return cfg.Sink.Type, true
}

// replayKeys reads the --key KEY_ID=ENV keys.
func replayKeys(env *Env, keys keyFlags) (map[string][]byte, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	out := make(map[string][]byte, len(keys))
	for _, kv := range keys {
		id, name, ok := strings.Cut(kv, "=")
		if !ok || id == "" || name == "" {
			return nil, fmt.Errorf("--key: expected KEY_ID=ENV (got %q)", kv)
		}
		v, ok := env.Getenv(name)
		if !ok {
			return nil, fmt.Errorf("--key %s: environment variable %s is not set", id, name)
		}
		k, err := seal.ParseKey(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("--key %s: environment variable %s: %v", id, name, err)
		}
		out[id] = k[:]
	}
	return out, nil
}

// replayCustody is the hook for custody documents: when the target
// configuration enables custody, each replayed record gets the custody
// document the runner would have computed at receipt, from the spooled
// receive times and headers. A record whose custody fails (a malformed
// chain link, an input over the limit) stops the replay at that record.
func replayCustody(cfg *config.Config) func(*sink.Envelope) error {
	return pipeline.CustodyHook(&cfg.Custody)
}

// replayStartFailure prints a failure of the spool side's start or plan; a
// file that stops the plan counts as the one failed record of a real run.
func replayStartFailure(env *Env, err error, run bool) int {
	var ce *sink.ConfigError
	var fe *spool.FileError
	switch {
	case errors.As(err, &ce):
		lines := make([]string, len(ce.Problems))
		for i, p := range ce.Problems {
			lines[i] = "sink." + p.Path + ": " + p.Message
		}
		fmt.Fprintf(env.Stderr, "Configuration error: %s\n", strings.Join(lines, "\n  "))
		return exitConfig
	case errors.Is(err, sink.ErrConfig):
		fmt.Fprintf(env.Stderr, "Configuration error: %v\n", err)
		return exitConfig
	case errors.As(err, &fe) && run:
		fmt.Fprintln(env.Stdout, "Replay incomplete: scanned=0 replayed=0 deleted=0 failed=1")
	}
	fmt.Fprintf(env.Stderr, "Replay failed: %v\n", err)
	return exitRuntime
}

// openReplayTarget opens the target configuration's sink. Only its sink
// section is applied; a sink that asks for the source connection (the NATS
// republish sink with connection null) gets one made from the target's nats
// section.
func openReplayTarget(ctx context.Context, env *Env, cfg *config.Config) (sink.Sink, func(), error) {
	log := telemetry.NewLogger(env.Stderr, cfg.Logging.Format, "WARNING")
	var nc *nats.Conn
	var connErr error
	connect := func() (*nats.Conn, error) {
		if nc != nil || connErr != nil {
			return nc, connErr
		}
		m, _ := telemetry.NewMetrics(nil, cfg.Metrics.Namespace)
		opts, err := pipeline.NATSOptions(&cfg.NATS, config.Env(env.Getenv), log, m)
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
	closeConn := func() {
		if nc != nil {
			nc.Close()
		}
	}
	s, err := pipeline.OpenSink(ctx, cfg, nil, log, connect, config.Env(env.Getenv))
	if connErr != nil {
		err = connErr // the sink could not get the connection: report that
	}
	if err != nil {
		closeConn()
		return nil, nil, err
	}
	return s, closeConn, nil
}
