package cli

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// uncountedJS hands out consumers whose Info reports nothing delivered and
// nothing pending, as a server does right after the publishes, before it
// has counted the stored messages into the consumer.
type uncountedJS struct{ jetstream.JetStream }

func (u uncountedJS) Consumer(ctx context.Context, stream, name string) (jetstream.Consumer, error) {
	c, err := u.JetStream.Consumer(ctx, stream, name)
	return uncountedConsumer{c}, err
}

type uncountedConsumer struct{ jetstream.Consumer }

func (u uncountedConsumer) Info(ctx context.Context) (*jetstream.ConsumerInfo, error) {
	info, err := u.Consumer.Info(ctx)
	if err != nil {
		return nil, err
	}
	uncounted := *info
	uncounted.Delivered, uncounted.AckFloor = jetstream.SequenceInfo{}, jetstream.SequenceInfo{}
	uncounted.NumPending, uncounted.NumAckPending, uncounted.NumRedelivered = 0, 0, 0
	return &uncounted, nil
}

// TestDemoSettleWaitsForDelivery: the tour settles only once every
// pipeline's consumer delivered the last sample it takes; a consumer that
// reports nothing pending before it saw the samples does not end the wait
// (the container image test under load printed a tour with every row
// "missing" after 0.06 s).
func TestDemoSettleWaitsForDelivery(t *testing.T) {
	d := &demo{env: &Env{}, dir: t.TempDir(), port: -1, timeout: 500 * time.Millisecond}
	if err := d.setup(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.server.Shutdown)
	t.Cleanup(d.nc.Close)
	var consumers []jetstream.Consumer
	for _, dp := range d.pipelines() {
		c, err := d.js.CreateConsumer(t.Context(), "DEMO", jetstream.ConsumerConfig{Durable: dp.consumer, FilterSubject: dp.filter, AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			t.Fatal(err)
		}
		consumers = append(consumers, c)
	}
	lastSeq, err := d.publish(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	real := d.js
	d.js = uncountedJS{real}
	if err := d.settle(t.Context(), lastSeq); err == nil {
		t.Fatal("settle() = nil while no consumer had delivered a sample, want the timeout")
	}

	d.js = real
	for _, c := range consumers {
		msgs, err := c.Fetch(100, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range msgs.Messages() {
			if err := m.DoubleAck(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	d.timeout = 10 * time.Second
	if err := d.settle(t.Context(), lastSeq); err != nil {
		t.Errorf("settle() after every sample was delivered and ACKed = %v, want nil", err)
	}
}
