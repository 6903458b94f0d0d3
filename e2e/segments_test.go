package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// TestSegmentsCrash (the JSON Lines case: 30,000 messages, 100,000 with
// NATS_SINKS_SOAK=1) kills the real binary with SIGKILL while it appends
// JSON Lines segments with fsync, restarts it, drains the stream and checks
// with `nats-sink segments verify`: every stream sequence present, no open
// or torn segment left, and duplicates only within what was fetched but not
// acknowledged at each kill.
func TestSegmentsCrash(t *testing.T) {
	for _, tt := range []struct {
		name        string
		n, kills    int
		compression string
	}{
		{"jsonl", scaled(30000, 100000), 3, ""},
		{"gzip", 20000, 1, "gzip"},
		{"zstd", 20000, 1, "zstd"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			segmentsCrash(t, tt.n, tt.kills, tt.compression)
		})
	}
}

// segSource starts an embedded JetStream server with the stream SEG
// (seg.>) holding n 256-byte messages on seg.events, the source of every
// segments test.
func segSource(t *testing.T, n int) (*server.Server, jetstream.JetStream) {
	t.Helper()
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "SEG", Subjects: []string{"seg.>"}})
	natstest.PublishN(t, js, "seg.events", n, body256)
	return s, js
}

func segmentsCrash(t *testing.T, n, kills int, compression string) {
	s, js := segSource(t, n)

	lake := t.TempDir()
	comp := ""
	if compression != "" {
		comp = fmt.Sprintf(`, "compression": %q`, compression)
	}
	cfg := writeConfig(t, fmt.Sprintf(`{
  "nats": {"url": %q, "stream": "SEG", "consumer": "seg-lake", "subject": "seg.>"},
  "consumer_management": {"ack_wait_seconds": 5, "max_ack_pending": 4000},
  "delivery": {"batch_size": 500, "max_in_flight_batches": 4, "batch_timeout_ms": 200,
               "retry_backoff_ms": 100, "shutdown_timeout_ms": 10000},
  "logging": {"level": "WARNING"},
  "sink": {"type": "segments", "directory": %q, "max_records": 10000%s}
}`, s.ClientURL(), lake, comp))
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("random seed %d", seed)

	ctx := context.Background()
	inFlight := 0
	for round := range kills {
		p := start(t, cfg)
		// Kill after at least one acknowledgement of this round, at a
		// random point of the run: once the ack floor passes a threshold
		// spread over the stream.
		// The ack floor stalls while a gap left by the previous kill waits
		// for redelivery, so progress is the last delivered sequence, and
		// one acknowledgement is the consumer's ack floor moving.
		var floor0 uint64
		if c, err := js.Consumer(ctx, "SEG", "seg-lake"); err == nil {
			if info, err := c.Info(ctx); err == nil {
				floor0 = info.AckFloor.Consumer
			}
		}
		threshold := uint64(n*(round+1)/(kills+1) - rng.IntN(n/(4*(kills+1))))
		deadline := time.Now().Add(60 * time.Second)
		drained := false
		for {
			info, err := consumerInfo(ctx, js, "SEG", "seg-lake")
			if err == nil && info.Delivered.Stream >= threshold && info.AckFloor.Consumer > floor0 {
				break
			}
			// On a loaded machine the polls can be so far apart that the
			// process writes the whole stream before a kill point comes.
			if err == nil && info.AckFloor.Stream >= uint64(n) {
				drained = true
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("delivered sequence did not reach %d with an acknowledgement within 60s (%v)", threshold, err)
			}
			time.Sleep(2 * time.Millisecond)
		}
		p.kill(t)
		floor, pending, err := ackState(ctx, js, "SEG", "seg-lake")
		inFlight += pending
		t.Logf("round %d: killed; ack floor %d, ack pending %d (%v)", round, floor, pending, err)
		if drained {
			t.Logf("round %d: the stream was drained before the kill point; no further kills", round)
			break
		}
	}

	p := start(t, cfg)
	natstest.WaitAckState(t, js, "SEG", "seg-lake", uint64(n), 0, 3*time.Minute)
	waitFetching(t, js, "SEG", "seg-lake")
	p.stop(t)

	out, err := exec.Command(binary, "segments", "verify", lake, "--format", "json", "--expect", fmt.Sprintf("SEG:1-%d", n)).CombinedOutput()
	if err != nil {
		t.Fatalf("segments verify: %v\n%s", err, out)
	}
	var rep struct {
		Distinct, Duplicates, Open, Records, Segments, Torn, Unreadable int
		Streams                                                         []struct {
			Name              string
			Min, Max, Missing int
		}
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("verify output %s: %v", out, err)
	}
	t.Logf("verify: %s", strings.TrimSpace(string(out)))
	if rep.Open != 0 || rep.Torn != 0 || rep.Unreadable != 0 {
		t.Errorf("open %d, torn %d, unreadable %d; want 0, 0, 0", rep.Open, rep.Torn, rep.Unreadable)
	}
	if rep.Distinct != n || len(rep.Streams) != 1 || rep.Streams[0].Missing != 0 {
		t.Errorf("distinct %d, streams %+v; want %d and none missing", rep.Distinct, rep.Streams, n)
	}
	if rep.Duplicates > inFlight {
		t.Errorf("duplicates %d, more than the %d messages fetched but not acknowledged at the kills", rep.Duplicates, inFlight)
	}
	checkSegmentRecords(t, lake)
}

// checkSegmentRecords reads uncompressed segments line by line as JSON and
// checks each record's payload matches its stream sequence: the record a
// reader gets is the message that was published.
func checkSegmentRecords(t *testing.T, lake string) {
	t.Helper()
	checked := 0
	filepath.WalkDir(lake, func(path string, d os.DirEntry, err error) error {
		if err != nil || !strings.HasSuffix(path, ".jsonl") {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var rec struct {
				Schema         string `json:"schema"`
				StreamSequence int    `json:"stream_sequence"`
				Payload        struct{ N int }
			}
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if rec.Payload.N != rec.StreamSequence || rec.Schema != "nats_sinks.file.message.v1" {
				t.Fatalf("%s: record of stream sequence %d holds n %d, schema %q", path, rec.StreamSequence, rec.Payload.N, rec.Schema)
			}
			checked++
		}
		return sc.Err()
	})
	t.Logf("checked %d records field by field", checked)
}
