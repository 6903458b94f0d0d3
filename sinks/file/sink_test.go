package file

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/sink"
)

// parse reads a record file and returns it as a jsonx tree.
func parse(t *testing.T, b []byte) map[string]any {
	t.Helper()
	if !bytes.HasSuffix(b, []byte("\n")) {
		t.Fatalf("record %q does not end in a newline", b)
	}
	v, err := jsonx.Parse(b[:len(b)-1])
	if err != nil {
		t.Fatalf("parse record: %v", err)
	}
	return v.(map[string]any)
}

func TestWriteStrategies(t *testing.T) {
	e := env("orders.created", 42, "O-1001", `{"order_id":"O-1001"}`)
	for _, tt := range []struct {
		strategy string
		want     string
	}{
		{"stream_sequence", "orders.created/ORDERS-00000000000000000042.json"},
		{"message_id", "orders.created/O-1001-6b2d27e6813f395f.json"},
		{"payload_sha256", "orders.created/orders.created-5d0e9f0cbd2bbd4fe5e2c6b47bb6f5aa31a37d8c8f1e8f4d4c3f0c1e0a1b6e60.json"},
	} {
		t.Run(tt.strategy, func(t *testing.T) {
			c := config(t)
			c.FilenameStrategy = tt.strategy
			s := open(t, c)
			rs := s.WriteBatch(t.Context(), []*sink.Envelope{e})
			if diff := cmp.Diff([]sink.Outcome{sink.Committed}, outcomes(rs)); diff != "" {
				t.Fatalf("outcomes (-want +got):\n%s\n%v", diff, rs[0].Err)
			}
			got := files(t, c.Directory)
			if len(got) != 1 || !strings.HasPrefix(got[0], "orders.created/") {
				t.Fatalf("files = %v, want one under orders.created/", got)
			}
			if tt.strategy != "payload_sha256" && got[0] != tt.want {
				t.Errorf("file = %s, want %s", got[0], tt.want)
			}
			rec := parse(t, read(t, filepath.Join(c.Directory, got[0])))
			for k, want := range map[string]any{
				"schema": "nats_sinks.file.message.v1", "subject": "orders.created", "stream": "ORDERS",
				"stream_sequence": jsonx.Integer("42"), "message_id": "O-1001",
				"payload": map[string]any{"order_id": "O-1001"},
			} {
				if diff := cmp.Diff(want, rec[k]); diff != "" {
					t.Errorf("record[%q] (-want +got):\n%s", k, diff)
				}
			}
			st, err := os.Stat(filepath.Join(c.Directory, got[0]))
			if err != nil || st.Mode().Perm() != 0o600 {
				t.Errorf("mode = %v (%v), want 0600", st.Mode().Perm(), err)
			}
		})
	}
}

