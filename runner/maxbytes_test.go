package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/sink"
)

// TestLargeMessagesStayConnected fetches 1 MB messages at the default
// batch size (100). Without a byte limit one fetch would ask for 100 MB,
// more than the server lets a client have pending (64 MiB), and the server
// would drop the connection as a slow consumer. Every fetch asking for at
// most the default max batch bytes (16 MiB) keeps the connection, and every
// message is written once.
func TestLargeMessagesStayConnected(t *testing.T) {
	const n, size = 120, 1_000_000
	s := natstest.RunJetStream(t)
	var disconnects, slow atomic.Int64
	var lastErr atomic.Value
	nc, js := natstest.Connect(t, s,
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				disconnects.Add(1)
				lastErr.Store(err.Error())
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrSlowConsumer) {
				slow.Add(1)
			}
		}))
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: testStream, Subjects: []string{"orders.>"}})
	pad := make([]byte, size)
	for i := range pad {
		pad[i] = 'x'
	}
	natstest.PublishN(t, js, "orders.created", n, func(i int) []byte {
		b := fmt.Appendf(nil, `{"n":%d,"pad":"`, i+1)
		b = append(b, pad[:size-len(b)-2]...)
		return append(b, `"}`...)
	})
	c, _, err := EnsureConsumer(t.Context(), js, ConsumerSpec{Stream: testStream, Name: testConsumer, Subject: "orders.>",
		AckWait: new(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}

	var log committedLog
	var maxBatchBytes atomic.Int64
	fs := &funcSink{write: func(_ context.Context, b []*sink.Envelope) []sink.Result {
		total := 0
		for _, e := range b {
			total += len(e.Data)
		}
		if int64(total) > maxBatchBytes.Load() {
			maxBatchBytes.Store(int64(total))
		}
		log.add(b)
		return results(len(b), sink.Ok)
	}}
	start(t, &Runner{Consumer: c, Conn: nc, Sink: fs})
	natstest.WaitFor(t, 2*time.Minute, func() error {
		info, err := c.Info(t.Context())
		if err != nil {
			return err
		}
		if info.AckFloor.Stream != n || info.NumAckPending != 0 {
			return fmt.Errorf("ack floor %d, ack pending %d, want %d, 0 (disconnects %d, last: %v)", info.AckFloor.Stream, info.NumAckPending, n, disconnects.Load(), lastErr.Load())
		}
		return nil
	})
	if d, sc := disconnects.Load(), slow.Load(); d != 0 || sc != 0 {
		t.Errorf("%d disconnects (last: %v), %d slow-consumer errors, want none", d, lastErr.Load(), sc)
	}
	got := log.get()
	slices.Sort(got)
	want := make([]uint64, n)
	for i := range want {
		want[i] = uint64(i + 1)
	}
	if !slices.Equal(got, want) {
		t.Errorf("committed %d messages (%d distinct), want each of 1..%d once", len(got), len(slices.Compact(slices.Clone(got))), n)
	}
	if mb := maxBatchBytes.Load(); mb > DefaultMaxBatchBytes {
		t.Errorf("largest batch held %d payload bytes, more than max batch bytes %d", mb, DefaultMaxBatchBytes)
	}
	t.Logf("largest batch: %d payload bytes in %d write calls", maxBatchBytes.Load(), fs.callCount())
}

// TestMaxPayloadMessageFits sets max batch bytes to the server's
// max_payload, the smallest value the start-up check allows, and publishes
// a message of exactly max_payload bytes: the server counts its subject and
// reply subject as well, so a request for exactly max_payload bytes could
// never deliver it, and the consumer would stall.
func TestMaxPayloadMessageFits(t *testing.T) {
	e := newEnv(t, false)
	c := e.consumer(ConsumerSpec{})
	mp := int(e.nc.MaxPayload())
	if err := CheckMaxBatchBytes(e.nc.MaxPayload(), mp); err != nil {
		t.Fatalf("CheckMaxBatchBytes(%d, %d) = %v, want nil", mp, mp, err)
	}
	natstest.Publish(t, e.js, "orders.created", make([]byte, mp), nil)
	natstest.Publish(t, e.js, "orders.created", []byte(`{"n":2}`), nil)
	var log committedLog
	fs := &funcSink{write: func(_ context.Context, b []*sink.Envelope) []sink.Result {
		log.add(b)
		return results(len(b), sink.Ok)
	}}
	start(t, &Runner{Consumer: c, Conn: e.nc, Sink: fs, MaxBatchBytes: mp, BatchTimeout: 100 * time.Millisecond})
	e.waitAcked(c, 2)
	if got := log.get(); !slices.Equal(got, []uint64{1, 2}) {
		t.Errorf("committed %v, want [1 2]", got)
	}
}

func TestCheckMaxBatchBytes(t *testing.T) {
	for _, tt := range []struct {
		maxPayload int64
		batchBytes int
		want       string
	}{
		{1 << 20, 16 << 20, ""},
		{1 << 20, 1 << 20, ""},
		{1 << 20, 0, ""}, // the default, 16 MiB
		{8 << 20, 4 << 20, "delivery.max_batch_bytes: must be at least the server's max_payload 8388608"},
		{64 << 20, 0, "delivery.max_batch_bytes: must be at least the server's max_payload 67108864"},
	} {
		err := CheckMaxBatchBytes(tt.maxPayload, tt.batchBytes)
		got := ""
		if err != nil {
			got = err.Error()
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Errorf("CheckMaxBatchBytes(%d, %d) = %T, want *ConfigError", tt.maxPayload, tt.batchBytes, err)
			}
		}
		if got != tt.want {
			t.Errorf("CheckMaxBatchBytes(%d, %d) = %q, want %q", tt.maxPayload, tt.batchBytes, got, tt.want)
		}
	}
}

