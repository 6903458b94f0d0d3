//go:build linux

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// TestFanoutDeadLetters runs the binary with two required targets, a file
// sink in json_only mode and SQLite, no_match "reject" and a DLQ, over
// four messages: a JSON message, a non-JSON message (permanent in the file
// target only), a message no route matches, and another JSON message. It
// checks what the contract promises for each, on the wire and at rest:
//   - the non-JSON message is dead-lettered naming the target that refused
//     it (header x-fanout-target: archive, error "archive: …", the file
//     sink's error type), its copy in SQLite stays;
//   - the unroutable message is dead-lettered with PermanentSinkError and
//     "fan-out routing selected no child sink target", no x-fanout-target,
//     and is written nowhere;
//   - both are acknowledged only after their DLQ record was published (the
//     record reaches a subscriber before the ACK does);
//   - the routable messages of the same batch are written and ACKed.
func TestFanoutDeadLetters(t *testing.T) {
	const stream, consumer = "FANDL", "fandl"
	s := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: stream, Subjects: []string{"fandl.>"}})
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "FANDL_DLQ", Subjects: []string{"dlq.fandl"}})

	// One channel receives the DLQ publishes and the ACKs in the order the
	// connection read them, which is the order the binary's connection sent
	// them (callback subscriptions would each deliver on their own
	// goroutine, in no common order).
	var (
		mu     sync.Mutex
		events []string // "dlq <seq>" / "settle <seq>" (ACK or TERM)
		recs   = map[uint64]*nats.Msg{}
	)
	ch := make(chan *nats.Msg, 64)
	for _, subj := range []string{"dlq.fandl", "$JS.ACK." + stream + "." + consumer + ".>"} {
		sub, err := nc.ChanSubscribe(subj, ch)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sub.Unsubscribe() })
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		for {
			var m *nats.Msg
			select {
			case m = <-ch:
			case <-done:
				return
			}
			if m.Subject == "dlq.fandl" {
				v, err := jsonx.Parse(m.Data)
				doc, _ := v.(map[string]any)
				seq, _ := doc["stream_sequence"].(jsonx.Integer)
				mu.Lock()
				if err != nil {
					events = append(events, "dlq body is not JSON")
				}
				var n uint64
				fmt.Sscan(string(seq), &n)
				events = append(events, fmt.Sprintf("dlq %d", n))
				recs[n] = m
				mu.Unlock()
				continue
			}
			seq, ok := ackSeq(m.Subject)
			if !ok {
				continue
			}
			// ACK and TERM both settle a dead-lettered message; anything
			// else (NAK, WPI) is recorded under its own name.
			kind := "settle"
			if b := string(m.Data); b != "" && b != "+ACK" && !strings.HasPrefix(b, "+TERM") {
				kind = strings.TrimPrefix(b, "+")
			}
			mu.Lock()
			events = append(events, fmt.Sprintf("%s %d", kind, seq))
			mu.Unlock()
		}
	}()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	for _, m := range []struct{ subj, body string }{
		{"fandl.data", `{"n":1}`},
		{"fandl.data", `not json`},
		{"fandl.other", `{"n":3}`},
		{"fandl.data", `{"n":4}`},
	} {
		if _, err := js.Publish(ctx, m.subj, []byte(m.body)); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	dbPath := filepath.Join(t.TempDir(), "fan.db")
	cfg := fanWriteConfig(t, fmt.Sprintf(`{
  "nats": {"url": %q, "stream": %q, "consumer": %q, "subject": "fandl.>"},
  "delivery": {"batch_size": 10, "batch_timeout_ms": 200},
  "dead_letter": {"enabled": true, "subject": "dlq.fandl"},
  "logging": {"level": "ERROR"},
  "sinks": {
    "archive": {"type": "file", "directory": %q, "partition_by_subject": false, "payload_mode": "json_only"},
    "db": {"type": "sqlite", "path": %q}
  },
  "routing": {"enabled": true, "no_match": "reject",
    "routes": [{"name": "data", "match": {"subject": "fandl.data"}, "targets": ["archive", "db"]}]},
  "sink": {"type": "fanout"}
}`, s.ClientURL(), stream, consumer, dir, dbPath))
	p := start(t, cfg)
	natstest.WaitAckState(t, js, stream, consumer, 4, 0, 30*time.Second)
	natstest.WaitFor(t, 10*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(recs) != 2 || len(events) != 6 {
			return fmt.Errorf("seen %v", events)
		}
		return nil
	})
	p.stop(t)

	mu.Lock()
	defer mu.Unlock()
	pos := map[string]int{}
	for i, e := range events {
		if _, dup := pos[e]; dup {
			t.Errorf("%q seen twice in %v", e, events)
		}
		pos[e] = i
	}
	for _, want := range []string{"settle 1", "settle 4", "dlq 2", "settle 2", "dlq 3", "settle 3"} {
		if _, ok := pos[want]; !ok {
			t.Errorf("no %q in %v", want, events)
		}
	}
	for _, seq := range []int{2, 3} {
		if pos[fmt.Sprintf("settle %d", seq)] < pos[fmt.Sprintf("dlq %d", seq)] {
			t.Errorf("message %d acknowledged before its DLQ record was published: %v", seq, events)
		}
	}

	check := func(seq uint64, target, errType, errPrefix string) {
		t.Helper()
		m := recs[seq]
		if m == nil {
			t.Errorf("no DLQ record for message %d", seq)
			return
		}
		if got := m.Header.Get("x-fanout-target"); got != target {
			t.Errorf("message %d: x-fanout-target = %q, want %q", seq, got, target)
		}
		v, _ := jsonx.Parse(m.Data)
		doc := v.(map[string]any)
		if doc["error_type"] != errType {
			t.Errorf("message %d: error_type = %v, want %s", seq, doc["error_type"], errType)
		}
		if e, _ := doc["error"].(string); !strings.HasPrefix(e, errPrefix) {
			t.Errorf("message %d: error = %q, want it to start with %q", seq, e, errPrefix)
		}
	}
	check(2, "archive", "SerializationError", "archive: ")
	check(3, "", "PermanentSinkError", "fan-out routing selected no child sink target")

	exactlyOnce(t, "archive (file)", fanFileSeqs(t, dir, stream), map[uint64]bool{1: true, 4: true})
	exactlyOnce(t, "db (sqlite)", fanSQLiteSeqs(t, dbPath), map[uint64]bool{1: true, 2: true, 4: true})
}
