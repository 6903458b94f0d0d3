package segments

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"golang.org/x/sys/unix"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/sink"
)

var (
	_ sink.Sink          = (*Sink)(nil)
	_ sink.HealthChecker = (*Sink)(nil)
)

// maxLocation is the longest [<prefix>/][<partition>/]<final name>, in bytes.
const maxLocation = 1024

// finalNameLen is the length of a final name without its extension:
// <20 digits>-<20 digits>-<16 hex>.
const finalNameLen = 20 + 1 + 20 + 1 + 16

// Sink appends records to segment files. It is safe for concurrent
// WriteBatch calls: appends to one segment are serialised by its lock, and
// one batch's records for a segment are written contiguously.
type Sink struct {
	cfg        Config
	tmpl       template
	prefix     string // "" or "<prefix>/"
	ext        string
	comp       string
	maxRecords int
	root       string
	rootfd     int
	log        *slog.Logger
	now        func() time.Time
	m          metrics

	zenc   *zstd.Encoder // EncodeAll is safe for concurrent use
	gzPool sync.Pool

	codec compress.Codec // held mode: the Parquet page codec
	ms    *mappedSchema  // parquet with mapped columns, else nil
	hs    heldState
	s3    *s3target // target s3, else nil
	cs    commitState

	// lineHint is the recent average record size plus slack, for sizing a
	// batch's encoding buffer.
	lineHint atomic.Int64
	// batchBufs keeps WriteBatch's batch buffers (*[]byte) for the next
	// batch: a 500-record batch is about 1 MB, and allocating it each time
	// cost its zeroing and the collector's work on every batch.
	batchBufs sync.Pool

	mu   sync.Mutex
	open map[string]*segment // by location directory (prefix and partition)

	stop     chan struct{}
	wg       sync.WaitGroup
	stopOnce sync.Once
}

// segment is one open segment file. mu serialises appends and the close;
// lock order is segment.mu before Sink.mu.
type segment struct {
	mu      sync.Mutex
	dir     string // location directory relative to the root ("" = root)
	id      string
	dirfd   int
	fd      int
	born    time.Time
	firstAt time.Time // first append
	size    int64
	records int
	first   uint64
	last    uint64
	closed  bool

	// Held mode (parquet) only.
	out     *fdWriter
	pw      pqWriter                    // gw or mw
	gw      *parquet.GenericWriter[row] // fixed columns only
	mw      *parquet.Writer             // with mapped columns
	hold    *hold
	keys    []heldKey // the messages the hold settles, for joining redeliveries
	inGroup int       // rows buffered in the current row group
}

func (g *segment) openName(ext string) string { return "." + g.id + ext + ".open" }

// New validates c, resolves and creates the root, and recovers the open
// segments left by a process that died (docs/segments.md#recovery). Invalid
// values, a root that is not a directory or is missing with
// create_directory false are a *sink.ConfigError; an I/O error during
// recovery is a plain error.
func New(ctx context.Context, c Config, deps sink.Deps) (*Sink, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	dir, err := expandHome(c.Directory)
	if err != nil {
		return nil, &sink.ConfigError{Problems: []sink.Problem{{Path: "directory", Message: err.Error()}}}
	}
	c.Directory = dir
	tmpl, _ := parseTemplate(c.Partition) // validated
	s := &Sink{
		cfg: c, tmpl: tmpl, ext: c.ext(), comp: c.compression(), maxRecords: c.maxRecords(),
		rootfd: -1, log: deps.Log(), now: time.Now, m: newMetrics(deps.Meter()),
		open: map[string]*segment{}, stop: make(chan struct{}),
	}
	s.lineHint.Store(1024)
	if c.Format == "parquet" && len(c.Mapping) > 0 {
		var p fields.Problems
		s.ms = newMappedSchema(&c, compileMapping(&c, &p)) // validated
	}
	if c.held() {
		s.codec = parquetCodec(&c)
		s.hs.by = map[heldKey]*hold{}
		s.hs.released = make(chan struct{})
	}
	if c.Prefix != nil && *c.Prefix != "" {
		s.prefix = *c.Prefix + "/"
	}
	if s.comp == "zstd" && c.Format == "jsonl" {
		s.zenc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(c.level())),
			zstd.WithEncoderCRC(true), zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("segments sink: zstd encoder: %w", err)
		}
	}
	s.cs.init()
	if c.Target == "s3" {
		if s.s3, err = newS3Target(ctx, &c, deps); err != nil {
			return nil, err
		}
		if err := s.openStaging(); err != nil {
			return nil, err
		}
		if err := s.recoverStaging(ctx); err != nil {
			unix.Close(s.rootfd)
			return nil, err
		}
		s.abortStale(ctx)
		s.wg.Go(s.ager)
		return s, nil
	}
	abs, err := filepath.Abs(c.Directory)
	if err != nil {
		return nil, fmt.Errorf("segments sink directory %s: %w", c.Directory, err)
	}
	if err := makeRoot(abs, c.CreateDirectory, c.Fsync); err != nil {
		return nil, err
	}
	if s.root, err = filepath.EvalSymlinks(abs); err != nil {
		return nil, fmt.Errorf("segments sink directory %s: %w", abs, err)
	}
	if s.rootfd, err = unix.Open(s.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		return nil, fmt.Errorf("open segments sink directory %s: %w", s.root, err)
	}
	if err := s.recoverTree(ctx); err != nil {
		unix.Close(s.rootfd)
		return nil, err
	}
	s.wg.Go(s.ager)
	return s, nil
}

