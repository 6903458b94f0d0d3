package file

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sink/sinktest"
)

// TestConformance runs the sink conformance suite against the file sink
// with its default (idempotent) policy, skip_existing.
func TestConformance(t *testing.T) {
	c := Default()
	c.Directory = filepath.Join(t.TempDir(), "out")
	sinktest.Run(t, sinktest.Harness{
		Open: func(t *testing.T) sink.Sink {
			s, err := New(t.Context(), c, sink.Deps{})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			return s
		},
		ReadBack: func(t *testing.T) []sinktest.Stored {
			var out []sinktest.Stored
			err := filepath.WalkDir(c.Directory, func(path string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
					return err
				}
				b, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				var rec struct {
					Stream         string `json:"stream"`
					StreamSequence uint64 `json:"stream_sequence"`
				}
				if err := json.Unmarshal(b, &rec); err != nil {
					return err
				}
				out = append(out, sinktest.Stored{Stream: rec.Stream, Sequence: rec.StreamSequence})
				return nil
			})
			if err != nil {
				t.Fatalf("read back: %v", err)
			}
			return out
		},
		Idempotent: true,
	})
}
