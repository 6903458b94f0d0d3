package telemetry

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestWriteFileAtomicReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "metrics.json")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	old, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()

	if err := WriteFileAtomic(path, []byte("new\n"), 0o600); err != nil {
		t.Fatalf("WriteFileAtomic: %v", err)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "new\n" {
		t.Errorf("content = %q, %v, want %q", got, err, "new\n")
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("mode = %v, want 0600", perm)
	}
	// The old file was replaced by rename, not rewritten in place: a reader
	// that opened it before still sees the complete old content.
	b, err := io.ReadAll(old)
	if err != nil || string(b) != "old" {
		t.Errorf("reader of the previous file sees %q, %v, want %q", b, err, "old")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v, want only metrics.json (no temp files left)", names)
	}
}

func TestWriteFileAtomicFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	// The target is a non-empty directory: the rename fails.
	path := filepath.Join(dir, "target")
	if err := os.MkdirAll(filepath.Join(path, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(path, []byte("data"), 0o600); err == nil {
		t.Fatal("WriteFileAtomic over a non-empty directory: got nil error")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries after a failed write, want 1 (temp file removed)", len(entries))
	}
}

// readSnapshot returns the counter and generation time of the snapshot file.
func readSnapshot(t *testing.T, path, counter string) (string, string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read snapshot: %v", err)
	}
	doc := parseSnapshot(t, b)
	return string(doc.Counters[counter]), string(doc.Generated)
}

func TestSnapshotWriterRateLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The bubble's clock starts at 2000-01-01T00:00:00Z = 946684800.
		path := filepath.Join(t.TempDir(), "metrics.json")
		m := newTestMetrics(t, nil)
		w := &SnapshotWriter{Metrics: m, Path: path}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()

		check := func(when, wantAcked, wantGen string) {
			t.Helper()
			synctest.Wait() // the writer finished whatever this instant triggers
			acked, gen := readSnapshot(t, path, "messages_acked_total")
			if acked != wantAcked || gen != wantGen {
				t.Errorf("%s: file has acked=%s generated=%s, want acked=%s generated=%s", when, acked, gen, wantAcked, wantGen)
			}
		}
		check("at start", "0", "946684800.0")

		m.MessagesAcked.Inc()
		time.Sleep(500 * time.Millisecond)
		check("0.5 s, one update", "0", "946684800.0") // not rewritten within the second

		m.MessagesAcked.Inc()
		time.Sleep(500 * time.Millisecond)
		check("1 s tick", "2", "946684801.0") // both updates, one write

		time.Sleep(3 * time.Second)
		check("idle 3 s", "2", "946684801.0") // unchanged metrics: no rewrite

		m.MessagesAcked.Inc()
		time.Sleep(1 * time.Second)
		check("tick after update", "3", "946684805.0")

		m.MessagesAcked.Inc()
		time.Sleep(200 * time.Millisecond)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		check("shutdown", "4", "946684805.2") // final write between ticks

		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm != 0o600 {
			t.Errorf("snapshot mode = %v, want 0600", perm)
		}
	})
}

func TestSnapshotWriterFailure(t *testing.T) {
	var logs bytes.Buffer
	m := newTestMetrics(t, nil)
	w := &SnapshotWriter{
		Metrics: m,
		Path:    filepath.Join(t.TempDir(), "missing-dir", "metrics.json"),
		Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
		Now:     func() time.Time { return time.Unix(1, 0) },
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := w.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "write metrics snapshot") {
		t.Errorf("Run with an unwritable path = %v, want a write error", err)
	}
	if !strings.Contains(logs.String(), "metrics snapshot write failed") {
		t.Errorf("first failed write not logged; log:\n%s", logs.String())
	}
}

func TestSnapshotWriterWriteUsesNow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.json")
	m := newTestMetrics(t, nil)
	m.MessagesDLQ.Add(9)
	w := &SnapshotWriter{Metrics: m, Path: path, Now: func() time.Time { return time.Unix(42, 500000000) }}
	if err := w.Write(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(m.Snapshot(time.Unix(42, 500000000))), string(got)); diff != "" {
		t.Errorf("file mismatch (-want +got):\n%s", diff)
	}
}