// makeRoot checks the root and creates it when create allows.
func makeRoot(abs string, create, fsyncDirs bool) error {
	st, err := os.Stat(abs)
	switch {
	case err == nil && !st.IsDir():
		return &sink.ConfigError{Problems: []sink.Problem{{Path: "directory", Message: fmt.Sprintf("%s exists and is not a directory", abs)}}}
	case err == nil:
		return nil
	case errors.Is(err, unix.ENOTDIR):
		return &sink.ConfigError{Problems: []sink.Problem{{Path: "directory", Message: fmt.Sprintf("%s: a parent exists and is not a directory", abs)}}}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("segments sink directory %s: %w", abs, err)
	case !create:
		return &sink.ConfigError{Problems: []sink.Problem{{Path: "directory", Message: fmt.Sprintf("%s does not exist and create_directory is false", abs)}}}
	}
	existing := abs
	for {
		parent := filepath.Dir(existing)
		if parent == existing {
			break
		}
		existing = parent
		if _, err := os.Stat(existing); err == nil {
			break
		}
	}
	if err := os.MkdirAll(abs, dirMode); err != nil {
		return &sink.ConfigError{Problems: []sink.Problem{{Path: "directory", Message: fmt.Sprintf("cannot create %s: %v", abs, err)}}}
	}
	if !fsyncDirs {
		return nil
	}
	for d := abs; ; d = filepath.Dir(d) {
		parent := filepath.Dir(d)
		if err := syncPath(parent); err != nil {
			return fmt.Errorf("sync directory %s: %w", parent, err)
		}
		if parent == existing || parent == d {
			return nil
		}
	}
}

func syncPath(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Fsync(fd)
}

// Type returns "segments".
func (s *Sink) Type() string { return "segments" }

// Root returns the resolved absolute root directory.
func (s *Sink) Root() string { return s.root }

// item is one message's record on its way into a segment.
type item struct {
	i    int
	line []byte
	seq  uint64
	// off and end locate line in its batch's shared buffer (direct mode),
	// so that consecutive records are appended without another copy.
	off, end int
}

type group struct {
	dir   string
	items []item
}

// WriteBatch appends each envelope's record to the open segment of its
// partition and reports it Committed once an fdatasync covering it
// succeeded (with fsync false: once the write returned).
//
// In held mode (format parquet) the messages are reported Held instead:
// their hold settles when the segment is committed.
func (s *Sink) WriteBatch(ctx context.Context, batch []*sink.Envelope) []sink.Result {
	if s.cfg.held() {
		return s.writeHeld(ctx, batch)
	}
	results := make([]sink.Result, len(batch))
	var groups []*group
	index := map[string]*group{}
	storedAt := s.now()
	// Every record of the batch is encoded into one buffer, sized from the
	// records seen so far: no per-record allocation and regrowth, and a
	// group whose records are adjacent in it is written without a copy.
	buf := s.batchBuffer(len(batch) * int(s.lineHint.Load()))
	defer func() { s.keepBatchBuffer(buf) }()
	for i, e := range batch {
		var it item
		var dir string
		var err error
		buf, it, dir, err = s.buildInto(buf, e, storedAt)
		if err != nil {
			results[i] = sink.Failed(err)
			continue
		}
		it.i = i
		g := index[dir]
		if g == nil {
			g = &group{dir: dir}
			index[dir] = g
			groups = append(groups, g)
		}
		g.items = append(g.items, it)
	}
	if n := len(batch); n > 0 && len(buf) > 0 {
		s.lineHint.Store(int64(len(buf)/n + 64))
	}
	for _, g := range groups {
		for k := range g.items {
			g.items[k].line = buf[g.items[k].off:g.items[k].end]
		}
	}
	for gi, g := range groups {
		if err := ctx.Err(); err != nil {
			for _, g := range groups[gi:] {
				for _, it := range g.items {
					results[it.i] = sink.Failed(fmt.Errorf("segments sink (stream seq %d): %w", it.seq, err))
				}
			}
			break
		}
		if err := s.appendGroup(g, results); err != nil {
			for _, g := range groups[gi+1:] {
				for _, it := range g.items {
					results[it.i] = sink.Result{Outcome: sink.NotAttempted}
				}
			}
			break
		}
	}
	return results
}

