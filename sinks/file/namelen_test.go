package file

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/sink"
)

// TestExtensionLength: a long extension made the temp name of a long stem
// exceed the 255 bytes a file name may have, so every write failed (a
// destination error, fetching paused, no message ever stored). The
// configuration is refused at load instead, naming sink.extension; the
// longest extension it accepts works for the longest name each strategy
// can produce, through named temp files and overwrite (the longest path).
func TestExtensionLength(t *testing.T) {
	long := strings.Repeat("a", 120) + "." // sanitised to 120 a's + a hash
	for _, tt := range []struct {
		strategy string
		e        *sink.Envelope
	}{
		{"stream_sequence", func() *sink.Envelope { e := env("s", 1, "", "{}"); e.Stream = long; return e }()},
		{"message_id", env("s", 1, long, "{}")},
		{"payload_sha256", env(long, 1, "", "{}")},
	} {
		t.Run(tt.strategy, func(t *testing.T) {
			max := maxExtension(tt.strategy)
			if max < len(".json.gz") {
				t.Fatalf("maxExtension(%s) = %d", tt.strategy, max)
			}
			raw := func(n int) json.RawMessage {
				return json.RawMessage(fmt.Sprintf(`{"type":"file","directory":"d","filename_strategy":%q,"extension":%q}`,
					tt.strategy, "."+strings.Repeat("x", n-1)))
			}
			_, err := Decode(raw(max + 1))
			var ce *sink.ConfigError
			if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Path != "extension" ||
				!strings.Contains(ce.Problems[0].Message, "255") {
				t.Fatalf("Decode with a %d-byte extension = %v, want one problem at extension naming the 255-byte limit", max+1, err)
			}
			if _, err := Decode(raw(max)); err != nil {
				t.Fatalf("Decode with a %d-byte extension: %v", max, err)
			}
			c := config(t)
			c.FilenameStrategy, c.Extension, c.ExtensionSet = tt.strategy, "."+strings.Repeat("x", max-1), true
			c.DuplicatePolicy = "overwrite"
			s := open(t, c)
			s.tmpfile = false // named temp files: the longest names
			for range 2 {     // the second write renames over the first
				if rs := s.WriteBatch(t.Context(), []*sink.Envelope{tt.e}); rs[0].Outcome != sink.Committed {
					t.Fatalf("write with the longest name: %v %v", rs[0].Outcome, rs[0].Err)
				}
			}
		})
	}
}
