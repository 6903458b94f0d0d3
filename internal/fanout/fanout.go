// Package fanout runs a sink's per-message write over a batch, in order or
// with bounded concurrency, for the sinks that write one message per
// request (http, s3).
package fanout

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/nats-sinks/nats-sink/sink"
)

// Write calls write for the envelopes of batch and returns one result per
// envelope, in batch order (docs/library.md#the-sink-boundary).
//
// With concurrency 1 (or a batch of one) the messages go in order, and
// after a Temporary or Destination result the rest are NotAttempted: the
// destination is failing, and writing more would only reorder the stream.
// With concurrency > 1 up to that many writes run at once and each message
// keeps its own result; after a Destination result, messages not yet
// started are NotAttempted, since the destination fails the same way for
// all of them. Once ctx is done no further write starts, and each message
// not started gets a Temporary result whose error is prefixed with name
// ("http sink (stream seq 7): context canceled").
//
// write must honour ctx and be safe for concurrent calls when concurrency
// is above 1. Write returns after every write it started has returned.
func Write(ctx context.Context, name string, batch []*sink.Envelope, concurrency int, write func(context.Context, *sink.Envelope) sink.Result) []sink.Result {
	results := make([]sink.Result, len(batch))
	if concurrency <= 1 || len(batch) == 1 {
		for i, e := range batch {
			results[i] = write(ctx, e)
			if o := results[i].Outcome; o == sink.Temporary || o == sink.Destination {
				for j := i + 1; j < len(batch); j++ {
					results[j] = sink.Result{Outcome: sink.NotAttempted, Err: fmt.Errorf("not attempted: message %d of the batch failed first", i)}
				}
				break
			}
		}
		return results
	}

	// A fixed pool of concurrency workers takes the messages in batch order.
	// One goroutine per message would cost a goroutine start and, for SDK
	// clients with deep call chains, repeated stack growth per message.
	var (
		wg     sync.WaitGroup
		next   atomic.Int64 // index of the next message to start
		broken atomic.Int64 // index+1 of a Destination result, 0 while none
	)
	for range min(concurrency, len(batch)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(batch) {
					return
				}
				e := batch[i]
				if err := ctx.Err(); err != nil {
					results[i] = sink.Failed(fmt.Errorf("%s (stream seq %d): %w", name, e.StreamSequence, err))
					continue
				}
				if b := broken.Load(); b > 0 {
					results[i] = sink.Result{Outcome: sink.NotAttempted, Err: fmt.Errorf("not attempted: message %d of the batch hit a destination failure", b-1)}
					continue
				}
				results[i] = write(ctx, e)
				if results[i].Outcome == sink.Destination {
					broken.CompareAndSwap(0, int64(i)+1)
				}
			}
		})
	}
	wg.Wait()
	return results
}