// maxBatchBuffer bounds the batch buffers batchBufs keeps: one grown by
// large messages is left to the collector.
const maxBatchBuffer = 16 << 20

// batchBuffer returns an empty buffer with room for size bytes.
func (s *Sink) batchBuffer(size int) []byte {
	if bp, ok := s.batchBufs.Get().(*[]byte); ok && cap(*bp) >= size {
		return (*bp)[:0]
	}
	return make([]byte, 0, size)
}

// keepBatchBuffer returns buf to batchBufs once WriteBatch is done with it:
// the lines in it have been written, and nothing refers to them after.
func (s *Sink) keepBatchBuffer(buf []byte) {
	if cap(buf) <= maxBatchBuffer {
		buf = buf[:0]
		s.batchBufs.Put(&buf)
	}
}

// buildInto appends e's record (its line) to buf and works out its location
// directory; the item's off and end locate the line in the returned buffer.
func (s *Sink) buildInto(buf []byte, e *sink.Envelope, storedAt time.Time) ([]byte, item, string, error) {
	dir, err := s.locate(e)
	if err != nil {
		return buf, item{}, "", err
	}
	off := len(buf)
	buf, err = record.AppendFileRecord(buf, e, record.PayloadMode(s.cfg.PayloadMode), s.cfg.IncludeMetadata, storedAt)
	if err != nil {
		return buf, item{}, "", fmt.Errorf("segments sink (stream seq %d): %w", e.StreamSequence, err)
	}
	buf = append(buf, '\n')
	return buf, item{seq: e.StreamSequence, off: off, end: len(buf)}, dir, nil
}

// build encodes e's record and works out its location directory.
func (s *Sink) build(e *sink.Envelope, storedAt time.Time) (item, string, error) {
	dir, err := s.locate(e)
	if err != nil {
		return item{}, "", err
	}
	line, err := record.AppendFileRecord(make([]byte, 0, 2048+len(e.Data)), e, record.PayloadMode(s.cfg.PayloadMode), s.cfg.IncludeMetadata, storedAt)
	if err != nil {
		return item{}, "", fmt.Errorf("segments sink (stream seq %d): %w", e.StreamSequence, err)
	}
	line = append(line, '\n')
	return item{line: line, seq: e.StreamSequence}, dir, nil
}

// locate checks e's stream metadata and returns its location directory
// (prefix and partition); a location over 1024 bytes is Permanent.
func (s *Sink) locate(e *sink.Envelope) (string, error) {
	if e.Stream == "" || e.StreamSequence == 0 {
		return "", sink.AsPermanent(errors.New("segments sink requires JetStream stream metadata"))
	}
	at := e.ReceivedAt
	if s.cfg.PartitionTime == "jetstream" && !e.Timestamp.IsZero() {
		at = e.Timestamp
	}
	dir := s.prefix + s.tmpl.render(e, at)
	dir = strings.TrimSuffix(dir, "/")
	loc := len(dir) + finalNameLen + len(s.ext)
	if dir != "" {
		loc++
	}
	if loc > maxLocation {
		return "", sink.AsPermanent(fmt.Errorf("segments sink (stream seq %d): location is %d bytes, more than %d", e.StreamSequence, loc, maxLocation))
	}
	return dir, nil
}

