package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// TestMachineServer runs the basic path against the machine's own
// nats-server (Debian's 2.9 release in CI): the compatibility check with
// older servers. It needs NATS_SINKS_TEST_NATS_URL.
func TestMachineServer(t *testing.T) {
	url := natstest.Service(t, "NATS_SINKS_TEST_NATS_URL")
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	defer nc.Close()
	t.Logf("server version %s", nc.ConnectedServerVersion())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id := fmt.Sprintf("%d", time.Now().UnixNano())
	stream, subject := "E2E_COMPAT_"+id, "e2e-compat."+id
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject + ".>"}}); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	t.Cleanup(func() { js.DeleteStream(context.Background(), stream) })
	dlq := "e2e-compat-dlq." + id
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream + "_DLQ", Subjects: []string{dlq}}); err != nil {
		t.Fatalf("create DLQ stream: %v", err)
	}
	t.Cleanup(func() { js.DeleteStream(context.Background(), stream+"_DLQ") })

	const n = 2000
	natstest.PublishN(t, js, subject+".events", n, body)
	// One poison message: not JSON, with json_only payload mode → DLQ.
	natstest.Publish(t, js, subject+".poison", []byte("not json"), nil)

	out := t.TempDir()
	cfg := fileConfig(t, url, stream, "compat-file", subject+".>", out,
		fmt.Sprintf(`, "dead_letter": {"enabled": true, "subject": %q}`, dlq))
	// json_only makes the poison message a permanent SerializationError.
	replaceInFile(t, cfg, `"fsync": true}`, `"fsync": true, "payload_mode": "json_only"}`)

	p := start(t, cfg)
	natstest.WaitFor(t, 2*time.Minute, func() error {
		floor, pending, err := ackState(ctx, js, stream, "compat-file")
		if err != nil || floor != n+1 || pending != 0 {
			return fmt.Errorf("ack floor %d, ack pending %d (%v); want %d, 0", floor, pending, err, n+1)
		}
		return nil
	})
	p.stop(t)
	checkFiles(t, out, stream, n)

	dlqStream, err := js.Stream(ctx, stream+"_DLQ")
	if err != nil {
		t.Fatal(err)
	}
	m, err := dlqStream.GetLastMsgForSubject(ctx, dlq)
	if err != nil {
		t.Fatalf("DLQ message: %v", err)
	}
	if got := m.Header.Get("Nats-Sinks-Error-Type"); got != "SerializationError" {
		t.Errorf("DLQ Nats-Sinks-Error-Type = %q, want SerializationError", got)
	}
	if got := m.Header.Get("x-original-subject"); got != subject+".poison" {
		t.Errorf("DLQ x-original-subject = %q, want %q", got, subject+".poison")
	}
	if !strings.Contains(string(m.Data), `"stream_sequence":2001`) {
		t.Errorf("DLQ body does not name stream sequence 2001: %s", m.Data)
	}
}

// TestMachineServerRefusesNewFeatures starts the binary against the
// machine's 2.9 server with consumer settings only 2.10 and newer keep:
// exit 2 naming the key and the version, and no consumer left behind (a
// 2.9 server would have created one without any filter, which the next
// start refuses as drift).
func TestMachineServerRefusesNewFeatures(t *testing.T) {
	url := natstest.Service(t, "NATS_SINKS_TEST_NATS_URL")
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	defer nc.Close()
	version := nc.ConnectedServerVersion()
	if !strings.HasPrefix(version, "2.9.") {
		t.Skipf("the machine's server is %s; this test is about a 2.9 server", version)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id := fmt.Sprintf("%d", time.Now().UnixNano())
	stream, subject := "E2E_FEAT_"+id, "e2e-feat."+id
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject + ".>"}}); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	t.Cleanup(func() { js.DeleteStream(context.Background(), stream) })

	for _, tt := range []struct {
		name, cm, want string
	}{
		{"filter_subjects", fmt.Sprintf(`"filter_subjects": [%q, %q]`, subject+".a", subject+".b"),
			"consumer_management.filter_subjects: several filter subjects need nats-server 2.10.0 or newer (the server is " + version + ")"},
		{"metadata", `"metadata": {"team": "billing"}`,
			"consumer_management.metadata: consumer metadata needs nats-server 2.10.0 or newer (the server is " + version + ")"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := fileConfig(t, url, stream, "feat-"+strings.ReplaceAll(tt.name, "_", "-"), subject+".>", t.TempDir(), "")
			replaceInFile(t, cfg, `"max_ack_pending": 4000}`, `"max_ack_pending": 4000, `+tt.cm+`}`)
			p := start(t, cfg)
			if code := p.wait(t, 30*time.Second); code != 2 {
				t.Errorf("exit code = %d, want 2\nstderr:\n%s", code, p.stderr.String())
			}
			if !strings.Contains(p.stderr.String(), "Configuration error: "+tt.want) {
				t.Errorf("stderr does not say %q:\n%s", tt.want, p.stderr.String())
			}
			st, err := js.Stream(ctx, stream)
			if err != nil {
				t.Fatal(err)
			}
			if info, err := st.Info(ctx); err != nil || info.State.Consumers != 0 {
				t.Errorf("stream %s has %d consumers after the refused start (%v), want 0", stream, info.State.Consumers, err)
			}
		})
	}
}
