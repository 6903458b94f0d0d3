package spool

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/internal/spoolfile"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sink/sinktest"
)

var goldenSpooled = time.Date(2026, 5, 29, 10, 0, 0, 300000000, time.UTC)

// TestGoldenFileThroughSink: the sink writes upstream's V1 and V4 files
// byte for byte, under their names, mode 0600, in a 0700 directory.
func TestGoldenFileThroughSink(t *testing.T) {
	c := plain(t)
	c.IncludeMetadata = false
	s := open(t, c)
	s.now = func() time.Time { return goldenSpooled }
	golden := shapestest.Golden()
	golden.Consumer, golden.Reply = "orders-spool", ""
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{golden})
	if rs[0].Outcome != sink.Committed {
		t.Fatalf("WriteBatch = %+v", rs)
	}
	name := "622260921346156f43572a73c75ac7553c1c48059298561a5aa37a0011360e5b.spool.json"
	got, err := os.ReadFile(filepath.Join(c.Directory, name))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../internal/spoolfile/testdata/v1.spool.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("spool file differs from upstream V1 (-want +got):\n%s", cmp.Diff(string(want), string(got)))
	}
	for path, mode := range map[string]os.FileMode{filepath.Join(c.Directory, name): 0o600, c.Directory: 0o700 | os.ModeDir} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != mode {
			t.Errorf("mode of %s = %v, want %v", path, st.Mode(), mode)
		}
	}
	assertNoTemps(t, c.Directory)
}

// TestEncryptedRecords: encrypted files hold no plaintext and decrypt with
// the configured key.
func TestEncryptedRecords(t *testing.T) {
	c := config(t)
	s := open(t, c)
	e := shapestest.Golden()
	if rs := s.WriteBatch(t.Context(), []*sink.Envelope{e}); rs[0].Outcome != sink.Committed {
		t.Fatalf("WriteBatch = %+v", rs)
	}
	files := spoolFiles(t, c.Directory)
	if len(files) != 1 {
		t.Fatalf("files = %q", files)
	}
	data, _ := os.ReadFile(filepath.Join(c.Directory, files[0]))
	for _, secret := range []string{"orders.created", "O-1001", "billing", "ORDERS", "café"} {
		if bytes.Contains(data, []byte(secret)) {
			t.Errorf("encrypted spool file contains %q", secret)
		}
	}
	w, err := spoolfile.ParseWrapper(files[0], data)
	if err != nil {
		t.Fatal(err)
	}
	got, err := w.Envelope(s.st.keys(nil), time.Now())
	if err != nil {
		t.Fatalf("Envelope: %v", err)
	}
	if got.Subject != e.Subject || string(got.Data) != string(e.Data) || got.StreamSequence != 42 {
		t.Errorf("decrypted envelope = %+v", got)
	}
	if w.Rank != 3 {
		t.Errorf("rank = %d, want 3 (high)", w.Rank)
	}
}

func TestDuplicates(t *testing.T) {
	t.Run("skip_existing", func(t *testing.T) {
		s := open(t, config(t))
		batch := []*sink.Envelope{env(1, ""), env(2, "")}
		s.WriteBatch(t.Context(), batch)
		rs := s.WriteBatch(t.Context(), append(batch, env(3, "")))
		if d := cmp.Diff([]sink.Outcome{sink.Duplicate, sink.Duplicate, sink.Committed}, outcomes(rs)); d != "" {
			t.Errorf("redelivery outcomes (-want +got):\n%s", d)
		}
		if n := len(spoolFiles(t, s.Directory())); n != 3 {
			t.Errorf("%d files, want 3", n)
		}
	})
	t.Run("fail", func(t *testing.T) {
		c := config(t)
		c.DuplicatePolicy = "fail"
		s := open(t, c)
		s.WriteBatch(t.Context(), []*sink.Envelope{env(1, "")})
		rs := s.WriteBatch(t.Context(), []*sink.Envelope{env(1, ""), env(2, "")})
		name := spoolfile.Name("stream-sequence:S:1")
		if rs[0].Outcome != sink.Permanent || rs[0].ErrorType != sink.PermanentSinkError ||
			rs[0].Err.Error() != "spool sink destination already exists: "+name {
			t.Errorf("result = %+v, want Permanent PermanentSinkError naming %s", rs[0], name)
		}
		if rs[1].Outcome != sink.Committed {
			t.Errorf("next message = %v, want Committed", rs[1].Outcome)
		}
	})
	t.Run("same message twice in a batch", func(t *testing.T) {
		s := open(t, config(t))
		rs := s.WriteBatch(t.Context(), []*sink.Envelope{env(1, ""), env(1, "")})
		if d := cmp.Diff([]sink.Outcome{sink.Committed, sink.Duplicate}, outcomes(rs)); d != "" {
			t.Errorf("outcomes (-want +got):\n%s", d)
		}
		assertNoTemps(t, s.Directory())
	})
}

