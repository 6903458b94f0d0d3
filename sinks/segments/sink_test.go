package segments

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"

	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sink/sinktest"
)

func newSink(t *testing.T, c Config) *Sink {
	t.Helper()
	s, err := New(t.Context(), c, sink.Deps{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Stop(t.Context()) })
	return s
}

func testConfig(t *testing.T) Config {
	c := Default()
	c.Directory = filepath.Join(t.TempDir(), "lake")
	return c
}

func env(stream string, seq uint64) *sink.Envelope {
	return &sink.Envelope{
		Subject: "orders.new", Stream: stream, StreamSequence: seq, Data: []byte(fmt.Sprintf(`{"n":%d}`, seq)),
		Payload:    sink.PayloadPresence{Present: true, OriginalSize: 8},
		ReceivedAt: time.Date(2026, 5, 29, 10, 0, 0, 250000000, time.UTC), Pending: -1,
	}
}

func envs(stream string, from, to uint64) []*sink.Envelope {
	var out []*sink.Envelope
	for i := from; i <= to; i++ {
		out = append(out, env(stream, i))
	}
	return out
}

func mustCommit(t *testing.T, s *Sink, batch []*sink.Envelope) {
	t.Helper()
	for i, r := range s.WriteBatch(t.Context(), batch) {
		if r.Outcome != sink.Committed {
			t.Fatalf("WriteBatch result %d = %v (%v), want committed", i, r.Outcome, r.Err)
		}
	}
}

// files returns every regular file below dir, relative, sorted.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	slices.Sort(out)
	return out
}

