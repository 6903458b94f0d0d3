package spool

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
)

// testKey is the golden key (bytes 0x00..0x1f).
const testKey = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

// config returns an encrypted spool configuration in a fresh directory.
func config(t *testing.T) Config {
	t.Helper()
	c := Default()
	c.Directory = filepath.Join(t.TempDir(), "spool")
	key := secret.Value(testKey)
	c.Encryption.Enabled = true
	c.Encryption.KeyID = "edge-spool-2026-05"
	c.Encryption.KeyB64 = &key
	return c
}

// plain returns an unencrypted configuration (allow_unencrypted).
func plain(t *testing.T) Config {
	c := config(t)
	c.Encryption = Default().Encryption
	c.AllowUnencrypted = true
	return c
}

func open(t *testing.T, c Config, deps ...sink.Deps) *Sink {
	t.Helper()
	var d sink.Deps
	if len(deps) > 0 {
		d = deps[0]
	}
	s, err := New(t.Context(), c, d)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Stop(t.Context()) })
	return s
}

// env is message seq of stream S on subject t.x with body {"n":seq} and an
// optional priority.
func env(seq uint64, priority string) *sink.Envelope {
	e := shapestest.Envelope("S", seq)
	e.Priority = priority
	return e
}

// noKey is a headers-only message without stream metadata or message id:
// it has no core idempotency key.
func noKey() *sink.Envelope {
	return intake.Build(intake.Message{Subject: "t.x", Header: map[string][]string{"Nats-Msg-Size": {"10"}}}, nil, time.Now())
}

// spoolFiles returns the *.spool.json names in dir.
func spoolFiles(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		if strings.HasSuffix(de.Name(), ".spool.json") {
			out = append(out, de.Name())
		}
	}
	return out
}

// assertNoTemps fails when a temp file is left in dir.
func assertNoTemps(t *testing.T, dir string) {
	t.Helper()
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		if strings.HasSuffix(de.Name(), ".tmp") {
			t.Errorf("temp file left behind: %s", de.Name())
		}
	}
}

func outcomes(rs []sink.Result) []sink.Outcome {
	out := make([]sink.Outcome, len(rs))
	for i, r := range rs {
		out[i] = r.Outcome
	}
	return out
}

// metrics records what a sink registers and sets.
type metrics struct {
	mu       sync.Mutex
	gauges   map[string]float64
	counters map[string]int
}

func newMetrics() *metrics {
	return &metrics{gauges: map[string]float64{}, counters: map[string]int{}}
}

type gauge struct {
	m    *metrics
	name string
}

func (g gauge) Set(v float64) { g.m.mu.Lock(); g.m.gauges[g.name] = v; g.m.mu.Unlock() }

type counter struct {
	m    *metrics
	name string
}

func (c counter) Add(n int)                { c.m.mu.Lock(); c.m.counters[c.name] += n; c.m.mu.Unlock() }
func (c counter) With(string) sink.Counter { return c }

func (m *metrics) Counter(name, _ string) (sink.Counter, error) { return counter{m, name}, nil }
func (m *metrics) Gauge(name, _ string) (sink.Gauge, error)     { return gauge{m, name}, nil }
func (m *metrics) Histogram(string, string, []float64) (sink.Histogram, error) {
	return nil, errors.New("unused")
}

func (m *metrics) gauge(name string) float64 { m.mu.Lock(); defer m.mu.Unlock(); return m.gauges[name] }
func (m *metrics) count(name string) int     { m.mu.Lock(); defer m.mu.Unlock(); return m.counters[name] }

// wrapperOf reads a spool file's wrapper keys.
func wrapperOf(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

func contextWithCancel(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithCancel(t.Context())
}

func mustKey(t *testing.T) []byte {
	t.Helper()
	k, err := base64.StdEncoding.DecodeString(testKey)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// mountTmpfs mounts a small tmpfs for the test, or skips when it cannot.
func mountTmpfs(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s)", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	return mnt
}

func remount(t *testing.T, mnt, mode string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,"+mode, mnt).CombinedOutput(); err != nil {
		t.Fatalf("remount %s: %v: %s", mode, err, out)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

func sortedStrings(s []string) bool { return slices.IsSorted(s) }
