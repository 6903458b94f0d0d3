package segments

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nats-sinks/nats-sink/sink"
)

// openSegment writes a committed segment with records 1..n and returns the
// path of its .open file, leaving it as a killed process would.
func openSegment(t *testing.T, c Config, n int) string {
	t.Helper()
	s, err := New(t.Context(), c, sink.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		mustCommit(t, s, envs("S", uint64(i), uint64(i)))
	}
	var path string
	for _, f := range files(t, c.Directory) {
		if IsOpenName(filepath.Base(f)) {
			path = filepath.Join(c.Directory, f)
		}
	}
	// Simulate the crash: drop the descriptors without closing segments.
	s.mu.Lock()
	for _, seg := range s.open {
		unix.Close(seg.fd)
		unix.Close(seg.dirfd)
	}
	s.open = map[string]*segment{}
	s.mu.Unlock()
	s.Stop(t.Context())
	if path == "" {
		t.Fatal("no open segment")
	}
	return path
}

func appendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(b)
	f.Close()
}

func finals(t *testing.T, dir string) (final, open []string) {
	for _, f := range files(t, dir) {
		switch b := filepath.Base(f); {
		case IsFinalName(b):
			final = append(final, b)
		case IsOpenName(b):
			open = append(open, b)
		}
	}
	return final, open
}

func TestRecovery(t *testing.T) {
	zstdComp, gzipComp := "zstd", "gzip"
	for _, tt := range []struct {
		name    string
		comp    *string
		damage  func(t *testing.T, path string)
		records int
		trunc   bool
	}{
		{"clean tail is renamed", nil, func(*testing.T, string) {}, 3, false},
		{"partial last line", nil, func(t *testing.T, p string) { appendBytes(t, p, []byte(`{"stream":"S","stream_seq`)) }, 3, true},
		{"zero-filled tail", nil, func(t *testing.T, p string) { appendBytes(t, p, make([]byte, 4096)) }, 3, true},
		{"zero region then a complete line", nil, func(t *testing.T, p string) {
			appendBytes(t, p, append(make([]byte, 100), `{"stream":"S","stream_sequence":9}`+"\n"...))
		}, 3, true},
		{"partial gzip member", &gzipComp, func(t *testing.T, p string) {
			b, _ := os.ReadFile(p)
			appendBytes(t, p, b[:firstMemberLen(t, b, "gzip")-3]) // a member without its trailer
		}, 3, true},
		{"zstd frame with a bad checksum", &zstdComp, func(t *testing.T, p string) {
			b, _ := os.ReadFile(p)
			// Copy the first frame (records 1) and flip its checksum.
			d := firstMemberLen(t, b, "zstd")
			frame := append([]byte(nil), b[:d]...)
			frame[len(frame)-1] ^= 0xff
			appendBytes(t, p, frame)
		}, 3, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := testConfig(t)
			c.Compression = tt.comp
			path := openSegment(t, c, 3)
			before, _ := os.Stat(path)
			tt.damage(t, path)
			s := newSink(t, c)
			final, open := finals(t, c.Directory)
			if len(open) != 0 || len(final) != 1 {
				t.Fatalf("after recovery final %v, open %v; want one final segment", final, open)
			}
			if !strings.HasPrefix(final[0], "00000000000000000001-00000000000000000003-") {
				t.Errorf("recovered name %s, want first 1, last 3", final[0])
			}
			got := filepath.Join(filepath.Dir(path), final[0])
			st, _ := os.Stat(got)
			if st.Size() != before.Size() {
				t.Errorf("recovered size %d, want %d (cut exactly at the first invalid line)", st.Size(), before.Size())
			}
			if k := readKeys(t, c.Directory); len(k) != tt.records {
				t.Errorf("records after recovery = %d, want %d", len(k), tt.records)
			}
			_ = s
		})
	}
}

// firstMemberLen returns the length of the first gzip member or zstd frame
// in b.
func firstMemberLen(t *testing.T, b []byte, comp string) int {
	t.Helper()
	res, err := scan(strings.NewReader(string(b)), comp, nil)
	if err != nil || res.records == 0 {
		t.Fatalf("scan: %v", err)
	}
	// The segment was written one record per frame; scan one frame alone.
	for n := 1; n <= len(b); n++ {
		r, _ := scan(strings.NewReader(string(b[:n])), comp, nil)
		if r.records == 1 {
			return n
		}
	}
	t.Fatal("no frame")
	return 0
}

func TestRecoveryDeletesEmptyAndParquet(t *testing.T) {
	c := testConfig(t)
	os.MkdirAll(filepath.Join(c.Directory, "p"), 0o750)
	empty := filepath.Join(c.Directory, "p", ".0123456789abcdef.jsonl.open")
	torn := filepath.Join(c.Directory, "p", ".1123456789abcdef.jsonl.open")
	pq := filepath.Join(c.Directory, "p", ".2123456789abcdef.parquet.open")
	os.WriteFile(empty, nil, 0o600)
	os.WriteFile(torn, []byte(`{"stream":"S"`), 0o600)
	os.WriteFile(pq, []byte("PAR1"), 0o600)
	newSink(t, c)
	if got := files(t, c.Directory); len(got) != 0 {
		t.Errorf("files after recovery = %v, want none", got)
	}
}

func TestRecoverySkipsLockedSegments(t *testing.T) {
	c := testConfig(t)
	live := newSink(t, c)
	mustCommit(t, live, envs("S", 1, 2))
	// A second process starting on the same directory leaves the live
	// process's open segment alone.
	other := newSink(t, c)
	_, open := finals(t, c.Directory)
	if len(open) != 1 {
		t.Fatalf("open segments = %v, want the live one", open)
	}
	mustCommit(t, live, envs("S", 3, 3))
	live.Flush(t.Context())
	if k := readKeys(t, c.Directory); len(k) != 3 {
		t.Errorf("records = %d, want 3", len(k))
	}
	_ = other
}
