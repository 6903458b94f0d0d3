package file

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/sink"
)

// policy is the parsed duplicate_policy.
type policy int

const (
	skipExisting policy = iota + 1
	overwrite
	failExisting
)

// syncMode selects how a batch makes its temp files durable before placing
// them. Both keep the same promise; BenchmarkCommit measures them.
type syncMode int

const (
	// syncEachFile fsyncs every temp file.
	syncEachFile syncMode = iota + 1
	// syncWholeFS issues one syncfs(2) per filesystem touched.
	syncWholeFS
)

// entry is one message on its way to disk.
type entry struct {
	subdir string // sanitised subject directory; "" writes into the root
	name   string // <stem><extension>
	data   []byte // the encoded (maybe compressed) record
	seq    uint64 // stream sequence, for error texts
	// src is the message, for telling its own earlier record from
	// another message's when the name is taken.
	src *sink.Envelope

	res  sink.Result // final once res.Outcome != 0
	dir  *dirState
	fd   int    // open temp file, -1 when none
	tmp  string // named temp file in dir ("" when unnamed or gone)
	dup  bool   // target exists: Duplicate once its syncs succeed
	done bool   // placed by us: Committed once the directory sync succeeds
}

func (e *entry) final() bool { return e.res.Outcome != 0 }

// rel is the entry's path relative to the root, for error texts.
func (e *entry) rel() string {
	if e.subdir == "" {
		return e.name
	}
	return e.subdir + "/" + e.name
}

// dirState is a directory opened for one batch.
type dirState struct {
	fd      int
	owned   bool // close at the end of the batch (false for the root fd)
	created bool // we created it: its parent (the root) must be synced too
	dev     uint64
	err     error // directory sync failure
}

// batch holds the state of one commit call; nothing in it is shared with
// concurrent calls.
type batch struct {
	s       *Sink
	entries []*entry
	dirs    map[string]*dirState
	order   []string // dirs in first-use order, for deterministic syncs
}

// commit writes every entry that is not final yet and sets its result.
// Phases: (1) in order, open directory, check the target, write a temp file;
// (2) make the data durable; (3) in order, place each file; (4) sync each
// touched directory once. A Temporary or Destination failure in (1)–(3) ends
// the batch there: later entries are NotAttempted (docs/library.md#the-sink-boundary).
func (s *Sink) commit(ctx context.Context, entries []*entry) {
	b := &batch{s: s, entries: entries, dirs: map[string]*dirState{}}
	for _, e := range entries {
		e.fd = -1
	}
	defer b.release()

	for i, e := range entries {
		if e.final() {
			continue
		}
		if err := ctx.Err(); err != nil {
			b.abort(err)
			return
		}
		if err := b.prepare(e); err != nil {
			// Entries before i go on: they are written and will be placed.
			b.stop(i, sink.Failed(err))
			break
		}
		s.hook(ctx, "prepared", i)
	}
	if err := ctx.Err(); err != nil {
		b.abort(err)
		return
	}
	if s.cfg.Fsync {
		if !b.syncData() {
			return
		}
	}
	if err := ctx.Err(); err != nil {
		b.abort(err)
		return
	}
	for i, e := range entries {
		if e.final() || e.dup {
			continue
		}
		if err := b.place(e); err != nil {
			b.stop(i, sink.Failed(err))
			break
		}
	}
	b.closeTemps() // unnamed files that were not placed vanish here
	s.hook(ctx, "placed", -1)
	if s.cfg.Fsync {
		if err := ctx.Err(); err != nil {
			b.abort(err)
			return
		}
		b.syncDirs()
	}
	for _, e := range entries {
		switch {
		case e.final():
		case e.dir != nil && e.dir.err != nil:
			e.res = sink.Failed(fmt.Errorf("sync directory of %s (stream seq %d): %w", e.rel(), e.seq, e.dir.err))
		case e.dup:
			e.res = sink.Result{Outcome: sink.Duplicate}
		case e.done:
			e.res = sink.Ok
		default: // unreachable: every non-final entry was placed or is a duplicate
			e.res = sink.Result{Outcome: sink.NotAttempted}
		}
	}
}

// stop gives entry i the result r and every later entry NotAttempted.
func (b *batch) stop(i int, r sink.Result) {
	b.entries[i].res = r
	for _, e := range b.entries[i+1:] {
		e.res = sink.Result{Outcome: sink.NotAttempted}
	}
}

// abort reports every entry that is not durable yet as Temporary.
func (b *batch) abort(err error) {
	for _, e := range b.entries {
		if !e.final() {
			e.res = sink.Failed(fmt.Errorf("write %s (stream seq %d): %w", e.rel(), e.seq, err))
		}
	}
}

