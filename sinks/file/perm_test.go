package file

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-sinks/nats-sink/sink"
)

// TestDirectoryModes: the directories the sink creates (the root, its
// missing parents and the subject directories) give no access to others:
// 0750 before the umask, so that records (0600) are not even listed for
// every local user.
func TestDirectoryModes(t *testing.T) {
	base := t.TempDir()
	c := Default()
	c.Directory = filepath.Join(base, "a", "root")
	s := open(t, c)
	if rs := s.WriteBatch(t.Context(), []*sink.Envelope{env("orders.created", 1, "", "{}")}); rs[0].Outcome != sink.Committed {
		t.Fatalf("write: %+v", rs[0])
	}
	for _, d := range []string{filepath.Join(base, "a"), c.Directory, filepath.Join(c.Directory, "orders.created")} {
		st, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if m := st.Mode().Perm(); m&0o027 != 0 {
			t.Errorf("%s mode = %v, want no group-write and no other access (0750 before umask)", d, m)
		}
	}
}
