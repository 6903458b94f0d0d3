package sink

import (
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
)

var outcomeNames = [...]string{"", "committed", "duplicate", "permanent", "temporary", "destination", "not_attempted"}

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
// error_type and the Nats-Sinks-Error-Type header (spec sinks.md §0.3).
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