// openDir returns the batch's handle on subdir, creating the directory when
// needed.
func (b *batch) openDir(subdir string) (*dirState, error) {
	if d, ok := b.dirs[subdir]; ok {
		return d, nil
	}
	d := &dirState{fd: b.s.rootfd, dev: b.s.rootDev}
	if subdir != "" {
		err := unix.Mkdirat(b.s.rootfd, subdir, dirMode)
		switch {
		case err == nil:
			d.created = true
		case errors.Is(err, unix.EEXIST):
		default:
			return nil, fmt.Errorf("create directory %s: %w", subdir, classify(err))
		}
		fd, err := openBeneath(b.s.rootfd, b.s.root, subdir)
		if err != nil {
			return nil, fmt.Errorf("open directory %s: %w", subdir, classify(err))
		}
		d.fd, d.owned = fd, true
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("stat directory %s: %w", subdir, classify(err))
		}
		d.dev = uint64(st.Dev)
	}
	b.dirs[subdir] = d
	b.order = append(b.order, subdir)
	return d, nil
}

// prepare runs phase 1 for e: it leaves e with a written temp file. Whether
// the target exists is learnt when the file is linked (EEXIST), not by a stat
// here: redeliveries are rare, and one system call less per message is
// measurable on fast filesystems.
func (b *batch) prepare(e *entry) error {
	d, err := b.openDir(e.subdir)
	if err != nil {
		return fmt.Errorf("%w (stream seq %d)", err, e.seq)
	}
	e.dir = d
	if err := b.writeTemp(e); err != nil {
		return fmt.Errorf("write temp file for %s (stream seq %d): %w", e.rel(), e.seq, classify(err))
	}
	return nil
}

// writeTemp creates e's temp file in its directory and writes the record.
func (b *batch) writeTemp(e *entry) error {
	fd, err := -1, errNoTmpfile
	if b.s.tmpfile {
		fd, err = openTmpfile(e.dir.fd)
	}
	if errors.Is(err, errNoTmpfile) {
		e.tmp = tempName(e.name)
		fd, err = unix.Openat(e.dir.fd, e.tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, fileMode)
		if err != nil {
			e.tmp = ""
		}
	}
	if err != nil {
		return err
	}
	e.fd = fd
	return writeAll(fd, e.data)
}

