package spool

import (
	"context"

	"github.com/nats-sinks/nats-sink/sink"
)

// This file bridges the sink.Opener of today, Open(ctx), to the boundary
// this package is written against, Open(ctx, sink.Deps). When sink.Opener
// takes Deps, delete this file and define:
//
//	func opener(c Config) sink.Opener { return c }
//	func ConfigOf(op sink.Opener) (Config, bool) { c, ok := op.(Config); return c, ok }

// legacyOpener opens c with the zero Deps: the process environment, no
// logger, no metrics.
type legacyOpener struct{ Config }

// Open starts the sink with the zero sink.Deps.
func (l legacyOpener) Open(ctx context.Context) (sink.Sink, error) {
	return l.Config.Open(ctx, sink.Deps{})
}

func opener(c Config) sink.Opener { return legacyOpener{c} }

// ConfigOf returns the Config behind an Opener that Decode returned.
func ConfigOf(op sink.Opener) (Config, bool) {
	c, ok := op.(legacyOpener)
	return c.Config, ok
}
