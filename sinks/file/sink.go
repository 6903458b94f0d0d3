package file

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/sink"
)

var (
	_ sink.Sink          = (*Sink)(nil)
	_ sink.HealthChecker = (*Sink)(nil)
)

// Sink writes one file per message. It is safe for concurrent WriteBatch
// calls: each call opens its own directory handles and temp files, and two
// calls racing for one name are resolved by link(2), which never replaces.
type Sink struct {
	cfg     Config
	root    string // resolved absolute root
	rootfd  int
	rootDev uint64
	policy  policy
	tmpfile bool     // O_TMPFILE works in the root
	sync    syncMode // how temp file data is made durable
	now     func() time.Time

	// testHook, when set by a test, runs at named points of commit.
	testHook func(ctx context.Context, event string, i int)
	// syncDirHook, when set by a test, replaces fsync of directories.
	syncDirHook func(fd int) error

	gzPool   sync.Pool // *gzip.Writer at cfg.CompressionLevel
	stopOnce sync.Once
}

// New validates c (Config.Validate), expands and resolves the root, creates
// it when create_directory allows, and removes stale temp files older than
// twice deps.DrainTimeout (40 s when the host gives none). Invalid values, a
// root that exists but is not a directory, or one missing while
// create_directory is false are a *sink.ConfigError (exit 2 in the CLI);
// other failures are plain errors. Build c from Default().
func New(ctx context.Context, c Config, deps sink.Deps) (*Sink, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	dir, err := expandHome(c.Directory)
	if err != nil {
		return nil, &sink.ConfigError{Problems: []sink.Problem{{Path: "directory", Message: err.Error()}}}
	}
	c.Directory = dir
	c.Extension = c.extension()
	s := &Sink{cfg: c, rootfd: -1, sync: defaultSync, now: time.Now, policy: policyOf(c.DuplicatePolicy)}
	abs, err := filepath.Abs(c.Directory)
	if err != nil {
		return nil, fmt.Errorf("file sink directory %s: %w", c.Directory, err)
	}
	if err := makeRoot(abs, c.CreateDirectory, c.Fsync); err != nil {
		return nil, err
	}
	if s.root, err = filepath.EvalSymlinks(abs); err != nil {
		return nil, fmt.Errorf("file sink directory %s: %w", abs, err)
	}
	if s.rootfd, err = unix.Open(s.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		return nil, fmt.Errorf("open file sink directory %s: %w", s.root, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(s.rootfd, &st); err != nil {
		unix.Close(s.rootfd)
		return nil, fmt.Errorf("stat file sink directory %s: %w", s.root, err)
	}
	s.rootDev = uint64(st.Dev)
	s.tmpfile = probeTmpfile(s.rootfd)
	if err := removeStaleTemps(s.root, tempMaxAge(deps.DrainTimeout), time.Now()); err != nil {
		unix.Close(s.rootfd)
		return nil, fmt.Errorf("remove stale temp files in %s: %w", s.root, err)
	}
	return s, nil
}

// policyOf maps duplicate_policy (already validated) to its policy.
func policyOf(name string) policy {
	switch name {
	case "overwrite":
		return overwrite
	case "fail":
		return failExisting
	}
	return skipExisting
}

// tempMaxAge is the age beyond which a named temp file found at start
// belongs to a dead process and is removed: twice the host's drain bound
// (at least 2 s), so that a live process's temp file is never touched, or
// 40 s (twice the default delivery.shutdown_timeout_ms) when the host gives
// none.
func tempMaxAge(drain time.Duration) time.Duration {
	if drain <= 0 {
		return 40 * time.Second
	}
	return 2 * max(drain, time.Second)
}

// makeRoot applies the start rules of docs/file-sink.md to the root directory.
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
		return fmt.Errorf("file sink directory %s: %w", abs, err)
	case !create:
		return &sink.ConfigError{Problems: []sink.Problem{{Path: "directory", Message: fmt.Sprintf("%s does not exist and create_directory is false", abs)}}}
	}
	// Find the first existing ancestor: after MkdirAll, it and every
	// directory created below it need their entries synced.
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
		if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EEXIST) {
			return &sink.ConfigError{Problems: []sink.Problem{{Path: "directory", Message: fmt.Sprintf("cannot create %s: %v", abs, err)}}}
		}
		return fmt.Errorf("create file sink directory %s: %w", abs, err)
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
	return fsync(fd)
}

// probeTmpfile reports whether unnamed temp files can be created and linked
// in the root (O_TMPFILE support, a mounted /proc).
func probeTmpfile(rootfd int) bool {
	fd, err := openTmpfile(rootfd)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	name := tempName("nats-sinks-probe")
	if err := linkTmpfile(fd, rootfd, name); err != nil {
		return false
	}
	_ = unix.Unlinkat(rootfd, name, 0)
	return true
}

