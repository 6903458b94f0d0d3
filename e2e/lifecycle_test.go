package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// TestSecondSignalForcesExit holds every request at the HTTP endpoint, so
// batches are in flight, and signals the binary twice: the first SIGTERM
// starts the drain (which would wait for the endpoint, for up to the
// 10-minute shutdown timeout configured here), the second ends the process
// at once with exit 1, while the endpoint still holds everything. Nothing
// is acknowledged, then or later.
func TestSecondSignalForcesExit(t *testing.T) {
	const n = 300
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "HTTPE2E", Subjects: []string{"httpe2e.>"}})
	natstest.PublishN(t, js, "httpe2e.events", n, body)
	gate := make(chan struct{})
	defer close(gate) // after the process is gone: nothing can answer it any more
	is := newIdempotentServer(t, gate, 0)
	cfg := httpConfig(t, s.ClientURL(), is.srv.URL, 30, 4)
	replaceInFile(t, cfg, `"shutdown_timeout_ms": 10000`, `"shutdown_timeout_ms": 600000`)
	replaceInFile(t, cfg, `"level": "WARNING"`, `"level": "INFO"`)

	p := start(t, cfg)
	natstest.WaitFor(t, time.Minute, func() error {
		if _, waiting, _ := is.counts(); waiting < 4 {
			return fmt.Errorf("%d requests held, waiting for 4", waiting)
		}
		return nil
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, 30*time.Second, func() error {
		if !strings.Contains(p.stderr.String(), `"msg":"shutdown requested"`) {
			return fmt.Errorf("no shutdown requested record yet")
		}
		return nil
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The drain would outlast this wait by far: only the forced exit ends
	// the process while the endpoint still holds every request.
	if code := p.wait(t, 30*time.Second); code != 1 {
		t.Errorf("exit code after the second SIGTERM = %d, want 1\nstderr:\n%s", code, p.stderr.String())
	}
	if !strings.Contains(p.stderr.String(), "Runtime error: forced shutdown") {
		t.Errorf("stderr lacks %q:\n%s", "Runtime error: forced shutdown", p.stderr.String())
	}
	if _, waiting, stored := is.counts(); stored != 0 {
		t.Errorf("endpoint stored %d keys (%d held), want 0", stored, waiting)
	}
	holdsNoAcks(t, js, "HTTPE2E", "http-e2e", 10, "the process was forced to exit mid-batch")
}

// TestConsumerRecreated deletes the durable consumer twice while the
// binary runs. In create_if_missing mode consumer management runs again
// each time: a new consumer (deliver policy all) takes over, everything is
// written exactly once (the file sink skips what exists) and acknowledged
// on the new consumer. In bind_only mode the process stops with exit 2.
func TestConsumerRecreated(t *testing.T) {
	const n, part = 300, 100
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "RECREATE", Subjects: []string{"recreate.>"}})
	natstest.PublishN(t, js, "recreate.events", part, body)
	out := t.TempDir()
	cfg := fileConfig(t, s.ClientURL(), "RECREATE", "recreate-file", "recreate.>", out, "")
	// INFO: each re-creation logs "consumer ready"; the WARNING that
	// precedes it is rate-limited like every repeated failure record
	// (docs/observability.md#logs), so it appears once.
	replaceInFile(t, cfg, `"level": "WARNING"`, `"level": "INFO"`)
	ctx := context.Background()

	p := start(t, cfg)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("nats-sink stderr:\n%s", p.stderr.String())
		}
	})
	natstest.WaitAckState(t, js, "RECREATE", "recreate-file", part, 0, time.Minute)
	for published := part; published < n; published += part {
		if err := js.DeleteConsumer(ctx, "RECREATE", "recreate-file"); err != nil {
			t.Fatal(err)
		}
		natstest.PublishN(t, js, "recreate.events", part, func(i int) []byte { return body(i + published) })
		natstest.WaitAckState(t, js, "RECREATE", "recreate-file", uint64(published+part), 0, time.Minute)
	}
	if !strings.Contains(p.stderr.String(), `"msg":"consumer disappeared; running consumer management again"`) {
		t.Errorf("stderr lacks the consumer-management rerun:\n%s", p.stderr.String())
	}
	if got := strings.Count(p.stderr.String(), `"msg":"consumer ready","component":"consumer","action":"created"`); got != 3 {
		t.Errorf("stderr shows %d consumer creations, want 3 (start and two re-creations):\n%s", got, p.stderr.String())
	}
	p.stop(t)
	checkFiles(t, out, "RECREATE", n)

	t.Run("bind_only", func(t *testing.T) {
		bind := fileConfig(t, s.ClientURL(), "RECREATE", "recreate-file", "recreate.>", t.TempDir(), "")
		replaceInFile(t, bind, `"consumer_management": {`, `"consumer_management": {"mode": "bind_only", `)
		p := start(t, bind)
		waitFetching(t, js, "RECREATE", "recreate-file")
		if err := js.DeleteConsumer(ctx, "RECREATE", "recreate-file"); err != nil {
			t.Fatal(err)
		}
		if code := p.wait(t, 30*time.Second); code != 2 {
			t.Errorf("exit code = %d, want 2\nstderr:\n%s", code, p.stderr.String())
		}
		if !strings.Contains(p.stderr.String(), "Configuration error: ") || !strings.Contains(p.stderr.String(), "consumer not found") {
			t.Errorf("stderr does not report the vanished consumer as a configuration error:\n%s", p.stderr.String())
		}
	})
}

// TestSourceDomain consumes a stream that lives on a hub, through a leaf
// node with its own JetStream domain: nats.domain (or nats.api_prefix)
// selects the hub's JetStream API. Without it the stream is looked up on
// the leaf's own JetStream, where it does not exist: exit 2.
func TestSourceDomain(t *testing.T) {
	const n = 100
	l := natstest.RunLeaf(t)
	hubNC, _ := natstest.Connect(t, l.Hub)
	hubJS, err := jetstream.New(hubNC)
	if err != nil {
		t.Fatal(err)
	}
	natstest.CreateStream(t, hubJS, jetstream.StreamConfig{Name: "CENTRAL", Subjects: []string{"central.>"}})
	natstest.PublishN(t, hubJS, "central.events", n, body)

	for _, tt := range []struct{ name, nats, consumer string }{
		{"domain", `"domain": "hub"`, "via-domain"},
		{"api_prefix", `"api_prefix": "$JS.hub.API"`, "via-prefix"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := t.TempDir()
			cfg := fileConfig(t, l.Leaf.ClientURL(), "CENTRAL", tt.consumer, "central.>", out, "")
			replaceInFile(t, cfg, `"subject": "central.>"}`, `"subject": "central.>", `+tt.nats+`}`)
			p := start(t, cfg)
			natstest.WaitAckState(t, hubJS, "CENTRAL", tt.consumer, n, 0, time.Minute)
			p.stop(t)
			checkFiles(t, out, "CENTRAL", n)
		})
	}

	t.Run("without domain", func(t *testing.T) {
		p := start(t, fileConfig(t, l.Leaf.ClientURL(), "CENTRAL", "no-domain", "central.>", t.TempDir(), ""))
		if code := p.wait(t, 30*time.Second); code != 2 {
			t.Errorf("exit code = %d, want 2\nstderr:\n%s", code, p.stderr.String())
		}
		if want := `Configuration error: nats.stream: JetStream stream "CENTRAL" does not exist`; !strings.Contains(p.stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, p.stderr.String())
		}
	})
}
