package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// kafkaCluster starts an in-process Kafka cluster (kfake, the Kafka wire
// protocol over TCP on loopback) with topic "events" of three partitions.
func kafkaCluster(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(3, "events")}, opts...)...)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func kafkaConfig(t *testing.T, natsURL string, brokers []string, batch, produceTimeoutMS int) string {
	t.Helper()
	b, _ := json.Marshal(brokers)
	doc := fmt.Sprintf(`{
  "nats": {"url": %q, "stream": "KAFKAE2E", "consumer": "kafka-e2e", "subject": "kafkae2e.>"},
  "consumer_management": {"ack_wait_seconds": 10, "max_ack_pending": 4000},
  "delivery": {"batch_size": %d, "max_in_flight_batches": 2, "batch_timeout_ms": 200,
               "retry_backoff_ms": 100, "shutdown_timeout_ms": 10000},
  "logging": {"level": "WARNING"},
  "sink": {"type": "kafka", "brokers": %s, "topic": "events", "produce_timeout_ms": %d}
}`, natsURL, batch, b, produceTimeoutMS)
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// kafkaTopicRecords returns the number of records in topic (sum of the
// partitions' end offsets).
func kafkaTopicRecords(t *testing.T, brokers []string, topic string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

// kafkaConsume reads every record of topic from the start.
func kafkaConsume(t *testing.T, brokers []string, topic string) []*kgo.Record {
	t.Helper()
	want := kafkaTopicRecords(t, brokers, topic)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for int64(len(out)) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records: %v", len(out), want, ctx.Err())
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// checkKafkaRecords asserts that the topic holds every message 1..n of
// stream KAFKAE2E under its own key, with its own payload, and returns the
// raw record count (redeliveries after a crash add records with a key
// already present: Kafka's duplicate model is the key, docs/kafka.md).
func checkKafkaRecords(t *testing.T, brokers []string, n int) int {
	t.Helper()
	records := kafkaConsume(t, brokers, "events")
	partitionOf := map[string]int32{}
	for _, r := range records {
		key := string(r.Key)
		if p, seen := partitionOf[key]; seen && p != r.Partition {
			t.Errorf("key %s in partitions %d and %d", key, p, r.Partition)
		}
		partitionOf[key] = r.Partition
		doc, err := jsonx.Parse(r.Value)
		if err != nil {
			t.Errorf("record %s/%d@%d: value is not JSON: %v", r.Topic, r.Partition, r.Offset, err)
			continue
		}
		m := doc.(map[string]any)
		seq, _ := strconv.Atoi(string(m["stream_sequence"].(jsonx.Integer)))
		payload, _ := m["payload"].(map[string]any)
		if want := fmt.Sprintf("stream-sequence:KAFKAE2E:%d", seq); key != want || fmt.Sprint(payload["n"]) != strconv.Itoa(seq) {
			t.Errorf("record key %s holds stream_sequence %d, payload n %v", key, seq, payload["n"])
		}
	}
	if len(partitionOf) != n {
		t.Errorf("%d distinct keys in the topic, want %d", len(partitionOf), n)
	}
	for seq := 1; seq <= n; seq++ {
		if _, ok := partitionOf[fmt.Sprintf("stream-sequence:KAFKAE2E:%d", seq)]; !ok {
			t.Errorf("stream sequence %d has no record", seq)
		}
	}
	return len(records)
}

func kafkaWaitAcked(t *testing.T, js jetstream.JetStream, n int) {
	t.Helper()
	natstest.WaitFor(t, 2*time.Minute, func() error {
		floor, pending, err := ackState(context.Background(), js, "KAFKAE2E", "kafka-e2e")
		if err != nil {
			return err
		}
		if floor != uint64(n) || pending != 0 {
			return fmt.Errorf("ack floor %d, ack pending %d; want %d, 0", floor, pending, n)
		}
		return nil
	})
}

// TestKafkaCrashRedelivery produces 3,000 messages through the binary into a
// kfake cluster, kills the binary with SIGKILL mid-run, restarts it, and
// checks that every message has a record under its own key, and that the
// consumer acknowledged everything.
func TestKafkaCrashRedelivery(t *testing.T) {
	const n = 3000
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "KAFKAE2E", Subjects: []string{"kafkae2e.>"}})
	natstest.PublishN(t, js, "kafkae2e.events", n, body)
	kc := kafkaCluster(t)
	brokers := kc.ListenAddrs()
	// Small batches keep the first run busy long enough to be killed
	// while records and acknowledgements are in flight.
	cfg := kafkaConfig(t, s.ClientURL(), brokers, 20, 10000)

	p := start(t, cfg)
	natstest.WaitFor(t, time.Minute, func() error {
		if got := kafkaTopicRecords(t, brokers, "events"); got < n/4 {
			return fmt.Errorf("%d records, waiting for %d before the kill", got, n/4)
		}
		return nil
	})
	p.kill(t)
	atKill := kafkaTopicRecords(t, brokers, "events")
	floor, pending, _ := ackState(context.Background(), js, "KAFKAE2E", "kafka-e2e")
	t.Logf("killed with %d records in the topic; ack floor %d, ack pending %d", atKill, floor, pending)

	p = start(t, cfg)
	kafkaWaitAcked(t, js, n)
	p.stop(t)
	raw := checkKafkaRecords(t, brokers, n)
	t.Logf("%d records for %d messages: %d redelivery duplicates (same key, same partition)", raw, n, raw-n)
	if raw < n {
		t.Errorf("%d records, fewer than the %d messages", raw, n)
	}
}

// TestKafkaStallHoldsAcks holds every produce request at the broker: while
// none is answered, nothing may be acknowledged. Once the broker answers,
// every message is acknowledged and present.
func TestKafkaStallHoldsAcks(t *testing.T) {
	const n = 300
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "KAFKAE2E", Subjects: []string{"kafkae2e.>"}})
	natstest.PublishN(t, js, "kafkae2e.events", n, body)
	kc := kafkaCluster(t)
	gate := make(chan struct{})
	var held atomic.Int64
	kc.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		select {
		case <-gate:
			kc.DropControl()
		default:
			held.Add(1)
			kc.SleepControl(func() { <-gate })
		}
		return nil, nil, false // then produced normally
	})
	cfg := kafkaConfig(t, s.ClientURL(), kc.ListenAddrs(), 100, 2000)

	p := start(t, cfg)
	natstest.WaitFor(t, time.Minute, func() error {
		if held.Load() == 0 {
			return fmt.Errorf("no produce request held yet")
		}
		return nil
	})
	// Look for longer than produce_timeout_ms: the writes time out, are
	// NAKed and retried, and still nothing may be acknowledged.
	holdsNoAcks(t, js, "KAFKAE2E", "kafka-e2e", 30, "the broker holds every produce request")
	if got := kafkaTopicRecords(t, kc.ListenAddrs(), "events"); got != 0 {
		t.Fatalf("%d records stored while the broker held every produce request", got)
	}
	t.Logf("%d produce requests held during the stall", held.Load())
	close(gate)
	kafkaWaitAcked(t, js, n)
	p.stop(t)
	raw := checkKafkaRecords(t, kc.ListenAddrs(), n)
	t.Logf("%d records for %d messages after the stall", raw, n)
}