// writeAll writes p to fd, retrying short writes and EINTR.
func writeAll(fd int, p []byte) error {
	for len(p) > 0 {
		n, err := unix.Write(fd, p)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// syncData makes the data of every temp file, and of every existing file
// reported as a duplicate, durable before anything is placed: a name must
// never point at data that a crash can still lose. It returns false when the
// batch ended.
func (b *batch) syncData() bool {
	if b.s.sync == syncWholeFS && haveSyncfs {
		seen := map[uint64]bool{}
		for _, name := range b.order {
			d := b.dirs[name]
			if seen[d.dev] {
				continue
			}
			seen[d.dev] = true
			if err := syncFilesystem(d.fd); err != nil {
				b.abort(fmt.Errorf("syncfs: %w", classify(err)))
				return false
			}
		}
		return true
	}
	for i, e := range b.entries {
		if e.final() {
			continue
		}
		var err error
		switch {
		case e.fd >= 0:
			err = fsync(e.fd)
		case e.dup:
			err = fsyncAt(e.dir.fd, e.name)
		}
		if err != nil {
			b.stop(i, sink.Failed(fmt.Errorf("fsync %s (stream seq %d): %w", e.rel(), e.seq, classify(err))))
			return false
		}
	}
	return true
}

func fsync(fd int) error {
	for {
		err := unix.Fsync(fd)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// checkRegular fails unless name in dirfd is a regular file: a directory or
// symlink where a record belongs is a destination problem, not a duplicate.
func checkRegular(dirfd int, name string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return errNotRegular
	}
	return nil
}

// fsyncAt fsyncs an existing file that another delivery wrote: it may have
// been linked by a process that crashed before its directory sync.
func fsyncAt(dirfd int, name string) error {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return errors.New("destination disappeared while writing")
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return fsync(fd)
}

// place gives e's temp file its final name.
func (b *batch) place(e *entry) error {
	dirfd := e.dir.fd
	if b.s.policy == overwrite {
		if e.tmp == "" { // unnamed: name it first, then rename over the target
			t := tempName(e.name)
			if err := linkTmpfile(e.fd, dirfd, t); err != nil {
				return fmt.Errorf("link %s (stream seq %d): %w", e.rel(), e.seq, classify(err))
			}
			e.tmp = t
		}
		if err := unix.Renameat(dirfd, e.tmp, dirfd, e.name); err != nil {
			return fmt.Errorf("rename to %s (stream seq %d): %w", e.rel(), e.seq, classify(err))
		}
		e.tmp, e.done = "", true
		return nil
	}
	var err error
	if e.tmp == "" {
		err = linkTmpfile(e.fd, dirfd, e.name)
	} else {
		err = unix.Linkat(dirfd, e.tmp, dirfd, e.name, 0)
	}
	switch {
	case err == nil:
		e.done = true
	case errors.Is(err, unix.EEXIST):
		if err := checkRegular(dirfd, e.name); err != nil {
			return fmt.Errorf("file sink destination %s (stream seq %d): %w", e.rel(), e.seq, classify(err))
		}
		if b.s.policy == failExisting {
			e.res = sink.Failed(sink.AsPermanent(fmt.Errorf("file sink destination already exists: %s", e.rel())))
			return nil
		}
		// skip_existing: an earlier delivery, a concurrent batch or
		// another process placed it; whoever linked it synced its data
		// first, but may have crashed before the directory sync. It is
		// this message's only if its record says so: a file of another
		// message under the same name (written before names were made
		// distinct, or a hash collision) must not swallow this one.
		same, err := b.s.sameMessage(dirfd, e)
		if err != nil {
			return fmt.Errorf("read existing %s (stream seq %d): %w", e.rel(), e.seq, classify(err))
		}
		if !same {
			e.res = sink.Failed(sink.AsPermanent(fmt.Errorf("%w: %s (stream seq %d)", errOtherMessage, e.rel(), e.seq)))
			return nil
		}
		e.dup = true
		if b.s.cfg.Fsync {
			if err := fsyncAt(dirfd, e.name); err != nil {
				return fmt.Errorf("fsync %s (stream seq %d): %w", e.rel(), e.seq, classify(err))
			}
		}
	default:
		return fmt.Errorf("link %s (stream seq %d): %w", e.rel(), e.seq, classify(err))
	}
	return nil
}

// syncDirs fsyncs every directory that received or holds a reported file,
// once, and the root when a subject directory was created in it.
func (b *batch) syncDirs() {
	var rootErr error
	rootSynced := false
	for _, name := range b.order {
		d := b.dirs[name]
		if !b.used(d) {
			continue
		}
		d.err = b.s.syncDir(d.fd)
		if d.created && d.err == nil {
			if !rootSynced {
				rootErr, rootSynced = b.s.syncDir(b.s.rootfd), true
			}
			d.err = rootErr
		}
		if d.err != nil {
			d.err = classify(d.err)
		}
	}
}

// used reports whether a non-final entry in d waits for d's sync.
func (b *batch) used(d *dirState) bool {
	for _, e := range b.entries {
		if e.dir == d && !e.final() && (e.done || e.dup) {
			return true
		}
	}
	return false
}

// closeTemps closes temp files and removes named ones that are left.
func (b *batch) closeTemps() {
	for _, e := range b.entries {
		if e.fd >= 0 {
			unix.Close(e.fd)
			e.fd = -1
		}
		if e.tmp != "" {
			// Best effort: a leftover is removed by the next start's cleanup.
			_ = unix.Unlinkat(e.dir.fd, e.tmp, 0)
			e.tmp = ""
		}
	}
}

// release closes everything the batch opened.
func (b *batch) release() {
	b.closeTemps()
	for _, d := range b.dirs {
		if d.owned {
			unix.Close(d.fd)
		}
	}
}

// defaultSync is the data sync strategy measured fastest on the real disk;
// see BenchmarkCommit and the package report.
const defaultSync = syncWholeFS

// hook calls the test hook, if any, at a named point of commit.
func (s *Sink) hook(ctx context.Context, event string, i int) {
	if s.testHook != nil {
		s.testHook(ctx, event, i)
	}
}

// syncDir fsyncs a directory; tests replace it through syncDirHook to make
// a directory sync fail.
func (s *Sink) syncDir(fd int) error {
	if s.syncDirHook != nil {
		return s.syncDirHook(fd)
	}
	return fsync(fd)
}

// errOtherMessage reports a file at a message's name whose record belongs
// to another message.
var errOtherMessage = errors.New("file sink destination exists and holds another message's record")

// sameMessage reports whether the record in name (a regular file in dirfd)
// is e's: it has e's identity and, with subject directories, e's subject.
// A record that cannot be parsed, or lacks the members, is not e's. Only
// duplicates pay for this read.
func (s *Sink) sameMessage(dirfd int, e *entry) (bool, error) {
	fd, err := unix.Openat(dirfd, e.name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	f := os.NewFile(uintptr(fd), e.name)
	defer f.Close()
	br := bufio.NewReader(f)
	var r io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		// gzip whatever the configuration says now: the file may have been
		// written with compression on.
		zr, err := gzip.NewReader(br)
		if err != nil {
			return false, nil
		}
		defer zr.Close()
		r = zr
	}
	doc, err := io.ReadAll(r)
	if err != nil {
		if errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) || errors.Is(err, io.ErrUnexpectedEOF) {
			return false, nil // not a record of ours
		}
		return false, err
	}
	st, ok := record.ParseStored(doc)
	if !ok {
		return false, nil
	}
	want, err := record.Identity(s.cfg.FilenameStrategy, e.src)
	if err != nil {
		return false, nil // unreachable: the name was made from the same material
	}
	if id, ok := st.Identity(s.cfg.FilenameStrategy); !ok || id != record.StoredForm(want) {
		return false, nil
	}
	if s.cfg.PartitionBySubject && (st.Subject == nil || *st.Subject != record.StoredForm(e.src.Subject)) {
		return false, nil
	}
	return true, nil
}