// Type returns "file".
func (s *Sink) Type() string { return "file" }

// Root returns the resolved absolute root directory.
func (s *Sink) Root() string { return s.root }

// WriteBatch writes each envelope to its own file and returns one result per
// envelope (docs/library.md#the-sink-boundary, docs/file-sink.md).
func (s *Sink) WriteBatch(ctx context.Context, batch []*sink.Envelope) []sink.Result {
	entries := make([]*entry, len(batch))
	for i, e := range batch {
		entries[i] = s.build(e)
	}
	s.commit(ctx, entries)
	results := make([]sink.Result, len(entries))
	for i, e := range entries {
		results[i] = e.res
	}
	return results
}

// build encodes e's record and works out its path; a message whose record or
// name cannot be built gets its Permanent result here.
func (s *Sink) build(e *sink.Envelope) *entry {
	en := &entry{seq: e.StreamSequence, fd: -1}
	p, err := record.NormalisePayload(e, record.PayloadMode(s.cfg.PayloadMode))
	if err != nil {
		en.res = sink.Failed(fmt.Errorf("file sink (stream seq %d): %w", e.StreamSequence, err))
		return en
	}
	stem, err := record.FileStem(s.cfg.FilenameStrategy, e)
	if err != nil {
		en.res = sink.Failed(fmt.Errorf("file sink (stream seq %d): %w", e.StreamSequence, err))
		return en
	}
	en.name = stem + s.cfg.Extension
	if s.cfg.PartitionBySubject {
		en.subdir = record.SafeDistinct(e.Subject, "subject")
	}
	en.src = e
	// SafeDistinct and FileStem only emit [A-Za-z0-9._-] without a leading dot, so
	// these hold; checking keeps a future change from writing outside root.
	if !component(en.name) || en.subdir != "" && !component(en.subdir) {
		en.res = sink.Failed(sink.AsDestination(fmt.Errorf("file sink path %s (stream seq %d) %w", en.rel(), e.StreamSequence, errEscapes)))
		return en
	}
	doc := record.FileRecord(e, p, s.cfg.IncludeMetadata, s.now())
	var data []byte
	if s.cfg.Pretty {
		data = jsonx.MarshalPretty(doc, jsonx.UTF8)
	} else {
		data = jsonx.Marshal(doc, jsonx.UTF8)
	}
	data = append(data, '\n')
	if s.cfg.Compression == "gzip" {
		data = s.gzipBytes(data)
	}
	en.data = data
	return en
}

// component reports whether name is one safe path component.
func component(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

// gzipBytes compresses b with a reproducible header: MTIME 0, no name, OS 3
// (Unix), as docs/formats.md#file-records requires. Writers are pooled per sink: a new
// gzip.Writer allocates about 800 KB, more than a batch of records.
func (s *Sink) gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	buf.Grow(len(b)/2 + 64)
	zw, _ := s.gzPool.Get().(*gzip.Writer)
	if zw == nil {
		var err error
		if zw, err = gzip.NewWriterLevel(&buf, s.cfg.CompressionLevel); err != nil {
			panic(err) // the level was checked at start: 1..9
		}
	} else {
		zw.Reset(&buf) // keeps the level, clears the header
	}
	zw.Header.OS = 3
	_, _ = zw.Write(b) // writes to a bytes.Buffer cannot fail
	_ = zw.Close()
	s.gzPool.Put(zw)
	return buf.Bytes()
}

// Healthcheck creates, fsyncs and deletes .nats-sinks-healthcheck.<random>.tmp
// in the root, and fsyncs the root when fsync is on.
func (s *Sink) Healthcheck(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	name := tempName("nats-sinks-healthcheck")
	fd, err := unix.Openat(s.rootfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, fileMode)
	if err != nil {
		return fmt.Errorf("file sink healthcheck in %s: %w", s.root, classify(err))
	}
	err = fsync(fd)
	unix.Close(fd)
	if rmErr := unix.Unlinkat(s.rootfd, name, 0); err == nil {
		err = rmErr
	}
	if err == nil && s.cfg.Fsync {
		err = fsync(s.rootfd)
	}
	if err != nil {
		return fmt.Errorf("file sink healthcheck in %s: %w", s.root, classify(err))
	}
	return nil
}

// Stop closes the root directory. The runner calls it once, after the last
// WriteBatch; later calls do nothing.
func (s *Sink) Stop(ctx context.Context) error {
	var err error
	s.stopOnce.Do(func() {
		if s.rootfd >= 0 {
			err = unix.Close(s.rootfd)
		}
	})
	return err
}
