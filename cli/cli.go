// Package cli implements the nats-sink command line (the README lists the commands). Main
// returns the exit code instead of exiting, so commands are testable with
// txtar scripts and only package main calls os.Exit.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Exit codes (README.md).
const (
	ExitOK      = 0 // success
	ExitRuntime = 1 // runtime failure: retrying later may succeed
	ExitConfig  = 2 // configuration or usage error: fix the input first
)

// Short names inside the package.
const (
	exitOK      = ExitOK
	exitRuntime = ExitRuntime
	exitConfig  = ExitConfig
)

// Env is the process environment the CLI reads and writes. Tests and
// programs that mount the commands inject their own; nil fields get the
// process's defaults.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Getenv looks up environment variables (secrets, overrides); nil means
	// os.LookupEnv.
	Getenv func(string) (string, bool)
	// Signals delivers the process signals that stop `run` and `demo`
	// (SIGINT, SIGTERM). Nil means the real ones.
	Signals func(ctx context.Context) (context.Context, context.CancelFunc)
	// Program is the command path shown in usage messages, such as
	// "myctl sink"; "" means "nats-sink".
	Program string
}

// withDefaults fills the nil fields of a copy of env.
func (env *Env) withDefaults() *Env {
	e := *env
	if e.Stdin == nil {
		e.Stdin = os.Stdin
	}
	if e.Stdout == nil {
		e.Stdout = os.Stdout
	}
	if e.Stderr == nil {
		e.Stderr = os.Stderr
	}
	if e.Getenv == nil {
		e.Getenv = os.LookupEnv
	}
	if e.Signals == nil {
		e.Signals = func(ctx context.Context) (context.Context, context.CancelFunc) {
			return signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
		}
	}
	if e.Program == "" {
		e.Program = "nats-sink"
	}
	return &e
}

// A Command is one nats-sink subcommand. Another program mounts the commands
// under its own command tree by calling Run with the arguments that follow
// the command's name; Run returns the exit code and never exits the process.
type Command struct {
	// Name is the subcommand's name ("run", "validate", …).
	Name string
	// Usage lists the arguments after the name, for help text.
	Usage string
	// Summary is a one-line description.
	Summary string

	run func(env *Env, args []string) int
}

// Run runs the command with args (not including the command's name).
func (c Command) Run(env *Env, args []string) int {
	if env == nil {
		env = &Env{}
	}
	return c.run(env.withDefaults(), args)
}

// Commands returns every nats-sink subcommand, in help order.
func Commands() []Command {
	return []Command{
		{"validate", "CONFIG", "validate a configuration file", runValidate},
		{"show-effective-config", "CONFIG", "print the effective configuration, secrets masked", runShow},
		{"test-sink", "CONFIG [--dry-run]", "open the configured sink, check it and close it", runTestSink},
		{"run", "CONFIG [--log-level LEVEL] [--dry-run]", "run the sink until SIGINT/SIGTERM", runRun},
		{"version", "[--format text|json]", "print version information", runVersion},
		{"schema", "[--output FILE]", "print the configuration's JSON Schema", runSchema},
		{"replay-spool", replaySpoolUsage, "drain a spool directory into the sink of a second configuration", runReplaySpool},
		{"decrypt", "[INPUT] [--key-env NAME] [--key KEY_ID=ENV]... [--output FILE]", "decrypt a stored encryption envelope", runDecrypt},
		{"demo", "[--dir DIR] [--port N] [--timeout SECONDS] [--keep-running] [--format table|json]", "zero-setup tour on an embedded NATS server", runDemo},
		{"bench", "[flags]", "measure throughput against a temporary stream", runBench},
		{"dlq", "list|show|redrive CONFIG ...", "list, show and republish dead-letter entries", runDLQ},
		{"status", statusUsage, "consumer state and lag, DLQ depth, sink health, process readiness", runStatus},
		{"segments", segmentsUsage, "check segment files: records, distinct keys, duplicates, torn or unreadable files", runSegments},
		{"replay", replayUsage, "backfill the sink from a range of the stream on a consumer of its own", runReplay},
		{"verify-custody", verifyCustodyUsage, "re-compute the custody hashes of stored records", runVerifyCustody},
	}
}

// Main runs nats-sink with the process's arguments and environment and
// returns the exit code.
func Main() int {
	return Run(os.Args[1:], &Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.LookupEnv})
}

// Run runs one nats-sink invocation and returns its exit code.
func Run(args []string, env *Env) int {
	if env == nil {
		env = &Env{}
	}
	env = env.withDefaults()
	if len(args) == 0 {
		usage(env, env.Stderr)
		return exitConfig
	}
	switch args[0] {
	case "--version", "-version":
		v, _, _ := stampedBuild()
		fmt.Fprintln(env.Stdout, v)
		return exitOK
	case "--help", "-help", "-h", "help":
		usage(env, env.Stdout)
		return exitOK
	}
	for _, c := range Commands() {
		if c.Name == args[0] {
			return c.run(env, args[1:])
		}
	}
	fmt.Fprintf(env.Stderr, "%s: unknown command %q\n", env.Program, args[0])
	usage(env, env.Stderr)
	return exitConfig
}

func usage(env *Env, w io.Writer) {
	fmt.Fprintf(w, "usage: %s <command> [arguments]\n", env.Program)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range Commands() {
		fmt.Fprintf(w, "  %-22s %s\n", c.Name, c.Summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Start with: %s demo\n", env.Program)
	fmt.Fprintln(w, "Exit codes: 0 success, 1 runtime error, 2 configuration or usage error.")
}

// newFlags returns a FlagSet for a subcommand whose usage goes to stderr
// (or stdout for --help) and whose errors are returned, not fatal.
func newFlags(env *Env, name, args string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s %s %s\n", env.Program, name, args)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args allowing flags before and after positional
// arguments ("run cfg.json --dry-run" as well as "run --dry-run cfg.json").
// It returns the positional arguments, and an exit code >= 0 when the
// command must stop (help printed: 0; usage error: 2).
func parseFlags(env *Env, fs *flag.FlagSet, args []string) ([]string, int) {
	var positional []string
	// The flag package prints the usage itself on -h and on errors; print it
	// once, here, so that --help goes to stdout only.
	usage := fs.Usage
	fs.Usage = func() {}
	defer func() { fs.Usage = usage }()
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(env.Stdout)
				usage()
				return nil, exitOK
			}
			usage() // after the error line the flag package printed to stderr
			return nil, exitConfig
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, -1
		}
		if args[0] == "--" {
			return append(positional, args[1:]...), -1
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

// oneConfigArg checks that exactly one positional CONFIG argument was given.
func oneConfigArg(env *Env, fs *flag.FlagSet, positional []string) (string, bool) {
	if len(positional) != 1 {
		if len(positional) == 0 {
			fmt.Fprintf(env.Stderr, "%s %s: missing CONFIG argument\n", env.Program, fs.Name())
		} else {
			fmt.Fprintf(env.Stderr, "%s %s: unexpected arguments: %s\n", env.Program, fs.Name(), strings.Join(positional[1:], " "))
		}
		fs.Usage()
		return "", false
	}
	return positional[0], true
}
