package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/nats-sinks/nats-sink/internal/logtest"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fixedTime is in a non-UTC zone so the tests see the UTC conversion.
var fixedTime = time.Date(2026, 3, 4, 7, 8, 9, 123450000, time.FixedZone("X", 2*3600))

// logAt sends one record with fixedTime through l's handler, as l.Log would.
func logAt(t *testing.T, l *slog.Logger, level slog.Level, msg string, args ...any) {
	t.Helper()
	if !l.Handler().Enabled(context.Background(), level) {
		return
	}
	r := slog.NewRecord(fixedTime, level, msg, 0)
	r.Add(args...)
	if err := l.Handler().Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
}

func TestJSONRecordLayout(t *testing.T) {
	var buf bytes.Buffer
	l := NewLogger(&buf, "json", "DEBUG").With("component", "runner")
	logAt(t, l, slog.LevelDebug, "d")
	logAt(t, l, slog.LevelInfo, "ready")
	logAt(t, l, slog.LevelWarn, "ack failed", "stream_sequence", 42, "error", errors.New("nats: timeout"))
	logAt(t, l, slog.LevelError, "dlq publish failed", "subject", "orders.new")
	logAt(t, l, LevelCritical, "fatal", "count", 2)

	want := strings.Join([]string{
		`{"time":"2026-03-04T05:08:09.123450000Z","level":"DEBUG","msg":"d","component":"runner"}`,
		`{"time":"2026-03-04T05:08:09.123450000Z","level":"INFO","msg":"ready","component":"runner"}`,
		`{"time":"2026-03-04T05:08:09.123450000Z","level":"WARNING","msg":"ack failed","component":"runner","stream_sequence":42,"error":"nats: timeout"}`,
		`{"time":"2026-03-04T05:08:09.123450000Z","level":"ERROR","msg":"dlq publish failed","component":"runner","subject":"orders.new"}`,
		`{"time":"2026-03-04T05:08:09.123450000Z","level":"CRITICAL","msg":"fatal","component":"runner","count":2}`,
	}, "\n") + "\n"
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("JSON log mismatch (-want +got):\n%s", diff)
	}
	logtest.AssertLogKeys(t, buf.String())
}

func TestTextRecordLayout(t *testing.T) {
	var buf bytes.Buffer
	l := NewLogger(&buf, "text", "INFO").With("component", "sink")
	logAt(t, l, slog.LevelDebug, "hidden")
	logAt(t, l, slog.LevelInfo, "consumer ready", "action", "bound")
	logAt(t, l, slog.LevelWarn, "temporary failure; batch will be redelivered",
		"count", 3, "delay_ms", 250, "error", errors.New(`insert "x": dial tcp`), "file", `C:\out`)
	logAt(t, l, LevelCritical, "x", "error", "a\nb\rc\td\x00e\x1bf\x7fg\u0085h\u2028i", "empty", "")

	want := strings.Join([]string{
		`time=2026-03-04T05:08:09.123450000Z level=INFO msg="consumer ready" component=sink action=bound`,
		`time=2026-03-04T05:08:09.123450000Z level=WARNING msg="temporary failure; batch will be redelivered" component=sink count=3 delay_ms=250 error="insert \"x\": dial tcp" file="C:\\out"`,
		`time=2026-03-04T05:08:09.123450000Z level=CRITICAL msg=x component=sink error="a\nb\rc\td\x00e\x1bf\x7fg\x85h\u2028i" empty=""`,
	}, "\n") + "\n"
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("text log mismatch (-want +got):\n%s", diff)
	}
}

