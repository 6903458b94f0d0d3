package file

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nats-sinks/nats-sink/sink"
)

const (
	// fileMode is the mode of every file the sink creates (docs/file-sink.md).
	fileMode = 0o600
	// dirMode is used for the root, its missing parents and the subject
	// directories the sink creates (before the umask): the owner and its
	// group may list them, others may not even learn which subjects and
	// message ids exist. The records themselves are fileMode.
	dirMode = 0o750
	// tempSuffix ends every named temp file: .<name>.<16 hex>.tmp.
	tempSuffix = ".tmp"
)

var (
	// errEscapes reports a directory that resolves outside the root.
	errEscapes = errors.New("resolves outside the sink directory")
	// errNoTmpfile reports a filesystem without O_TMPFILE.
	errNoTmpfile = errors.New("unnamed temp files are not supported")
	// errNotRegular reports a destination path held by something other
	// than a regular file.
	errNotRegular = errors.New("exists and is not a regular file")
)

// openBeneathByPath opens root/name as a directory after checking that its
// fully resolved path stays inside the resolved root. It is the fallback for
// systems without openat2 and is open to a rename race the openat2 path is not.
func openBeneathByPath(rootPath, name string) (int, error) {
	resolved, err := filepath.EvalSymlinks(filepath.Join(rootPath, name))
	if err != nil {
		return -1, err
	}
	if !within(rootPath, resolved) {
		return -1, errEscapes
	}
	return unix.Open(resolved, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// within reports whether path is root or below it; both must be clean and
// absolute.
func within(root, path string) bool {
	if path == root {
		return true
	}
	if root == string(filepath.Separator) {
		return strings.HasPrefix(path, root)
	}
	return strings.HasPrefix(path, root+string(filepath.Separator))
}

// randomHex returns 16 lower-case hex characters from the CSPRNG, so
// concurrent writers (other goroutines, other processes) never pick the same
// temp name.
func randomHex() string {
	var b [8]byte
	_, _ = io.ReadFull(rand.Reader, b[:]) // crypto/rand.Reader never fails on Linux ≥ 3.17
	return hex.EncodeToString(b[:])
}

// tempName returns the named-temp-file name for a target name:
// .<name>.<random>.tmp (docs/file-sink.md step 3).
func tempName(name string) string { return "." + name + "." + randomHex() + tempSuffix }

// isTempName reports whether name matches tempName's pattern (which also
// covers the healthcheck file .nats-sinks-healthcheck.<random>.tmp).
func isTempName(name string) bool {
	if !strings.HasPrefix(name, ".") || !strings.HasSuffix(name, tempSuffix) {
		return false
	}
	body := strings.TrimSuffix(name[1:], tempSuffix) // <name>.<random>
	dot := strings.LastIndexByte(body, '.')
	if dot < 1 || len(body)-dot-1 != 16 {
		return false
	}
	for _, c := range body[dot+1:] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// removeStaleTemps removes named temp files older than maxAge from root and
// its immediate subdirectories (the only places the sink writes). Younger
// ones may belong to another process writing into the same tree right now,
// so they are kept. Directories are read in chunks: a subject directory can
// hold millions of records.
func removeStaleTemps(root string, maxAge time.Duration, now time.Time) error {
	var (
		errs    []error
		subdirs []string
	)
	visit := func(dir string, descend bool) {
		f, err := os.Open(dir)
		if err != nil {
			errs = append(errs, err)
			return
		}
		defer f.Close()
		for {
			entries, err := f.ReadDir(4096)
			for _, de := range entries {
				name := de.Name()
				switch {
				case de.Type().IsRegular() && isTempName(name):
					info, err := de.Info()
					if err != nil {
						continue // already gone
					}
					if now.Sub(info.ModTime()) > maxAge {
						if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
							errs = append(errs, err)
						}
					}
				case descend && de.IsDir(): // never follows symlinks: de.Type() is the link's
					subdirs = append(subdirs, filepath.Join(dir, name))
				}
			}
			if err != nil {
				if err != io.EOF {
					errs = append(errs, err)
				}
				return
			}
		}
	}
	visit(root, true)
	for _, d := range subdirs {
		visit(d, false)
	}
	return errors.Join(errs...)
}

// classify wraps an operating-system error with its outcome class: lost
// access (EACCES, EPERM, EROFS) and a tree that cannot hold the file
// (ENOTDIR, ELOOP, ENAMETOOLONG, escapes, not a regular file) are Destination errors that
// hit every message; everything else (ENOSPC, EIO, …) is Temporary.
func classify(err error) error {
	switch {
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM), errors.Is(err, unix.EROFS),
		errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.EISDIR), errors.Is(err, unix.ELOOP),
		errors.Is(err, unix.ENAMETOOLONG), // only a too long extension can cause it
		errors.Is(err, errEscapes), errors.Is(err, errNotRegular):
		return sink.AsDestination(err)
	}
	return err
}
