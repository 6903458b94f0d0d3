package pipeline_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/pipeline"
	"github.com/nats-sinks/nats-sink/telemetry"
)

// TestDisconnectLogLevels checks the connection-event records: closing the
// connection on purpose (every graceful shutdown does) is no warning and
// carries no error, while losing the server is a WARNING naming why.
func TestDisconnectLogLevels(t *testing.T) {
	s := natstest.RunJetStream(t)
	connect := func(t *testing.T, extra ...nats.Option) (*nats.Conn, *records) {
		t.Helper()
		rec := &records{}
		m, err := telemetry.NewMetrics(nil, "nats_sinks")
		if err != nil {
			t.Fatal(err)
		}
		c := config.Default().NATS
		c.URL = s.ClientURL()
		opts, err := pipeline.NATSOptions(&c, nil, telemetry.NewLogger(rec, "json", "DEBUG"), m)
		if err != nil {
			t.Fatal(err)
		}
		nc, err := nats.Connect(s.ClientURL(), append(opts, extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc, rec
	}

	t.Run("close", func(t *testing.T) {
		nc, rec := connect(t)
		nc.Close()
		rec.wait(t, "nats connection closed")
		for _, r := range rec.all("nats disconnected") {
			if r["level"] == "WARNING" || r["error"] != nil {
				t.Errorf("record after Close = %v, want no WARNING and no error key", r)
			}
		}
	})

	t.Run("drain", func(t *testing.T) {
		nc, rec := connect(t)
		if err := nc.Drain(); err != nil {
			t.Fatal(err)
		}
		rec.wait(t, "nats connection closed")
		for _, r := range rec.all("nats disconnected") {
			if r["level"] == "WARNING" || r["error"] != nil {
				t.Errorf("record after Drain = %v, want no WARNING and no error key", r)
			}
		}
	})

	t.Run("server lost", func(t *testing.T) {
		_, final := connect(t, nats.NoReconnect())
		_, retrying := connect(t, nats.MaxReconnects(-1), nats.ReconnectWait(time.Hour))
		s.Shutdown()
		final.wait(t, "nats connection closed")
		retrying.wait(t, "nats disconnected")
		for name, rec := range map[string]*records{"without reconnect": final, "reconnecting": retrying} {
			got := rec.all("nats disconnected")
			if len(got) != 1 || got[0]["level"] != "WARNING" || got[0]["error"] == nil || got[0]["error"] == "" {
				t.Errorf("%s: records after losing the server = %v, want one WARNING with an error", name, got)
			}
		}
	})
}

// records collects JSON log records.
type records struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (r *records) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Write(p)
}

func (r *records) all(msg string) []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(r.buf.String()), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

func (r *records) wait(t *testing.T, msg string) {
	t.Helper()
	natstest.WaitFor(t, 10*time.Second, func() error {
		if len(r.all(msg)) == 0 {
			return fmt.Errorf("no %q record", msg)
		}
		return nil
	})
}