func TestTextControlCharacters(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"plain", "plain"},
		{"", `""`},
		{"a b", `"a b"`},
		{"k=v", `"k=v"`},
		{"é", "é"},
		{"line\nbreak", `"line\nbreak"`},
		{"\r\t", `"\r\t"`},
		{"\x01\x07\x08\x0b\x0c\x1f", `"\x01\x07\x08\x0b\x0c\x1f"`},
		{"\x7f", `"\x7f"`},
		{"\u009f", `"\x9f"`},
		{"bad\xffutf8", `"bad\xffutf8"`},
		{`back\slash`, `"back\\slash"`},
	} {
		if got := string(appendText(nil, tt.in)); got != tt.want {
			t.Errorf("appendText(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestLevels(t *testing.T) {
	for _, tt := range []struct {
		in      string
		want    slog.Level
		wantErr bool
	}{
		{"DEBUG", slog.LevelDebug, false},
		{" info ", slog.LevelInfo, false},
		{"Warning", slog.LevelWarn, false},
		{"error", slog.LevelError, false},
		{"CRITICAL", LevelCritical, false},
		{"WARN", 0, true},
		{"", 0, true},
	} {
		got, err := ParseLevel(tt.in)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
	for _, tt := range []struct {
		l    slog.Level
		want string
	}{
		{slog.LevelDebug - 4, "DEBUG"}, {slog.LevelDebug, "DEBUG"}, {slog.LevelInfo, "INFO"},
		{slog.LevelInfo + 2, "INFO"}, {slog.LevelWarn, "WARNING"}, {slog.LevelError, "ERROR"},
		{LevelCritical, "CRITICAL"}, {LevelCritical + 4, "CRITICAL"},
	} {
		if got := LevelName(tt.l); got != tt.want {
			t.Errorf("LevelName(%d) = %q, want %q", tt.l, got, tt.want)
		}
	}

	// The threshold drops records below it, in both formats.
	for _, format := range []string{"json", "text"} {
		var buf bytes.Buffer
		l := NewLogger(&buf, format, "ERROR")
		l.Warn("dropped")
		l.Error("kept")
		l.Log(context.Background(), LevelCritical, "kept too")
		if got := strings.Count(buf.String(), "\n"); got != 2 || strings.Contains(buf.String(), "dropped") {
			t.Errorf("%s at ERROR wrote %d records:\n%s", format, got, buf.String())
		}
	}
	// Unknown names fall back to json and INFO.
	var buf bytes.Buffer
	l := NewLogger(&buf, "yaml", "LOUD")
	l.Debug("no")
	l.Info("yes")
	if !strings.HasPrefix(buf.String(), `{"time":`) || strings.Contains(buf.String(), `"no"`) {
		t.Errorf("fallback logger wrote %q", buf.String())
	}
}

func TestTruncation(t *testing.T) {
	exact := strings.Repeat("é", MaxLogString)
	long := exact + "é"
	for _, tt := range []struct {
		name string
		in   string
		want string
	}{
		{"short", "abc", "abc"},
		{"exactly the limit", exact, exact},
		{"one over counts code points, not bytes", long, exact + TruncatedSuffix},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := truncateLog(tt.in); got != tt.want {
				t.Errorf("truncateLog(len %d) has %d bytes, want %d", len(tt.in), len(got), len(tt.want))
			}
			// Through both handlers, for string attributes, errors and msg.
			var jb, tb bytes.Buffer
			for _, l := range []*slog.Logger{NewLogger(&jb, "json", "INFO"), NewLogger(&tb, "text", "INFO")} {
				logAt(t, l, slog.LevelInfo, tt.in, "error", errors.New(tt.in), "subject", tt.in)
			}
			var rec map[string]any
			if err := json.Unmarshal(jb.Bytes(), &rec); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"msg", "error", "subject"} {
				if rec[k] != tt.want {
					t.Errorf("json %s has %d bytes, want %d", k, len(fmt.Sprint(rec[k])), len(tt.want))
				}
			}
			if got := strings.Count(tb.String(), tt.want); got != 3 {
				t.Errorf("text record holds the expected value %d times, want 3", got)
			}
			if tt.in != tt.want && strings.Contains(tb.String()+jb.String(), long) {
				t.Error("untruncated value in the output")
			}
		})
	}
}

// fakeClock is a manually advanced clock for the rate limiter.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type logLine struct {
	Level      string `json:"level"`
	Msg        string `json:"msg"`
	ErrorType  string `json:"error_type"`
	Suppressed int    `json:"suppressed"`
	Component  string `json:"component"`
}

func parseLines(t *testing.T, s string) []logLine {
	t.Helper()
	var out []logLine
	for _, ln := range strings.Split(strings.TrimSpace(s), "\n") {
		if ln == "" {
			continue
		}
		var l logLine
		if err := json.Unmarshal([]byte(ln), &l); err != nil {
			t.Fatalf("bad log line %q: %v", ln, err)
		}
		out = append(out, l)
	}
	return out
}

func TestRateLimit(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	var buf bytes.Buffer
	root := newLogger(&buf, "json", "DEBUG", clock.now)
	runner := root.With("component", "runner")
	sinkLog := root.With("component", "sink", "error_type", "Timeout")

	const tmp = "temporary failure; batch will be redelivered"
	step := func(d time.Duration, f func()) { clock.advance(d); f() }

	runner.Warn(tmp, "error_type", "Timeout", "count", 1)                   // t=0 emitted
	step(time.Second, func() { runner.Warn(tmp, "error_type", "Timeout") }) // suppressed 1
	step(time.Second, func() { sinkLog.Warn(tmp) })                         // same key via With: suppressed 2
	step(0, func() { runner.Warn(tmp, "error_type", "ConnectionError") })   // other key: emitted
	step(0, func() { runner.Info("ready") })                                // INFO: never limited
	step(0, func() { runner.Info("ready") })
	step(0, func() { runner.Error("dlq publish failed") })                                    // ERROR, no error_type: emitted
	step(time.Second, func() { runner.Error("dlq publish failed") })                          // suppressed
	step(7*time.Second-time.Nanosecond, func() { runner.Warn(tmp, "error_type", "Timeout") }) // t=10s-1ns: suppressed 3
	step(time.Nanosecond, func() { runner.Warn(tmp, "error_type", "Timeout") })               // t=10s: emitted, suppressed=3
	step(time.Second, func() { runner.Warn(tmp, "error_type", "Timeout") })                   // new window: suppressed
	step(10*time.Second, func() { runner.Error("dlq publish failed") })                       // emitted, suppressed=1
	step(10*time.Second, func() { runner.Warn(tmp, "error_type", "Timeout") })                // emitted, suppressed=1
	step(10*time.Second, func() { runner.Warn(tmp, "error_type", "Timeout") })                // emitted, nothing suppressed

	want := []logLine{
		{"WARNING", tmp, "Timeout", 0, "runner"},
		{"WARNING", tmp, "ConnectionError", 0, "runner"},
		{"INFO", "ready", "", 0, "runner"},
		{"INFO", "ready", "", 0, "runner"},
		{"ERROR", "dlq publish failed", "", 0, "runner"},
		{"WARNING", tmp, "Timeout", 3, "runner"},
		{"ERROR", "dlq publish failed", "", 1, "runner"},
		{"WARNING", tmp, "Timeout", 1, "runner"},
		{"WARNING", tmp, "Timeout", 0, "runner"},
	}
	if diff := cmp.Diff(want, parseLines(t, buf.String())); diff != "" {
		t.Errorf("rate-limited records mismatch (-want +got):\n%s", diff)
	}
}

