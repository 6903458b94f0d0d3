package runner

import (
	"time"

	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/telemetry"
)

// Freshness configures the event freshness metrics (metrics.event_* keys,
// docs/observability.md#metrics). The zero value is the config default: enabled, stale
// after 300 s, future skew tolerance 5 s.
type Freshness struct {
	// Disabled turns the freshness metrics off (event_freshness_enabled
	// false).
	Disabled bool
	// StaleAfter is event_stale_after_seconds; nil means 300 s and a
	// negative value disables the stale counters (config null).
	StaleAfter *time.Duration
	// FutureSkewTolerance is event_future_skew_tolerance_seconds; nil means
	// 5 s.
	FutureSkewTolerance *time.Duration
}

func (f Freshness) staleAfter() (time.Duration, bool) {
	if f.StaleAfter == nil {
		return 300 * time.Second, true
	}
	return *f.StaleAfter, *f.StaleAfter >= 0
}

func (f Freshness) tolerance() time.Duration {
	if f.FutureSkewTolerance == nil {
		return 5 * time.Second
	}
	return *f.FutureSkewTolerance
}

// observeFreshness records the freshness metrics of committed envelopes
// (docs/delivery.md#fetching-and-in-flight-batches step 9). The sink stamps stored_at itself; storedAt here is
// when the write call that committed them returned, the closest moment the
// runner knows. Metric failures never affect delivery: this only counts.
func observeFreshness(m *telemetry.Metrics, f Freshness, envs []*sink.Envelope, storedAt time.Time) {
	if f.Disabled {
		return
	}
	stale, staleOn := f.staleAfter()
	tol := f.tolerance().Seconds()
	for _, e := range envs {
		c := record.CreatedAt(e)
		if c.Malformed {
			m.EventCreationMalformed.Inc()
		}
		if c.Source == record.SourceMissing {
			m.EventCreationMissing.Inc()
			continue
		}
		if skew := record.AgeSeconds(c.Time, e.ReceivedAt); skew > 0 {
			m.EventSourceClockSkewSeconds.Observe(skew)
			if skew > tol {
				m.EventCreationFuture.Inc()
			}
		}
		atReceive := record.AgeSeconds(e.ReceivedAt, c.Time)
		atStore := record.AgeSeconds(storedAt, c.Time)
		m.EventAgeAtReceiveSeconds.Observe(atReceive)
		m.EventAgeAtStoreSeconds.Observe(atStore)
		if staleOn {
			if atReceive >= stale.Seconds() {
				m.EventsStaleAtReceive.Inc()
			}
			if atStore >= stale.Seconds() {
				m.EventsStaleAtStore.Inc()
			}
		}
	}
}
