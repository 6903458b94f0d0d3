package sink

import (
	"context"
	"errors"
	"fmt"
)

// Outcome is the fate of one envelope in a WriteBatch call.
type Outcome int

// The outcomes a sink reports per envelope.
const (
	// Committed: the record is durable now.
	Committed Outcome = iota + 1
	// Duplicate: the record was already durable (a redelivery); counts as
	// committed.
	Duplicate
	// Permanent: this message's content or identity can never be written.
	// The runner dead-letters it, then acknowledges it.
	Permanent
	// Temporary: the write may succeed later (network, lock, timeout, full
	// disk, unknown commit outcome). The runner NAKs with back-off.
	Temporary
	// Destination: the destination itself is broken for every message
	// (authentication, missing table, permission). Handled like Temporary,
	// never dead-lettered, and the sink is reported unhealthy.
	Destination
	// NotAttempted: the sink did not try this message, usually because an
	// earlier one failed. Handled like Temporary.
	NotAttempted
	// Held: accepted into an open segment but not durable yet; Result.Hold
	// is set. Only a sink implementing Holder with MaxHeld() > 0 returns it.
	// The runner keeps the message unacknowledged (with heartbeats) until
	// the hold settles, then acknowledges it when the hold settled
	// Committed and takes the temporary path otherwise. Code that does not
	// know Held must treat it as not committed, as Acked reports.
	Held
)

var outcomeNames = [...]string{"", "committed", "duplicate", "permanent", "temporary", "destination", "not_attempted", "held"}

// String returns the outcome's name as used in logs, metrics labels and spans
// ("committed", "temporary", …).
func (o Outcome) String() string {
	if o > 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Acked reports whether the outcome makes a message safe to acknowledge.
func (o Outcome) Acked() bool { return o == Committed || o == Duplicate }

// Error types carried by Permanent results; they become the DLQ body's
// error_type and the Nats-Sinks-Error-Type header (docs/formats.md#dlq-body).
const (
	PermanentSinkError = "PermanentSinkError"
	SerializationError = "SerializationError"
	ValidationError    = "ValidationError"
	// PolicyViolationError marks a message the runner rejected before any
	// sink saw it, such as one whose producer signature did not verify.
	PolicyViolationError  = "PolicyViolationError"
	MaxDeliveriesExceeded = "MaxDeliveriesExceeded"
)

// Result is the outcome of writing one envelope.
type Result struct {
	Outcome Outcome
	// ErrorType is set for Permanent results: PermanentSinkError,
	// SerializationError or ValidationError.
	ErrorType string
	// Err describes the failure. It must not contain payload bytes, header
	// values or secrets.
	Err error
	// Shared marks a failure that belongs to a whole transaction rather than
	// to this message. The runner bisects shared Permanent failures to find
	// the offending message.
	Shared bool
	// Hold is set exactly when Outcome is Held: the commit the message
	// waits for.
	Hold Hold
}

// A Hold is the pending commit of held messages (a segment that is still
// open or uploading). It settles exactly once.
type Hold interface {
	// Done is closed when the hold has settled.
	Done() <-chan struct{}
	// Outcome is, after Done, Committed, Temporary or Destination — never
	// Permanent: a segment is never one message's fault.
	Outcome() Outcome
	// Err describes a failed hold; nil when it committed.
	Err() error
}

// A Holder is a sink that may return Held results.
type Holder interface {
	// MaxHeld is the most messages the sink holds at once; 0 means this
	// configuration never holds. The runner checks at start that the
	// consumer's MaxAckPending leaves room for them.
	MaxHeld() int
	// Flush closes and commits every open segment now. The runner calls it
	// at shutdown, after fetching stopped and every WriteBatch returned,
	// with a context that ends at the shutdown deadline; holds not settled
	// by then settle Temporary.
	Flush(ctx context.Context) error
}

// Ok is the result of a committed write.
var Ok = Result{Outcome: Committed}

// Failed returns the Result that err classifies to: errors wrapped by
// AsPermanent, AsPermanentType or AsDestination keep their class, and anything
// else is Temporary.
func Failed(err error) Result {
	var pe *permanentError
	if errors.As(err, &pe) {
		return Result{Outcome: Permanent, ErrorType: pe.errorType, Err: err}
	}
	var de *destinationError
	if errors.As(err, &de) {
		return Result{Outcome: Destination, Err: err}
	}
	return Result{Outcome: Temporary, Err: err}
}

// AsPermanent marks err as caused by the message itself, with error type
// PermanentSinkError. The runner dead-letters the message.
func AsPermanent(err error) error { return AsPermanentType(PermanentSinkError, err) }

// AsPermanentType marks err as permanent with the given DLQ error type.
func AsPermanentType(errorType string, err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{errorType: errorType, err: err}
}

// AsDestination marks err as a failure of the destination that would affect
// every message (authentication, missing table, permission).
func AsDestination(err error) error {
	if err == nil {
		return nil
	}
	return &destinationError{err: err}
}

type permanentError struct {
	errorType string
	err       error
}

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

type destinationError struct{ err error }

func (e *destinationError) Error() string { return e.err.Error() }
func (e *destinationError) Unwrap() error { return e.err }
