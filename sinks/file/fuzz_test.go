package file

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/sink"
)

// FuzzPath checks that no subject, stream or message id yields a path
// outside the root, and that the file lands exactly where build said.
func FuzzPath(f *testing.F) {
	for _, s := range []string{"orders.created", "../..", "a/../../b", "/etc/passwd", "", ".", "..", "\x00", "Ünïcode/x y",
		strings.Repeat("a", 130), "..hidden.", `..\..\x`} {
		f.Add(s, "ORDERS", s, uint8(0))
		f.Add("x", s, "id", uint8(0))
		f.Add(s, "S", s, uint8(1))
		f.Add(s, "S", s, uint8(2))
	}
	c := Default()
	c.Directory = filepath.Join(f.TempDir(), "root")
	c.Fsync = false
	s, err := New(f.Context(), c, sink.Deps{})
	if err != nil {
		f.Fatal(err)
	}
	strategies := []string{"stream_sequence", "message_id", "payload_sha256"}
	seq := uint64(0)
	f.Fuzz(func(t *testing.T, subject, stream, id string, strategy uint8) {
		seq++
		s.cfg.FilenameStrategy = strategies[int(strategy)%len(strategies)]
		e := env(subject, seq, id, "{}")
		e.Stream = stream
		en := s.build(e)
		if en.final() {
			if en.res.Outcome != sink.Permanent {
				t.Fatalf("build(%q, %q, %q) = %v %v", subject, stream, id, en.res.Outcome, en.res.Err)
			}
			return
		}
		path := filepath.Join(s.root, en.subdir, en.name)
		if filepath.Dir(path) != filepath.Join(s.root, en.subdir) || !within(s.root, filepath.Dir(path)) ||
			filepath.Dir(filepath.Dir(path)) != s.root {
			t.Fatalf("build(%q, %q, %q) = %s, outside %s", subject, stream, id, path, s.root)
		}
		rs := s.WriteBatch(t.Context(), []*sink.Envelope{e})
		if !rs[0].Outcome.Acked() {
			t.Fatalf("WriteBatch(%q, %q, %q) = %v %v", subject, stream, id, rs[0].Outcome, rs[0].Err)
		}
		if st, err := os.Lstat(path); err != nil || !st.Mode().IsRegular() {
			t.Fatalf("file for (%q, %q, %q) not at %s: %v", subject, stream, id, path, err)
		}
	})
}
