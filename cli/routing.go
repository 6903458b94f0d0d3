package cli

import (
	"fmt"
	"strings"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/routing"
)

// printRoutingLines prints validate's named-sink and route lines: the
// named sinks in ascending name order, the default targets, and each
// route's targets in configuration order (also with routing disabled).
func printRoutingLines(env *Env, cfg *config.Config) {
	if names := cfg.NamedSinkNames(); len(names) > 0 {
		parts := make([]string, len(names))
		for i, n := range names {
			parts[i] = fmt.Sprintf("%s (%s)", n, cfg.Sinks[n].Type)
		}
		fmt.Fprintf(env.Stdout, "Named sinks: %s\n", strings.Join(parts, ", "))
	}
	if len(cfg.Routing.DefaultTargets) > 0 {
		fmt.Fprintf(env.Stdout, "Default route targets: %s\n", targetList(cfg.Routing.DefaultTargets))
	}
	if len(cfg.Routing.Routes) > 0 {
		fmt.Fprintln(env.Stdout, "Route target references:")
		for _, r := range cfg.Routing.Routes {
			fmt.Fprintf(env.Stdout, "  - %s: %s\n", r.Name, targetList(r.Targets))
		}
	}
}

func targetList(ts []routing.Target) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		if t.Required {
			parts[i] = t.Sink + " (required)"
			continue
		}
		s := t.Sink + " (optional"
		if t.MinimumWaitMS != nil {
			s += fmt.Sprintf(", minimum_wait_ms=%d", *t.MinimumWaitMS)
		}
		if t.TimeoutMS != nil {
			s += fmt.Sprintf(", timeout_ms=%d", *t.TimeoutMS)
		}
		parts[i] = s + ")"
	}
	return strings.Join(parts, ", ")
}