// appendGroup appends g's records to its partition's segments, splitting at
// max_records and rolling at max_bytes. On failure every item of g not yet
// committed gets the failure's class, and the error is returned.
func (s *Sink) appendGroup(g *group, results []sink.Result) error {
	rest := g.items
	for len(rest) > 0 {
		seg, err := s.segmentFor(g.dir)
		if err != nil {
			return s.fail(rest, results, err)
		}
		take := min(s.maxRecords-seg.records, len(rest))
		chunk := rest[:take]
		data := s.encode(chunk)
		if seg.records > 0 && seg.size+int64(len(data)) > s.cfg.MaxBytes {
			s.closeLocked(seg, "bytes")
			seg.mu.Unlock()
			continue
		}
		start := time.Now()
		err = s.appendLocked(seg, data)
		if err != nil {
			seg.mu.Unlock()
			return s.fail(rest, results, err)
		}
		s.m.appendSeconds.Observe(time.Since(start).Seconds())
		if seg.records == 0 {
			seg.firstAt = s.now()
		}
		for _, it := range chunk {
			if seg.records == 0 || it.seq < seg.first {
				seg.first = it.seq
			}
			if seg.records == 0 || it.seq > seg.last {
				seg.last = it.seq
			}
			seg.records++
			results[it.i] = sink.Ok
		}
		seg.size += int64(len(data))
		if seg.records >= s.maxRecords {
			s.closeLocked(seg, "records")
		}
		seg.mu.Unlock()
		rest = rest[take:]
	}
	return nil
}

func (s *Sink) fail(items []item, results []sink.Result, err error) error {
	for _, it := range items {
		results[it.i] = sink.Failed(fmt.Errorf("segments sink (stream seq %d): %w", it.seq, err))
	}
	return err
}

// encode returns the bytes of one append: the lines, or one gzip member or
// zstd frame holding them.
func (s *Sink) encode(items []item) []byte {
	if s.comp == "none" && adjacent(items) {
		return items[0].line[:len(items[0].line)+(items[len(items)-1].end-items[0].end)]
	}
	n := 0
	for _, it := range items {
		n += len(it.line)
	}
	raw := make([]byte, 0, n)
	for _, it := range items {
		raw = append(raw, it.line...)
	}
	switch s.comp {
	case "gzip":
		var buf bytes.Buffer
		buf.Grow(n/3 + 64)
		zw, _ := s.gzPool.Get().(*gzip.Writer)
		if zw == nil {
			zw, _ = gzip.NewWriterLevel(&buf, s.cfg.level()) // level validated: 1..9
		} else {
			zw.Reset(&buf)
		}
		zw.Header.OS = 3
		_, _ = zw.Write(raw)
		_ = zw.Close()
		s.gzPool.Put(zw)
		return buf.Bytes()
	case "zstd":
		return s.zenc.EncodeAll(raw, make([]byte, 0, n/3+64))
	}
	return raw
}

// adjacent reports whether items' lines follow each other in one buffer
// (buildInto's), so that they can be written as one slice.
func adjacent(items []item) bool {
	if len(items) == 0 || items[0].end == 0 {
		return false
	}
	for k := 1; k < len(items); k++ {
		if items[k].off != items[k-1].end {
			return false
		}
	}
	return true
}

// appendLocked writes data at the end of seg and makes it durable. On
// failure the segment is cut back to its size before the append; when that
// fails too, the segment is abandoned and recovered at once.
func (s *Sink) appendLocked(seg *segment, data []byte) error {
	err := pwriteAll(seg.fd, data, seg.size)
	if err == nil && s.cfg.Fsync {
		err = datasync(seg.fd)
	}
	if err == nil {
		return nil
	}
	err = fmt.Errorf("append to segment %s: %w", s.rel(seg.dir, seg.openName(s.ext)), classify(err))
	terr := unix.Ftruncate(seg.fd, seg.size)
	if terr == nil && s.cfg.Fsync {
		terr = datasync(seg.fd)
	}
	if terr != nil {
		s.abandonLocked(seg)
	}
	return err
}

// abandonLocked gives up seg after a failed repair: its descriptor is
// closed (releasing the lock) and the file is recovered like one a dead
// process left.
func (s *Sink) abandonLocked(seg *segment) {
	seg.closed = true
	s.detach(seg)
	name := seg.openName(s.ext)
	unix.Close(seg.fd)
	if err := s.recoverFile(seg.dir, seg.dirfd, name); err != nil {
		s.log.Warn("segment recovery failed", "file", s.rel(seg.dir, name), "error", err)
	}
	unix.Close(seg.dirfd)
	s.m.closed.With("error").Add(1)
}

func (s *Sink) detach(seg *segment) {
	s.mu.Lock()
	if s.open[seg.dir] == seg {
		delete(s.open, seg.dir)
	}
	s.m.open.Set(float64(len(s.open)))
	s.mu.Unlock()
}

