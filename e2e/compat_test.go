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