// The payload_sha256 name must be the sha256 of the delivered body.
func TestPayloadSHA256Name(t *testing.T) {
	c := config(t)
	c.FilenameStrategy = "payload_sha256"
	c.PartitionBySubject = false
	s := open(t, c)
	s.WriteBatch(t.Context(), []*sink.Envelope{env("a.b", 1, "", "hello world")})
	want := []string{"a.b-b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9.json"}
	if diff := cmp.Diff(want, files(t, c.Directory)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}

func TestLayoutOptions(t *testing.T) {
	e := env("orders.created", 7, "", `{"b":1,"a":[1,2]}`)
	for _, tt := range []struct {
		name  string
		set   func(*Config)
		file  string
		check func(t *testing.T, b []byte)
	}{
		{"compact with metadata", func(*Config) {}, "orders.created/ORDERS-00000000000000000007.json",
			func(t *testing.T, b []byte) {
				if bytes.Count(b, []byte("\n")) != 1 || bytes.Contains(b, []byte(": ")) {
					t.Errorf("record is not compact: %s", b)
				}
				if _, ok := parse(t, b)["metadata"]; !ok {
					t.Error("metadata missing")
				}
			}},
		{"pretty", func(c *Config) { c.Pretty = true }, "orders.created/ORDERS-00000000000000000007.json",
			func(t *testing.T, b []byte) {
				if !bytes.HasPrefix(b, []byte("{\n  \"classification\": null,\n")) || !bytes.HasSuffix(b, []byte("\n}\n")) {
					t.Errorf("record is not pretty: %s", b)
				}
				parse(t, b)
			}},
		{"include_metadata false", func(c *Config) { c.IncludeMetadata = false }, "orders.created/ORDERS-00000000000000000007.json",
			func(t *testing.T, b []byte) {
				if _, ok := parse(t, b)["metadata"]; ok {
					t.Error("metadata present")
				}
			}},
		{"partition_by_subject false", func(c *Config) { c.PartitionBySubject = false }, "ORDERS-00000000000000000007.json",
			func(t *testing.T, b []byte) { parse(t, b) }},
		{"explicit extension", func(c *Config) { c.Extension, c.ExtensionSet = ".ndjson", true }, "orders.created/ORDERS-00000000000000000007.ndjson",
			func(t *testing.T, b []byte) { parse(t, b) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := config(t)
			tt.set(&c)
			s := open(t, c)
			if rs := s.WriteBatch(t.Context(), []*sink.Envelope{e}); rs[0].Outcome != sink.Committed {
				t.Fatalf("WriteBatch = %+v", rs)
			}
			if diff := cmp.Diff([]string{tt.file}, files(t, c.Directory)); diff != "" {
				t.Fatalf("files (-want +got):\n%s", diff)
			}
			tt.check(t, read(t, filepath.Join(c.Directory, tt.file)))
		})
	}
}

func TestGzip(t *testing.T) {
	// Two records per batch: the second reuses the pooled gzip writer.
	batch := []*sink.Envelope{env("orders.created", 3, "", `{"note":"café"}`), env("orders.created", 4, "", "plain text")}
	names := []string{"ORDERS-00000000000000000003.json", "ORDERS-00000000000000000004.json"}
	plainCfg := config(t)
	plain := open(t, plainCfg)
	plain.WriteBatch(t.Context(), batch)

	for _, level := range []int{1, 6, 9} {
		t.Run(fmt.Sprint("level ", level), func(t *testing.T) {
			c := config(t)
			c.Compression, c.CompressionLevel = "gzip", level
			s := open(t, c)
			if diff := cmp.Diff([]sink.Outcome{sink.Committed, sink.Committed}, outcomes(s.WriteBatch(t.Context(), batch))); diff != "" {
				t.Fatalf("outcomes (-want +got):\n%s", diff)
			}
			for _, name := range names {
				want := read(t, filepath.Join(plainCfg.Directory, "orders.created", name))
				raw := read(t, filepath.Join(c.Directory, "orders.created", name+".gz"))
				zr, err := gzip.NewReader(bytes.NewReader(raw))
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(zr)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(string(want), string(got)); diff != "" {
					t.Errorf("decompressed %s (-want +got):\n%s", name, diff)
				}
				h := zr.Header
				if !h.ModTime.IsZero() || h.Name != "" || h.OS != 3 || raw[4]|raw[5]|raw[6]|raw[7] != 0 || raw[3] != 0 {
					t.Errorf("%s gzip header = mtime %v name %q os %d flags %#x, want mtime 0, no name, os 3", name, h.ModTime, h.Name, h.OS, raw[3])
				}
			}
		})
	}
}

func TestDuplicatePolicies(t *testing.T) {
	variants(t, func(t *testing.T, tune func(*Sink)) {
		const name = "orders.created/ORDERS-00000000000000000005.json"
		for _, tt := range []struct {
			policy      string
			want        sink.Outcome
			wantErrType string
			rewritten   bool
		}{
			{"skip_existing", sink.Duplicate, "", false},
			{"overwrite", sink.Committed, "", true},
			{"fail", sink.Permanent, sink.PermanentSinkError, false},
		} {
			t.Run(tt.policy, func(t *testing.T) {
				c := config(t)
				c.DuplicatePolicy = tt.policy
				s := open(t, c)
				tune(s)
				e := env("orders.created", 5, "", `{"x":1}`)
				if rs := s.WriteBatch(t.Context(), []*sink.Envelope{e}); rs[0].Outcome != sink.Committed {
					t.Fatalf("first write = %+v", rs)
				}
				first := read(t, filepath.Join(c.Directory, name))
				// The redelivery is built later: a rewrite has a new stored_at.
				s.now = func() time.Time { return time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC) }
				rs := s.WriteBatch(t.Context(), []*sink.Envelope{e, env("orders.created", 6, "", "{}")})
				if diff := cmp.Diff([]sink.Outcome{tt.want, sink.Committed}, outcomes(rs)); diff != "" {
					t.Fatalf("redelivery outcomes (-want +got):\n%s", diff)
				}
				if rs[0].ErrorType != tt.wantErrType {
					t.Errorf("ErrorType = %q, want %q", rs[0].ErrorType, tt.wantErrType)
				}
				if tt.policy == "fail" {
					if want := "file sink destination already exists: " + name; rs[0].Err == nil || rs[0].Err.Error() != want {
						t.Errorf("Err = %v, want %q", rs[0].Err, want)
					}
				}
				second := read(t, filepath.Join(c.Directory, name))
				if rewritten := !bytes.Equal(first, second); rewritten != tt.rewritten {
					t.Errorf("file rewritten = %v, want %v", rewritten, tt.rewritten)
				}
				if tt.rewritten && !bytes.Contains(second, []byte(`"stored_at":"2026-06-01T00:00:00+00:00"`)) {
					t.Errorf("rewritten record lacks the new stored_at: %s", second)
				}
				assertNoTemps(t, c.Directory)
			})
		}
	})
}

