package file

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nats-sinks/nats-sink/sink"
)

// benchDirs returns the filesystems to measure: the real disk (a temp dir
// under NATS_SINKS_BENCH_DISK_DIR, default /var/tmp, which is not tmpfs on
// the reference VM) and tmpfs (/dev/shm) when present.
func benchDirs(b *testing.B) map[string]string {
	disk := os.Getenv("NATS_SINKS_BENCH_DISK_DIR")
	if disk == "" {
		disk = "/var/tmp"
	}
	dirs := map[string]string{}
	for name, parent := range map[string]string{"disk": disk, "tmpfs": "/dev/shm"} {
		if st, err := os.Stat(parent); err != nil || !st.IsDir() {
			b.Logf("skipping %s: %s unavailable", name, parent)
			continue
		}
		d, err := os.MkdirTemp(parent, "nats-sinks-bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(d) })
		dirs[name] = d
	}
	return dirs
}

const (
	benchBatch = 500
	benchSize  = 400
)

// BenchmarkCommit measures the ways to make a batch of 500 × 400-byte files
// durable (and two non-durable baselines). Each iteration writes one batch
// into one subject directory. Run with -benchtime=20x or more.
func BenchmarkCommit(b *testing.B) {
	variants := []struct {
		name    string
		fsync   bool
		tmpfile bool
		sync    syncMode
		naive   bool
		oneDir  bool // every batch into the same, existing subject directory
	}{
		{"tmpfile/syncfs/one-dir", true, true, syncWholeFS, false, true},
		{"named/syncfs/one-dir", true, false, syncWholeFS, false, true},
		{"tmpfile/syncfs", true, true, syncWholeFS, false, false},
		{"tmpfile/fsync-each", true, true, syncEachFile, false, false},
		{"named/syncfs", true, false, syncWholeFS, false, false},
		{"named/fsync-each", true, false, syncEachFile, false, false},
		{"naive-per-message", true, false, syncEachFile, true, false},
		{"tmpfile/no-fsync", false, true, syncWholeFS, false, false},
		{"named/no-fsync", false, false, syncWholeFS, false, false},
	}
	data := make([]byte, benchSize)
	for i := range data {
		data[i] = 'x'
	}
	for fsName, dir := range benchDirs(b) {
		for _, v := range variants {
			b.Run(fsName+"/"+v.name, func(b *testing.B) {
				root, err := os.MkdirTemp(dir, "v-")
				if err != nil {
					b.Fatal(err)
				}
				c := Default()
				c.Directory, c.Fsync = root, v.fsync
				s, err := New(context.Background(), c, sink.Deps{})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Stop(context.Background())
				s.tmpfile = s.tmpfile && v.tmpfile
				s.sync = v.sync
				b.ResetTimer()
				start := time.Now()
				for it := 0; b.Loop(); it++ {
					sub := "s" + strconv.Itoa(it)
					if v.naive {
						if err := naiveWrite(s, sub, benchBatch, data); err != nil {
							b.Fatal(err)
						}
						continue
					}
					entries := make([]*entry, benchBatch)
					for i := range entries {
						entries[i] = &entry{subdir: sub, name: fmt.Sprintf("f-%05d.json", i), data: data, seq: uint64(i + 1)}
						if v.oneDir {
							entries[i].subdir, entries[i].name = "s", fmt.Sprintf("f-%s-%05d.json", sub, i)
						}
					}
					s.commit(context.Background(), entries)
					for _, e := range entries {
						if !e.res.Outcome.Acked() {
							b.Fatalf("%s: %v %v", e.name, e.res.Outcome, e.res.Err)
						}
					}
				}
				b.ReportMetric(float64(b.N*benchBatch)/time.Since(start).Seconds(), "msgs/s")
			})
		}
		b.Run(fsName+"/BareLoop", func(b *testing.B) {
			for it := 0; b.Loop(); it++ {
				d, err := os.MkdirTemp(dir, "bare-")
				if err != nil {
					b.Fatal(err)
				}
				if err := BareLoop(context.Background(), d, benchBatch, benchSize, true); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// naiveWrite is docs/file-sink.md steps 1–5 taken literally, one message at a
// time: named temp file, write, fsync, link, unlink, fsync the directory.
func naiveWrite(s *Sink, sub string, n int, data []byte) error {
	if err := unix.Mkdirat(s.rootfd, sub, dirMode); err != nil {
		return err
	}
	dirfd, err := unix.Openat(s.rootfd, sub, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	if err := fsync(s.rootfd); err != nil {
		return err
	}
	for i := range n {
		name := fmt.Sprintf("f-%05d.json", i)
		tmp := tempName(name)
		fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, fileMode)
		if err != nil {
			return err
		}
		if err := writeAll(fd, data); err != nil {
			return err
		}
		if err := fsync(fd); err != nil {
			return err
		}
		unix.Close(fd)
		if err := unix.Linkat(dirfd, tmp, dirfd, name, 0); err != nil {
			return err
		}
		if err := unix.Unlinkat(dirfd, tmp, 0); err != nil {
			return err
		}
		if err := fsync(dirfd); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkWriteBatch measures the whole sink (record building, encoding,
// optional gzip, files) for batches of 500 messages with 400-byte payloads.
func BenchmarkWriteBatch(b *testing.B) {
	payload := `{"id":"` + strings.Repeat("p", benchSize-9) + `"}`
	for fsName, dir := range benchDirs(b) {
		for _, v := range []struct {
			name string
			gzip bool
		}{{"plain", false}, {"gzip", true}} {
			b.Run(fsName+"/"+v.name, func(b *testing.B) {
				c := Default()
				c.Directory, _ = os.MkdirTemp(dir, "w-")
				if v.gzip {
					c.Compression = "gzip"
				}
				s, err := New(context.Background(), c, sink.Deps{})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Stop(context.Background())
				seq := uint64(0)
				start := time.Now()
				for b.Loop() {
					batch := make([]*sink.Envelope, benchBatch)
					for i := range batch {
						seq++
						batch[i] = env("bench.subject", seq, "", payload)
					}
					for _, r := range s.WriteBatch(context.Background(), batch) {
						if r.Outcome != sink.Committed {
							b.Fatal(r.Outcome, r.Err)
						}
					}
				}
				b.ReportMetric(float64(b.N*benchBatch)/time.Since(start).Seconds(), "msgs/s")
			})
		}
	}
}
