// Package cli implements the nats-sink command line (spec cli.md). Main
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

// Exit codes (cli.md §1).
const (
	exitOK      = 0
	exitRuntime = 1
	exitConfig  = 2
)

// Env is the process environment the CLI reads; tests inject their own.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) (string, bool)
	// Signals delivers the process signals that stop `run` and `demo`
	// (SIGINT, SIGTERM). Nil means the real ones.
	Signals func(ctx context.Context) (context.Context, context.CancelFunc)
}

// command is one subcommand.
type command struct {
	name    string
	args    string // usage after the name
	summary string
	run     func(env *Env, args []string) int
}

func commands() []command {
	return []command{
		{"validate", "CONFIG", "validate a configuration file", runValidate},
		{"show-effective-config", "CONFIG", "print the effective configuration, secrets masked", runShow},
		{"test-sink", "CONFIG [--dry-run]", "open the configured sink, check it and close it", runTestSink},
		{"run", "CONFIG [--log-level LEVEL] [--dry-run]", "run the sink until SIGINT/SIGTERM", runRun},
		{"version", "[--format text|json]", "print version information", runVersion},
		{"schema", "[--output FILE]", "print the configuration's JSON Schema", runSchema},
		{"decrypt", "[INPUT] [--key-env NAME] [--key KEY_ID=ENV]... [--output FILE]", "decrypt a stored encryption envelope", runDecrypt},
		{"demo", "[--dir DIR] [--port N] [--timeout SECONDS] [--keep-running] [--format table|json]", "zero-setup tour on an embedded NATS server", runDemo},
		{"bench", "[flags]", "measure throughput against a temporary stream", runBench},
	}
}

// Main runs nats-sink with the process's arguments and environment and
// returns the exit code.
func Main() int {
	return Run(os.Args[1:], &Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.LookupEnv})
}

// Run runs one nats-sink invocation and returns its exit code.
func Run(args []string, env *Env) int {
	if env.Getenv == nil {
		env.Getenv = os.LookupEnv
	}
	if env.Signals == nil {
		env.Signals = func(ctx context.Context) (context.Context, context.CancelFunc) {
			return signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
		}
	}
	if len(args) == 0 {
		usage(env.Stderr)
		return exitConfig
	}
	switch args[0] {
	case "--version", "-version":
		fmt.Fprintln(env.Stdout, Version)
		return exitOK
	case "--help", "-help", "-h", "help":
		usage(env.Stdout)
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(env, args[1:])
		}
	}
	fmt.Fprintf(env.Stderr, "nats-sink: unknown command %q\n", args[0])
	usage(env.Stderr)
	return exitConfig
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: nats-sink <command> [arguments]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-22s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Start with: nats-sink demo")
	fmt.Fprintln(w, "Exit codes: 0 success, 1 runtime error, 2 configuration or usage error.")
}

// newFlags returns a FlagSet for a subcommand whose usage goes to stderr
// (or stdout for --help) and whose errors are returned, not fatal.
func newFlags(env *Env, name, args string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: nats-sink %s %s\n", name, args)
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
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(env.Stdout)
				fs.Usage()
				return nil, exitOK
			}
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
			fmt.Fprintf(env.Stderr, "nats-sink %s: missing CONFIG argument\n", fs.Name())
		} else {
			fmt.Fprintf(env.Stderr, "nats-sink %s: unexpected arguments: %s\n", fs.Name(), strings.Join(positional[1:], " "))
		}
		fs.Usage()
		return "", false
	}
	return positional[0], true
}
