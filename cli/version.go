package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
)

// Build information, set with -ldflags "-X github.com/nats-sinks/nats-sink/cli.Version=…"
// (scripts/release, scripts/image). A binary built without them reports what
// the Go toolchain stamped instead (stampedBuild).
var (
	Version   = devVersion
	Commit    = "unknown"
	BuildTime = "unknown"
)

const devVersion = "0.1.0-dev"

// stampedBuild returns the version, commit and build time: the -X values
// where set, else the module version of `go install …@version` and the VCS
// revision and commit time of a build in a checkout (debug.ReadBuildInfo).
func stampedBuild() (version, commit, built string) {
	version, commit, built = Version, Commit, BuildTime
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	if version == devVersion && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		version = bi.Main.Version
	}
	var modified bool
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision" && commit == "unknown":
			commit = s.Value
		case s.Key == "vcs.time" && built == "unknown":
			built = s.Value
		case s.Key == "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified && Commit == "unknown" && commit != "unknown" {
		commit += "-dirty"
	}
	return
}

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
	version, commit, built := stampedBuild()
	if *format == "json" {
		doc := map[string]any{
			"build_time": built,
			"commit":     commit,
			"compat":     "nats-sinks 0.3.0-0.4.2",
			"go":         runtime.Version(),
			"version":    version,
		}
		env.Stdout.Write(append(jsonx.Marshal(doc, jsonx.UTF8), '\n'))
		return exitOK
	}
	fmt.Fprintf(env.Stdout, "nats-sink %s\ncommit %s\nbuilt %s\ngo %s\ncompatible with nats-sinks 0.3.0–0.4.2 configurations\n",
		version, commit, built, runtime.Version())
	return exitOK
}
