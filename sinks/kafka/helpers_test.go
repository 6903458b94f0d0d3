package kafkasink

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/tracing"
)

// fixedNow is the stored_at of every test sink.
var fixedNow = time.Date(2026, 5, 29, 10, 0, 0, 300000000, time.UTC)

// cluster starts an in-process Kafka cluster (kfake speaks the Kafka wire
// protocol, including idempotent produce and acks=all) with topics of three
// partitions, and closes it when the test ends.
func cluster(t testing.TB, topics []string, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	opts = append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(3, topics...)}, opts...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// testConfig returns the default configuration producing to topic on c.
func testConfig(c *kfake.Cluster, topic string) Config {
	cfg := Default()
	cfg.Brokers = c.ListenAddrs()
	cfg.Topic = topic
	cfg.ProduceTimeoutMS = 10000
	return cfg
}

// open starts a sink for c with a fixed clock and stops it when the test
// ends. Its deps give it tracing (spans only in a traced write context).
func open(t testing.TB, c Config) *Sink {
	t.Helper()
	return openWith(t, c, sink.Deps{})
}

// openWith is open with deps (a tracer is added when deps has none).
func openWith(t testing.TB, c Config, deps sink.Deps) *Sink {
	t.Helper()
	if deps.Tracer == nil {
		deps.Tracer = tracing.ForSinks()
	}
	s, err := New(context.Background(), c, deps)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	s.now = func() time.Time { return fixedNow }
	t.Cleanup(func() { s.Stop(context.Background()) })
	return s
}

// env builds an envelope the way the runner does, from stream and seq
// (0 = no JetStream metadata), headers and body.
func env(subject, stream string, seq uint64, header map[string][]string, body string) *sink.Envelope {
	var reply string
	if seq != 0 {
		reply = fmt.Sprintf("$JS.ACK.%s.c.1.%d.%d.1780048800123456000.0", stream, seq, seq)
	}
	return intake.Build(intake.Message{Subject: subject, Reply: reply, Data: []byte(body), Header: header}, nil, fixedNow)
}

// batch returns n envelopes of stream with sequences from..from+n-1.
func batch(subject, stream string, from, n uint64) []*sink.Envelope {
	var b []*sink.Envelope
	for seq := from; seq < from+n; seq++ {
		b = append(b, env(subject, stream, seq, nil, fmt.Sprintf(`{"seq":%d}`, seq)))
	}
	return b
}

// consume returns every record of topic on brokers, from the start of each
// partition to its end offset at the time of the call.
func consume(t testing.TB, brokers []string, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list end offsets of %s: %v", topic, err)
	}
	var want int64
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset of %s/%d: %v", o.Topic, o.Partition, o.Err)
		}
		want += o.Offset
	})
	var out []*kgo.Record
	for int64(len(out)) < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records of %s: %v", len(out), want, topic, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		out = append(out, fs.Records()...)
	}
	return out
}

// keys returns the record keys, in consumption order.
func keys(rs []*kgo.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r.Key)
	}
	return out
}

// outcomes returns the outcome of each result.
func outcomes(rs []sink.Result) []sink.Outcome {
	out := make([]sink.Outcome, len(rs))
	for i, r := range rs {
		out[i] = r.Outcome
	}
	return out
}

func repeat(o sink.Outcome, n int) []sink.Outcome {
	out := make([]sink.Outcome, n)
	for i := range out {
		out[i] = o
	}
	return out
}

func ptr[T any](v T) *T { return &v }
