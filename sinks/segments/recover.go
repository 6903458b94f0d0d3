package segments

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// recoverTree finishes or discards every open segment under the root (and
// prefix) that no live process holds. It runs before the first write.
func (s *Sink) recoverTree(ctx context.Context) error {
	base := s.root
	if s.prefix != "" {
		base = filepath.Join(s.root, strings.TrimSuffix(s.prefix, "/"))
	}
	if _, err := os.Lstat(base); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var errs []error
	err := filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !d.Type().IsRegular() || !IsOpenName(d.Name()) {
			return nil
		}
		rel, _ := filepath.Rel(s.root, filepath.Dir(path))
		if rel == "." {
			rel = ""
		}
		dirfd, err := unix.Open(filepath.Dir(path), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		defer unix.Close(dirfd)
		if err := s.recoverFile(rel, dirfd, d.Name()); err != nil {
			errs = append(errs, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("segments sink recovery: %w", err)
	}
	return nil
}

// recoverFile applies start-up recovery to the open segment name in dirfd:
// a file another process has locked is skipped; a held-mode (parquet) file
// is deleted; a JSON Lines file is cut after its last valid line (member,
// frame) and renamed to its final name, or deleted when nothing valid is
// left. Every acknowledged record lies before that cut: each ACK waited for
// an fdatasync covering every earlier byte.
func (s *Sink) recoverFile(dir string, dirfd int, name string) error {
	rel := s.rel(dir, name)
	m := openName.FindStringSubmatch(name)
	if m == nil {
		return nil
	}
	id, ext := m[1], "."+m[2]
	fd, err := unix.Openat(dirfd, name, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil // finished by its owner meanwhile
		}
		return fmt.Errorf("open %s: %w", rel, err)
	}
	defer unix.Close(fd)
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil // a live process owns it
		}
		return fmt.Errorf("lock %s: %w", rel, err)
	}
	// The owner may have renamed it between our open and lock.
	var st, cur unix.Stat_t
	if unix.Fstat(fd, &st) != nil || unix.Fstatat(dirfd, name, &cur, unix.AT_SYMLINK_NOFOLLOW) != nil ||
		st.Ino != cur.Ino || st.Dev != cur.Dev {
		return nil
	}
	if ext == ".parquet" || s.s3 != nil {
		// Held mode: none of its messages was acknowledged.
		if err := s.discard(dirfd, name); err != nil {
			return fmt.Errorf("delete %s: %w", rel, err)
		}
		return nil
	}
	comp := compressionOfExt(ext)
	// Not os.NewFile: its finalizer would close fd a second time, maybe
	// after the number was reused.
	res, err := scan(io.NewSectionReader(fdReader(fd), 0, st.Size), comp, nil)
	if err != nil {
		return fmt.Errorf("read %s: %w", rel, err)
	}
	if res.valid < st.Size {
		if err := unix.Ftruncate(fd, res.valid); err != nil {
			return fmt.Errorf("truncate %s: %w", rel, err)
		}
		if err := datasync(fd); err != nil {
			return fmt.Errorf("sync %s: %w", rel, err)
		}
		s.m.truncations.Add(1)
		s.log.Warn("segment truncated", "file", rel, "count", st.Size-res.valid)
	}
	if res.valid == 0 {
		if err := s.discard(dirfd, name); err != nil {
			return fmt.Errorf("delete %s: %w", rel, err)
		}
		return nil
	}
	final := finalNameOf(res.first, res.last, id, ext)
	if err := renameNoReplace(dirfd, name, final); err != nil {
		return fmt.Errorf("rename %s to %s: %w", rel, final, err)
	}
	if err := unix.Fsync(dirfd); err != nil {
		return fmt.Errorf("sync directory of %s: %w", rel, err)
	}
	s.m.recovered.Add(1)
	return nil
}

func (s *Sink) discard(dirfd int, name string) error {
	if err := unix.Unlinkat(dirfd, name, 0); err != nil {
		return err
	}
	if err := unix.Fsync(dirfd); err != nil {
		return err
	}
	s.m.discarded.Add(1)
	return nil
}

// compressionOfExt returns the compression of a JSON Lines extension.
func compressionOfExt(ext string) string {
	switch {
	case strings.HasSuffix(ext, ".gz"):
		return "gzip"
	case strings.HasSuffix(ext, ".zst"):
		return "zstd"
	}
	return "none"
}

// fdReader reads a descriptor it does not own at given offsets.
type fdReader int

func (r fdReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := unix.Pread(int(r), p, off)
	if err == nil && n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	if n < 0 {
		n = 0
	}
	return n, err
}
