package spoolfile

import (
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// openTmpfile creates an unnamed file in dirfd, or fails with errNoTmpfile
// where the filesystem cannot.
func openTmpfile(dirfd int) (int, error) {
	fd, err := unix.Openat(dirfd, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, FileMode)
	if err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL) {
			return -1, errNoTmpfile
		}
		return -1, err
	}
	return fd, nil
}

// linkTmpfile names the unnamed file fd in dirfd; EEXIST when the name is
// taken (link never replaces). It goes through /proc/self/fd, which needs
// no capability (linkat with AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH before
// Linux 6.10).
func linkTmpfile(fd, dirfd int, name string) error {
	return unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), dirfd, name, unix.AT_SYMLINK_FOLLOW)
}

// syncFilesystem flushes the filesystem holding fd.
func syncFilesystem(fd int) error { return unix.Syncfs(fd) }

// syncfsReportsErrors is true from Linux 5.8: before it syncfs returned 0
// even when data failed to reach the disk, so those kernels fsync each file.
func syncfsReportsErrors() bool {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return false
	}
	var major, minor int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 5 || major == 5 && minor >= 8
}