func TestPermanentMessages(t *testing.T) {
	c := config(t)
	c.PayloadMode = "json_only"
	s := open(t, c)
	notJSON := env(2, "")
	notJSON.Data = []byte("plain text")
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{noKey(), notJSON, env(3, "")})
	if rs[0].Outcome != sink.Permanent || rs[0].ErrorType != sink.ValidationError {
		t.Errorf("no core key: %+v, want Permanent ValidationError", rs[0])
	}
	if rs[1].Outcome != sink.Permanent || rs[1].ErrorType != sink.SerializationError {
		t.Errorf("json_only with text: %+v, want Permanent SerializationError", rs[1])
	}
	if rs[2].Outcome != sink.Committed {
		t.Errorf("valid message after permanent ones: %v, want Committed", rs[2].Outcome)
	}
}

// TestRecordLimit: a batch larger than the free room commits what fits,
// refuses the first message that does not (Destination, no dead letter) and
// leaves the rest NotAttempted; a redelivery of a spooled message is still a
// Duplicate; the health check fails until a replay (another process) makes
// room, and the sink sees that room without a restart.
func TestRecordLimit(t *testing.T) {
	c := config(t)
	c.MaxRecords = 3
	m := newMetrics()
	s := open(t, c, sink.Deps{Metrics: m})
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{env(1, ""), env(2, ""), env(3, ""), env(4, ""), env(5, "")})
	if d := cmp.Diff([]sink.Outcome{sink.Committed, sink.Committed, sink.Committed, sink.Destination, sink.NotAttempted}, outcomes(rs)); d != "" {
		t.Fatalf("outcomes (-want +got):\n%s", d)
	}
	if !errors.Is(rs[3].Err, ErrRecordLimit) || rs[3].Err.Error() != "spool sink record limit has been reached" {
		t.Errorf("refusal = %v, want %v", rs[3].Err, ErrRecordLimit)
	}
	if rs := s.WriteBatch(t.Context(), []*sink.Envelope{env(2, "")}); rs[0].Outcome != sink.Duplicate {
		t.Errorf("redelivery while full = %v, want Duplicate", rs[0].Outcome)
	}
	if err := s.Healthcheck(t.Context()); !errors.Is(err, ErrRecordLimit) {
		t.Errorf("Healthcheck while full = %v, want %v", err, ErrRecordLimit)
	}
	if got := m.gauge("spool_records"); got != 3 {
		t.Errorf("spool_records = %v, want 3", got)
	}
	if got := m.count("spool_full_rejections_total"); got != 1 {
		t.Errorf("spool_full_rejections_total = %d, want 1", got)
	}
	// A replay elsewhere deletes two files.
	files := spoolFiles(t, c.Directory)
	for _, f := range files[:2] {
		if err := os.Remove(filepath.Join(c.Directory, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Healthcheck(t.Context()); err != nil {
		t.Errorf("Healthcheck with room = %v", err)
	}
	rs = s.WriteBatch(t.Context(), []*sink.Envelope{env(4, ""), env(5, ""), env(6, "")})
	if d := cmp.Diff([]sink.Outcome{sink.Committed, sink.Committed, sink.Destination}, outcomes(rs)); d != "" {
		t.Errorf("after the replay (-want +got):\n%s", d)
	}
	if n := len(spoolFiles(t, c.Directory)); n != 3 {
		t.Errorf("%d files, want 3 (the limit)", n)
	}
	assertNoTemps(t, c.Directory)
}

func TestByteLimit(t *testing.T) {
	c := config(t)
	c.MaxBytes = 1 << 20
	c.PayloadMode = "bytes_envelope"
	s := open(t, c)
	big := func(seq uint64) *sink.Envelope {
		e := env(seq, "")
		e.Data = bytes.Repeat([]byte("x"), 200_000) // ~530 KB wrapper: base64 twice, then encrypted
		return e
	}
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{big(1), big(2), env(3, "")})
	if d := cmp.Diff([]sink.Outcome{sink.Committed, sink.Destination, sink.NotAttempted}, outcomes(rs)); d != "" {
		t.Fatalf("outcomes (-want +got):\n%s", d)
	}
	if !errors.Is(rs[1].Err, ErrByteLimit) {
		t.Errorf("refusal = %v, want %v", rs[1].Err, ErrByteLimit)
	}
	// A small record still fits, but the health check keeps failing until
	// the refused record would fit.
	if rs := s.WriteBatch(t.Context(), []*sink.Envelope{env(3, "")}); rs[0].Outcome != sink.Committed {
		t.Errorf("small record = %v, want Committed", rs[0].Outcome)
	}
	big2 := big(2)
	if rs := s.WriteBatch(t.Context(), []*sink.Envelope{big2}); !errors.Is(rs[0].Err, ErrByteLimit) {
		t.Fatalf("big record again = %+v, want the byte limit", rs[0])
	}
	if err := s.Healthcheck(t.Context()); !errors.Is(err, ErrByteLimit) {
		t.Errorf("Healthcheck = %v, want %v", err, ErrByteLimit)
	}
	// A replay elsewhere deletes the big record.
	if err := os.Remove(filepath.Join(c.Directory, spoolfile.Name("stream-sequence:S:1"))); err != nil {
		t.Fatal(err)
	}
	if err := s.Healthcheck(t.Context()); err != nil {
		t.Errorf("Healthcheck after room was made = %v", err)
	}
}

// TestConcurrentLimit: batches written at once never overshoot the limit.
func TestConcurrentLimit(t *testing.T) {
	c := config(t)
	c.MaxRecords = 25
	c.Fsync = false
	s := open(t, c)
	var wg sync.WaitGroup
	var mu sync.Mutex
	committed := 0
	for g := range 4 {
		wg.Go(func() {
			var batch []*sink.Envelope
			for i := range 10 {
				batch = append(batch, env(uint64(g*100+i+1), ""))
			}
			for _, r := range s.WriteBatch(t.Context(), batch) {
				if r.Outcome == sink.Committed {
					mu.Lock()
					committed++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if n := len(spoolFiles(t, c.Directory)); n != 25 || committed != 25 {
		t.Errorf("%d files, %d committed; want 25 each", n, committed)
	}
}

// TestDirectorySyncFailure: nothing is reported before the directory sync.
func TestDirectorySyncFailure(t *testing.T) {
	s := open(t, config(t))
	s.syncDirHook = func() error { return errors.New("injected EIO") }
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{env(1, ""), env(2, "")})
	for i, r := range rs {
		if r.Outcome != sink.Temporary || !strings.Contains(r.Err.Error(), "injected EIO") {
			t.Errorf("result %d = %+v, want Temporary with the sync error", i, r)
		}
	}
}

// TestDataSyncFailure: a failed data sync places nothing; a duplicate
// earlier in the batch is not reported either.
func TestDataSyncFailure(t *testing.T) {
	s := open(t, config(t))
	s.WriteBatch(t.Context(), []*sink.Envelope{env(1, "")})
	s.syncDataHook = func() error { return errors.New("injected EIO") }
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{env(1, ""), env(2, ""), env(3, "")})
	if d := cmp.Diff([]sink.Outcome{sink.Temporary, sink.NotAttempted, sink.NotAttempted}, outcomes(rs)); d != "" {
		t.Errorf("outcomes (-want +got):\n%s", d)
	}
	if n := len(spoolFiles(t, s.Directory())); n != 1 {
		t.Errorf("%d files after a failed data sync, want only the earlier one", n)
	}
	assertNoTemps(t, s.Directory())
}

func TestCancelled(t *testing.T) {
	s := open(t, config(t))
	ctx, cancel := contextWithCancel(t)
	cancel()
	for i, r := range s.WriteBatch(ctx, []*sink.Envelope{env(1, ""), env(2, "")}) {
		if r.Outcome.Acked() {
			t.Errorf("result %d = %v after cancellation", i, r.Outcome)
		}
	}
	if n := len(spoolFiles(t, s.Directory())); n != 0 {
		t.Errorf("%d files written after cancellation", n)
	}
}

func TestStart(t *testing.T) {
	t.Run("not a directory", func(t *testing.T) {
		c := config(t)
		os.WriteFile(c.Directory, nil, 0o600)
		_, err := New(t.Context(), c, sink.Deps{})
		if d := cmp.Diff([]string{"directory: " + c.Directory + " exists and is not a directory"}, problems(err)); d != "" {
			t.Errorf("problems (-want +got):\n%s", d)
		}
	})
	t.Run("missing without create_directory", func(t *testing.T) {
		c := config(t)
		c.CreateDirectory = false
		_, err := New(t.Context(), c, sink.Deps{})
		if d := cmp.Diff([]string{"directory: " + c.Directory + " does not exist and sink.create_directory is false"}, problems(err)); d != "" {
			t.Errorf("problems (-want +got):\n%s", d)
		}
	})
	t.Run("parents created 0700", func(t *testing.T) {
		c := config(t)
		c.Directory = filepath.Join(c.Directory, "a", "b")
		open(t, c)
		for d := c.Directory; d != filepath.Dir(filepath.Dir(filepath.Dir(c.Directory))); d = filepath.Dir(d) {
			if st, err := os.Stat(d); err != nil || st.Mode().Perm() != 0o700 {
				t.Errorf("%s: %v %v, want mode 0700", d, st.Mode(), err)
			}
		}
	})
	t.Run("key from environment", func(t *testing.T) {
		c := config(t)
		name := "SPOOL_TEST_KEY"
		c.Encryption.KeyB64, c.Encryption.KeyB64Env = nil, &name
		_, err := New(t.Context(), c, sink.Deps{Env: func(string) (string, bool) { return "", false }})
		if d := cmp.Diff([]string{"encryption.key_b64_env: environment variable SPOOL_TEST_KEY is not set"}, problems(err)); d != "" {
			t.Errorf("unset variable (-want +got):\n%s", d)
		}
		_, err = New(t.Context(), c, sink.Deps{Env: func(string) (string, bool) { return "c2hvcnQ=", true }})
		if d := cmp.Diff([]string{"encryption.key_b64_env: must decode to exactly 32 bytes for AES-256"}, problems(err)); d != "" {
			t.Errorf("short key (-want +got):\n%s", d)
		}
		s, err := New(t.Context(), c, sink.Deps{Env: func(n string) (string, bool) { return testKey, n == name }})
		if err != nil {
			t.Fatalf("New with the key set: %v", err)
		}
		s.Stop(t.Context())
	})
	t.Run("key from file", func(t *testing.T) {
		c := config(t)
		file := filepath.Join(t.TempDir(), "key")
		os.WriteFile(file, []byte(testKey+"\n"), 0o600)
		c.Encryption.KeyB64, c.Encryption.KeyB64File = nil, &file
		s := open(t, c)
		if got := s.st.seal.Key; !bytes.Equal(got, mustKey(t)) {
			t.Errorf("key from file differs")
		}
	})
	t.Run("stale temp files", func(t *testing.T) {
		c := config(t)
		os.MkdirAll(c.Directory, 0o700)
		old := filepath.Join(c.Directory, spoolfile.TempName("abc.spool.json"))
		young := filepath.Join(c.Directory, spoolfile.TempName("def.spool.json"))
		foreign := filepath.Join(c.Directory, "notes.txt")
		for _, p := range []string{old, young, foreign} {
			os.WriteFile(p, []byte("x"), 0o600)
		}
		past := time.Now().Add(-time.Hour)
		os.Chtimes(old, past, past)
		s := open(t, c, sink.Deps{DrainTimeout: 20 * time.Second})
		for p, want := range map[string]bool{old: false, young: true, foreign: true} {
			if _, err := os.Stat(p); (err == nil) != want {
				t.Errorf("%s exists = %v, want %v", filepath.Base(p), err == nil, want)
			}
		}
		if s.records != 0 || s.bytes != 0 {
			t.Errorf("usage counts non-spool files: %d records, %d bytes", s.records, s.bytes)
		}
	})
}

func TestHealthcheck(t *testing.T) {
	s := open(t, config(t))
	if err := s.Healthcheck(t.Context()); err != nil {
		t.Fatal(err)
	}
	assertNoTemps(t, s.Directory())
}

// TestReadOnlyFilesystem: losing write access is a Destination failure.
func TestReadOnlyFilesystem(t *testing.T) {
	mnt := mountTmpfs(t)
	c := config(t)
	c.Directory = filepath.Join(mnt, "spool")
	s := open(t, c)
	remount(t, mnt, "ro")
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{env(1, ""), env(2, "")})
	if d := cmp.Diff([]sink.Outcome{sink.Destination, sink.NotAttempted}, outcomes(rs)); d != "" {
		t.Errorf("outcomes on a read-only filesystem (-want +got):\n%s", d)
	}
	if err := s.Healthcheck(t.Context()); err == nil || sink.Failed(err).Outcome != sink.Destination {
		t.Errorf("Healthcheck = %v, want a Destination failure", err)
	}
}

// TestConformance runs the sink contract suite.
func TestConformance(t *testing.T) {
	c := config(t)
	sinktest.Run(t, sinktest.Harness{
		Open: func(t *testing.T) sink.Sink { return open(t, c) },
		ReadBack: func(t *testing.T) []sinktest.Stored {
			keys := open(t, c).st.keys(nil)
			var out []sinktest.Stored
			for _, name := range spoolFiles(t, c.Directory) {
				data, err := os.ReadFile(filepath.Join(c.Directory, name))
				if err != nil {
					t.Fatal(err)
				}
				w, err := spoolfile.ParseWrapper(name, data)
				if err != nil {
					t.Fatal(err)
				}
				e, err := w.Envelope(keys, time.Now())
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, sinktest.Stored{Stream: e.Stream, Sequence: e.StreamSequence})
			}
			return out
		},
		Idempotent: true,
		Poison:     func(string, uint64) *sink.Envelope { return noKey() },
	})
}
