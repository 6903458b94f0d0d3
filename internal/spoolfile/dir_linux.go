package spoolfile

import (
	"errors"
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
