package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"

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

// s3SegmentsConfig writes the run configuration of a segments sink that
// uploads to st: the consumer SEG/seg-lake over seg.>, the given sink keys
// (format, rolling) after the connection's, and shutdownMS.
func s3SegmentsConfig(t *testing.T, url string, st *s3Server, staging, sinkKeys string, shutdownMS int) string {
	t.Helper()
	t.Setenv("E2E_S3_KEY_ID", "AKIDE2E")
	t.Setenv("E2E_S3_SECRET", "e2e-secret")
	return writeConfig(t, fmt.Sprintf(`{
  "nats": {"url": %q, "stream": "SEG", "consumer": "seg-lake", "subject": "seg.>"},
  "consumer_management": {"ack_wait_seconds": 5},
  "delivery": {"batch_size": 500, "max_in_flight_batches": 4, "batch_timeout_ms": 200,
               "retry_backoff_ms": 100, "shutdown_timeout_ms": %d},
  "logging": {"level": "WARNING"},
  "sink": {"type": "segments", "target": "s3", "bucket": %q, "prefix": "lake",
           "endpoint_url": %q, "allow_http_for_local_testing": true, "region_name": "us-east-1",
           "credential_mode": "environment", "aws_access_key_id_env": "E2E_S3_KEY_ID",
           "aws_secret_access_key_env": "E2E_S3_SECRET", "staging_directory": %q, %s}
}`, url, shutdownMS, s3Bucket, st.srv.URL, staging, sinkKeys))
}

