// Package ops holds the logic of the operator commands (`dlq`, `replay`,
// `status`) that is not output formatting: finding and reading DLQ
// entries, the keys a redrive decrypts with, consumer state and lag, the
// replay range and its completion. The cli package prints what it returns.
package ops

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-sinks/nats-sink/sink"
)

// A ConfigError is a problem the operator must fix in the configuration or
// the flags (exit 2); its text is printed after "Configuration error: ".
// It matches sink.ErrConfig, as every configuration error does.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string        { return e.Msg }
func (e *ConfigError) Is(target error) bool { return target == sink.ErrConfig }

func configError(format string, args ...any) error {
	return &ConfigError{Msg: fmt.Sprintf(format, args...)}
}

// IsConfigError reports whether err is a *ConfigError.
func IsConfigError(err error) bool {
	var ce *ConfigError
	return errors.As(err, &ce)
}

// ParseTime reads a time flag: RFC 3339 with an offset (a fraction is
// allowed), or an age <n>s, <n>m, <n>h or <n>d meaning now minus that.
// flag names the flag in the error.
func ParseTime(flag, v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if n := len(v); n >= 2 {
		unit := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}[v[n-1]]
		if k, err := strconv.ParseUint(v[:n-1], 10, 32); err == nil && unit > 0 && !strings.HasPrefix(v, "+") {
			return now.Add(-time.Duration(k) * unit), nil
		}
	}
	return time.Time{}, configError("%s: expected an RFC 3339 time or an age like 30m (got %q)", flag, v)
}