// Two messages with the same name in one batch behave as if written one
// after the other.
func TestSameNameInOneBatch(t *testing.T) {
	variants(t, func(t *testing.T, tune func(*Sink)) {
		c := config(t)
		c.FilenameStrategy = "message_id"
		s := open(t, c)
		tune(s)
		rs := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", 1, "m", "{}"), env("a", 2, "m", "{}")})
		if diff := cmp.Diff([]sink.Outcome{sink.Committed, sink.Duplicate}, outcomes(rs)); diff != "" {
			t.Errorf("outcomes (-want +got):\n%s", diff)
		}
		if got := files(t, c.Directory); len(got) != 1 {
			t.Errorf("files = %v, want one", got)
		}
	})
}

func TestHostileSubjects(t *testing.T) {
	variants(t, func(t *testing.T, tune func(*Sink)) {
		base := t.TempDir()
		c := Default()
		c.Directory = filepath.Join(base, "root")
		c.FilenameStrategy = "message_id"
		s := open(t, c)
		tune(s)
		subjects := []string{"../..", "a/../../b", "/etc/passwd", "..", ".", "", "Ünïcode/x y",
			strings.Repeat("z", 200), "a\x00b", "..hidden.", `C:\Windows`, "~root", "%2e%2e"}
		var batch []*sink.Envelope
		for i, subj := range subjects {
			// The message id is hostile too: it names the file.
			batch = append(batch, env(subj, uint64(i+1), subj+"/../x", "{}"))
		}
		rs := s.WriteBatch(t.Context(), batch)
		for i, r := range rs {
			if r.Outcome != sink.Committed {
				t.Errorf("subject %q: %v %v", subjects[i], r.Outcome, r.Err)
			}
		}
		all := files(t, base)
		if len(all) != len(subjects) {
			t.Errorf("%d files, want %d: %v", len(all), len(subjects), all)
		}
		for _, f := range all {
			if !strings.HasPrefix(f, "root/") || strings.Count(f, "/") != 2 {
				t.Errorf("file %s is not at root/<subject>/<name>", f)
			}
		}
	})
}