func (s *Sink) rel(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// segmentFor returns the open segment of dir, locked, creating it (and
// closing the oldest when max_open_segments are open) when there is none.
func (s *Sink) segmentFor(dir string) (*segment, error) {
	for {
		s.mu.Lock()
		seg := s.open[dir]
		var victim *segment
		if seg == nil {
			if len(s.open) >= s.cfg.MaxOpenSegments {
				for _, o := range s.open {
					if victim == nil || o.age() > victim.age() {
						victim = o
					}
				}
				delete(s.open, victim.dir)
			}
			var err error
			seg, err = s.create(dir)
			if err == nil {
				s.open[dir] = seg
			}
			s.m.open.Set(float64(len(s.open)))
			s.mu.Unlock()
			if victim != nil {
				s.finish(victim, "open_limit")
			}
			if err != nil {
				return nil, err
			}
		} else {
			s.mu.Unlock()
		}
		seg.mu.Lock()
		if !seg.closed {
			return seg, nil
		}
		seg.mu.Unlock()
	}
}

// age returns how long ago the segment's first append (or, while empty,
// its creation) was.
func (g *segment) age() time.Duration {
	if g.records > 0 {
		return time.Since(g.firstAt)
	}
	return time.Since(g.born)
}

// create makes a new open segment in dir: the directories it needs (each
// resolved beneath the root), the flocked .open file, and, with fsync, the
// durable directory entries.
func (s *Sink) create(dir string) (*segment, error) {
	if s.s3 != nil {
		return s.createStaged(dir)
	}
	dirfd, toSync, err := s.makeDirs(dir)
	defer func() {
		for _, fd := range toSync {
			if fd != s.rootfd && fd != dirfd {
				unix.Close(fd)
			}
		}
	}()
	if err != nil {
		return nil, err
	}
	seg := &segment{dir: dir, id: randomID(), dirfd: dirfd, born: s.now()}
	name := seg.openName(s.ext)
	fd, err := unix.Openat(dirfd, name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, fileMode)
	if err != nil {
		unix.Close(dirfd)
		return nil, fmt.Errorf("create segment %s: %w", s.rel(dir, name), classify(err))
	}
	// The lock tells start-up recovery of another process sharing the
	// directory that this segment is alive.
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		unix.Close(dirfd)
		return nil, fmt.Errorf("lock segment %s: %w", s.rel(dir, name), err)
	}
	seg.fd = fd
	if s.cfg.held() {
		s.initHeld(seg)
	}
	if s.cfg.Fsync {
		for _, d := range append([]int{dirfd}, toSync...) {
			if err := unix.Fsync(d); err != nil {
				_ = unix.Unlinkat(dirfd, name, 0)
				unix.Close(fd)
				unix.Close(dirfd)
				return nil, fmt.Errorf("sync directory of segment %s: %w", s.rel(dir, name), classify(err))
			}
		}
	}
	return seg, nil
}

// makeDirs opens dir beneath the root, creating missing levels. It returns
// the directory's descriptor and those of the parents whose entries a new
// level was added to (which must be synced).
func (s *Sink) makeDirs(dir string) (int, []int, error) {
	if dir == "" {
		fd, err := unix.Dup(s.rootfd)
		return fd, nil, err
	}
	levels := strings.Split(dir, "/")
	cur := s.rootfd
	var toSync []int
	for k, name := range levels {
		err := unix.Mkdirat(cur, name, dirMode)
		created := err == nil
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, toSync, fmt.Errorf("create directory %s: %w", strings.Join(levels[:k+1], "/"), classify(err))
		}
		next, err := openBeneath(s.rootfd, strings.Join(levels[:k+1], "/"))
		if err != nil {
			return -1, toSync, fmt.Errorf("open directory %s: %w", strings.Join(levels[:k+1], "/"), classify(err))
		}
		if created {
			toSync = append(toSync, cur)
		} else if cur != s.rootfd {
			unix.Close(cur)
		}
		cur = next
	}
	return cur, toSync, nil
}

// finish closes seg (reason for the metric) unless it is closed already.
func (s *Sink) finish(seg *segment, reason string) {
	seg.mu.Lock()
	s.closeLocked(seg, reason)
	seg.mu.Unlock()
}

