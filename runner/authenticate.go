package runner

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/nats-sinks/nats-sink/sink"
)

// authMinPerWorker is the fewest messages one extra verification worker
// gets: below about 2×8 messages a batch is checked sequentially, as the
// goroutines would cost more than an HMAC check saves.
const authMinPerWorker = 8

// gomaxprocs is runtime.GOMAXPROCS(0); benchmarks replace it with 1 to
// measure the sequential check in the same run as the parallel one.
var gomaxprocs = func() int { return runtime.GOMAXPROCS(0) }

// authWorkers is the number of goroutines that check a batch of n
// messages with procs = GOMAXPROCS: at most procs, at least
// authMinPerWorker messages each, and 1 (the calling goroutine alone) for
// small batches.
func authWorkers(n, procs int) int {
	return max(1, min(procs, n/authMinPerWorker))
}

// authVerdict is the Authenticate hook's answer for one message.
type authVerdict struct {
	reject, err error
	panicked    bool
	panicValue  any
}

// checkAll calls hook on every envelope and returns the answers by index.
// Batches of authMinPerWorker×2 messages or more are checked by up to
// GOMAXPROCS goroutines (an Ed25519 verification costs tens of
// microseconds, the whole of a message's budget at the pipeline's
// ceiling); the answers are the same as one goroutine's in index order,
// so the caller decides exactly as it would sequentially. A panic in hook
// is recorded with its message rather than crashing a worker.
func checkAll(envs []*sink.Envelope, hook func(*sink.Envelope) (error, error)) []authVerdict {
	out := make([]authVerdict, len(envs))
	check := func(i int) {
		defer func() {
			if p := recover(); p != nil {
				out[i] = authVerdict{panicked: true, panicValue: p}
			}
		}()
		out[i].reject, out[i].err = hook(envs[i])
	}
	workers := authWorkers(len(envs), gomaxprocs())
	if workers == 1 {
		for i := range envs {
			check(i)
			if out[i].panicked || out[i].err != nil {
				// Sequentially the first failure ends the batch's
				// checks; the rest would not be used.
				break
			}
		}
		return out
	}
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	work := func() {
		for !failed.Load() {
			i := int(next.Add(1) - 1)
			if i >= len(envs) {
				return
			}
			check(i)
			if out[i].panicked || out[i].err != nil {
				failed.Store(true) // the batch goes to the temporary path
			}
		}
	}
	for range workers - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	return out
}

// firstFailure returns the error of the lowest-indexed message whose check
// panicked or failed, as a sequential loop that stops there would: an
// index after a failure may be unchecked, but never one before it.
func firstFailure(envs []*sink.Envelope, vs []authVerdict) error {
	for i, v := range vs {
		switch {
		case v.panicked:
			return fmt.Errorf("message authenticity: panic: %v", v.panicValue)
		case v.err != nil:
			return fmt.Errorf("message authenticity (stream seq %d): %w", envs[i].StreamSequence, v.err)
		}
	}
	return nil
}