func TestRateLimitText(t *testing.T) {
	clock := &fakeClock{t: time.Unix(0, 0)}
	var buf bytes.Buffer
	l := newLogger(&buf, "text", "INFO", clock.now)
	l.Warn("nats disconnected")
	l.Warn("nats disconnected")
	clock.advance(10 * time.Second)
	l.Warn("nats disconnected")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[1], `msg="nats disconnected" suppressed=1`) {
		t.Errorf("text rate limiting wrote:\n%s", buf.String())
	}
}

func TestLimiterBoundsKeys(t *testing.T) {
	clock := &fakeClock{t: time.Unix(0, 0)}
	l := &limiter{now: clock.now, window: logRateWindow}
	for i := range maxLimiterKeys {
		l.admit(fmt.Sprint(i))
	}
	clock.advance(logRateWindow)
	l.admit("new")
	if got := len(l.entries); got != 1 {
		t.Errorf("limiter holds %d keys after expiry and a new key, want 1", got)
	}
}

type maskedSecret string

func (maskedSecret) LogValue() slog.Value { return slog.StringValue("********") }

func TestLogValuerIsResolved(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		var buf bytes.Buffer
		l := NewLogger(&buf, format, "INFO")
		l.Info("starting", "dlq", maskedSecret("hunter2"), slog.Group("g", "k", maskedSecret("hunter2")))
		logtest.AssertLogSafe(t, buf.String(), "hunter2")
		if !strings.Contains(buf.String(), "********") {
			t.Errorf("%s: mask missing: %s", format, buf.String())
		}
	}
}

// recordingTB captures failures of the assertion helpers under test.
type recordingTB struct {
	testing.TB
	errors []string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func TestAssertLogSafe(t *testing.T) {
	for _, tt := range []struct {
		name    string
		out     string
		secrets []string
		fails   int
	}{
		{"clean", `{"msg":"ok"}`, []string{"s3cr3t"}, 0},
		{"raw", `{"msg":"dsn postgres://u:s3cr3t@h"}`, []string{"s3cr3t"}, 1},
		{"json escaped", `{"error":"payload \"quoted\"\n"}`, []string{"payload \"quoted\"\n"}, 1},
		{"text escaped", `msg="a\x00b"`, []string{"a\x00b"}, 1},
		{"two of three", "A B", []string{"A", "B", "C"}, 2},
		{"empty secret ignored", "anything", []string{""}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recordingTB{TB: t}
			logtest.AssertLogSafe(rec, tt.out, tt.secrets...)
			if len(rec.errors) != tt.fails {
				t.Errorf("AssertLogSafe reported %d failures %q, want %d", len(rec.errors), rec.errors, tt.fails)
			}
			for _, e := range rec.errors {
				for _, s := range tt.secrets {
					if len(s) > 2 && strings.Contains(e, s) {
						t.Errorf("failure message %q reveals the secret", e)
					}
				}
			}
		})
	}
}

func TestAssertLogKeys(t *testing.T) {
	for _, tt := range []struct {
		name  string
		out   string
		fails int
	}{
		{"allowed", `{"time":"t","level":"INFO","msg":"x","component":"runner","count":1}` + "\n", 0},
		{"starting keys on starting", `{"msg":"starting","version":"1","tracing":false}`, 0},
		{"starting key elsewhere", `{"msg":"ready","version":"1"}`, 1},
		{"unknown key", `{"msg":"x","payload":"boom"}`, 1},
		{"not json", `level=INFO msg=x`, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recordingTB{TB: t}
			logtest.AssertLogKeys(rec, tt.out)
			if len(rec.errors) != tt.fails {
				t.Errorf("AssertLogKeys reported %q, want %d failures", rec.errors, tt.fails)
			}
		})
	}
}