// readKeys reads every record of every segment (final and open) below dir.
func readKeys(t *testing.T, dir string) []Key {
	t.Helper()
	var keys []Key
	for _, rel := range files(t, dir) {
		name := filepath.Base(rel)
		if !IsFinalName(name) && !IsOpenName(name) {
			continue
		}
		f, err := os.Open(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		ext := strings.TrimSuffix(name[strings.Index(name[1:], ".")+1:], ".open")
		res, err := scan(f, compressionOfExt(ext), func(k Key) { keys = append(keys, k) })
		f.Close()
		if err != nil || res.bad != "" {
			t.Fatalf("scan %s: %v %s", rel, err, res.bad)
		}
	}
	return keys
}

func TestConformance(t *testing.T) {
	c := testConfig(t)
	sinktest.Run(t, sinktest.Harness{
		Open: func(t *testing.T) sink.Sink {
			s, err := New(t.Context(), c, sink.Deps{})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			return s
		},
		ReadBack: func(t *testing.T) []sinktest.Stored {
			var out []sinktest.Stored
			for _, k := range readKeys(t, c.Directory) {
				out = append(out, sinktest.Stored{Stream: k.Stream, Sequence: k.Sequence})
			}
			return out
		},
	})
}

func TestPartitionAndNames(t *testing.T) {
	c := testConfig(t)
	c.Partition = "src={stream}/dt={yyyy}-{mm}-{dd}/hour={hh}"
	prefix := "lake/raw"
	c.Prefix = &prefix
	s := newSink(t, c)
	mustCommit(t, s, []*sink.Envelope{env("ORDERS", 42), env("ORDERS", 7), env("ORDERS", 100)})
	if err := s.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := files(t, c.Directory)
	if len(got) != 1 {
		t.Fatalf("files = %v, want one segment", got)
	}
	dir, name := filepath.Split(got[0])
	if want := "lake/raw/src=ORDERS/dt=2026-05-29/hour=10/"; dir != want {
		t.Errorf("segment directory = %q, want %q", dir, want)
	}
	if !strings.HasPrefix(name, "00000000000000000007-00000000000000000100-") || !IsFinalName(name) {
		t.Errorf("segment name = %q, want first 7, last 100 and the final-name pattern", name)
	}
	st, _ := os.Stat(filepath.Join(c.Directory, got[0]))
	if st.Mode().Perm() != 0o600 {
		t.Errorf("segment mode = %v, want 0600", st.Mode().Perm())
	}
}

func TestRolling(t *testing.T) {
	t.Run("max_records splits a batch", func(t *testing.T) {
		c := testConfig(t)
		n := 4
		c.MaxRecords = &n
		s := newSink(t, c)
		mustCommit(t, s, envs("S", 1, 10))
		s.Flush(t.Context())
		var names []string
		for _, f := range files(t, c.Directory) {
			names = append(names, filepath.Base(f)[:41])
		}
		slices.Sort(names)
		want := []string{
			"00000000000000000001-00000000000000000004",
			"00000000000000000005-00000000000000000008",
			"00000000000000000009-00000000000000000010",
		}
		if diff := cmp.Diff(want, names); diff != "" {
			t.Errorf("segments (-want +got):\n%s", diff)
		}
	})
	t.Run("max_bytes closes before an append", func(t *testing.T) {
		c := testConfig(t)
		c.MaxBytes = 1 << 20
		s := newSink(t, c)
		big := func(seq uint64) *sink.Envelope {
			e := env("S", seq)
			e.Data = []byte(`"` + strings.Repeat("x", 400<<10) + `"`)
			return e
		}
		for seq := uint64(1); seq <= 5; seq++ {
			mustCommit(t, s, []*sink.Envelope{big(seq)})
		}
		s.Flush(t.Context())
		got := files(t, c.Directory)
		if len(got) != 3 { // 2 + 2 + 1 records of ~400 KiB under 1 MiB
			t.Errorf("segments = %v, want 3", got)
		}
		for _, f := range got {
			st, _ := os.Stat(filepath.Join(c.Directory, f))
			if st.Size() > c.MaxBytes {
				t.Errorf("%s is %d bytes, more than max_bytes", f, st.Size())
			}
		}
	})
	t.Run("max_open_segments closes the oldest", func(t *testing.T) {
		c := testConfig(t)
		c.Partition = "{subject}"
		c.MaxOpenSegments = 2
		s := newSink(t, c)
		for i, subj := range []string{"a", "b", "c"} {
			e := env("S", uint64(i+1))
			e.Subject = subj
			mustCommit(t, s, []*sink.Envelope{e})
		}
		var final []string
		for _, f := range files(t, c.Directory) {
			if IsFinalName(filepath.Base(f)) {
				final = append(final, filepath.Dir(f))
			}
		}
		if diff := cmp.Diff([]string{"a"}, final); diff != "" {
			t.Errorf("closed segments by partition (-want +got):\n%s", diff)
		}
	})
	t.Run("max_age closes without traffic", func(t *testing.T) {
		c := testConfig(t)
		c.MaxAgeMS = 1000
		s := newSink(t, c)
		mustCommit(t, s, envs("S", 1, 3))
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := files(t, c.Directory)
			if len(got) == 1 && IsFinalName(filepath.Base(got[0])) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("files = %v; want one final segment after max_age_ms", got)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

func TestCompressionRoundTrip(t *testing.T) {
	for _, comp := range []string{"gzip", "zstd"} {
		t.Run(comp, func(t *testing.T) {
			c := testConfig(t)
			c.Compression = &comp
			s := newSink(t, c)
			mustCommit(t, s, envs("S", 1, 5))
			mustCommit(t, s, envs("S", 6, 9))
			s.Flush(t.Context())
			got := files(t, c.Directory)
			if len(got) != 1 || !strings.HasSuffix(got[0], map[string]string{"gzip": ".jsonl.gz", "zstd": ".jsonl.zst"}[comp]) {
				t.Fatalf("files = %v", got)
			}
			// An independent decoder sees every line of both appends.
			raw, _ := os.ReadFile(filepath.Join(c.Directory, got[0]))
			var plain []byte
			if comp == "gzip" {
				zr, err := gzip.NewReader(bytes.NewReader(raw))
				if err != nil {
					t.Fatal(err)
				}
				plain, err = readAll(zr)
				if err != nil {
					t.Fatal(err)
				}
			} else {
				d, _ := zstd.NewReader(nil)
				var err error
				if plain, err = d.DecodeAll(raw, nil); err != nil {
					t.Fatal(err)
				}
			}
			if n := bytes.Count(plain, []byte("\n")); n != 9 {
				t.Errorf("decoded %d lines, want 9", n)
			}
		})
	}
}

func readAll(r interface{ Read([]byte) (int, error) }) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(r)
	return b.Bytes(), err
}

func TestPermanentWithoutStream(t *testing.T) {
	s := newSink(t, testConfig(t))
	e := env("S", 1)
	e.Stream, e.StreamSequence = "", 0
	res := s.WriteBatch(t.Context(), []*sink.Envelope{e, env("S", 2)})
	if res[0].Outcome != sink.Permanent || res[0].ErrorType != sink.PermanentSinkError || res[1].Outcome != sink.Committed {
		t.Errorf("results = %v, %v; want permanent PermanentSinkError, committed", res[0], res[1])
	}
}

func TestDestinationWhenReadOnly(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root ignores directory permissions")
	}
	c := testConfig(t)
	s := newSink(t, c)
	os.Chmod(c.Directory, 0o500)
	t.Cleanup(func() { os.Chmod(c.Directory, 0o750) })
	res := s.WriteBatch(t.Context(), envs("S", 1, 2))
	if res[0].Outcome != sink.Destination {
		t.Errorf("result = %v (%v), want destination", res[0].Outcome, res[0].Err)
	}
	if err := s.Healthcheck(t.Context()); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("Healthcheck = %v, want permission denied", err)
	}
}
