package segments

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/nats-sinks/nats-sink/sink"
)

// BenchmarkHeld writes batches of 500 × 256 B from 4 goroutines (the
// runner's max_in_flight_batches 4) into Parquet segments with the default
// rolling limits, locally and to an in-process S3 store, and waits for
// every hold to settle. It reports messages per second, the committed bytes
// per record, and the largest heap in use seen after each batch.
func BenchmarkHeld(b *testing.B) {
	for _, target := range []string{"local", "s3"} {
		b.Run("parquet-zstd-"+target, func(b *testing.B) {
			var c Config
			var st *fakeS3
			if target == "s3" {
				st = newFakeS3(b)
				c = st.benchConfig(b.TempDir())
			} else {
				c = Default()
				c.Format = "parquet"
				c.Directory = filepath.Join(b.TempDir(), "lake")
			}
			s, err := New(b.Context(), c, sink.Deps{Env: testEnv})
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
			var (
				mu    sync.Mutex
				holds []sink.Hold
				peak  uint64
			)
			b.ResetTimer()
			var wg sync.WaitGroup
			per := b.N/4 + 1
			for g := range 4 {
				wg.Go(func() {
					for k := range per {
						rs := s.WriteBatch(b.Context(), batch((g*per+k)*500))
						mu.Lock()
						for _, r := range rs {
							if r.Outcome != sink.Held {
								b.Error(r.Err)
							}
							holds = append(holds, r.Hold)
						}
						if k%8 == 0 {
							var ms runtime.MemStats
							runtime.ReadMemStats(&ms)
							peak = max(peak, ms.HeapInuse)
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if err := s.Flush(b.Context()); err != nil {
				b.Fatal(err)
			}
			for _, h := range holds {
				<-h.Done()
				if h.Outcome() != sink.Committed {
					b.Fatal(h.Err())
				}
			}
			b.StopTimer()
			n := per * 4 * 500
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			var total int64
			if st != nil {
				for _, k := range st.keys(b) {
					body, _ := st.object(b, k)
					total += int64(len(body))
				}
			} else {
				filepath.Walk(c.Directory, func(p string, fi os.FileInfo, err error) error {
					if err == nil && strings.HasSuffix(p, ".parquet") {
						total += fi.Size()
					}
					return nil
				})
			}
			b.ReportMetric(float64(total)/float64(n), "B/record")
		})
	}
}

func (st *fakeS3) benchConfig(staging string) Config {
	c := Default()
	c.Target = "s3"
	c.Format = "parquet"
	c.Bucket = testBucket
	c.EndpointURL = ptr(st.srv.URL)
	c.AllowHTTPForLocalTesting = true
	c.RegionName = ptr("us-east-1")
	c.CredentialMode = "environment"
	c.AWSAccessKeyIDEnv = ptr("TEST_AWS_KEY_ID")
	c.AWSSecretAccessKeyEnv = ptr("TEST_AWS_SECRET")
	c.StagingDirectory = ptr(staging)
	c.RequestTimeoutSeconds = 60
	return c
}
