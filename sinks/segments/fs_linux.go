package segments

import (
	"errors"

	"golang.org/x/sys/unix"
)

// openBeneath opens the directory name inside rootfd; symlinks are followed
// only while they stay beneath it, so a partition directory that is a link
// out of the lake fails with errEscapes instead of writing elsewhere.
func openBeneath(rootfd int, name string) (int, error) {
	fd, err := unix.Openat2(rootfd, name, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.EXDEV) {
		return -1, errEscapes
	}
	if errors.Is(err, unix.ENOSYS) {
		return openBeneathByPath(rootfd, name)
	}
	return fd, err
}

// renameNoReplace renames old to new in dirfd and fails with EEXIST when new
// exists: a final name is never replaced.
func renameNoReplace(dirfd int, old, new string) error {
	err := unix.Renameat2(dirfd, old, dirfd, new, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) {
		return renameByLink(dirfd, old, new)
	}
	return err
}

// datasync makes fd's data durable.
func datasync(fd int) error { return unix.Fdatasync(fd) }