func TestSymlinkedSubjectDirectory(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	os.Mkdir(outside, 0o755)
	c := Default()
	c.Directory = filepath.Join(base, "root")
	s := open(t, c)
	inside := filepath.Join(c.Directory, "real")
	os.Mkdir(inside, 0o755)
	if err := os.Symlink(outside, filepath.Join(c.Directory, "evil")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(c.Directory, "alias")); err != nil {
		t.Fatal(err)
	}

	rs := s.WriteBatch(t.Context(), []*sink.Envelope{env("alias", 1, "", "{}"), env("evil", 2, "", "{}"), env("real", 3, "", "{}")})
	if diff := cmp.Diff([]sink.Outcome{sink.Committed, sink.Destination, sink.NotAttempted}, outcomes(rs)); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
	if got := files(t, outside); len(got) != 0 {
		t.Errorf("files written outside the root: %v", got)
	}
	if diff := cmp.Diff([]string{"ORDERS-00000000000000000001.json"}, files(t, inside)); diff != "" {
		t.Errorf("files in the symlink target inside the root (-want +got):\n%s", diff)
	}
	if !strings.Contains(rs[1].Err.Error(), "evil") {
		t.Errorf("error %q does not name the directory", rs[1].Err)
	}
}

func TestDestinationFailures(t *testing.T) {
	t.Run("file where the subject directory should be", func(t *testing.T) {
		c := config(t)
		s := open(t, c)
		os.WriteFile(filepath.Join(c.Directory, "blocked"), []byte("x"), 0o600)
		rs := s.WriteBatch(t.Context(), []*sink.Envelope{env("ok", 1, "", "{}"), env("blocked", 2, "", "{}"), env("ok", 3, "", "{}")})
		if diff := cmp.Diff([]sink.Outcome{sink.Committed, sink.Destination, sink.NotAttempted}, outcomes(rs)); diff != "" {
			t.Fatalf("outcomes (-want +got):\n%s", diff)
		}
		want := []string{"blocked", "ok/ORDERS-00000000000000000001.json"}
		if diff := cmp.Diff(want, files(t, c.Directory)); diff != "" {
			t.Errorf("files (-want +got):\n%s", diff)
		}
	})
	t.Run("directory where the file should be", func(t *testing.T) {
		c := config(t)
		s := open(t, c)
		os.MkdirAll(filepath.Join(c.Directory, "a", "ORDERS-00000000000000000001.json"), 0o755)
		rs := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", 1, "", "{}"), env("a", 2, "", "{}")})
		if diff := cmp.Diff([]sink.Outcome{sink.Destination, sink.NotAttempted}, outcomes(rs)); diff != "" {
			t.Fatalf("outcomes (-want +got):\n%s", diff)
		}
		assertNoTemps(t, c.Directory)
	})
	t.Run("unwritable directory", func(t *testing.T) {
		c := config(t)
		s := open(t, c)
		sub := filepath.Join(c.Directory, "ro")
		os.Mkdir(sub, 0o755)
		if os.Geteuid() == 0 {
			// chmod does not stop root: make the directory a read-only bind
			// mount of itself instead, which stops everyone with EROFS.
			if out, err := runMount(t, "--bind", sub, sub); err != nil {
				t.Skipf("root cannot bind-mount here (%v: %s); the file-where-directory test covers Destination as root", err, out)
			}
			t.Cleanup(func() { runMount(t, "-u", sub) })
			if out, err := runMount(t, "-o", "remount,ro,bind", sub); err != nil {
				t.Skipf("cannot remount read-only (%v: %s)", err, out)
			}
		} else {
			os.Chmod(sub, 0o500)
			t.Cleanup(func() { os.Chmod(sub, 0o755) })
		}
		rs := s.WriteBatch(t.Context(), []*sink.Envelope{env("ro", 1, "", "{}"), env("ok", 2, "", "{}")})
		if diff := cmp.Diff([]sink.Outcome{sink.Destination, sink.NotAttempted}, outcomes(rs)); diff != "" {
			t.Fatalf("outcomes (-want +got):\n%s (%v)", diff, rs[0].Err)
		}
		if got := files(t, sub); len(got) != 0 {
			t.Errorf("files in the read-only directory: %v", got)
		}
	})
}

