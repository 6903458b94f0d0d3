// Package backofftest lets tests of the sinks that retry inside a write
// (http, s3) see the delays they ask for without waiting them out.
package backofftest

import (
	"context"
	"sync"
	"time"
)

// Recorder stands in for backoff.Sleep. It is safe for concurrent use.
type Recorder struct {
	mu sync.Mutex
	ds []time.Duration
}

// Sleep records d and returns at once: nil, or ctx.Err() when ctx has
// ended, as backoff.Sleep would.
func (r *Recorder) Sleep(ctx context.Context, d time.Duration) error {
	r.mu.Lock()
	r.ds = append(r.ds, d)
	r.mu.Unlock()
	return ctx.Err()
}

// Delays returns the delays recorded so far, in call order.
func (r *Recorder) Delays() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.ds...)
}
