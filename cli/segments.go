package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/sinks/segments"
)

const segmentsUsage = "verify DIR [--format text|json] [--expect STREAM:FIRST-LAST]..."

// expectFlags collects repeated --expect flags.
type expectFlags []segments.Expect

func (e *expectFlags) String() string { return fmt.Sprint(len(*e)) }
func (e *expectFlags) Set(v string) error {
	x, err := segments.ParseExpect(v)
	if err != nil {
		return err
	}
	*e = append(*e, x)
	return nil
}

// runSegments runs the segments subcommands; verify is the only one.
func runSegments(env *Env, args []string) int {
	if len(args) == 0 || args[0] != "verify" {
		fmt.Fprintf(env.Stderr, "usage: %s segments %s\n", env.Program, segmentsUsage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return exitOK
		}
		return exitConfig
	}
	fs := newFlags(env, "segments verify", "DIR [--format text|json] [--expect STREAM:FIRST-LAST]...")
	format := fs.String("format", "text", "output format: text or json")
	var expects expectFlags
	fs.Var(&expects, "expect", "STREAM:FIRST-LAST: every sequence of this range must be present (repeatable)")
	pos, code := parseFlags(env, fs, args[1:])
	if code >= 0 {
		return code
	}
	if len(pos) != 1 || *format != "text" && *format != "json" {
		fs.Usage()
		return exitConfig
	}
	rep, err := segments.Verify(pos[0], expects)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error: %v\n", err)
		if errors.Is(err, segments.ErrNotDirectory) || strings.Contains(err.Error(), "no such file") {
			return exitConfig
		}
		return exitRuntime
	}
	for _, u := range rep.UnreadableFiles {
		fmt.Fprintf(env.Stderr, "unreadable: %s: %s\n", u.Path, u.Reason)
	}
	if *format == "json" {
		streams := make([]any, 0, len(rep.Streams))
		for _, s := range rep.Streams {
			streams = append(streams, map[string]any{"name": s.Name, "min": s.Min, "max": s.Max, "missing": s.Missing})
		}
		files := make([]any, 0, len(rep.UnreadableFiles))
		for _, u := range rep.UnreadableFiles {
			files = append(files, u.Path)
		}
		doc := map[string]any{
			"distinct": rep.Distinct, "duplicates": rep.Duplicates, "open": rep.Open, "records": rep.Records,
			"segments": rep.Segments, "streams": streams, "torn": rep.Torn, "unreadable": rep.Unreadable,
			"unreadable_files": files,
		}
		env.Stdout.Write(append(jsonx.Marshal(doc, jsonx.UTF8), '\n'))
	} else {
		fmt.Fprintf(env.Stdout, "segments %d  open %d  torn %d  unreadable %d\n", rep.Segments, rep.Open, rep.Torn, rep.Unreadable)
		fmt.Fprintf(env.Stdout, "records %d  distinct %d  duplicates %d\n", rep.Records, rep.Distinct, rep.Duplicates)
		for _, s := range rep.Streams {
			fmt.Fprintf(env.Stdout, "stream %s  min %d  max %d  missing %d\n", s.Name, s.Min, s.Max, s.Missing)
		}
	}
	if rep.Unreadable > 0 {
		return exitRuntime
	}
	for _, s := range rep.Streams {
		for _, e := range expects {
			if e.Stream == s.Name && s.Missing > 0 {
				return exitRuntime
			}
		}
	}
	return exitOK
}
