package cli

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sinks/builtin"
)

// fanoutTargets returns the target sink types of a bench fan-out sink
// (fanout-A-B), or nil for any other name.
func fanoutTargets(s string) []string {
	switch s {
	case "fanout-null-null":
		return []string{"null"}
	case "fanout-file-file":
		return []string{"file"}
	case "fanout-file-sqlite":
		return []string{"file", "sqlite"}
	}
	return nil
}

// withFanoutTargets inserts, before each fan-out phase, the phases of its
// targets alone that the list lacks, so that every run measures the gate
// against its slowest target in the same round.
func withFanoutTargets(sinks []string) []string {
	var out []string
	for _, s := range sinks {
		for _, t := range fanoutTargets(s) {
			if !slices.Contains(out, t) && !slices.Contains(sinks, t) {
				out = append(out, t)
			}
		}
		out = append(out, s)
	}
	return out
}

// benchRegistry is the built-in registry plus the "null" sink type, which
// only bench's configurations name (as targets of fanout-null-null): a
// fan-out over two null targets measures the gate without any disk.
func benchRegistry() *sink.Registry {
	r := builtin.Registry()
	r.Register("null", func(json.RawMessage) (sink.Opener, error) { return nullOpener{}, nil })
	return r
}

type nullOpener struct{}

func (nullOpener) Open(context.Context, sink.Deps) (sink.Sink, error) { return nullSink{}, nil }
