package file

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/sink"
)

// TestFullDisk writes into a 64 KiB tmpfs until it is full: the message that
// does not fit is Temporary (ENOSPC), the rest NotAttempted, everything
// reported Committed is on disk, and no temp file is left.
func TestFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tiny tmpfs; TestDestinationFailures covers OS errors unprivileged")
	}
	mnt := t.TempDir()
	if out, err := runMount(t, "-t", "tmpfs", "-o", "size=64k", "tmpfs", mnt); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s)", err, out)
	}
	t.Cleanup(func() { runMount(t, "-u", mnt) })
	variants(t, func(t *testing.T, tune func(*Sink)) {
		c := Default()
		c.Directory = filepath.Join(mnt, strings.ReplaceAll(t.Name(), "/", "_"))
		c.PayloadMode = "bytes_envelope"
		s := open(t, c)
		tune(s)
		body := strings.Repeat("x", 8000)
		var batch []*sink.Envelope
		for i := range 40 { // ~11 KB records: 40 of them cannot fit in 64 KiB
			batch = append(batch, env("full", uint64(i+1), "", body))
		}
		rs := s.WriteBatch(t.Context(), batch)
		first := -1
		for i, r := range rs {
			switch {
			case first < 0 && r.Outcome == sink.Committed:
				if _, err := os.Stat(filepath.Join(c.Directory, "full", fmt.Sprintf("ORDERS-%020d.json", i+1))); err != nil {
					t.Errorf("result %d Committed but: %v", i, err)
				}
			case first < 0:
				first = i
				if r.Outcome != sink.Temporary || !strings.Contains(r.Err.Error(), "no space left") {
					t.Errorf("result %d = %v %v, want Temporary ENOSPC", i, r.Outcome, r.Err)
				}
			case r.Outcome != sink.NotAttempted:
				t.Errorf("result %d = %v after the failure, want NotAttempted", i, r.Outcome)
			}
		}
		if first < 0 {
			t.Fatal("the disk never filled up")
		}
		assertNoTemps(t, c.Directory)
		os.RemoveAll(c.Directory) // room for the next variant
	})
}