func TestPermanentFailures(t *testing.T) {
	c := config(t)
	c.PayloadMode = "json_only"
	s := open(t, c)
	noStream := env("a", 3, "", "{}")
	noStream.Stream = ""
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{
		env("a", 1, "", "not json"),
		env("a", 2, "", `{"ok":true}`),
		noStream,
		env("a", 4, "", `[1]`),
	})
	want := []sink.Result{
		{Outcome: sink.Permanent, ErrorType: sink.SerializationError},
		{Outcome: sink.Committed},
		{Outcome: sink.Permanent, ErrorType: sink.PermanentSinkError},
		{Outcome: sink.Committed},
	}
	if diff := cmp.Diff(want, rs, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Err" }, cmp.Ignore())); diff != "" {
		t.Fatalf("results (-want +got):\n%s", diff)
	}
	for _, i := range []int{0, 2} {
		if msg := rs[i].Err.Error(); strings.Contains(msg, "not json") || !strings.Contains(msg, fmt.Sprint("stream seq ", i+1)) {
			t.Errorf("error %q: must name the sequence and not carry payload bytes", msg)
		}
	}
	if got := len(files(t, c.Directory)); got != 2 {
		t.Errorf("%d files, want 2", got)
	}

	c = config(t)
	c.FilenameStrategy = "message_id"
	s = open(t, c)
	rs = s.WriteBatch(t.Context(), []*sink.Envelope{env("a", 1, "", "{}")})
	if rs[0].Outcome != sink.Permanent || rs[0].ErrorType != sink.PermanentSinkError {
		t.Errorf("missing message id: %+v, want Permanent PermanentSinkError", rs[0])
	}
}

func TestCancellation(t *testing.T) {
	for _, tt := range []struct {
		event string
		at    int
	}{
		{"before", -1}, {"prepared", 0}, {"prepared", 2}, {"placed", -1},
	} {
		variants(t, func(t *testing.T, tune func(*Sink)) {
			t.Run(fmt.Sprint(tt.event, tt.at), func(t *testing.T) {
				c := config(t)
				s := open(t, c)
				tune(s)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				if tt.event == "before" {
					cancel()
				}
				s.testHook = func(_ context.Context, event string, i int) {
					if event == tt.event && i == tt.at {
						cancel()
					}
				}
				var batch []*sink.Envelope
				for i := range 5 {
					batch = append(batch, env(fmt.Sprint("s", i%2), uint64(i+1), "", "{}"))
				}
				rs := s.WriteBatch(ctx, batch)
				for i, r := range rs {
					if r.Outcome != sink.Temporary || !errors.Is(r.Err, context.Canceled) {
						t.Errorf("result %d = %v %v, want Temporary context.Canceled", i, r.Outcome, r.Err)
					}
				}
				assertNoTemps(t, c.Directory)
				// A redelivery completes the batch: placed files are duplicates.
				rs = s.WriteBatch(t.Context(), batch)
				for i, r := range rs {
					if !r.Outcome.Acked() {
						t.Errorf("redelivery %d = %v %v", i, r.Outcome, r.Err)
					}
				}
				if got := len(files(t, c.Directory)); got != 5 {
					t.Errorf("%d files, want 5", got)
				}
			})
		})
	}
}

