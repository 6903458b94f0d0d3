//go:build !linux

package segments

import "golang.org/x/sys/unix"

func openBeneath(rootfd int, name string) (int, error) { return openBeneathByPath(rootfd, name) }

func renameNoReplace(dirfd int, old, new string) error { return renameByLink(dirfd, old, new) }

func datasync(fd int) error { return unix.Fsync(fd) }
