package runner

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-sinks/nats-sink/telemetry"
)

// writeProbeSink has a health check but reports that its broken part
// cannot be probed by it (the fanout sink with a required HTTP target
// down).
type writeProbeSink struct{ *healthSink }

func (writeProbeSink) ProbeByWrite() bool { return true }

// TestCircuitProbeByWrite: while the sink reports ProbeByWrite, the runner
// probes half-open with a batch instead of calling Healthcheck, and the
// circuit stays open (the process unready) during that probe.
func TestCircuitProbeByWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hs := &healthSink{funcSink: &funcSink{}}
		hs.healthy.Store(true) // a check would pass without looking at the broken target
		r := &Runner{Sink: writeProbeSink{hs}, Retry: Retry{Jitter: JitterNone}}
		r.st.metrics = &telemetry.Metrics{}
		r.st.stop = make(chan struct{})
		r.st.inFlight = map[uint64]time.Time{}
		r.st.circuit.changed = make(chan struct{})
		r.openCircuit()
		begin := time.Now()
		probe, ok := r.waitCircuit(context.Background(), r.logger())
		if !probe || !ok {
			t.Fatalf("waitCircuit() = %v, %v, want true, true (a half-open probe batch)", probe, ok)
		}
		if got := time.Since(begin); got != time.Second {
			t.Errorf("probe after %v, want the first back-off (1s)", got)
		}
		if n := hs.checks.Load(); n != 0 {
			t.Errorf("Healthcheck called %d times, want 0", n)
		}
		if st := r.Status(); !st.CircuitOpen || !st.SinkUnhealthy {
			t.Errorf("Status() = %+v during the probe batch, want open and unhealthy", st)
		}
	})
}
