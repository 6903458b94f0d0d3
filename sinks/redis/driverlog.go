package redissink

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// go-redis writes its own diagnostics (connection-pool dial retries, for
// example) through one process-wide logger that defaults to raw lines on
// stderr, outside the connector's structured log. The sink routes them
// into the sink's logger at debug level: the failures they describe reach
// the runner as write errors, which are logged and counted there.
//
// The driver has a single logger per process, so with several redis sinks
// (named sinks) the lines go to the most recently opened one's logger.
var (
	driverLogger     atomic.Pointer[slog.Logger]
	installDriverLog sync.Once
)

type driverLog struct{}

func (driverLog) Printf(ctx context.Context, format string, v ...any) {
	if l := driverLogger.Load(); l != nil {
		l.DebugContext(ctx, "redis driver: "+fmt.Sprintf(format, v...))
	}
}

// routeDriverLog sends go-redis's log lines to log from now on.
func routeDriverLog(log *slog.Logger) {
	driverLogger.Store(log)
	installDriverLog.Do(func() { redis.SetLogger(driverLog{}) })
}
