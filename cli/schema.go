package cli

import (
	"fmt"
	"os"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/sinks/builtin"
)

func runSchema(env *Env, args []string) int {
	fs := newFlags(env, "schema", "[--output FILE]")
	output := fs.String("output", "", "write the schema to FILE instead of stdout")
	pos, code := parseFlags(env, fs, args)
	if code >= 0 {
		return code
	}
	if len(pos) > 0 {
		fs.Usage()
		return exitConfig
	}
	doc, err := config.Schema(builtin.Prototypes())
	if err != nil {
		fmt.Fprintf(env.Stderr, "Unexpected runtime error: %v\n", err)
		return exitRuntime
	}
	if *output == "" {
		env.Stdout.Write(doc)
		return exitOK
	}
	if err := os.WriteFile(*output, doc, 0o644); err != nil {
		fmt.Fprintf(env.Stderr, "Runtime error: %v\n", err)
		return exitRuntime
	}
	return exitOK
}
