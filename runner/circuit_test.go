package runner

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-sinks/nats-sink/telemetry"
)

// idleRunner returns a Runner whose state is initialised as Run would, for
// tests of internals that need no server.
func idleRunner(s *healthSink, retry Retry) *Runner {
	r := &Runner{Sink: s, Retry: retry}
	r.st.metrics = &telemetry.Metrics{}
	r.st.stop = make(chan struct{})
	r.st.inFlight = map[uint64]time.Time{}
	r.st.circuit.changed = make(chan struct{})
	return r
}

// TestCircuitProbeBackoff checks, in a synctest bubble, that probes follow
// the retry back-off with attempt = consecutive failed probes, and that the
// first successful probe closes the circuit.
func TestCircuitProbeBackoff(t *testing.T) {
	for _, tt := range []struct {
		name  string
		retry Retry
		fails int
		want  time.Duration
	}{
		{"fixed", Retry{Mode: ModeFixed, Jitter: JitterNone}, 2, 3 * time.Second},
		{"exponential", Retry{Jitter: JitterNone}, 2, 7 * time.Second},
		{"exponential capped", Retry{Jitter: JitterNone, MaxBackoff: new(3 * time.Second)}, 3, 9 * time.Second}, // 1+2+3+3
		{"first probe succeeds", Retry{Jitter: JitterNone}, 0, time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				hs := &healthSink{funcSink: &funcSink{}}
				r := idleRunner(hs, tt.retry)
				r.openCircuit()
				if !r.Status().CircuitOpen || !r.Status().SinkUnhealthy {
					t.Fatalf("Status() = %+v after openCircuit, want open and unhealthy", r.Status())
				}
				go func() {
					// Fail tt.fails probes, then turn healthy.
					for hs.checks.Load() < int64(tt.fails) {
						synctest.Wait()
						time.Sleep(100 * time.Millisecond)
					}
					hs.healthy.Store(true)
				}()
				begin := time.Now()
				probe, ok := r.waitCircuit(context.Background(), r.logger())
				if probe || !ok {
					t.Fatalf("waitCircuit() = %v, %v, want false, true", probe, ok)
				}
				// Probes happen only at back-off boundaries, so the healthy
				// flag flipped within 100 ms is seen at the next probe.
				if got := time.Since(begin); got != tt.want {
					t.Errorf("circuit closed after %v, want %v", got, tt.want)
				}
				if got := hs.checks.Load(); got != int64(tt.fails+1) {
					t.Errorf("Healthcheck calls = %d, want %d", got, tt.fails+1)
				}
				if st := r.Status(); st.CircuitOpen || st.SinkUnhealthy {
					t.Errorf("Status() = %+v, want closed and healthy", st)
				}
			})
		})
	}
}

func TestCircuitWaitStopsOnCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hs := &healthSink{funcSink: &funcSink{}}
		r := idleRunner(hs, Retry{Jitter: JitterNone})
		r.openCircuit()
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(90*time.Second, cancel)
		_, ok := r.waitCircuit(ctx, r.logger())
		if ok {
			t.Errorf("waitCircuit() ok after cancellation, want false")
		}
		if err := ctx.Err(); !errors.Is(err, context.Canceled) {
			t.Errorf("ctx.Err() = %v", err)
		}
	})
}