func TestConcurrentBatches(t *testing.T) {
	variants(t, func(t *testing.T, tune func(*Sink)) {
		c := config(t)
		s := open(t, c)
		tune(s)
		const n = 200
		var all []*sink.Envelope
		for i := range n {
			all = append(all, env(fmt.Sprint("s", i%3), uint64(i+1), "", fmt.Sprintf(`{"i":%d}`, i)))
		}
		// Four writers, each with an overlapping window of the messages.
		var wg sync.WaitGroup
		results := make([][]sink.Result, 4)
		for w := range results {
			wg.Go(func() { results[w] = s.WriteBatch(t.Context(), all[w*n/8:w*n/8+n/2]) })
		}
		wg.Wait()
		committed := map[uint64]int{}
		for w, rs := range results {
			for i, r := range rs {
				e := all[w*n/8+i]
				switch r.Outcome {
				case sink.Committed:
					committed[e.StreamSequence]++
				case sink.Duplicate:
				default:
					t.Errorf("seq %d: %v %v", e.StreamSequence, r.Outcome, r.Err)
				}
			}
		}
		for seq, k := range committed {
			if k != 1 {
				t.Errorf("seq %d committed %d times", seq, k)
			}
		}
		got := files(t, c.Directory)
		if len(got) != len(committed) {
			t.Errorf("%d files for %d committed messages", len(got), len(committed))
		}
		assertNoTemps(t, c.Directory)
	})
}

