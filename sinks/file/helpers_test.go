package file

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-sinks/nats-sink/sink"
)

// env returns a complete envelope for subject with stream ORDERS and the
// given sequence, message id and body.
func env(subject string, seq uint64, id, body string) *sink.Envelope {
	return &sink.Envelope{
		Subject:          subject,
		Data:             []byte(body),
		Headers:          sink.Headers{},
		Stream:           "ORDERS",
		Consumer:         "orders-file",
		StreamSequence:   seq,
		ConsumerSequence: seq,
		Pending:          -1,
		Timestamp:        time.Date(2026, 5, 29, 10, 0, 0, 123456000, time.UTC),
		DeliveryCount:    1,
		MessageID:        id,
		Labels:           []string{},
		Payload:          sink.PayloadPresence{Present: true, OriginalSize: int64(len(body))},
		ReceivedAt:       time.Date(2026, 5, 29, 10, 0, 0, 250000000, time.UTC),
	}
}

// config returns the default configuration writing into a fresh temp dir.
func config(t *testing.T) Config {
	t.Helper()
	c := Default()
	c.Directory = filepath.Join(t.TempDir(), "out")
	return c
}

// open starts a sink for c with a fixed clock and stops it when the test
// ends.
func open(t *testing.T, c Config) *Sink {
	t.Helper()
	s, err := New(t.Context(), c, sink.Deps{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	s.now = func() time.Time { return time.Date(2026, 5, 29, 10, 0, 0, 300000000, time.UTC) }
	t.Cleanup(func() { s.Stop(context.Background()) })
	return s
}

// outcomes returns the outcome of each result.
func outcomes(rs []sink.Result) []sink.Outcome {
	out := make([]sink.Outcome, len(rs))
	for i, r := range rs {
		out[i] = r.Outcome
	}
	return out
}

// files lists every non-directory below dir, relative to dir, sorted.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return out
}

// assertNoTemps fails when a temp file is left anywhere below dir.
func assertNoTemps(t *testing.T, dir string) {
	t.Helper()
	for _, f := range files(t, dir) {
		if strings.HasSuffix(f, ".tmp") {
			t.Errorf("temp file left behind: %s", f)
		}
	}
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// variants runs f for each way the sink can create and sync files, so the
// fallbacks are tested as well as the defaults.
func variants(t *testing.T, f func(t *testing.T, tune func(*Sink))) {
	for _, v := range []struct {
		name    string
		tmpfile bool
		sync    syncMode
	}{
		{"tmpfile-syncfs", true, syncWholeFS},
		{"named-syncfs", false, syncWholeFS},
		{"tmpfile-fsync", true, syncEachFile},
		{"named-fsync", false, syncEachFile},
	} {
		t.Run(v.name, func(t *testing.T) {
			f(t, func(s *Sink) {
				s.tmpfile = s.tmpfile && v.tmpfile
				s.sync = v.sync
			})
		})
	}
}
