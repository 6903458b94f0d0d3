package segments

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nats-sinks/nats-sink/sink"
)

// BenchmarkWriteBatch appends batches of 500 × 256 B from 4 goroutines, as
// the runner does with max_in_flight_batches 4.
func BenchmarkWriteBatch(b *testing.B) {
	for _, fsync := range []bool{true, false} {
		b.Run(fmt.Sprint("fsync=", fsync), func(b *testing.B) {
			c := Default()
			c.Directory = filepath.Join(b.TempDir(), "lake")
			c.Fsync = fsync
			s, err := New(b.Context(), c, sink.Deps{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Stop(b.Context())
			pad := strings.Repeat("x", 230)
			batch := func(first int) []*sink.Envelope {
				out := make([]*sink.Envelope, 500)
				for i := range out {
					e := env("S", uint64(first+i+1))
					e.Data = fmt.Appendf(nil, `{"n":%d,"pad":"%s"}`, first+i, pad)
					out[i] = e
				}
				return out
			}
			b.ResetTimer()
			var wg sync.WaitGroup
			per := b.N/4 + 1
			for g := range 4 {
				wg.Go(func() {
					for k := range per {
						bt := batch((g*per + k) * 500)
						for _, r := range s.WriteBatch(b.Context(), bt) {
							if r.Outcome != sink.Committed {
								b.Error(r.Err)
								return
							}
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(per*4*500)/b.Elapsed().Seconds(), "msgs/s")
			var total int64
			filepath.Walk(c.Directory, func(p string, fi os.FileInfo, err error) error {
				if err == nil && fi.Mode().IsRegular() {
					total += fi.Size()
				}
				return nil
			})
			b.ReportMetric(float64(total)/float64(per*4*500), "B/record")
		})
	}
}

// BenchmarkBuild measures building one JSON Lines record (the file record,
// encoded), the largest cost of a local append.
func BenchmarkBuild(b *testing.B) {
	c := Default()
	c.Directory = filepath.Join(b.TempDir(), "lake")
	s, err := New(b.Context(), c, sink.Deps{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Stop(b.Context())
	e := env("S", 1)
	e.Data = fmt.Appendf(nil, `{"n":%d,"pad":"%s"}`, 1, strings.Repeat("x", 230))
	now := s.now()
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := s.build(e, now); err != nil {
			b.Fatal(err)
		}
	}
}
