package runner

import (
	"time"

	"github.com/nats-sinks/nats-sink/internal/backoff"
)

// Retry modes and jitter kinds (delivery.retry_backoff_mode, retry_jitter).
const (
	ModeFixed       = "fixed"
	ModeLinear      = "linear"
	ModeExponential = "exponential"

	JitterNone  = "none"
	JitterFull  = "full"
	JitterEqual = "equal"
)

// Retry holds the retry settings of docs/configuration.md#delivery (delivery.max_retries and the
// retry_backoff_* keys). Zero values mean the docs/configuration.md defaults. Fields whose
// configured value may legitimately be 0 are pointers, so that nil ("unset",
// default) and 0 are distinct; write new(0) for an explicit zero.
type Retry struct {
	// MaxRetries is the active NAK budget; nil means 5.
	MaxRetries *int
	// Backoff is retry_backoff_ms; nil means 1 s.
	Backoff *time.Duration
	// MaxBackoff is retry_backoff_max_ms; nil means 60 s.
	MaxBackoff *time.Duration
	// Mode is fixed, linear or exponential; "" means exponential.
	Mode string
	// Multiplier is retry_backoff_multiplier; 0 means 2.0.
	Multiplier float64
	// Jitter is none, full or equal; "" means full.
	Jitter string
}

func (r Retry) maxRetries() int {
	if r.MaxRetries == nil {
		return 5
	}
	return *r.MaxRetries
}

func (r Retry) base() time.Duration {
	if r.Backoff == nil {
		return time.Second
	}
	return *r.Backoff
}

func (r Retry) max() time.Duration {
	if r.MaxBackoff == nil {
		return time.Minute
	}
	return *r.MaxBackoff
}

func (r Retry) mode() string {
	if r.Mode == "" {
		return ModeExponential
	}
	return r.Mode
}

func (r Retry) multiplier() float64 {
	if r.Multiplier == 0 {
		return 2
	}
	return r.Multiplier
}

func (r Retry) jitter() string {
	if r.Jitter == "" {
		return JitterFull
	}
	return r.Jitter
}

// Backoff returns the NAK delay for a delivery attempt (docs/delivery.md#retries-and-back-off): the raw
// delay of the mode, capped at MaxBackoff, then jittered with u, a draw in
// [0, 1). Attempts below 1 count as 1. The function is pure; the runner
// draws u from crypto/rand (JitterDraw).
func Backoff(attempt int, r Retry, u float64) time.Duration {
	return backoff.Policy{Base: r.base(), Max: r.max(), Mode: r.mode(), Multiplier: r.multiplier(), Jitter: r.jitter()}.Delay(attempt, u)
}

// JitterDraw returns u = (uniform integer 0..999 999) / 10⁶ from the
// operating system's CSPRNG, as docs/delivery.md#retries-and-back-off prescribes. If the CSPRNG fails,
// which crypto/rand documents as not happening on supported platforms, it
// returns 0.5 so that retries still spread.
func JitterDraw() float64 { return backoff.Draw() }
