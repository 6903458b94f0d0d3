package telemetry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// LevelCritical is upstream's CRITICAL, above slog.LevelError. Log it with
// logger.Log(ctx, telemetry.LevelCritical, msg, ...).
const LevelCritical = slog.Level(12)

// MaxLogString is the length in characters (code points) beyond which a
// logged string value is cut and suffixed with TruncatedSuffix.
const MaxLogString = 10000

// TruncatedSuffix marks a truncated log string.
const TruncatedSuffix = "...<truncated>"

// logRateWindow is how long repeated identical failure records are
// suppressed after one is emitted (docs/observability.md#logs).
const logRateWindow = 10 * time.Second

// ParseLevel parses logging.level (trimmed, case-insensitive): DEBUG, INFO,
// WARNING, ERROR or CRITICAL.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "DEBUG":
		return slog.LevelDebug, nil
	case "INFO":
		return slog.LevelInfo, nil
	case "WARNING":
		return slog.LevelWarn, nil
	case "ERROR":
		return slog.LevelError, nil
	case "CRITICAL":
		return LevelCritical, nil
	}
	return 0, fmt.Errorf("unknown log level %q", s)
}

// LevelName returns the upstream name of l: DEBUG, INFO, WARNING, ERROR or
// CRITICAL. Levels between two names take the lower one.
func LevelName(l slog.Level) string {
	switch {
	case l >= LevelCritical:
		return "CRITICAL"
	case l >= slog.LevelError:
		return "ERROR"
	case l >= slog.LevelWarn:
		return "WARNING"
	case l >= slog.LevelInfo:
		return "INFO"
	}
	return "DEBUG"
}

// NewLogger returns the process logger of docs/observability.md#logs, writing to w
// (stderr in the CLI). format is "json" or "text", level a logging.level
// name; both are validated by the config package, so an unknown format
// falls back to json and an unknown level to INFO rather than failing.
//
// Records carry time (RFC 3339, UTC, nanoseconds), level, msg, then
// attributes in the order given; add the component with
// logger.With("component", "runner"). String values longer than
// MaxLogString characters are truncated. Records at WARNING and above with
// the same msg and error_type are rate-limited to one per 10 s; the next one
// emitted carries suppressed=<n>.
//
// Keys: by policy only the allow-list of AllowedLogKeys appears in records.
// The handler does not filter keys, since silently dropping an unexpected
// key would hide the bug that added it; tests check with logtest.AssertLogSafe and
// logtest.AssertLogKeys instead.
func NewLogger(w io.Writer, format, level string) *slog.Logger {
	return newLogger(w, format, level, time.Now)
}

// newLogger is NewLogger with an injected clock for the rate limiter.
func newLogger(w io.Writer, format, level string, now func() time.Time) *slog.Logger {
	lvl, err := ParseLevel(level)
	if err != nil {
		lvl = slog.LevelInfo
	}
	var h slog.Handler
	if strings.EqualFold(strings.TrimSpace(format), "text") {
		h = &textHandler{mu: new(sync.Mutex), w: w, level: lvl}
	} else {
		h = slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl, ReplaceAttr: replaceJSONAttr})
	}
	return slog.New(&limitHandler{inner: h, lim: &limiter{now: now, window: logRateWindow}})
}

// formatLogTime renders t as RFC 3339 in UTC with nine fraction digits; the
// fixed width keeps lines aligned and lexically sortable.
func formatLogTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000000000Z07:00")
}

// truncateLog cuts s to MaxLogString code points plus TruncatedSuffix.
func truncateLog(s string) string {
	if len(s) <= MaxLogString { // bytes ≥ code points: the common fast path
		return s
	}
	n := 0
	for i := range s {
		if n == MaxLogString {
			return s[:i] + TruncatedSuffix
		}
		n++
	}
	return s
}

func replaceJSONAttr(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 {
		switch a.Key {
		case slog.TimeKey:
			if t, ok := a.Value.Any().(time.Time); ok && a.Value.Kind() == slog.KindTime {
				return slog.String(slog.TimeKey, formatLogTime(t))
			}
		case slog.LevelKey:
			if l, ok := a.Value.Any().(slog.Level); ok {
				return slog.String(slog.LevelKey, LevelName(l))
			}
		}
	}
	switch a.Value.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(truncateLog(a.Value.String()))
	case slog.KindAny:
		if err, ok := a.Value.Any().(error); ok {
			a.Value = slog.StringValue(truncateLog(err.Error()))
		}
	}
	return a
}

// limitHandler rate-limits repeated failure records in front of the
// formatting handler.
type limitHandler struct {
	inner     slog.Handler
	lim       *limiter // shared by every logger derived with With
	errorType string   // error_type added with With, if any
}

func (h *limitHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h *limitHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		et := h.errorType
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "error_type" {
				et = a.Value.Resolve().String()
				return false
			}
			return true
		})
		emit, suppressed := h.lim.admit(r.Message + "\x00" + et)
		if !emit {
			return nil
		}
		if suppressed > 0 {
			r = r.Clone()
			r.AddAttrs(slog.Int("suppressed", suppressed))
		}
	}
	return h.inner.Handle(ctx, r)
}

func (h *limitHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h2 := *h
	h2.inner = h.inner.WithAttrs(as)
	for _, a := range as {
		if a.Key == "error_type" {
			h2.errorType = a.Value.Resolve().String()
		}
	}
	return &h2
}

