//go:build unix && !linux

package file

import (
	"errors"

	"golang.org/x/sys/unix"
)

// openBeneath opens the directory name inside the root. Without openat2 the
// symlink check is done on paths: resolve, check containment, then open.
func openBeneath(rootfd int, rootPath, name string) (int, error) {
	return openBeneathByPath(rootPath, name)
}

// openTmpfile reports that unnamed temp files are unavailable here.
func openTmpfile(dirfd int) (int, error) { return -1, errNoTmpfile }

// linkTmpfile is never called when openTmpfile fails.
func linkTmpfile(fd, dirfd int, newName string) error { return errNoTmpfile }

// syncFilesystem is unavailable; callers fsync each file instead.
func syncFilesystem(fd int) error { return errors.ErrUnsupported }

const haveSyncfs = false

var _ = unix.O_RDONLY
