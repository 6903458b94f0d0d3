//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// TestRoutingInertWithoutFanout runs the binary with an active file sink
// beside named sinks and an enabled route: the loader warns that routes do
// not affect delivery, every message goes to the active sink only, and no
// named sink is opened (its directory, which opening would create, never
// appears).
func TestRoutingInertWithoutFanout(t *testing.T) {
	const stream, consumer = "FANINERT", "faninert"
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: stream, Subjects: []string{"faninert.>"}})
	natstest.PublishN(t, js, "faninert.events", 50, body)
	active := t.TempDir()
	named := filepath.Join(t.TempDir(), "named")
	cfg := fanWriteConfig(t, fmt.Sprintf(`{
  "nats": {"url": %q, "stream": %q, "consumer": %q, "subject": "faninert.>"},
  "delivery": {"batch_size": 20, "batch_timeout_ms": 100},
  "logging": {"level": "WARNING"},
  "sink": {"type": "file", "directory": %q, "partition_by_subject": false},
  "sinks": {"other": {"type": "file", "directory": %q, "partition_by_subject": false}},
  "routing": {"enabled": true, "routes": [{"name": "all", "match": {"subject": "faninert.>"}, "targets": "other"}]}
}`, s.ClientURL(), stream, consumer, active, named))
	p := start(t, cfg)
	natstest.WaitAckState(t, js, stream, consumer, 50, 0, 30*time.Second)
	p.stop(t)
	if want := `Warning: routing: enabled but sink.type is not "fanout"; routes do not affect delivery`; !strings.Contains(p.stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, p.stderr.String())
	}
	if !strings.Contains(p.stdout.String(), "Active sink: file\n") {
		t.Errorf("stdout lacks the active sink line:\n%s", p.stdout.String())
	}
	exactlyOnce(t, "active (file)", fanFileSeqs(t, active, stream), fanSeqRange(1, 50))
	if _, err := os.Stat(named); !os.IsNotExist(err) {
		t.Errorf("the named sink's directory exists (%v): the named sink was opened", err)
	}
}
