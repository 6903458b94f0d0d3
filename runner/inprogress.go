package runner

import (
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of delivery.in_progress (docs/configuration.md#delivery).
const (
	DefaultInProgressInterval        = 5 * time.Second
	DefaultInProgressMaxHeartbeats   = 12
	DefaultInProgressShutdownTimeout = 5 * time.Second
)

// InProgress configures InProgress heartbeats (delivery.in_progress, runtime
// docs/delivery.md#inprogress-heartbeats). Zero values mean the config.md defaults.
type InProgress struct {
	// Interval is the time between two heartbeat rounds; 0 means 5 s. It
	// must stay below 80 % of the consumer's AckWait (CheckInProgress).
	Interval time.Duration
	// MaxHeartbeats bounds the rounds per batch; 0 means 12. A write that
	// outlasts Interval × MaxHeartbeats is redelivered after AckWait, as
	// without heartbeats: the bound keeps a hung sink from holding messages
	// forever.
	MaxHeartbeats int
	// ShutdownTimeout bounds the wait for a batch's heartbeat task to stop;
	// nil means 5 s, a pointer to 0 does not wait.
	ShutdownTimeout *time.Duration
}

func (p *InProgress) interval() time.Duration {
	if p.Interval <= 0 {
		return DefaultInProgressInterval
	}
	return p.Interval
}

func (p *InProgress) maxHeartbeats() int {
	if p.MaxHeartbeats <= 0 {
		return DefaultInProgressMaxHeartbeats
	}
	return p.MaxHeartbeats
}

func (p *InProgress) shutdownTimeout() time.Duration {
	if p.ShutdownTimeout == nil {
		return DefaultInProgressShutdownTimeout
	}
	return max(*p.ShutdownTimeout, 0)
}

// CheckInProgress applies the start-up guards of docs/delivery.md#inprogress-heartbeats to the bound
// consumer: it must be durable, have no BackOff (the server would pace
// redeliveries by BackOff, not by the AckWait the heartbeats reset), and
// have a positive AckWait of which interval is less than 80 %. Run these
// after consumer management (the consumer may have been created or
// reconciled). A failure is a *ConfigError (exit 2).
func CheckInProgress(info *jetstream.ConsumerInfo, interval time.Duration) error {
	const path = "delivery.in_progress.enabled"
	if interval <= 0 {
		interval = DefaultInProgressInterval
	}
	if info == nil {
		return &ConfigError{path, "the consumer's AckWait could not be read"}
	}
	cfg := info.Config
	if cfg.Durable == "" {
		return &ConfigError{path, "requires a durable consumer (nats.durable true)"}
	}
	if len(cfg.BackOff) > 0 {
		return &ConfigError{path, fmt.Sprintf("must not be used with a consumer BackOff (consumer %q has backoff %s)", info.Name, fmtDurations(cfg.BackOff))}
	}
	if cfg.AckWait <= 0 {
		return &ConfigError{path, fmt.Sprintf("consumer %q reports no positive AckWait", info.Name)}
	}
	if limit := 0.8 * float64(cfg.AckWait) / float64(time.Millisecond); float64(interval)/float64(time.Millisecond) >= limit {
		return &ConfigError{"delivery.in_progress.interval_ms", fmt.Sprintf("must be less than 80%% of the consumer's AckWait (%s ms) (got %s)",
			strconv.FormatFloat(limit, 'f', -1, 64), strconv.FormatFloat(float64(interval)/float64(time.Millisecond), 'f', -1, 64))}
	}
	return nil
}

// heartbeat sends InProgress for msgs every interval until stop is called
// or MaxHeartbeats rounds were sent (docs/delivery.md#fetching-and-in-flight-batches steps 6–8). A round in which
// any InProgress fails ends the heartbeats of the batch: the connection is
// most likely gone, and the batch's final decision does not depend on them.
// The returned stop waits at most ShutdownTimeout for the task to end.
func (r *Runner) heartbeat(b *batch, log *slog.Logger) (stop func()) {
	p := r.InProgress
	if p == nil || len(b.msgs) == 0 {
		return func() {}
	}
	m := r.metrics()
	quit := make(chan struct{})
	done := make(chan struct{})
	m.CurrentInProgressBatches.Add(1)
	go func() {
		defer close(done)
		defer m.CurrentInProgressBatches.Add(-1)
		t := time.NewTicker(p.interval())
		defer t.Stop()
		for round := 1; ; round++ {
			select {
			case <-quit:
				return
			case <-t.C:
			}
			start := time.Now()
			var failed int
			var firstErr error
			for _, msg := range b.msgs {
				if stopped(quit) {
					// Never after stop: a +WPI after a NAK with delay
					// would reset the delay the NAK asked for.
					return
				}
				m.InProgressAttempts.Inc()
				if err := msg.InProgress(); err != nil {
					failed++
					if firstErr == nil {
						firstErr = err
					}
					m.InProgressFailures.Inc()
					continue
				}
				m.InProgressSuccesses.Inc()
			}
			m.InProgressHeartbeatSeconds.Observe(time.Since(start).Seconds())
			if failed > 0 {
				log.Warn("in progress heartbeat failed; heartbeats stopped for the batch", "batch_id", b.id,
					"count", failed, "error", firstErr.Error())
				return
			}
			if round >= p.maxHeartbeats() {
				m.InProgressMaxHeartbeats.Inc()
				log.Warn("in progress heartbeat limit reached; the batch may be redelivered after AckWait",
					"batch_id", b.id, "count", round)
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(quit)
			t := time.NewTimer(p.shutdownTimeout())
			defer t.Stop()
			select {
			case <-done:
			case <-t.C:
				// The task is stuck in InProgress (a blocked connection);
				// it ends on its own once that returns, and sends no
				// further round since quit is closed.
			}
		})
	}
}

func stopped(quit <-chan struct{}) bool {
	select {
	case <-quit:
		return true
	default:
		return false
	}
}
