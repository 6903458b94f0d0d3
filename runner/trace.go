package runner

import (
	"time"

	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/tracing"
)

// Message spans (docs/tracing.md) end with the message's final decision.
// The outcome attribute of a committed or dead-lettered message is set when
// that is known (process, deadLetter), and its span ends in settle with its
// ack or term event; every other path ends the span through the helpers
// here. All of them do nothing when tracing is off (b.tr is nil).

// committedOutcome maps an acknowledged result to its span outcome.
func committedOutcome(o sink.Outcome) tracing.Outcome {
	if o == sink.Duplicate {
		return tracing.OutcomeDuplicate
	}
	return tracing.OutcomeCommitted
}

// traceFailed marks message i's span failed with its recorded error and
// sets outcome o.
func (b *batch) traceFailed(i int, o tracing.Outcome) tracing.Span {
	s := b.tr.Span(i)
	s.Fail(b.errTypes[i], b.errs[i])
	s.SetOutcome(o)
	return s
}

// traceLeft ends the span of message i, deliberately left unacknowledged
// (retry budget exhausted, leave_unacked, permanent failure without DLQ).
func (b *batch) traceLeft(i int) {
	b.traceFailed(i, tracing.OutcomeLeftUnacked).End()
}

// traceNak ends the span of message i, NAKed with delay (err is the NAK's
// own failure). A message on its last allowed delivery is left_unacked even
// though it is NAKed: the server will not deliver it again.
func (b *batch) traceNak(i int, delay time.Duration, err error) {
	o := tracing.OutcomeNak
	if b.lastTry[i] {
		o = tracing.OutcomeLeftUnacked
	}
	s := b.traceFailed(i, o)
	s.Nak(delay, err)
	s.End()
}
