// Package backoff is the retry-delay formula of docs/delivery.md#retries-and-back-off, shared by the
// runner's NAK delays and the sinks that retry inside a write (http, s3): the
// raw delay of the mode, capped, then jittered with a draw from crypto/rand.
package backoff

import (
	"context"
	"crypto/rand"
	"math"
	"math/big"
	"time"
)

// Policy is one retry configuration. Mode is "fixed", "linear" or anything
// else for exponential; Jitter is "none", "equal" or anything else for full.
type Policy struct {
	Base, Max  time.Duration
	Mode       string
	Multiplier float64
	Jitter     string
}

// Delay returns the delay before attempt (attempts below 1 count as 1), with
// u, a draw in [0, 1), as the jitter. It is pure; Draw supplies u.
func (p Policy) Delay(attempt int, u float64) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	b := float64(p.Base) / float64(time.Millisecond)
	x := float64(p.Max) / float64(time.Millisecond)
	var raw float64
	switch p.Mode {
	case "fixed":
		raw = b
	case "linear":
		raw = b * float64(attempt)
	default: // exponential; the loader rejects any other mode
		raw = b * math.Pow(p.Multiplier, float64(attempt-1))
		if math.IsInf(raw, 0) || math.IsNaN(raw) {
			raw = x
		}
	}
	cappedMS := math.Min(raw, x)
	if !(cappedMS > 0) { // also catches NaN
		return 0
	}
	var ms float64
	switch p.Jitter {
	case "none":
		ms = cappedMS
	case "equal":
		ms = cappedMS/2 + cappedMS/2*u
	default: // full
		ms = cappedMS * u
	}
	// Whole nanoseconds; config caps keep this far from Duration overflow.
	return time.Duration(math.Round(ms * float64(time.Millisecond)))
}

// Draw returns u = (uniform integer 0..999 999) / 10⁶ from the operating
// system's CSPRNG, as docs/delivery.md#retries-and-back-off prescribes. If the CSPRNG fails, which
// crypto/rand documents as not happening on supported platforms, it returns
// 0.5 so that retries still spread.
func Draw() float64 {
	n, err := rand.Int(rand.Reader, big.NewInt(1_000_000))
	if err != nil {
		return 0.5
	}
	return float64(n.Int64()) / 1e6
}

// Sleep waits d or until ctx ends, returning ctx.Err() in that case.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
