package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

type verifyReport struct {
	Distinct, Duplicates, Open, Records, Segments, Torn, Unreadable int
	Streams                                                         []struct {
		Name              string
		Min, Max, Missing int
	}
}

func verifyLake(t *testing.T, lake string, expect string) (verifyReport, string) {
	t.Helper()
	args := []string{"segments", "verify", lake, "--format", "json"}
	if expect != "" {
		args = append(args, "--expect", expect)
	}
	cmd := exec.Command(binary, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, _ := cmd.Output() // exit 1 when sequences are missing
	var rep verifyReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("verify %v: output %q: %v\nstderr: %s", args, out, err, stderr.String())
	}
	return rep, strings.TrimSpace(string(out))
}

// expectUpTo is verify's --expect for stream SEG's sequences 1..floor, or
// none for floor 0: a kill between a segment's commit and its ACKs reaching
// the server leaves the floor where it was (0 in the first round), and
// "SEG:1-0" is no range.
func expectUpTo(floor uint64) string {
	if floor == 0 {
		return ""
	}
	return fmt.Sprintf("SEG:1-%d", floor)
}

// TestSegmentsParquetCrash kills the real binary with SIGKILL (twice over 20,000
// messages; three times over 100,000 with NATS_SINKS_SOAK=1) while it
// builds Parquet segments in held mode, with the consumer created by the
// product (so with room for the held messages). After each kill, every
// stream sequence at or below the consumer's ack floor must already lie in a
// committed segment: a held message is acknowledged only after its segment
// was committed. After the restarts and a drain, every sequence is present
// and no open segment is left.
func TestSegmentsParquetCrash(t *testing.T) {
	n, kills := scaled(20000, 100000), scaled(2, 3)
	s, js := segSource(t, n)

	lake := t.TempDir()
	cfg := writeConfig(t, fmt.Sprintf(`{
  "nats": {"url": %q, "stream": "SEG", "consumer": "seg-lake", "subject": "seg.>"},
  "consumer_management": {"ack_wait_seconds": 5},
  "delivery": {"batch_size": 500, "max_in_flight_batches": 4, "batch_timeout_ms": 200,
               "retry_backoff_ms": 100, "shutdown_timeout_ms": 10000},
  "logging": {"level": "WARNING"},
  "sink": {"type": "segments", "directory": %q, "format": "parquet", "max_records": 5000, "max_age_ms": 2000}
}`, s.ClientURL(), lake))

	ctx := context.Background()
	for round := range kills {
		p := start(t, cfg)
		// Kill once deliveries passed a threshold and this run committed a
		// segment (and so acknowledged messages). The ack floor itself stalls
		// after a kill until AckWait redelivers the killed run's held
		// messages.
		threshold := uint64(n * (round + 1) / (kills + 1))
		deadline := time.Now().Add(90 * time.Second)
		committed0 := countParquet(t, lake)
		for {
			info, err := consumerInfo(ctx, js, "SEG", "seg-lake")
			if err == nil && info.Delivered.Stream >= threshold && countParquet(t, lake) > committed0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("delivered sequence did not reach %d with a committed segment within 90s (%v)", threshold, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		p.kill(t)
		info, err := consumerInfo(ctx, js, "SEG", "seg-lake")
		if err != nil {
			t.Fatal(err)
		}
		floor := info.AckFloor.Stream
		rep, out := verifyLake(t, lake, expectUpTo(floor))
		t.Logf("round %d: killed; ack floor %d, ack pending %d; verify %s", round, floor, info.NumAckPending, out)
		// Without an expectation (ack floor 0) verify counts as missing the
		// gaps between the lowest and highest sequence it found, which
		// segments committed from redeliveries and later batches may leave;
		// only sequences at or below the floor must be there.
		if rep.Unreadable != 0 || floor > 0 && (len(rep.Streams) != 1 || rep.Streams[0].Missing != 0) {
			t.Errorf("after kill %d: sequences at or below the ack floor %d missing from committed segments: %s", round, floor, out)
		}
		if info.Config.MaxAckPending != 10000+4*500 {
			t.Errorf("consumer max_ack_pending = %d, want max_held_messages + in-flight capacity = %d", info.Config.MaxAckPending, 12000)
		}
	}

	p := start(t, cfg)
	natstest.WaitAckState(t, js, "SEG", "seg-lake", uint64(n), 0, 3*time.Minute)
	waitFetching(t, js, "SEG", "seg-lake")
	p.stop(t)

	rep, out := verifyLake(t, lake, fmt.Sprintf("SEG:1-%d", n))
	t.Logf("verify: %s", out)
	if rep.Open != 0 || rep.Unreadable != 0 {
		t.Errorf("open %d, unreadable %d; want 0, 0", rep.Open, rep.Unreadable)
	}
	if rep.Distinct != n || len(rep.Streams) != 1 || rep.Streams[0].Missing != 0 {
		t.Errorf("distinct %d, streams %+v; want %d and none missing", rep.Distinct, rep.Streams, n)
	}
}

// countParquet counts the committed Parquet segments below lake.
func countParquet(t *testing.T, lake string) int {
	t.Helper()
	n := 0
	filepath.WalkDir(lake, func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".parquet") {
			n++
		}
		return nil
	})
	return n
}