func TestStaleTempCleanup(t *testing.T) {
	c := config(t)
	sub := filepath.Join(c.Directory, "orders")
	deep := filepath.Join(sub, "deeper")
	os.MkdirAll(deep, 0o755)
	old := time.Now().Add(-2 * time.Minute)
	for _, f := range []struct {
		path string
		old  bool
	}{
		{filepath.Join(c.Directory, ".ORDERS-1.json.0123456789abcdef.tmp"), true},
		{filepath.Join(sub, ".ORDERS-2.json.0123456789abcdef.tmp"), true},
		{filepath.Join(sub, ".nats-sinks-healthcheck.fedcba9876543210.tmp"), true},
		{filepath.Join(sub, ".ORDERS-3.json.0123456789abcdef.tmp"), false}, // young: another process's
		{filepath.Join(sub, "notes.tmp"), true},                            // not our pattern
		{filepath.Join(sub, ".x.json.0123456789ABCDEF.tmp"), true},         // not our pattern
		{filepath.Join(deep, ".ORDERS-4.json.0123456789abcdef.tmp"), true}, // not where we write
	} {
		os.WriteFile(f.path, nil, 0o600)
		if f.old {
			os.Chtimes(f.path, old, old)
		}
	}
	// The drain bound is the host's (delivery.shutdown_timeout_ms): temp
	// files older than twice it are a dead process's.
	s, err := New(t.Context(), c, sink.Deps{DrainTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	want := []string{
		"orders/.ORDERS-3.json.0123456789abcdef.tmp",
		"orders/.x.json.0123456789ABCDEF.tmp",
		"orders/deeper/.ORDERS-4.json.0123456789abcdef.tmp",
		"orders/notes.tmp",
	}
	if diff := cmp.Diff(want, files(t, c.Directory)); diff != "" {
		t.Errorf("files after start (-want +got):\n%s", diff)
	}
}

func TestHealthcheck(t *testing.T) {
	c := config(t)
	s := open(t, c)
	if err := s.Healthcheck(t.Context()); err != nil {
		t.Fatalf("Healthcheck: %v", err)
	}
	if got := files(t, c.Directory); len(got) != 0 {
		t.Errorf("Healthcheck left %v", got)
	}
	if s.Type() != "file" {
		t.Errorf("Type() = %q", s.Type())
	}
	os.RemoveAll(c.Directory)
	if err := s.Healthcheck(t.Context()); err == nil {
		t.Error("Healthcheck on a removed root = nil, want an error")
	}
	if err := s.Stop(t.Context()); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if err := s.Stop(t.Context()); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestBareLoop(t *testing.T) {
	for _, fsyncOn := range []bool{true, false} {
		dir := t.TempDir()
		if err := BareLoop(t.Context(), dir, 1203, 400, fsyncOn); err != nil {
			t.Fatalf("BareLoop: %v", err)
		}
		got := files(t, dir)
		if len(got) != 1203 {
			t.Fatalf("%d files, want 1203", len(got))
		}
		if st, err := os.Stat(filepath.Join(dir, "bare-1202")); err != nil || st.Size() != 400 {
			t.Errorf("bare-1202: %v, size %d", err, st.Size())
		}
		assertNoTemps(t, dir)
	}
}

// A failed directory sync makes exactly the messages placed in that
// directory Temporary; a failed root sync those in directories created in it.
func TestDirectorySyncFailure(t *testing.T) {
	for _, tt := range []struct {
		name   string
		failIn string // directory whose fsync fails, relative to the root ("" = root)
		pre    []string
		want   []sink.Outcome
	}{
		{"subject directory", "bad", []string{"good", "bad"},
			[]sink.Outcome{sink.Committed, sink.Temporary, sink.Committed, sink.Temporary}},
		{"root, subject directories created now", "", nil,
			[]sink.Outcome{sink.Temporary, sink.Temporary, sink.Temporary, sink.Temporary}},
		{"root, subject directories existing", "", []string{"good", "bad"},
			[]sink.Outcome{sink.Committed, sink.Committed, sink.Committed, sink.Committed}},
	} {
		variants(t, func(t *testing.T, tune func(*Sink)) {
			t.Run(tt.name, func(t *testing.T) {
				c := config(t)
				s := open(t, c)
				tune(s)
				for _, d := range tt.pre {
					os.Mkdir(filepath.Join(c.Directory, d), 0o755)
				}
				failPath := filepath.Join(s.Root(), tt.failIn)
				s.syncDirHook = func(fd int) error {
					if p, _ := os.Readlink(fmt.Sprint("/proc/self/fd/", fd)); p == failPath {
						return syscall.EIO
					}
					return nil
				}
				rs := s.WriteBatch(t.Context(), []*sink.Envelope{
					env("good", 1, "", "{}"), env("bad", 2, "", "{}"), env("good", 3, "", "{}"), env("bad", 4, "", "{}"),
				})
				if diff := cmp.Diff(tt.want, outcomes(rs)); diff != "" {
					t.Errorf("outcomes (-want +got):\n%s", diff)
				}
				for _, r := range rs {
					if r.Outcome == sink.Temporary && !errors.Is(r.Err, syscall.EIO) {
						t.Errorf("Err = %v, want EIO", r.Err)
					}
				}
				assertNoTemps(t, c.Directory)
			})
		})
	}
}

// TestTargetIsNotAFile: a directory where a record belongs is a destination
// problem under every policy — never a Duplicate (which would ACK a message
// that was not stored) and never a Permanent (which would dead-letter it).
func TestTargetIsNotAFile(t *testing.T) {
	for _, policy := range []string{"skip_existing", "fail", "overwrite"} {
		t.Run(policy, func(t *testing.T) {
			c := config(t)
			c.DuplicatePolicy = policy
			s := open(t, c)
			target := filepath.Join(c.Directory, "orders.created", "ORDERS-00000000000000000001.json")
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
			res := s.WriteBatch(t.Context(), []*sink.Envelope{env("orders.created", 1, "", `{"n":1}`)})
			if got := res[0].Outcome; got != sink.Destination {
				t.Errorf("outcome = %v (%v), want destination", got, res[0].Err)
			}
			if st, err := os.Stat(target); err != nil || !st.IsDir() {
				t.Errorf("the directory at the target was replaced: %v", err)
			}
			assertNoTemps(t, c.Directory)
		})
	}
}

// TestTempMaxAge: temp files are stale after twice the host's drain bound
// (docs/file-sink.md), at least 2 s, and after 40 s when the host gives none.
func TestTempMaxAge(t *testing.T) {
	for _, tt := range []struct{ drain, want time.Duration }{
		{0, 40 * time.Second},
		{30 * time.Second, time.Minute},
		{100 * time.Millisecond, 2 * time.Second},
	} {
		if got := tempMaxAge(tt.drain); got != tt.want {
			t.Errorf("tempMaxAge(%v) = %v, want %v", tt.drain, got, tt.want)
		}
	}
}
