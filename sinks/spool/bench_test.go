package spool

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sinks/file"
)

// BenchmarkWriteBatch compares the spool sink (encrypted and plaintext)
// with the file sink on the same filesystems: the real disk (a temp dir
// under NATS_SINKS_BENCH_DISK_DIR, default /var/tmp) and tmpfs (/dev/shm).
// Each iteration writes one batch of 100 messages with 256-byte JSON bodies,
// fsync on; msgs/s is the figure to compare. Run with -benchtime=30x.
func BenchmarkWriteBatch(b *testing.B) {
	const batchSize = 100
	disk := os.Getenv("NATS_SINKS_BENCH_DISK_DIR")
	if disk == "" {
		disk = "/var/tmp"
	}
	for _, fsys := range []struct{ name, parent string }{{"disk", disk}, {"tmpfs", "/dev/shm"}} {
		if st, err := os.Stat(fsys.parent); err != nil || !st.IsDir() {
			b.Logf("skipping %s: %s unavailable", fsys.name, fsys.parent)
			continue
		}
		for _, variant := range []string{"file", "spool-plaintext", "spool-encrypted"} {
			b.Run(fsys.name+"/"+variant, func(b *testing.B) {
				dir, err := os.MkdirTemp(fsys.parent, "nats-sinks-bench-")
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { os.RemoveAll(dir) })
				s := benchSink(b, variant, dir)
				defer s.Stop(b.Context())
				pad := strings.Repeat("x", 230)
				seq := uint64(0)
				b.ResetTimer()
				for range b.N {
					batch := make([]*sink.Envelope, batchSize)
					for i := range batch {
						seq++
						batch[i] = intake.Build(intake.Message{
							Subject: "bench.events",
							Reply:   fmt.Sprintf("$JS.ACK.BENCH.c.1.%d.%d.1780048800123456000.0", seq, seq),
							Data:    fmt.Appendf(nil, `{"n":%d,"pad":"%s"}`, seq, pad),
						}, nil, goldenSpooled)
					}
					for i, r := range s.WriteBatch(b.Context(), batch) {
						if r.Outcome != sink.Committed {
							b.Fatalf("message %d: %v %v", i, r.Outcome, r.Err)
						}
					}
				}
				b.ReportMetric(float64(b.N*batchSize)/b.Elapsed().Seconds(), "msgs/s")
			})
		}
	}
}

func benchSink(b *testing.B, variant, dir string) sink.Sink {
	b.Helper()
	if variant == "file" {
		c := file.Default()
		c.Directory = dir
		s, err := file.New(b.Context(), c, sink.Deps{})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	c := Default()
	c.Directory = dir
	c.MaxRecords = 10_000_000
	c.MaxBytes = 1 << 40
	if variant == "spool-encrypted" {
		key := secret.Value(testKey)
		c.Encryption.Enabled, c.Encryption.KeyB64 = true, &key
	} else {
		c.AllowUnencrypted = true
	}
	s, err := New(b.Context(), c, sink.Deps{})
	if err != nil {
		b.Fatal(err)
	}
	return s
}
