package cli

import (
	"fmt"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/sinks/builtin"
)

// loadConfig loads path with the built-in sinks, prints warnings, and on
// failure prints the configuration error and returns exit code 2.
func loadConfig(env *Env, path string) (*config.Config, int) {
	cfg, err := config.Load(path, builtin.Registry(), config.Env(env.Getenv))
	if err != nil {
		fmt.Fprintf(env.Stderr, "Configuration error: %s\n", err)
		return nil, exitConfig
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintf(env.Stderr, "Warning: %s\n", w)
	}
	return cfg, -1
}

func printSinkHeader(env *Env, cfg *config.Config) {
	fmt.Fprintf(env.Stdout, "Active sink: %s\n", cfg.Sink.Type)
	fmt.Fprintln(env.Stdout, "ACK policy: commit-then-acknowledge")
}
