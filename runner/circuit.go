package runner

import (
	"context"
	"log/slog"
	"time"

	"sync"

	"github.com/nats-sinks/nats-sink/sink"
)

// healthcheckTimeout bounds one circuit probe.
const healthcheckTimeout = 10 * time.Second

// circuit is the destination circuit of docs/delivery.md#destination-circuit. While open, the fetch
// loop issues no fetch; it probes the sink's Healthcheck with the retry
// back-off and closes the circuit on the first success. A sink without
// Healthcheck is probed with one real batch (half-open): a commit closes the
// circuit, another destination failure keeps it open.
type circuit struct {
	mu       sync.Mutex
	open     bool
	probing  bool // half-open: one batch is testing the destination
	failures int  // consecutive failed probes
	// changed is closed and replaced on every state change, so the fetch
	// loop can wait for the probe batch without polling.
	changed chan struct{}
}

func (c *circuit) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// writeProber is implemented by a sink whose health check cannot always
// probe what broke: the fanout sink, when a required target with an open
// circuit has no health check of its own. While ProbeByWrite is true the
// circuit is probed half-open, with one real batch, as for a sink without
// Healthcheck; a health check that passed without looking at the broken
// destination would close the circuit, report ready and refetch at the
// shortest back-off again and again.
type writeProber interface{ ProbeByWrite() bool }

// waitCircuit returns when fetching may proceed. probe is true when the next
// fetch is the half-open probe of a sink without Healthcheck; ok is false
// when the runner is stopping.
func (r *Runner) waitCircuit(ctx context.Context, log *slog.Logger) (probe, ok bool) {
	c := &r.st.circuit
	marked := false
	for {
		c.mu.Lock()
		open, probing, failures, changed := c.open, c.probing, c.failures, c.changed
		c.mu.Unlock()
		if !open {
			return false, true
		}
		if !marked {
			// Paused for a broken destination: a deliberate wait, bounded
			// by the back-off and the probe's timeout (Status.Heartbeat).
			defer r.waiting()()
			marked = true
		}
		if probing {
			select {
			case <-changed:
				continue
			case <-ctx.Done():
				return false, false
			case <-r.st.stop:
				return false, false
			}
		}
		delay := Backoff(failures+1, r.Retry, r.draw())
		if !sleep(ctx, r.st.stop, delay) {
			return false, false
		}
		hc, ok := r.Sink.(sink.HealthChecker)
		if pw, can := r.Sink.(writeProber); ok && can && pw.ProbeByWrite() {
			ok = false // its broken part has no health check: probe with a batch
		}
		if !ok {
			c.mu.Lock()
			c.probing = true
			c.mu.Unlock()
			return true, true
		}
		hctx, cancel := context.WithTimeout(ctx, healthcheckTimeout)
		err := hc.Healthcheck(hctx)
		cancel()
		if err == nil {
			r.closeCircuit(log)
			return false, true
		}
		c.mu.Lock()
		c.failures++
		c.mu.Unlock()
		log.Warn("destination probe failed", "attempt", failures+1, "sink", r.Sink.Type(), "error", err.Error())
	}
}

// openCircuit records a destination failure: fetching pauses and the sink is
// unhealthy until the next commit.
func (r *Runner) openCircuit() {
	c := &r.st.circuit
	c.mu.Lock()
	if c.open && c.probing {
		c.failures++
	}
	c.open, c.probing = true, false
	c.notify()
	c.mu.Unlock()
	r.st.mu.Lock()
	r.st.sinkUnhealthy = true
	r.st.mu.Unlock()
	m := r.metrics()
	m.SinkCircuitOpen.Set(1)
	m.SinkHealthy.Set(0)
}

// closeCircuit resumes fetching after a successful probe or commit.
func (r *Runner) closeCircuit(log *slog.Logger) {
	c := &r.st.circuit
	c.mu.Lock()
	wasOpen := c.open
	c.open, c.probing, c.failures = false, false, 0
	c.notify()
	c.mu.Unlock()
	r.st.mu.Lock()
	r.st.sinkUnhealthy = false
	r.st.mu.Unlock()
	m := r.metrics()
	m.SinkCircuitOpen.Set(0)
	m.SinkHealthy.Set(1)
	if wasOpen {
		log.Info("destination available", "sink", r.Sink.Type())
	}
}

// probeDone ends a half-open probe whose batch neither committed nor failed
// with a destination error (empty fetch, temporary failure): the circuit stays
// open and the next probe waits a longer back-off.
func (r *Runner) probeDone(probe, failed bool) {
	if !probe {
		return
	}
	c := &r.st.circuit
	c.mu.Lock()
	if c.probing {
		c.probing = false
		if failed {
			c.failures++
		}
		c.notify()
	}
	c.mu.Unlock()
}
