package spool

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/spoolfile"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sinks/file"
)

// target is a replay target that records what it was given and fails as
// told.
type target struct {
	mu      sync.Mutex
	got     []uint64 // stream sequences in write order, committed ones only
	calls   int
	failAt  map[uint64]sink.Result // by stream sequence
	batches [][]uint64
}

func (tg *target) Type() string { return "test" }

func (tg *target) WriteBatch(_ context.Context, b []*sink.Envelope) []sink.Result {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	tg.calls++
	rs := make([]sink.Result, len(b))
	var seqs []uint64
	for i, e := range b {
		seqs = append(seqs, e.StreamSequence)
		if r, ok := tg.failAt[e.StreamSequence]; ok {
			rs[i] = r
			continue
		}
		rs[i] = sink.Ok
		tg.got = append(tg.got, e.StreamSequence)
	}
	tg.batches = append(tg.batches, seqs)
	return rs
}

func (tg *target) Stop(context.Context) error { return nil }

// spoolAll writes envs through a sink of c, spooled one µs apart, in order.
func spoolAll(t *testing.T, c Config, envs ...*sink.Envelope) {
	t.Helper()
	s := open(t, c)
	at := time.Date(2026, 5, 29, 10, 0, 0, 0, time.UTC)
	s.now = func() time.Time { at = at.Add(time.Millisecond); return at }
	for _, e := range envs {
		if rs := s.WriteBatch(t.Context(), []*sink.Envelope{e}); !rs[0].Outcome.Acked() {
			t.Fatalf("spool %d: %+v", e.StreamSequence, rs[0])
		}
	}
	s.Stop(t.Context())
}

func replay(t *testing.T, c Config, tg sink.Sink, o ReplayOptions) (Summary, error) {
	t.Helper()
	r, err := c.StartReplay(t.Context(), sink.Deps{}, o)
	if err != nil {
		return Summary{}, err
	}
	defer r.Close()
	return r.Run(t.Context(), tg)
}

func TestReplayOrder(t *testing.T) {
	envs := []*sink.Envelope{
		env(1, "low"), env(2, "flash"), env(3, ""), env(4, "HIGH"), env(5, "flash"), env(6, "routine"), env(7, "deferred"),
	}
	for _, tt := range []struct {
		ordering string
		want     []uint64
	}{
		{"priority", []uint64{2, 5, 4, 6, 3, 1, 7}},
		{"fifo", []uint64{1, 2, 3, 4, 5, 6, 7}},
	} {
		t.Run(tt.ordering, func(t *testing.T) {
			c := config(t)
			c.DrainOrdering = tt.ordering
			spoolAll(t, c, envs...)
			tg := &target{}
			sum, err := replay(t, c, tg, ReplayOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, tg.got); d != "" {
				t.Errorf("replay order (-want +got):\n%s", d)
			}
			if want := (Summary{Scanned: 7, Replayed: 7, Deleted: 7}); sum != want {
				t.Errorf("summary = %+v, want %+v", sum, want)
			}
			if files := spoolFiles(t, c.Directory); len(files) != 0 {
				t.Errorf("spool not empty after replay: %q", files)
			}
		})
	}
}