// closeLocked renames seg to its final name (an empty one is deleted) and
// syncs its directory. No acknowledgement waits on it: every record in it
// is durable already. A failed rename leaves the file to start-up recovery.
func (s *Sink) closeLocked(seg *segment, reason string) {
	if s.cfg.held() {
		s.commitLocked(seg, reason)
		return
	}
	if seg.closed {
		return
	}
	seg.closed = true
	s.detach(seg)
	start := time.Now()
	name := seg.openName(s.ext)
	defer func() {
		unix.Close(seg.fd)
		unix.Close(seg.dirfd)
	}()
	if seg.records == 0 {
		_ = unix.Unlinkat(seg.dirfd, name, 0)
		return
	}
	final := finalNameOf(seg.first, seg.last, seg.id, s.ext)
	if err := renameNoReplace(seg.dirfd, name, final); err != nil {
		s.log.Warn("segment rename failed; start-up recovery finishes it", "file", s.rel(seg.dir, name), "error", err)
		s.m.closed.With("error").Add(1)
		return
	}
	if s.cfg.Fsync {
		if err := unix.Fsync(seg.dirfd); err != nil {
			s.log.Warn("segment directory sync failed", "file", s.rel(seg.dir, final), "error", err)
		}
	}
	s.m.closed.With(reason).Add(1)
	s.m.committed.Add(1)
	s.m.commitSeconds.Observe(time.Since(start).Seconds())
	s.m.segBytes.Observe(float64(seg.size))
	s.m.segRecords.Observe(float64(seg.records))
}

func finalNameOf(first, last uint64, id, ext string) string {
	return fmt.Sprintf("%020d-%020d-%s%s", first, last, id, ext)
}

// ager closes segments older than max_age_ms, checking every second (more
// often for shorter ages), also without traffic.
func (s *Sink) ager() {
	maxAge := time.Duration(s.cfg.MaxAgeMS) * time.Millisecond
	t := time.NewTicker(min(time.Second, maxAge/2))
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		var due []*segment
		for _, seg := range s.open {
			due = append(due, seg)
		}
		s.mu.Unlock()
		for _, seg := range due {
			seg.mu.Lock()
			if !seg.closed && seg.age() >= maxAge {
				s.closeLocked(seg, "age")
			}
			seg.mu.Unlock()
		}
	}
}

// Flush closes every open segment now (reason shutdown). Direct mode has
// nothing to commit: every record in a segment is durable already.
//
// In held mode it commits them, while ctx lasts: the segments it cannot
// commit by then are given up, and their holds settle Temporary.
func (s *Sink) Flush(ctx context.Context) error {
	if s.cfg.held() {
		return s.flushHeld(ctx)
	}
	s.mu.Lock()
	all := make([]*segment, 0, len(s.open))
	for _, seg := range s.open {
		all = append(all, seg)
	}
	s.mu.Unlock()
	for _, seg := range all {
		s.finish(seg, "shutdown")
	}
	return ctx.Err()
}

// Healthcheck creates, writes 64 KiB to, fsyncs and deletes
// .nats-sinks-healthcheck.<random>.tmp in the root: writing real bytes keeps
// a nearly full disk from passing.
func (s *Sink) Healthcheck(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.s3 != nil {
		if err := s.headBucket(ctx); err != nil {
			return err
		}
	}
	name := ".nats-sinks-healthcheck." + randomID() + ".tmp"
	fd, err := unix.Openat(s.rootfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, fileMode)
	if err != nil {
		return fmt.Errorf("segments sink healthcheck in %s: %w", s.root, classify(err))
	}
	err = pwriteAll(fd, make([]byte, 64<<10), 0)
	if err == nil {
		err = unix.Fsync(fd)
	}
	unix.Close(fd)
	if rmErr := unix.Unlinkat(s.rootfd, name, 0); err == nil {
		err = rmErr
	}
	if err != nil {
		return fmt.Errorf("segments sink healthcheck in %s: %w", s.root, classify(err))
	}
	return nil
}

// Stop closes every open segment and the root. The runner calls it once,
// after the last WriteBatch; later calls do nothing.
func (s *Sink) Stop(ctx context.Context) error {
	var err error
	s.stopOnce.Do(func() {
		close(s.stop)
		s.wg.Wait()
		if s.cfg.held() {
			// Held segments the runner's Flush did not commit are given
			// up: their messages were never acknowledged.
			s.abandonAll()
			s.cs.stop()
		} else {
			_ = s.Flush(context.WithoutCancel(ctx))
		}
		if s.zenc != nil {
			s.zenc.Close()
		}
		err = unix.Close(s.rootfd)
	})
	return err
}
