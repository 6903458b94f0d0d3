package file

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/sink"
)

// TestSanitisedNamesStayDistinct: subjects that sanitise alike ("a.x",
// "a.x-", "a.é", "a.ü") with equal bodies under payload_sha256 used to get
// one file name, and every message after the first was acknowledged as a
// duplicate without being stored. Each must get its own file, with and
// without subject directories, and a name that needed no change keeps it.
func TestSanitisedNamesStayDistinct(t *testing.T) {
	subjects := []string{"a.x", "a.x-", "a.é", "a.ü", "a.x_", "a x"}
	for _, partition := range []bool{false, true} {
		t.Run(map[bool]string{false: "flat", true: "partitioned"}[partition], func(t *testing.T) {
			c := config(t)
			c.FilenameStrategy = "payload_sha256"
			c.PartitionBySubject = partition
			s := open(t, c)
			var batch []*sink.Envelope
			for i, subj := range subjects {
				batch = append(batch, env(subj, uint64(i+1), "", `{"same":"body"}`))
			}
			rs := s.WriteBatch(t.Context(), batch)
			for i, r := range rs {
				if r.Outcome != sink.Committed {
					t.Errorf("subject %q: %v %v, want Committed", subjects[i], r.Outcome, r.Err)
				}
			}
			got := files(t, c.Directory)
			if len(got) != len(subjects) {
				t.Fatalf("%d files for %d subjects: %v", len(got), len(subjects), got)
			}
			// The unchanged subject keeps the nats-sinks name.
			plain := "a.x-" + sha256Hex(`{"same":"body"}`) + ".json"
			if partition {
				plain = "a.x/" + plain
			}
			found := false
			for _, f := range got {
				found = found || f == plain
			}
			if !found {
				t.Errorf("files %v lack %s (a subject that needed no change keeps its name)", got, plain)
			}
			// A redelivery of every message is a duplicate, nothing more.
			rs = s.WriteBatch(t.Context(), batch)
			for i, r := range rs {
				if r.Outcome != sink.Duplicate {
					t.Errorf("redelivery of %q: %v %v, want Duplicate", subjects[i], r.Outcome, r.Err)
				}
			}
		})
	}
}

// TestExistingFileOfAnotherMessage: a file already at a message's name
// whose record names another message (written before names were made
// distinct, or by a hash collision) is not a duplicate: the message is a
// permanent failure (dead-lettered), and the file is left alone.
func TestExistingFileOfAnotherMessage(t *testing.T) {
	for _, tt := range []struct {
		strategy string
		mine     *sink.Envelope
		other    *sink.Envelope
	}{
		// Same name before the fix: "order/1" sanitised to "order_1".
		{"payload_sha256", env("a.x", 1, "", "{}"), env("a.x-", 2, "", "{}")},
		{"stream_sequence", env("a", 7, "", "{}"), env("a", 7, "", "{}")},
		{"message_id", env("a", 1, "m-1", "{}"), env("a", 2, "m-2", "{}")},
	} {
		t.Run(tt.strategy, func(t *testing.T) {
			c := config(t)
			c.FilenameStrategy = tt.strategy
			c.PartitionBySubject = false
			s := open(t, c)
			if tt.strategy == "stream_sequence" {
				tt.other.Stream = "OTHER" // another stream's record at ORDERS-…7
			}
			if rs := s.WriteBatch(t.Context(), []*sink.Envelope{tt.mine}); rs[0].Outcome != sink.Committed {
				t.Fatalf("first write: %+v", rs[0])
			}
			name := files(t, c.Directory)[0]
			path := filepath.Join(c.Directory, name)
			// Put the other message's record under my name.
			s2 := open(t, Config{Type: "file", Directory: t.TempDir(), Mode: c.Mode, FilenameStrategy: tt.strategy,
				DuplicatePolicy: c.DuplicatePolicy, PayloadMode: c.PayloadMode, Compression: "none", CompressionLevel: 6,
				CreateDirectory: true, Fsync: true, IncludeMetadata: true})
			s2.WriteBatch(t.Context(), []*sink.Envelope{tt.other})
			otherFile := filepath.Join(s2.cfg.Directory, files(t, s2.cfg.Directory)[0])
			if err := os.Rename(otherFile, path); err != nil {
				t.Fatal(err)
			}
			before := read(t, path)
			rs := s.WriteBatch(t.Context(), []*sink.Envelope{tt.mine})
			if rs[0].Outcome != sink.Permanent || rs[0].ErrorType != sink.PermanentSinkError {
				t.Fatalf("write over another message's file = %v %q (%v), want Permanent PermanentSinkError", rs[0].Outcome, rs[0].ErrorType, rs[0].Err)
			}
			if !strings.Contains(rs[0].Err.Error(), name) {
				t.Errorf("error %q does not name the file", rs[0].Err)
			}
			if diff := cmp.Diff(string(before), string(read(t, path))); diff != "" {
				t.Errorf("the other message's file changed (-before +after):\n%s", diff)
			}
		})
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