// TestReplayTieBreak: equal rank and time drain in file-name order.
func TestReplayTieBreak(t *testing.T) {
	c := config(t)
	s := open(t, c)
	s.now = func() time.Time { return goldenSpooled }
	var envs []*sink.Envelope
	for i := range 5 {
		envs = append(envs, env(uint64(i+1), "urgent"))
	}
	s.WriteBatch(t.Context(), envs)
	tg := &target{}
	if _, err := replay(t, c, tg, ReplayOptions{}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, seq := range tg.got {
		names = append(names, spoolfile.Name("stream-sequence:S:"+itoa(seq)))
	}
	if !sortedStrings(names) {
		t.Errorf("ties replayed out of name order: %q", names)
	}
}

// TestReplayStopsAndResumes: a target failure stops the run with the file
// untouched; nothing after it is sent; a rerun resumes in the same order
// and ends with an empty spool and every record delivered.
func TestReplayStopsAndResumes(t *testing.T) {
	c := config(t)
	var envs []*sink.Envelope
	for i := range 5 {
		envs = append(envs, env(uint64(i+1), ""))
	}
	spoolAll(t, c, envs...)
	tg := &target{failAt: map[uint64]sink.Result{3: {Outcome: sink.Temporary, Err: errors.New("connection refused")}}}
	sum, err := replay(t, c, tg, ReplayOptions{})
	fe, ok := errors.AsType[*FileError](err)
	name3 := spoolfile.Name("stream-sequence:S:3")
	if !ok || fe.File != filepath.Join(c.Directory, name3) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("replay error = %v, want a FileError for %s", err, name3)
	}
	if want := (Summary{Scanned: 5, Replayed: 2, Deleted: 2, Failed: 1}); sum != want {
		t.Errorf("summary = %+v, want %+v", sum, want)
	}
	if d := cmp.Diff([]uint64{1, 2}, tg.got); d != "" {
		t.Errorf("delivered (-want +got):\n%s", d)
	}
	if files := spoolFiles(t, c.Directory); len(files) != 3 {
		t.Errorf("%d files left, want 3 (the failed one and the two after it)", len(files))
	}
	delete(tg.failAt, 3)
	sum, err = replay(t, c, tg, ReplayOptions{})
	if err != nil || sum != (Summary{Scanned: 3, Replayed: 3, Deleted: 3}) {
		t.Errorf("rerun = %+v, %v", sum, err)
	}
	if d := cmp.Diff([]uint64{1, 2, 3, 4, 5}, tg.got); d != "" {
		t.Errorf("delivered after the rerun (-want +got):\n%s", d)
	}
	if files := spoolFiles(t, c.Directory); len(files) != 0 {
		t.Errorf("spool not empty: %q", files)
	}
}

// TestReplayForeignAndTruncatedFiles: a file that is not a wrapper stops
// the replay before anything is sent or deleted, naming the file.
func TestReplayForeignAndTruncatedFiles(t *testing.T) {
	for _, tt := range []struct {
		name string
		bad  func(t *testing.T, dir string) string
		want string
	}{
		{"foreign", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "notes.spool.json")
			os.WriteFile(p, []byte("hello\n"), 0o600)
			return p
		}, "spool file notes.spool.json is not a valid wrapper"},
		{"truncated", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, spoolFiles(t, dir)[0])
			data, _ := os.ReadFile(p)
			os.WriteFile(p, data[:len(data)/2], 0o600)
			return p
		}, "is not a valid wrapper"},
		{"not an object", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "0000.spool.json")
			os.WriteFile(p, []byte("[]\n"), 0o600)
			return p
		}, "spool file 0000.spool.json wrapper must be a JSON object"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := config(t)
			spoolAll(t, c, env(1, ""), env(2, ""), env(3, ""))
			bad := tt.bad(t, c.Directory)
			before := spoolFiles(t, c.Directory)
			tg := &target{}
			_, err := replay(t, c, tg, ReplayOptions{})
			fe, ok := errors.AsType[*FileError](err)
			if !ok || fe.File != bad || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("replay error = %v, want a FileError for %s containing %q", err, bad, tt.want)
			}
			if tg.calls != 0 {
				t.Errorf("target written %d times, want 0", tg.calls)
			}
			if d := cmp.Diff(before, spoolFiles(t, c.Directory)); d != "" {
				t.Errorf("files changed (-before +after):\n%s", d)
			}
			if n, err := c.DryRun(t.Context(), ReplayOptions{}); err == nil {
				t.Errorf("DryRun = %d, nil; want the same failure", n)
			}
		})
	}
}

// TestReplayUndecryptable: a record the key cannot open stops the run at
// that record; earlier ones are delivered and deleted.
func TestReplayUndecryptable(t *testing.T) {
	c := config(t)
	spoolAll(t, c, env(1, "flash"), env(3, "low"))
	other := c
	other.Encryption.KeyID = "edge-spool-2026-04"
	spoolAll(t, other, env(2, ""))
	tg := &target{}
	sum, err := replay(t, c, tg, ReplayOptions{})
	if err == nil || !strings.Contains(err.Error(), "encrypted payload key_id does not match configuration") {
		t.Errorf("replay error = %v, want the key_id mismatch", err)
	}
	if want := (Summary{Scanned: 3, Replayed: 1, Deleted: 1, Failed: 1}); sum != want || len(tg.got) != 1 {
		t.Errorf("summary = %+v, delivered %v; want %+v and [1]", sum, tg.got, want)
	}
	// --key for the old key id (the same material here) lets it through.
	sum, err = replay(t, c, tg, ReplayOptions{Keys: map[string][]byte{"edge-spool-2026-04": mustKey(t)}})
	if err != nil || sum.Replayed != 2 {
		t.Errorf("replay with the extra key = %+v, %v", sum, err)
	}
}

