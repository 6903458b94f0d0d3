package routing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-sinks/nats-sink/sink"
)

// probeTimeout bounds one Healthcheck probe of a target.
const probeTimeout = 10 * time.Second

// errCircuitOpen is the failure of an optional-only target's operation while
// its destination circuit is open: the target is not called.
var errCircuitOpen = errors.New("not attempted: the target's destination circuit is open")

// health is one target's destination circuit (docs/routing.md#target-health).
// A destination result opens it. For a target required by some route (or
// the default targets) the runner's process-wide circuit does the pausing
// and probing, since such a result reaches the runner; this circuit only
// reports the target unhealthy until it commits again or a probe passes.
// For an optional-only target nothing reaches the runner: while its circuit
// is open its operations fail at once without calling it, and a goroutine
// probes it with the retry back-off.
type health struct {
	name     string
	required bool // required somewhere: the process circuit applies
	hc       sink.HealthChecker

	mu       sync.Mutex
	open     bool
	failures int  // consecutive failed probes
	trial    bool // optional-only without Healthcheck: the next operation is the probe
	probing  bool // a probe goroutine runs
}

// skip reports whether an operation of this target must fail without
// calling it. An optional-only target without Healthcheck lets one
// operation through as its probe (half-open) once the back-off has passed.
func (h *health) skip() bool {
	if h.required {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.open {
		return false
	}
	if h.trial {
		h.trial = false
		return false
	}
	return true
}

// TargetHealth reports each opened target's health by name: true while its
// destination circuit is closed.
func (s *Sink) TargetHealth() map[string]bool {
	out := make(map[string]bool, len(s.names))
	for _, n := range s.names {
		h := s.health[n]
		h.mu.Lock()
		out[n] = !h.open
		h.mu.Unlock()
	}
	return out
}

// observeHealth updates the targets' circuits from the operations of one
// batch: a destination result opens a circuit, a commit closes it.
func (s *Sink) observeHealth(ops []*op) {
	for _, o := range ops {
		if o.skipped {
			continue
		}
		var dest error
		committed := false
		for _, r := range o.results {
			switch {
			case r.Outcome == sink.Destination && dest == nil:
				dest = r.Err
				if dest == nil {
					dest = errors.New("destination failure")
				}
			case r.Outcome.Acked():
				committed = true
			}
		}
		switch {
		case dest != nil:
			s.markDown(s.health[o.name], dest)
		case committed:
			s.markUp(s.health[o.name])
		}
	}
}

// markDown opens h's circuit; an optional-only target starts being probed.
func (s *Sink) markDown(h *health, err error) {
	h.mu.Lock()
	was := h.open
	h.open = true
	if was {
		h.failures++
	}
	start := !h.required && !h.probing
	if start {
		h.probing = true
	}
	h.mu.Unlock()
	if !was {
		s.m.unhealthy.Set(float64(s.unhealthyN.Add(1)))
		s.log.Error("target destination unavailable", "target", h.name, "required_somewhere", h.required, "error", err.Error())
	}
	if start {
		s.wg.Go(func() { s.probe(h) })
	}
}

// markUp closes h's circuit.
func (s *Sink) markUp(h *health) {
	h.mu.Lock()
	was := h.open
	h.open, h.failures, h.trial = false, 0, false
	h.mu.Unlock()
	if was {
		s.m.unhealthy.Set(float64(s.unhealthyN.Add(-1)))
		s.log.Info("target destination available", "target", h.name)
	}
}

// probe waits the back-off and checks an optional-only target until it is
// healthy or the sink stops. Without Healthcheck it lets the next operation
// through as the probe and returns; a destination result of that operation
// starts the next round.
func (s *Sink) probe(h *health) {
	defer func() {
		h.mu.Lock()
		h.probing = false
		h.mu.Unlock()
	}()
	for {
		h.mu.Lock()
		attempt := h.failures + 1
		h.mu.Unlock()
		t := time.NewTimer(s.probeDelay(attempt))
		select {
		case <-s.stopping:
			t.Stop()
			return
		case <-t.C:
		}
		if h.hc == nil {
			h.mu.Lock()
			h.trial = true
			h.mu.Unlock()
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		go func() { // Stop must not wait a whole probe timeout
			select {
			case <-s.stopping:
				cancel()
			case <-ctx.Done():
			}
		}()
		err := h.hc.Healthcheck(ctx)
		cancel()
		if err == nil {
			s.markUp(h)
			return
		}
		h.mu.Lock()
		h.failures++
		h.mu.Unlock()
		s.log.Warn("target probe failed", "target", h.name, "attempt", attempt, "error", err.Error())
	}
}

// probeDelay is the back-off before probe attempt n.
func (s *Sink) probeDelay(n int) time.Duration {
	if s.probeBackoff != nil {
		return s.probeBackoff(n)
	}
	return min(time.Second<<min(n-1, 6), time.Minute)
}

// ProbeByWrite reports whether a target some route requires has an open
// destination circuit and no health check (an HTTP target, say): the
// process can then only be probed with a real batch, and the runner probes
// half-open instead of calling Healthcheck.
func (s *Sink) ProbeByWrite() bool {
	for _, n := range s.names {
		h := s.health[n]
		h.mu.Lock()
		down := h.open && h.required && h.hc == nil
		h.mu.Unlock()
		if down {
			return true
		}
	}
	return false
}

// healthcheck checks the targets some route (or the default targets)
// requires, never an optional-only one: a down optional target must never
// make the process unhealthy or keep its fetching paused
// (docs/routing.md#target-health). While a required target has an open
// circuit, the runner's process-wide probe is this call: only those
// targets are checked, and a pass closes their circuits. Otherwise every
// required target that has a health check is checked, in ascending name
// order. Optional-only targets are probed on their own.
func (s *Sink) healthcheck(ctx context.Context) error {
	var down []*health
	for _, n := range s.names {
		h := s.health[n]
		h.mu.Lock()
		if h.open && h.required {
			down = append(down, h)
		}
		h.mu.Unlock()
	}
	if len(down) > 0 {
		for _, h := range down {
			if h.hc != nil {
				if err := h.hc.Healthcheck(ctx); err != nil {
					return fmt.Errorf("sinks.%s: %w", h.name, err)
				}
			}
		}
		for _, h := range down {
			if h.hc != nil {
				s.markUp(h)
			}
		}
		return nil
	}
	for _, n := range s.names {
		h := s.health[n]
		if !h.required || h.hc == nil {
			continue
		}
		if err := h.hc.Healthcheck(ctx); err != nil {
			return fmt.Errorf("sinks.%s: %w", n, err)
		}
	}
	return nil
}
