package sinktest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/runner"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sink/sinktest"
)

// auditTable is a custom sink: a few lines implementing sink.Sink. It stands
// in for your own destination; the map plays a table with a unique key on
// (stream, sequence), which is what makes redelivery harmless.
type auditTable struct {
	mu   sync.Mutex
	rows map[sinktest.Stored][]byte
}

func newAuditTable() *auditTable { return &auditTable{rows: map[sinktest.Stored][]byte{}} }

// Type names the sink in logs and metrics.
func (t *auditTable) Type() string { return "audit_table" }

// WriteBatch stores each envelope and reports one result per envelope, in
// order. Only what is durable may be reported Committed or Duplicate.
func (t *auditTable) WriteBatch(ctx context.Context, batch []*sink.Envelope) []sink.Result {
	results := make([]sink.Result, len(batch))
	if err := ctx.Err(); err != nil { // cancelled: write nothing, report temporary
		for i := range results {
			results[i] = sink.Failed(err)
		}
		return results
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, env := range batch {
		if env.Stream == "" || env.StreamSequence == 0 {
			// No idempotency key: this message can never be written safely.
			results[i] = sink.Failed(sink.AsPermanentType(sink.ValidationError, errors.New("message has no stream sequence")))
			continue
		}
		key := sinktest.Stored{Stream: env.Stream, Sequence: env.StreamSequence}
		if _, stored := t.rows[key]; stored {
			results[i] = sink.Result{Outcome: sink.Duplicate}
			continue
		}
		t.rows[key] = append([]byte(nil), env.Data...)
		results[i] = sink.Ok
	}
	return results
}

// Stop releases resources; the runner calls it once, after the last write.
func (t *auditTable) Stop(context.Context) error { return nil }

func (t *auditTable) stored() []sinktest.Stored {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []sinktest.Stored
	for k := range t.rows {
		out = append(out, k)
	}
	return out
}

// TestAuditTableConformance proves the custom sink keeps the contract with
// the same suite every built-in sink passes.
func TestAuditTableConformance(t *testing.T) {
	table := newAuditTable()
	sinktest.Run(t, sinktest.Harness{
		Open:       func(*testing.T) sink.Sink { return table },
		ReadBack:   func(*testing.T) []sinktest.Stored { return table.stored() },
		Idempotent: true,
	})
}

// A custom sink plugs into the runner like a built-in one: the runner
// fetches, builds envelopes, calls WriteBatch, and acknowledges only what the
// sink reported durable.
func Example() {
	url, stop := startServer()
	defer stop()
	nc, _ := nats.Connect(url)
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	js.CreateStream(ctx, jetstream.StreamConfig{Name: "AUDIT", Subjects: []string{"audit.>"}})
	for i := range 5 {
		js.Publish(ctx, "audit.login", fmt.Appendf(nil, `{"n":%d}`, i))
	}
	consumer, err := js.CreateOrUpdateConsumer(ctx, "AUDIT", jetstream.ConsumerConfig{
		Durable: "audit-table", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		fmt.Println(err)
		return
	}

	table := newAuditTable()
	r := &runner.Runner{Consumer: consumer, Conn: nc, Sink: table}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	for len(table.stored()) < 5 {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	fmt.Println("run ended:", <-done)
	fmt.Println("rows:", len(table.stored()))
	// Output:
	// run ended: <nil>
	// rows: 5
}

// startServer runs an in-process JetStream server on a free port.
func startServer() (url string, stop func()) {
	dir, _ := os.MkdirTemp("", "sinktest-example-js-")
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		panic(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		panic("nats-server not ready")
	}
	return s.ClientURL(), func() { s.Shutdown(); s.WaitForShutdown(); os.RemoveAll(dir) }
}