func TestReplayQuarantine(t *testing.T) {
	c := config(t)
	spoolAll(t, c, env(1, ""), env(2, ""), env(3, ""))
	tg := &target{failAt: map[uint64]sink.Result{2: {Outcome: sink.Permanent, ErrorType: sink.ValidationError, Err: errors.New("rejected")}}}
	var quarantined []string
	sum, err := replay(t, c, tg, ReplayOptions{Quarantine: true, OnQuarantine: func(f string, r sink.Result) {
		quarantined = append(quarantined, filepath.Base(f)+" "+r.ErrorType)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if want := (Summary{Scanned: 3, Replayed: 2, Deleted: 2, Failed: 1}); sum != want {
		t.Errorf("summary = %+v, want %+v", sum, want)
	}
	name2 := spoolfile.Name("stream-sequence:S:2")
	if d := cmp.Diff([]string{name2 + " ValidationError"}, quarantined); d != "" {
		t.Errorf("quarantined (-want +got):\n%s", d)
	}
	if _, err := os.Stat(filepath.Join(c.Directory, "quarantine", name2)); err != nil {
		t.Errorf("quarantined file: %v", err)
	}
	if files := spoolFiles(t, c.Directory); len(files) != 0 {
		t.Errorf("spool not empty: %q", files)
	}
	// Without --quarantine a permanent rejection stops the run.
	spoolAll(t, c, env(2, ""))
	if _, err := replay(t, c, tg, ReplayOptions{}); err == nil || !strings.Contains(err.Error(), "rejected") {
		t.Errorf("replay = %v, want the rejection", err)
	}
	if n := len(spoolFiles(t, c.Directory)); n != 1 {
		t.Errorf("%d files, want the rejected one kept", n)
	}
}

func TestReplayLock(t *testing.T) {
	c := config(t)
	spoolAll(t, c, env(1, ""))
	r, err := c.StartReplay(t.Context(), sink.Deps{}, ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartReplay(t.Context(), sink.Deps{}, ReplayOptions{}); !errors.Is(err, ErrLocked) {
		t.Errorf("second StartReplay = %v, want %v", err, ErrLocked)
	}
	r.Close()
	if _, err := replay(t, c, &target{}, ReplayOptions{}); err != nil {
		t.Errorf("replay after the lock was released: %v", err)
	}
	// The sink keeps writing while a replay holds the lock.
	r, err = c.StartReplay(t.Context(), sink.Deps{}, ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	spoolAll(t, c, env(2, ""))
	if r.Scanned() != 0 {
		t.Errorf("a file spooled after planning was planned")
	}
}

func TestReplayKeepFiles(t *testing.T) {
	c := config(t)
	c.DeleteAfterReplay = false
	spoolAll(t, c, env(1, ""), env(2, ""))
	for range 2 {
		sum, err := replay(t, c, &target{}, ReplayOptions{})
		if err != nil || sum != (Summary{Scanned: 2, Replayed: 2}) {
			t.Errorf("replay = %+v, %v; want 2 replayed, none deleted", sum, err)
		}
	}
}

func TestReplayMaxRecordsAndBatches(t *testing.T) {
	c := config(t)
	var envs []*sink.Envelope
	for i := range 7 {
		envs = append(envs, env(uint64(i+1), ""))
	}
	spoolAll(t, c, envs...)
	tg := &target{}
	sum, err := replay(t, c, tg, ReplayOptions{MaxRecords: 5, BatchSize: 2})
	if err != nil || sum != (Summary{Scanned: 5, Replayed: 5, Deleted: 5}) {
		t.Errorf("replay = %+v, %v", sum, err)
	}
	if d := cmp.Diff([][]uint64{{1, 2}, {3, 4}, {5}}, tg.batches); d != "" {
		t.Errorf("batches (-want +got):\n%s", d)
	}
}

// TestReplaySharedPermanent: a Shared permanent result is retried record by
// record, so only the record the target really rejects stops the run.
func TestReplaySharedPermanent(t *testing.T) {
	c := config(t)
	spoolAll(t, c, env(1, ""), env(2, ""), env(3, ""))
	tg := &sharedTarget{bad: 2}
	sum, err := replay(t, c, tg, ReplayOptions{BatchSize: 3})
	if want := (Summary{Scanned: 3, Replayed: 2, Deleted: 2, Failed: 1}); sum != want || err == nil {
		t.Errorf("replay = %+v, %v; want %+v and a failure", sum, err, want)
	}
	if n := len(spoolFiles(t, c.Directory)); n != 1 {
		t.Errorf("%d files left, want only the rejected one", n)
	}
}

// sharedTarget fails a whole batch with a Shared permanent result when it
// holds record bad, like a transactional sink.
type sharedTarget struct{ bad uint64 }

func (st *sharedTarget) Type() string               { return "shared" }
func (st *sharedTarget) Stop(context.Context) error { return nil }
func (st *sharedTarget) WriteBatch(_ context.Context, b []*sink.Envelope) []sink.Result {
	rs := make([]sink.Result, len(b))
	for _, e := range b {
		if e.StreamSequence == st.bad {
			for i := range rs {
				rs[i] = sink.Result{Outcome: sink.Permanent, Shared: true, ErrorType: sink.PermanentSinkError, Err: errors.New("constraint")}
			}
			return rs
		}
	}
	for i := range rs {
		rs[i] = sink.Ok
	}
	return rs
}

func TestDryRun(t *testing.T) {
	c := config(t)
	if n, err := c.DryRun(t.Context(), ReplayOptions{}); n != 0 || err != nil {
		t.Errorf("DryRun on a missing directory = %d, %v; want 0, nil", n, err)
	}
	if _, err := os.Stat(c.Directory); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("DryRun created the directory")
	}
	spoolAll(t, c, env(1, ""), env(2, ""), env(3, ""))
	noKey := c
	name := "UNSET_SPOOL_KEY"
	noKey.Encryption.KeyB64, noKey.Encryption.KeyB64Env = nil, &name
	if n, err := noKey.DryRun(t.Context(), ReplayOptions{MaxRecords: 2}); n != 2 || err != nil {
		t.Errorf("DryRun = %d, %v; want 2 (decrypting nothing)", n, err)
	}
	if _, err := os.Stat(filepath.Join(c.Directory, spoolfile.LockName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("DryRun created the lock file")
	}
	if n := len(spoolFiles(t, c.Directory)); n != 3 {
		t.Errorf("DryRun changed the spool: %d files", n)
	}
}

// TestReplayUpstreamIntoFileSink: an upstream-written spool file (V2,
// encrypted) replays into the file sink as the same record a direct write
// makes: same path, same idempotency, so a second replay is a duplicate.
func TestReplayUpstreamIntoFileSink(t *testing.T) {
	c := config(t)
	os.MkdirAll(c.Directory, 0o700)
	data, err := os.ReadFile("../../internal/spoolfile/testdata/v2.spool.json")
	if err != nil {
		t.Fatal(err)
	}
	name := "622260921346156f43572a73c75ac7553c1c48059298561a5aa37a0011360e5b.spool.json"
	os.WriteFile(filepath.Join(c.Directory, name), data, 0o600)
	fc := file.Default()
	fc.Directory = filepath.Join(t.TempDir(), "out")
	fs, err := file.New(t.Context(), fc, sink.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Stop(t.Context())
	sum, err := replay(t, c, fs, ReplayOptions{})
	if err != nil || sum != (Summary{Scanned: 1, Replayed: 1, Deleted: 1}) {
		t.Fatalf("replay = %+v, %v", sum, err)
	}
	rec := wrapperOf(t, filepath.Join(fc.Directory, "orders.created", "ORDERS-00000000000000000042.json"))
	if rec["message_id"] != "O-1001" || rec["consumer"] != "orders-spool" || rec["priority"] != "high" || rec["labels"] != "billing;eu" {
		t.Errorf("file record = %v", rec)
	}
	payload, _ := rec["payload"].(map[string]any)
	if payload["note"] != "café" {
		t.Errorf("payload = %v", payload)
	}
	os.WriteFile(filepath.Join(c.Directory, name), data, 0o600)
	if rs := fs.WriteBatch(t.Context(), []*sink.Envelope{mustRead(t, c, name)}); rs[0].Outcome != sink.Duplicate {
		t.Errorf("second write of the replayed record = %v, want Duplicate", rs[0].Outcome)
	}
}

func mustRead(t *testing.T, c Config, name string) *sink.Envelope {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(c.Directory, name))
	if err != nil {
		t.Fatal(err)
	}
	w, err := spoolfile.ParseWrapper(name, data)
	if err != nil {
		t.Fatal(err)
	}
	st, err := start(t.Context(), c, sink.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.dir.Close()
	e, err := w.Envelope(st.keys(nil), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return e
}
