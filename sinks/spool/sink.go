package spool

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/spoolfile"
	"github.com/nats-sinks/nats-sink/sink"
)

var (
	_ sink.Sink          = (*Sink)(nil)
	_ sink.HealthChecker = (*Sink)(nil)
)

// Limit errors: a full spool refuses the message as a Destination failure,
// so it is retried with back-off, never dead-lettered, and the runner
// pauses fetching until Healthcheck passes again.
var (
	ErrRecordLimit = errors.New("spool sink record limit has been reached")
	ErrByteLimit   = errors.New("spool sink byte limit has been reached")
	errUsage       = errors.New("failed to inspect spool usage")
	errEscapes     = errors.New("spool sink destination resolved outside the configured directory")
)

// Sink writes one spool file per message. Concurrent WriteBatch calls are
// serialised behind one lock: admission against the limits and placement
// must see one consistent usage.
type Sink struct {
	st  *store
	enc spoolfile.Encoder
	now func() time.Time

	mu          sync.Mutex
	records     int   // spool files, as last counted plus what this process placed
	bytes       int64 // their total size
	lastRefused int64 // size of the last record refused for bytes; 0 = none

	gRecords, gBytes sink.Gauge
	rejections       sink.Counter

	// syncDirHook and syncDataHook, when set by a test, replace the
	// directory fsync and the data sync of a batch's temp files.
	syncDirHook  func() error
	syncDataHook func() error

	stopOnce sync.Once
	stopErr  error
}