// TestPartialBatchAtOnce: fewer messages than the batch size are processed
// at once, not after the lingering fetch's expiry (a minute here), with the
// no-wait probe and with the timed probe the runner falls back to.
func TestPartialBatchAtOnce(t *testing.T) {
	for _, timed := range []bool{false, true} {
		t.Run(fmt.Sprintf("timed probe=%v", timed), func(t *testing.T) {
			e := newEnv(t, false)
			c := e.consumer(ConsumerSpec{})
			e.publish(30)
			var log committedLog
			fs := &funcSink{write: func(_ context.Context, b []*sink.Envelope) []sink.Result {
				log.add(b)
				return results(len(b), sink.Ok)
			}}
			start(t, &Runner{Consumer: c, Conn: e.nc, Sink: fs, BatchTimeout: time.Minute, timedProbe: timed})
			e.waitAcked(c, 30) // waitLong < BatchTimeout
			if got := len(log.get()); got != 30 {
				t.Errorf("committed %d messages, want 30", got)
			}
		})
	}
}

// TestReplicatedConsumer runs the runner on an R3 consumer of a 3-node
// cluster. A byte-limited fetch loses its messages there (the server's
// status that ends the request overtakes the replicated deliveries), so the
// runner fetches without a byte limit and bounds the count instead: every
// batch holds at most max_batch_bytes / max_payload messages, and every
// message is written once and acknowledged.
func TestReplicatedConsumer(t *testing.T) {
	const n = 300
	c := natstest.RunCluster(t, 3)
	nc, js := c.Connect(t)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: testStream, Subjects: []string{"orders.>"}, Replicas: 3})
	c.WaitStreamCurrent(t, js, testStream)
	cons, _, err := EnsureConsumer(t.Context(), js, ConsumerSpec{Stream: testStream, Name: testConsumer, Subject: "orders.>",
		Replicas: new(3), AckWait: new(30 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	c.WaitConsumerCurrent(t, js, testStream, testConsumer)
	natstest.PublishN(t, js, "orders.created", n, func(i int) []byte { return fmt.Appendf(nil, `{"n":%d}`, i+1) })

	var log committedLog
	var largest atomic.Int64
	fs := &funcSink{write: func(_ context.Context, b []*sink.Envelope) []sink.Result {
		if int64(len(b)) > largest.Load() {
			largest.Store(int64(len(b)))
		}
		log.add(b)
		return results(len(b), sink.Ok)
	}}
	r := &Runner{Consumer: cons, Conn: nc, Sink: fs}
	start(t, r)
	natstest.WaitAckState(t, js, testStream, testConsumer, n, 0, time.Minute)
	got := log.get()
	slices.Sort(got)
	if len(got) != n || len(slices.Compact(got)) != n {
		t.Errorf("committed %d messages, want each of 1..%d once", len(log.get()), n)
	}
	if want := int64(r.replicatedCount()); largest.Load() > want || want >= DefaultBatchSize {
		t.Errorf("largest batch %d, count bound %d: want a bound below the batch size %d, and no batch above it", largest.Load(), want, DefaultBatchSize)
	}
}