// checkS3Lake downloads the bucket and checks that it holds exactly the
// sequences 1..n of SEG, each in a complete, readable segment whose key
// has the configured prefix and ext, and that staging is empty.
func checkS3Lake(t *testing.T, st *s3Server, staging string, n int, ext string) {
	t.Helper()
	for _, key := range st.objectKeys(t) {
		if !strings.HasPrefix(key, "lake/SEG/") || !strings.HasSuffix(key, ext) {
			t.Errorf("unexpected object key %q", key)
		}
	}
	rep, out := verifyLake(t, downloadLake(t, st), fmt.Sprintf("SEG:1-%d", n))
	t.Logf("verify: %s", out)
	if rep.Open != 0 || rep.Unreadable != 0 || rep.Torn != 0 {
		t.Errorf("open %d, unreadable %d, torn %d; want 0, 0, 0", rep.Open, rep.Unreadable, rep.Torn)
	}
	if rep.Distinct != n || len(rep.Streams) != 1 || rep.Streams[0].Missing != 0 {
		t.Errorf("distinct %d, streams %+v; want %d and none missing", rep.Distinct, rep.Streams, n)
	}
	ents, err := os.ReadDir(staging)
	if err != nil && !os.IsNotExist(err) {
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

// TestSegmentsS3Crash kills the real binary with SIGKILL while it uploads
// segments to an S3 store (gofakes3 in the test process): Parquet (20,000
// messages, two kills) and zstd JSON Lines (20,000, one kill). After each
// kill, every stream sequence at or below the consumer's ack floor lies in
// an object already in the bucket (a held message is acknowledged only
// after its segment's upload completed). After the restarts and a drain,
// every sequence is present, every object is a complete, readable segment,
// and the staging directory is empty. NATS_SINKS_SOAK=1 runs 100,000
// messages with three kills in both formats.
func TestSegmentsS3Crash(t *testing.T) {
	t.Run("parquet", func(t *testing.T) {
		n, kills := 20000, 2
		if soak() {
			n, kills = 100000, 3
		}
		s3Crash(t, `"format": "parquet"`, ".parquet", n, kills)
	})
	t.Run("jsonl", func(t *testing.T) {
		n, kills := 20000, 1
		if soak() {
			n, kills = 100000, 3
		}
		s3Crash(t, `"format": "jsonl", "compression": "zstd"`, ".jsonl.zst", n, kills)
	})
}

func s3Crash(t *testing.T, format, ext string, n, kills int) {
	s, js := segSource(t, n)

	st := newS3Server(t, nil, 0)
	staging := filepath.Join(t.TempDir(), "staging")
	cfg := s3SegmentsConfig(t, s.ClientURL(), st, staging, format+`, "max_records": 5000, "max_age_ms": 2000`, 10000)

	ctx := context.Background()
	for round := range kills {
		p := start(t, cfg)
		threshold := uint64(n * (round + 1) / (kills + 1))
		deadline := time.Now().Add(90 * time.Second)
		objects0 := len(st.objectKeys(t))
		for {
			info, err := consumerInfo(ctx, js, "SEG", "seg-lake")
			if err == nil && info.Delivered.Stream >= threshold && len(st.objectKeys(t)) > objects0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("delivered sequence did not reach %d with an uploaded segment within 90s (%v)\nstderr:\n%s", threshold, err, p.stderr.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
		p.kill(t)
		info, err := consumerInfo(ctx, js, "SEG", "seg-lake")
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
	checkS3Lake(t, st, staging, n, ext)
}

// TestSegmentsS3Outage: the store answers every upload 503 SlowDown for
// 10 s from the first one. The held segments that cannot be
// uploaded are retried or NAKed and redelivered; once the store is back,
// every message is committed in a complete object, nothing is lost, and
// the process never stopped.
func TestSegmentsS3Outage(t *testing.T) {
	const n = 5000
	s, js := segSource(t, n)

	st := newS3Server(t, nil, 0)
	staging := filepath.Join(t.TempDir(), "staging")
	cfg := s3SegmentsConfig(t, s.ClientURL(), st, staging,
		`"format": "parquet", "max_records": 1000, "max_age_ms": 1000, "commit_timeout_ms": 3000`, 10000)
	st.outage(10 * time.Second)
	p := start(t, cfg)
	natstest.WaitAckState(t, js, "SEG", "seg-lake", n, 0, 2*time.Minute)
	st.mu.Lock()
	refused := st.refused
	st.mu.Unlock()
	if refused == 0 {
		t.Fatal("the store refused no upload: the outage was not exercised")
	}
	select {
	case <-p.done:
		t.Fatalf("nats-sink exited during the outage\nstderr:\n%s", p.stderr.String())
	default:
	}
	waitFetching(t, js, "SEG", "seg-lake")
	p.stop(t)
	t.Logf("uploads refused during the outage: %d", refused)
	checkS3Lake(t, st, staging, n, ".parquet")
}

// TestSegmentsS3Shutdown SIGTERMs the binary while every message is held in
// open segments (max_age_ms far beyond the test). With the store answering,
// the shutdown commits them: exit 0 within shutdown_timeout_ms + 5 s, and
// every message ACKed and in the bucket. With a store that never answers an
// upload, the shutdown gives up at shutdown_timeout_ms: exit 0 within the
// same bound, "drain timed out" logged with the abandoned count, nothing
// ACKed; a restart against the healed store then commits every message.
func TestSegmentsS3Shutdown(t *testing.T) {
	const n = 3000
	for _, stalled := range []bool{false, true} {
		t.Run(map[bool]string{false: "held", true: "stalled"}[stalled], func(t *testing.T) {
			s, js := segSource(t, n)
			var gate chan struct{}
			if stalled {
				gate = make(chan struct{})
			}
			st := newS3Server(t, gate, 0)
			staging := filepath.Join(t.TempDir(), "staging")
			const shutdownMS = 4000
			cfg := s3SegmentsConfig(t, s.ClientURL(), st, staging,
				`"format": "parquet", "max_records": 10000, "max_age_ms": 600000`, shutdownMS)

			// The sink holds every message once held_messages reads n: the
			// server's delivery count alone can run ahead of what reached
			// the sink, and a batch still on its way at SIGTERM is NAKed,
			// not committed.
			addr := freeAddr(t)
			replaceInFile(t, cfg, `"logging": {"level": "WARNING"}`,
				fmt.Sprintf(`"logging": {"level": "WARNING"}, "metrics": {"enabled": true, "listen": %q}`, addr))
			p := start(t, cfg)
			ctx := context.Background()
			natstest.WaitFor(t, time.Minute, func() error {
				m, err := getMetrics(addr)
				if err != nil {
					return err
				}
				if m["held_messages"] != n {
					return fmt.Errorf("held_messages = %v, want %d", m["held_messages"], n)
				}
				return nil
			})
			if keys := st.objectKeys(t); len(keys) != 0 {
				t.Fatalf("objects before the shutdown: %v, want none (the segment is open)", keys)
			}
			began := time.Now()
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			bound := time.Duration(shutdownMS)*time.Millisecond + 5*time.Second
			code := p.wait(t, bound+15*time.Second)
			took := time.Since(began)
			t.Logf("SIGTERM to exit: %v", took)
			if code != 0 {
				t.Fatalf("exit code %d, want 0\nstderr:\n%s", code, p.stderr.String())
			}
			if took > bound {
				t.Errorf("shutdown took %v, beyond shutdown_timeout_ms + 5 s = %v", took, bound)
			}
			if !stalled {
				natstest.WaitAckState(t, js, "SEG", "seg-lake", n, 0, 30*time.Second)
				checkS3Lake(t, st, staging, n, ".parquet")
				return
			}
			if !strings.Contains(p.stderr.String(), "drain timed out") {
				t.Errorf("no \"drain timed out\" warning after the stalled shutdown\nstderr:\n%s", p.stderr.String())
			}
			info, err := consumerInfo(ctx, js, "SEG", "seg-lake")
			if err != nil {
				t.Fatal(err)
			}
			if info.AckFloor.Stream != 0 {
				t.Fatalf("ack floor %d after a shutdown that committed nothing, want 0", info.AckFloor.Stream)
			}
			if keys := st.objectKeys(t); len(keys) != 0 {
				t.Fatalf("objects after the stalled shutdown: %v, want none", keys)
			}
			// The restart rolls by age, so that it commits while running.
			close(gate)
			p = start(t, s3SegmentsConfig(t, s.ClientURL(), st, staging,
				`"format": "parquet", "max_records": 10000, "max_age_ms": 1000`, shutdownMS))
			natstest.WaitAckState(t, js, "SEG", "seg-lake", n, 0, 2*time.Minute)
			waitFetching(t, js, "SEG", "seg-lake")
			p.stop(t)
			checkS3Lake(t, st, staging, n, ".parquet")
		})
	}
}