func (h *limitHandler) WithGroup(name string) slog.Handler {
	h2 := *h
	h2.inner = h.inner.WithGroup(name)
	return &h2
}

// limiter admits one record per key and window, counting the rest.
type limiter struct {
	now    func() time.Time
	window time.Duration

	mu      sync.Mutex
	entries map[string]*limitEntry
}

type limitEntry struct {
	until      time.Time
	suppressed int
}

// maxLimiterKeys bounds the limiter's memory. Keys are msg + error_type,
// both drawn from small fixed sets, so this is never reached in practice.
const maxLimiterKeys = 1024

// admit reports whether a record with key may be emitted now and, if so, how
// many were suppressed since the previous emitted one.
func (l *limiter) admit(key string) (emit bool, suppressed int) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entries[key]
	if e != nil && now.Before(e.until) {
		e.suppressed++
		return false, 0
	}
	if e == nil {
		if l.entries == nil {
			l.entries = make(map[string]*limitEntry)
		}
		if len(l.entries) >= maxLimiterKeys {
			for k, old := range l.entries {
				if !now.Before(old.until) {
					delete(l.entries, k)
				}
			}
		}
		e = &limitEntry{}
		l.entries[key] = e
	}
	suppressed, e.suppressed, e.until = e.suppressed, 0, now.Add(l.window)
	return true, suppressed
}

// textHandler writes logfmt-style "key=value" lines. It is not slog's
// TextHandler because that one quotes with strconv rules (\a, \u0085, and a
// doubled backslash for our escapes), while the spec asks for control
// characters as \xNN, \n, \r, \t.
type textHandler struct {
	mu     *sync.Mutex // shared by derived handlers: one line per Write
	w      io.Writer
	level  slog.Level
	pre    []byte // rendered attributes from WithAttrs
	prefix string // group prefix "a.b." for later keys
}

func (h *textHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *textHandler) Handle(_ context.Context, r slog.Record) error {
	buf := make([]byte, 0, 256)
	if !r.Time.IsZero() {
		buf = append(buf, "time="...)
		buf = append(buf, formatLogTime(r.Time)...)
		buf = append(buf, ' ')
	}
	buf = append(buf, "level="...)
	buf = append(buf, LevelName(r.Level)...)
	buf = append(buf, " msg="...)
	buf = appendText(buf, truncateLog(r.Message))
	buf = append(buf, h.pre...)
	r.Attrs(func(a slog.Attr) bool {
		buf = appendTextAttr(buf, h.prefix, a)
		return true
	})
	buf = append(buf, '\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := h.w.Write(buf)
	return err
}

func (h *textHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h2 := *h
	h2.pre = append([]byte(nil), h.pre...)
	for _, a := range as {
		h2.pre = appendTextAttr(h2.pre, h.prefix, a)
	}
	return &h2
}

func (h *textHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	h2 := *h
	h2.prefix = h.prefix + name + "."
	return &h2
}

func appendTextAttr(buf []byte, prefix string, a slog.Attr) []byte {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return buf // slog's rule: empty attributes are ignored
	}
	if a.Value.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, g := range a.Value.Group() {
			buf = appendTextAttr(buf, p, g)
		}
		return buf
	}
	buf = append(buf, ' ')
	buf = appendText(buf, prefix+a.Key)
	buf = append(buf, '=')
	var s string
	switch a.Value.Kind() {
	case slog.KindTime:
		s = formatLogTime(a.Value.Time())
	case slog.KindAny:
		if err, ok := a.Value.Any().(error); ok {
			s = err.Error()
		} else {
			s = a.Value.String()
		}
	default:
		s = a.Value.String()
	}
	return appendText(buf, truncateLog(s))
}

// appendText appends s bare when that is unambiguous, else double-quoted
// with '"' and '\' backslash-escaped and control characters as \n, \r, \t or
// \xNN (invalid UTF-8 bytes too), so one record is always one line.
func appendText(buf []byte, s string) []byte {
	if !needsQuote(s) {
		return append(buf, s...)
	}
	const hex = "0123456789abcdef"
	buf = append(buf, '"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			buf = append(buf, '\\', 'x', hex[s[i]>>4], hex[s[i]&0xf])
		case r == '"' || r == '\\':
			buf = append(buf, '\\', byte(r))
		case r == '\n':
			buf = append(buf, '\\', 'n')
		case r == '\r':
			buf = append(buf, '\\', 'r')
		case r == '\t':
			buf = append(buf, '\\', 't')
		case r < 0x20 || (r >= 0x7f && r <= 0x9f):
			buf = append(buf, '\\', 'x', hex[r>>4], hex[r&0xf])
		case r == '\u2028' || r == '\u2029': // line breaks to many log viewers
			buf = fmt.Appendf(buf, `\u%04x`, r)
		default:
			buf = append(buf, s[i:i+size]...)
		}
		i += size
	}
	return append(buf, '"')
}

func needsQuote(s string) bool {
	if s == "" {
		return true
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1,
			r <= ' ', r == '=', r == '"', r == '\\',
			r >= 0x7f && r <= 0x9f, r == '\u2028', r == '\u2029':
			return true
		}
		i += size
	}
	return false
}
