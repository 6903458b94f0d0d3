package segments

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nats-sinks/nats-sink/sink"
)

const (
	fileMode = 0o600
	dirMode  = 0o750
)

// errEscapes reports a partition directory that resolves outside the root.
var errEscapes = errors.New("resolves outside the sink directory")

// openBeneathByPath is openBeneath for systems without openat2: it resolves
// the path and checks that it stays inside the root.
func openBeneathByPath(rootfd int, name string) (int, error) {
	root, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", rootfd))
	if err != nil {
		return -1, err
	}
	resolved, err := filepath.EvalSymlinks(filepath.Join(root, name))
	if err != nil {
		return -1, err
	}
	if resolved != root && !strings.HasPrefix(resolved, root+"/") {
		return -1, errEscapes
	}
	return unix.Open(resolved, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// renameByLink renames without replacing where renameat2 is missing: link
// refuses an existing name, then the old name is removed.
func renameByLink(dirfd int, old, new string) error {
	if err := unix.Linkat(dirfd, old, dirfd, new, 0); err != nil {
		return err
	}
	return unix.Unlinkat(dirfd, old, 0)
}

// randomID returns 16 lower-case hex characters from the CSPRNG: segment ids
// of concurrent processes never collide.
func randomID() string {
	var b [8]byte
	_, _ = io.ReadFull(rand.Reader, b[:])
	return hex.EncodeToString(b[:])
}

// classify wraps an operating-system error with its outcome class: lost
// access, a read-only or full filesystem and a tree that cannot hold the
// segment fail every message alike (Destination); everything else (EIO, …)
// is Temporary.
func classify(err error) error {
	switch {
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM), errors.Is(err, unix.EROFS),
		errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT), errors.Is(err, unix.ENOTDIR),
		errors.Is(err, unix.ELOOP), errors.Is(err, errEscapes):
		return sink.AsDestination(err)
	}
	return err
}

// pwriteAll writes b at off.
func pwriteAll(fd int, b []byte, off int64) error {
	for len(b) > 0 {
		n, err := unix.Pwrite(fd, b, off)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return err
		}
		b, off = b[n:], off+int64(n)
	}
	return nil
}
