package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// TestMetricsEndpoint runs the binary with metrics.listen and checks what an
// operator's Prometheus and Kubernetes probes see: /readyz turns ready once
// the consumer is bound, /metrics counts every acknowledged message, and
// /healthz answers.
func TestMetricsEndpoint(t *testing.T) {
	const n = 300
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "MET", Subjects: []string{"met.>"}})
	natstest.PublishN(t, js, "met.events", n, body)

	addr := freeAddr(t)
	cfg := fileConfig(t, s.ClientURL(), "MET", "met-file", "met.>", t.TempDir(),
		fmt.Sprintf(`, "metrics": {"enabled": true, "listen": %q}`, addr))
	p := start(t, cfg)

	get := func(path string) (int, string, error) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	natstest.WaitFor(t, 30*time.Second, func() error {
		code, body, err := get("/readyz")
		if err != nil || code != 200 {
			return fmt.Errorf("/readyz = %d %q (%v)", code, body, err)
		}
		if want := `{"checks":{"consumer":"ok","nats":"ok","sink":"ok"},"status":"ready"}` + "\n"; body != want {
			return fmt.Errorf("/readyz body = %q, want %q", body, want)
		}
		return nil
	})
	acked := regexp.MustCompile(`(?m)^nats_sinks_messages_acked_total (\d+)$`)
	natstest.WaitFor(t, time.Minute, func() error {
		_, body, err := get("/metrics")
		if err != nil {
			return err
		}
		m := acked.FindStringSubmatch(body)
		if m == nil || m[1] != fmt.Sprint(n) {
			return fmt.Errorf("nats_sinks_messages_acked_total = %v, want %d", m, n)
		}
		return nil
	})
	if code, body, _ := get("/healthz"); code != 200 || body != `{"status":"ok"}`+"\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	// The counter says the ACKs were sent; plain ACKs are fire-and-forget,
	// so the server may still be applying them.
	natstest.WaitAckState(t, js, "MET", "met-file", n, 0, 30*time.Second)
	p.stop(t)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
