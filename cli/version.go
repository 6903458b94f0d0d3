package cli

import (
	"fmt"
	"runtime"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
)

// Build information, set with -ldflags "-X github.com/nats-sinks/nats-sink/cli.Version=…".
var (
	Version   = "0.1.0-dev"
	Commit    = "unknown"
	BuildTime = "unknown"
)

func runVersion(env *Env, args []string) int {
	fs := newFlags(env, "version", "[--format text|json]")
	format := fs.String("format", "text", "output format: text or json")
	pos, code := parseFlags(env, fs, args)
	if code >= 0 {
		return code
	}
	if len(pos) > 0 || (*format != "text" && *format != "json") {
		fs.Usage()
		return exitConfig
	}
	if *format == "json" {
		doc := map[string]any{
			"build_time": BuildTime,
			"commit":     Commit,
			"compat":     "nats-sinks 0.3.0-0.4.2",
			"go":         runtime.Version(),
			"version":    Version,
		}
		env.Stdout.Write(append(jsonx.Marshal(doc, jsonx.UTF8), '\n'))
		return exitOK
	}
	fmt.Fprintf(env.Stdout, "nats-sink %s\ncommit %s\nbuilt %s\ngo %s\ncompatible with nats-sinks 0.3.0–0.4.2 configurations\n",
		Version, Commit, BuildTime, runtime.Version())
	return exitOK
}
