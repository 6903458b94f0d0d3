package runner

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/sink"
)

// Held results: a sink implementing sink.Holder may accept a message into an
// open segment and report it Held. The message then stays unacknowledged,
// with mandatory InProgress heartbeats so that AckWait never expires, until
// its hold settles: Committed → ACK, anything else → the temporary path.

// minHeldAckWait is the shortest AckWait (and BackOff step) a holding sink
// can work with: heartbeats go out every half of it.
const minHeldAckWait = 2 * time.Second

// HeldInterval returns the heartbeat interval for held messages: half the
// smallest of the consumer's AckWait and BackOff steps. The error is a
// *ConfigError (exit 2) when that is unreadable or below 2 s.
func HeldInterval(info *jetstream.ConsumerInfo) (time.Duration, error) {
	bad := &ConfigError{"sink", "segments held mode needs the consumer's AckWait and BackOff steps to be at least 2s"}
	if info == nil || info.Config.AckWait <= 0 {
		return 0, bad
	}
	e := info.Config.AckWait
	for _, b := range info.Config.BackOff {
		e = min(e, b)
	}
	if e < minHeldAckWait {
		return 0, bad
	}
	return e / 2, nil
}

// CheckHeld applies the start-up guards for a sink that holds up to maxHeld
// messages: the heartbeat interval (HeldInterval), and a MaxAckPending (-1
// unlimited) of at least maxHeld + inFlight × batchSize, so that held
// messages never starve the fetches.
func CheckHeld(info *jetstream.ConsumerInfo, maxHeld, inFlight, batchSize int) error {
	if _, err := HeldInterval(info); err != nil {
		return err
	}
	need := maxHeld + inFlight*batchSize
	limit := info.Config.MaxAckPending
	if limit == 0 {
		limit = 1000 // the server default
	}
	if limit >= 0 && limit < need {
		return &ConfigError{"sink.max_held_messages", fmt.Sprintf(
			"the consumer's max_ack_pending %d is below max_held_messages + max_in_flight_batches × batch_size = %d", limit, need)}
	}
	return nil
}

// holdGroup is the messages of one batch waiting for one hold.
type holdGroup struct {
	hold sink.Hold
	idx  []int
}

// awaitHolds hands the held messages of b to a task that heartbeats them
// and settles them when their holds do. ctx is the in-flight context: when
// the shutdown deadline cancels it, whatever is still held is NAKed at once.
func (r *Runner) awaitHolds(ctx context.Context, b *batch, held []int, results []sink.Result, log *slog.Logger) {
	var groups []*holdGroup
	byHold := map[sink.Hold]*holdGroup{}
	for _, i := range held {
		h := results[i].Hold
		g := byHold[h]
		if g == nil {
			g = &holdGroup{hold: h}
			byHold[h] = g
			groups = append(groups, g)
		}
		g.idx = append(g.idx, i)
	}
	b.holding = true
	since := time.Now()
	r.heldChange(b, len(held), since)
	r.st.holds.Go(func() {
		defer b.tr.End()
		left := len(held)
		defer func() { r.heldChange(b, -left, since) }()
		t := time.NewTicker(r.st.heldEvery)
		defer t.Stop()
		for len(groups) > 0 {
			g := groups[0]
			select {
			case <-g.hold.Done():
				groups = groups[1:]
				r.heldChange(b, -len(g.idx), since)
				left -= len(g.idx)
				r.settleHold(ctx, b, g, log)
				continue
			case <-ctx.Done():
			case <-t.C:
				r.heartbeatHeld(b, groups)
				continue
			}
			// The shutdown deadline passed: nothing more is ACKed.
			var rest []int
			for _, g := range groups {
				rest = append(rest, g.idx...)
			}
			r.abandon(b, rest, log)
			return
		}
	})
}

// heartbeatHeld sends InProgress to every message of b still held. A
// failure is counted and retried next round: held messages have no other
// way to keep their AckWait from expiring.
func (r *Runner) heartbeatHeld(b *batch, groups []*holdGroup) {
	m := r.metrics()
	start := time.Now()
	for _, g := range groups {
		for _, i := range g.idx {
			m.InProgressAttempts.Inc()
			if err := b.msgs[i].InProgress(); err != nil {
				m.InProgressFailures.Inc()
				continue
			}
			m.InProgressSuccesses.Inc()
		}
	}
	m.InProgressHeartbeatSeconds.Observe(time.Since(start).Seconds())
}

// settleHold applies a settled hold's outcome to its messages.
func (r *Runner) settleHold(ctx context.Context, b *batch, g *holdGroup, log *slog.Logger) {
	m := r.metrics()
	out := g.hold.Outcome()
	if out == sink.Committed {
		m.MessagesWritten.Add(len(g.idx))
		if r.Metrics != nil {
			envs := make([]*sink.Envelope, len(g.idx))
			for k, i := range g.idx {
				envs[k] = b.envs[i]
			}
			observeFreshness(m, r.Freshness, envs, r.now())
		}
		for _, i := range g.idx {
			b.tr.Span(i).SetOutcome(committedOutcome(sink.Committed))
		}
		r.committed(log)
		r.settle(ctx, b, g.idx, nil, log)
		m.LastSinkSuccessEpochSeconds.Set(float64(r.now().UnixNano()) / 1e9)
		return
	}
	err := g.hold.Err()
	if err == nil {
		err = fmt.Errorf("hold settled %s", out)
	}
	if out != sink.Destination {
		out = sink.Temporary
	}
	for _, i := range g.idx {
		r.fail(b, i, out.String(), err)
		m.SinkWriteErrors.Inc()
	}
	if out == sink.Destination {
		m.SinkDestinationErrors.Inc()
		log.Error("destination unavailable", "sink", r.Sink.Type(), "error_type", out.String(), "error", err.Error())
		r.openCircuit()
		r.failFast("destination", err)
	}
	r.temporary(ctx, b, g.idx, log)
}

// heldChange adjusts the held_messages gauge and the oldest-held record of b.
func (r *Runner) heldChange(b *batch, n int, since time.Time) {
	if n == 0 {
		return
	}
	r.st.mu.Lock()
	r.st.held += n
	if r.st.heldSince == nil {
		r.st.heldSince = map[*batch]time.Time{}
		r.st.heldCount = map[*batch]int{}
	}
	r.st.heldCount[b] += n
	if r.st.heldCount[b] <= 0 {
		delete(r.st.heldCount, b)
		delete(r.st.heldSince, b)
	} else {
		r.st.heldSince[b] = since
	}
	held := r.st.held
	r.st.mu.Unlock()
	r.metrics().HeldMessages.Set(float64(held))
}

// oldestHeld returns the age of the oldest held message, 0 when none.
func (r *Runner) oldestHeld() float64 {
	r.st.mu.Lock()
	defer r.st.mu.Unlock()
	var oldest time.Time
	for _, s := range r.st.heldSince {
		if oldest.IsZero() || s.Before(oldest) {
			oldest = s
		}
	}
	if oldest.IsZero() {
		return 0
	}
	return time.Since(oldest).Seconds()
}
