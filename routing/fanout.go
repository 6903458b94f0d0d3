package routing

import (
	"context"
	"errors"

	"github.com/nats-sinks/nats-sink/sink"
)

// Fanout is the configuration of the fanout sink: the policy and the
// Openers of the named sinks it uses.
type Fanout struct {
	Policy Policy
	// Targets are the Openers of the named sinks the policy uses, by name.
	Targets map[string]sink.Opener
	// Isolation is delivery.permanent_failure_isolation: "message" or
	// "batch".
	Isolation string
}

// Open opens the used targets in ascending name order.
func (f *Fanout) Open(ctx context.Context, deps sink.Deps) (sink.Sink, error) {
	return nil, errors.New("not yet")
}