// Open starts the spool sink: Validate, then the start rules (directory
// checked or created with mode 0700, record key resolved through
// deps.LookupEnv, stale temp files removed, usage measured).
func (c Config) Open(ctx context.Context, deps sink.Deps) (sink.Sink, error) {
	s, err := New(ctx, c, deps)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// New is Open returning the concrete type.
func New(ctx context.Context, c Config, deps sink.Deps) (*Sink, error) {
	st, err := start(ctx, c, deps)
	if err != nil {
		return nil, err
	}
	s := &Sink{
		st:  st,
		enc: spoolfile.Encoder{PayloadMode: record.PayloadMode(c.PayloadMode), IncludeMetadata: c.IncludeMetadata, Pretty: c.Pretty, Seal: st.seal},
		now: time.Now,
	}
	m := deps.Meter()
	var errs [3]error
	s.gRecords, errs[0] = m.Gauge("spool_records", "Spool files in the spool sink's directory.")
	s.gBytes, errs[1] = m.Gauge("spool_bytes", "Total size of the spool files in the spool sink's directory.")
	s.rejections, errs[2] = m.Counter("spool_full_rejections_total", "Messages the spool sink refused because the spool was full.")
	if err := errors.Join(errs[:]...); err != nil {
		st.dir.Close()
		return nil, fmt.Errorf("spool sink metrics: %w", err)
	}
	if s.records, s.bytes, err = st.dir.Usage(); err != nil {
		st.dir.Close()
		return nil, classify(fmt.Errorf("spool sink: %w: %w", errUsage, err))
	}
	s.report()
	return s, nil
}

// Type returns "spool".
func (s *Sink) Type() string { return "spool" }

// Directory returns the resolved absolute spool directory.
func (s *Sink) Directory() string { return s.st.dir.Path() }

// entry is one message on its way into the spool.
type entry struct {
	i    int
	file spoolfile.File
	tmp  *spoolfile.Temp
	dup  bool // its file exists: Duplicate once the syncs succeed
	done bool // linked by this batch
}

// WriteBatch spools each envelope in order and returns one result per
// envelope. Per message: core key and file name; an existing file is a
// Duplicate (skip_existing) or Permanent (fail); the record is built and
// admitted against the limits; its temp file is written. Then the batch's
// temp files are synced, linked in order and the directory synced once, so
// no message is reported before its file and directory entry are durable. A
// Temporary or Destination failure ends the batch: later messages are
// NotAttempted, earlier ones are still committed.
func (s *Sink) WriteBatch(ctx context.Context, batch []*sink.Envelope) []sink.Result {
	results := make([]sink.Result, len(batch))
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.report()

	var entries []*entry
	stop := func(i int, err error) {
		results[i] = sink.Failed(err)
		for j := i + 1; j < len(batch); j++ {
			results[j] = sink.Result{Outcome: sink.NotAttempted}
		}
		for k, en := range entries {
			if en.i >= i {
				for _, later := range entries[k:] {
					if later.tmp != nil {
						s.st.dir.Discard(later.tmp)
					}
				}
				entries = entries[:k]
				return
			}
		}
	}
	defer func() {
		for _, en := range entries {
			if en.tmp != nil {
				s.st.dir.Discard(en.tmp)
			}
		}
	}()

	admitted, admittedBytes := 0, int64(0)
	for i, e := range batch {
		if err := ctx.Err(); err != nil {
			stop(i, fmt.Errorf("spool sink: %w", err))
			break
		}
		_, name, err := spoolfile.Key(e)
		if err != nil {
			results[i] = sink.Failed(err)
			continue
		}
		if !component(name) {
			stop(i, sink.AsDestination(errEscapes))
			break
		}
		exists, err := s.st.dir.Exists(name)
		if err != nil {
			stop(i, s.fileError(name, err))
			break
		}
		if exists {
			if s.st.cfg.DuplicatePolicy == "fail" {
				results[i] = sink.Failed(sink.AsPermanent(fmt.Errorf("spool sink destination already exists: %s", name)))
				continue
			}
			entries = append(entries, &entry{i: i, file: spoolfile.File{Name: name}, dup: true})
			continue
		}
		f, err := s.enc.Encode(e, s.now())
		if err != nil {
			results[i] = sink.Failed(err)
			continue
		}
		if err := s.admit(admitted, admittedBytes, int64(len(f.Data))); err != nil {
			stop(i, err)
			break
		}
		admitted++
		admittedBytes += int64(len(f.Data))
		tmp, err := s.st.dir.CreateTemp(f.Name, f.Data)
		if err != nil {
			stop(i, s.fileError(f.Name, err))
			break
		}
		entries = append(entries, &entry{i: i, file: f, tmp: tmp})
	}

	if s.st.cfg.Fsync {
		s.syncData(entries, stop)
	}
	if err := ctx.Err(); err != nil && len(entries) > 0 {
		stop(entries[0].i, fmt.Errorf("spool sink: %w", err))
	}
	for _, en := range entries {
		if en.dup {
			continue
		}
		err := s.st.dir.Link(en.tmp, en.file.Name)
		s.st.dir.Discard(en.tmp)
		en.tmp = nil
		switch {
		case err == nil:
			en.done = true
			s.records++
			s.bytes += int64(len(en.file.Data))
			continue
		case errors.Is(err, fs.ErrExist): // placed meanwhile by another process
			if s.st.cfg.DuplicatePolicy == "fail" {
				results[en.i] = sink.Failed(sink.AsPermanent(fmt.Errorf("spool sink destination already exists: %s", en.file.Name)))
				en.i = -1
				continue
			}
			en.dup = true
			continue
		}
		stop(en.i, s.fileError(en.file.Name, err))
		break
	}
	var dirErr error
	if s.st.cfg.Fsync && len(entries) > 0 {
		dirErr = s.syncDir()
	}
	for _, en := range entries {
		switch {
		case en.i < 0:
		case dirErr != nil:
			results[en.i] = sink.Failed(fmt.Errorf("spool sink failed to sync the directory of %s: %w", en.file.Name, classify(dirErr)))
		case en.dup:
			results[en.i] = sink.Result{Outcome: sink.Duplicate}
		case en.done:
			results[en.i] = sink.Ok
		}
	}
	return results
}

// syncData makes every entry's data durable before anything is linked: the
// batch's temp files together, and each duplicate's existing file (another
// delivery linked it; that writer may have died before its syncs). A
// failure stops the batch at the first entry it may concern.
func (s *Sink) syncData(entries []*entry, stop func(int, error)) {
	var temps []*spoolfile.Temp
	for _, en := range entries {
		if en.tmp != nil {
			temps = append(temps, en.tmp)
		}
	}
	sync := func() error { return s.st.dir.SyncTemps(temps) }
	if s.syncDataHook != nil && len(temps) > 0 {
		sync = s.syncDataHook
	}
	if err := sync(); err != nil {
		// A failed syncfs may concern any file of the filesystem: nothing
		// of this batch is known durable.
		stop(entries[0].i, s.fileError("of this batch", err))
		return
	}
	for _, en := range entries {
		if en.dup {
			if err := s.st.dir.SyncFile(en.file.Name); err != nil {
				stop(en.i, s.fileError(en.file.Name, err))
				return
			}
		}
	}
}

// admit checks that one more record of size n fits, with admitted records
// of admittedBytes of this batch not yet placed. Before refusing it counts
// the directory again: a replay in another process deletes files.
func (s *Sink) admit(admitted int, admittedBytes, n int64) error {
	fits := func() error {
		switch {
		case s.records+admitted+1 > s.st.cfg.MaxRecords:
			return ErrRecordLimit
		case s.bytes+admittedBytes+n > s.st.cfg.MaxBytes:
			return ErrByteLimit
		}
		return nil
	}
	if fits() == nil {
		s.lastRefused = 0
		return nil
	}
	records, bytes, err := s.st.dir.Usage()
	if err != nil {
		return fmt.Errorf("spool sink: %w: %w", errUsage, err)
	}
	s.records, s.bytes = records, bytes
	err = fits()
	if err == nil {
		s.lastRefused = 0
		return nil
	}
	if errors.Is(err, ErrByteLimit) {
		s.lastRefused = n
	}
	s.rejections.Add(1)
	return sink.AsDestination(err)
}

// component reports whether name is one path component inside the
// directory. File names are hex digests, so this cannot fail; checking
// keeps a future change from writing elsewhere.
func component(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

// fileError words an OS error on one spool file and classifies it.
func (s *Sink) fileError(name string, err error) error {
	return classify(fmt.Errorf("spool sink failed to write destination file %s: %w", name, err))
}

// classify marks lost access (EACCES, EPERM, EROFS) and a name held by a
// non-file as Destination failures that hit every message; other OS
// errors (ENOSPC, EIO, …) stay Temporary.
func classify(err error) error {
	switch {
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM), errors.Is(err, unix.EROFS),
		errors.Is(err, spoolfile.ErrNotRegular):
		return sink.AsDestination(err)
	}
	return err
}

func (s *Sink) syncDir() error {
	if s.syncDirHook != nil {
		return s.syncDirHook()
	}
	return s.st.dir.Sync()
}

// report sets the usage gauges.
func (s *Sink) report() {
	s.gRecords.Set(float64(s.records))
	s.gBytes.Set(float64(s.bytes))
}

// Healthcheck creates, fsyncs and deletes a temp file in the directory
// (and fsyncs the directory when fsync is on), then counts the spool: it
// fails with the limit text while the spool is full, so a runner paused by
// a full spool resumes only when a replay made room.
func (s *Sink) Healthcheck(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.st.dir.Probe(s.st.cfg.Fsync); err != nil {
		return classify(fmt.Errorf("spool sink healthcheck in %s: %w", s.st.dir.Path(), err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	records, bytes, err := s.st.dir.Usage()
	if err != nil {
		return fmt.Errorf("spool sink healthcheck: %w: %w", errUsage, err)
	}
	s.records, s.bytes = records, bytes
	s.report()
	switch {
	case records+1 > s.st.cfg.MaxRecords:
		return sink.AsDestination(ErrRecordLimit)
	case bytes+max(s.lastRefused, 1) > s.st.cfg.MaxBytes:
		return sink.AsDestination(ErrByteLimit)
	}
	return nil
}

// Usage is what a spool holds against its limits.
type Usage struct {
	Records, MaxRecords int
	Bytes, MaxBytes     int64
}

// Usage counts the spool files in the directory now (a replay in another
// process deletes them) and returns them with the configured limits.
func (s *Sink) Usage() (Usage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	records, bytes, err := s.st.dir.Usage()
	if err != nil {
		return Usage{}, fmt.Errorf("spool sink: %w: %w", errUsage, err)
	}
	s.records, s.bytes = records, bytes
	s.report()
	return Usage{Records: records, MaxRecords: s.st.cfg.MaxRecords, Bytes: bytes, MaxBytes: s.st.cfg.MaxBytes}, nil
}

// Stop closes the directory; later calls do nothing.
func (s *Sink) Stop(context.Context) error {
	s.stopOnce.Do(func() { s.stopErr = s.st.dir.Close() })
	return s.stopErr
}
