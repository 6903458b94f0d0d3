package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// downloadLake copies every object of the bucket into a fresh local
// directory under its key, for `nats-sink segments verify`, and returns it.
func downloadLake(t *testing.T, st *s3Server) string {
	t.Helper()
	dir := t.TempDir()
	list, err := st.backend.ListBucket(s3Bucket, nil, gofakes3.ListBucketPage{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list.Contents {
		o, err := st.backend.GetObject(s3Bucket, c.Key, nil)
		if err != nil {
			t.Fatalf("get %s: %v", c.Key, err)
		}
		b, err := io.ReadAll(o.Contents)
		o.Contents.Close()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, filepath.FromSlash(c.Key))
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestSegmentsS3ParquetCrash kills the real binary with SIGKILL while it
// uploads Parquet segments to an S3 store (gofakes3 in the test process).
// After each kill, every stream sequence at or below the consumer's ack
// floor lies in an object already in the bucket (a held message is
// acknowledged only after its segment's upload completed). After the
// restarts and a drain, every sequence is present, every object is a
// complete, readable segment, and the staging directory is empty.
// NATS_SINKS_SOAK=1 runs the full 100,000 messages with three kills.
func TestSegmentsS3ParquetCrash(t *testing.T) {
	n, kills := 20000, 2
	if soak() {
		n, kills = 100000, 3
	}
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "SEG", Subjects: []string{"seg.>"}})
	natstest.PublishN(t, js, "seg.events", n, body256)

	st := newS3Server(t, nil, 0)
	staging := filepath.Join(t.TempDir(), "staging")
	t.Setenv("E2E_S3_KEY_ID", "AKIDE2E")
	t.Setenv("E2E_S3_SECRET", "e2e-secret")
	cfg := writeConfig(t, fmt.Sprintf(`{
  "nats": {"url": %q, "stream": "SEG", "consumer": "seg-lake", "subject": "seg.>"},
  "consumer_management": {"ack_wait_seconds": 5},
  "delivery": {"batch_size": 500, "max_in_flight_batches": 4, "batch_timeout_ms": 200,
               "retry_backoff_ms": 100, "shutdown_timeout_ms": 10000},
  "logging": {"level": "WARNING"},
  "sink": {"type": "segments", "target": "s3", "format": "parquet", "bucket": %q, "prefix": "lake",
           "endpoint_url": %q, "allow_http_for_local_testing": true, "region_name": "us-east-1",
           "credential_mode": "environment", "aws_access_key_id_env": "E2E_S3_KEY_ID",
           "aws_secret_access_key_env": "E2E_S3_SECRET", "staging_directory": %q,
           "max_records": 5000, "max_age_ms": 2000}
}`, s.ClientURL(), s3Bucket, st.srv.URL, staging))

	ctx := context.Background()
	for round := range kills {
		p := start(t, cfg)
		threshold := uint64(n * (round + 1) / (kills + 1))
		deadline := time.Now().Add(90 * time.Second)
		objects0 := len(st.objectKeys(t))
		for {
			info, err := consumerInfo(ctx, js)
			if err == nil && info.Delivered.Stream >= threshold && len(st.objectKeys(t)) > objects0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("delivered sequence did not reach %d with an uploaded segment within 90s (%v)\nstderr:\n%s", threshold, err, p.stderr.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
		p.kill(t)
		info, err := consumerInfo(ctx, js)
		if err != nil {
			t.Fatal(err)
		}
		floor := info.AckFloor.Stream
		rep, out := verifyLake(t, downloadLake(t, st), expectUpTo(floor))
		t.Logf("round %d: killed; ack floor %d, ack pending %d; verify %s", round, floor, info.NumAckPending, out)
		if floor > 0 && (rep.Unreadable != 0 || len(rep.Streams) != 1 || rep.Streams[0].Missing != 0) {
			t.Errorf("after kill %d: sequences at or below the ack floor %d missing from uploaded segments: %s", round, floor, out)
		}
	}

	p := start(t, cfg)
	natstest.WaitAckState(t, js, "SEG", "seg-lake", uint64(n), 0, 3*time.Minute)
	waitFetching(t, js, "SEG", "seg-lake")
	p.stop(t)

	for _, key := range st.objectKeys(t) {
		if !strings.HasPrefix(key, "lake/SEG/") || !strings.HasSuffix(key, ".parquet") {
			t.Errorf("unexpected object key %q", key)
		}
	}
	rep, out := verifyLake(t, downloadLake(t, st), fmt.Sprintf("SEG:1-%d", n))
	t.Logf("verify: %s", out)
	if rep.Open != 0 || rep.Unreadable != 0 {
		t.Errorf("open %d, unreadable %d; want 0, 0", rep.Open, rep.Unreadable)
	}
	if rep.Distinct != n || len(rep.Streams) != 1 || rep.Streams[0].Missing != 0 {
		t.Errorf("distinct %d, streams %+v; want %d and none missing", rep.Distinct, rep.Streams, n)
	}
	ents, err := os.ReadDir(staging)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("staging directory after shutdown holds %v, want nothing", names)
	}
}
