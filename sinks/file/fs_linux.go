package file

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// openBeneath opens the directory name inside the directory rootfd. Symlinks
// are followed only while they stay beneath rootfd (RESOLVE_BENEATH), so a
// subject directory that is a symlink pointing outside the root fails with
// errEscapes instead of letting the sink write elsewhere. The check and the
// open are one system call: nothing can swap the link in between.
func openBeneath(rootfd int, rootPath, name string) (int, error) {
	fd, err := unix.Openat2(rootfd, name, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	})
	switch {
	case err == nil:
		return fd, nil
	case errors.Is(err, unix.EXDEV):
		return -1, errEscapes
	case errors.Is(err, unix.ENOSYS):
		// Kernels before 5.6 have no openat2: resolve and check by path.
		return openBeneathByPath(rootPath, name)
	}
	return -1, err
}

// openTmpfile creates an unnamed file in dirfd. It returns errNoTmpfile when
// the filesystem cannot do O_TMPFILE, so the caller falls back to a named
// temp file. An unnamed file vanishes with the process: a crash leaves no
// debris behind.
func openTmpfile(dirfd int) (int, error) {
	fd, err := unix.Openat(dirfd, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, fileMode)
	if err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL) {
			return -1, errNoTmpfile
		}
		return -1, err
	}
	return fd, nil
}

// linkTmpfile gives the unnamed file fd the name newName in dirfd. It fails
// with EEXIST when newName exists: link never replaces a file.
//
// linkat(fd, "", AT_EMPTY_PATH) is ~25% faster than going through
// /proc/self/fd (measured on tmpfs), but before Linux 6.10 it needs
// CAP_DAC_READ_SEARCH and fails with ENOENT or EPERM without it. The first
// such failure switches this process to the /proc/self/fd path, which works
// for everyone.
func linkTmpfile(fd, dirfd int, newName string) error {
	if !emptyPathRefused.Load() {
		err := unix.Linkat(fd, "", dirfd, newName, unix.AT_EMPTY_PATH)
		if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EPERM) {
			return err
		}
		emptyPathRefused.Store(true)
	}
	return unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), dirfd, newName, unix.AT_SYMLINK_FOLLOW)
}

// emptyPathRefused records that linkat with AT_EMPTY_PATH is not permitted.
var emptyPathRefused atomic.Bool

// syncFilesystem flushes the whole filesystem holding fd (syncfs(2)); since
// Linux 5.8 it reports writeback errors of that filesystem.
func syncFilesystem(fd int) error { return unix.Syncfs(fd) }

// haveSyncfs is true when syncfs(2) reports writeback errors: Linux 5.8 and
// later. Before 5.8 syncfs returned 0 even when data failed to reach the
// disk, so a batch could be reported durable when it was not; those kernels
// get one fsync per file instead (slower, and honest).
var haveSyncfs = syncfsReportsErrors()

func syncfsReportsErrors() bool {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return false
	}
	return kernelAtLeast(unix.ByteSliceToString(u.Release[:]), 5, 8)
}

// kernelAtLeast parses the leading "major.minor" of a kernel release string
// such as "6.18.44-fc-v782".
func kernelAtLeast(release string, major, minor int) bool {
	var ma, mi int
	if _, err := fmt.Sscanf(release, "%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}
