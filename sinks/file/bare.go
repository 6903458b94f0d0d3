package file

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// bareGroup is how many files BareLoop places between directory syncs: the
// bench command's default batch size.
const bareGroup = 500

// BareLoop creates n files of size bytes in dir the way the sink does, with
// no NATS and no record encoding, as the disk bound the bench command
// compares the sink against. Per group of 500: create each file (unnamed
// O_TMPFILE, else a named temp file) and write it; with fsync, make the data
// durable (one syncfs, else fsync per file); link every file into place; with
// fsync, fsync dir. dir must exist; files are named bare-<i>.
func BareLoop(ctx context.Context, dir string, n, size int, fsyncOn bool) error {
	dirfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(dirfd)
	tmpfile := probeTmpfile(dirfd)
	data := make([]byte, size)
	for i := range data {
		data[i] = 'x'
	}
	type file struct {
		fd        int
		tmp, name string
	}
	files := make([]file, 0, bareGroup)
	closeAll := func() {
		for _, f := range files {
			unix.Close(f.fd)
			if f.tmp != "" {
				_ = unix.Unlinkat(dirfd, f.tmp, 0)
			}
		}
		files = files[:0]
	}
	defer closeAll()
	for start := 0; start < n; start += bareGroup {
		if err := ctx.Err(); err != nil {
			return err
		}
		for i := start; i < min(n, start+bareGroup); i++ {
			f := file{fd: -1, name: "bare-" + strconv.Itoa(i)}
			err := errNoTmpfile
			if tmpfile {
				f.fd, err = openTmpfile(dirfd)
			}
			if errors.Is(err, errNoTmpfile) {
				f.tmp = tempName(f.name)
				f.fd, err = unix.Openat(dirfd, f.tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, fileMode)
			}
			if err != nil {
				return fmt.Errorf("create %s: %w", f.name, err)
			}
			files = append(files, f)
			if err := writeAll(f.fd, data); err != nil {
				return fmt.Errorf("write %s: %w", f.name, err)
			}
			if fsyncOn && !haveSyncfs {
				if err := fsync(f.fd); err != nil {
					return fmt.Errorf("fsync %s: %w", f.name, err)
				}
			}
		}
		if fsyncOn && haveSyncfs {
			if err := syncFilesystem(dirfd); err != nil {
				return fmt.Errorf("syncfs %s: %w", dir, err)
			}
		}
		for _, f := range files {
			if f.tmp == "" {
				err = linkTmpfile(f.fd, dirfd, f.name)
			} else {
				err = unix.Linkat(dirfd, f.tmp, dirfd, f.name, 0)
			}
			if err != nil {
				return fmt.Errorf("link %s: %w", f.name, err)
			}
		}
		closeAll()
		if fsyncOn {
			if err := fsync(dirfd); err != nil {
				return fmt.Errorf("fsync %s: %w", dir, err)
			}
		}
	}
	return nil
}
