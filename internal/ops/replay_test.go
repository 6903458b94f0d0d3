package ops

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/runner"
)

// fakeMsg is a delivered message with only its metadata.
type fakeMsg struct {
	jetstream.Msg
	seq, delivered uint64
}

func (m fakeMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Stream: m.seq}, NumDelivered: m.delivered}, nil
}

// fakeConsumer hands out up to n queued messages per fetch, as a server
// does, and records the sizes asked for.
type fakeConsumer struct {
	jetstream.Consumer
	queue []fakeMsg
	asked []int
}

func (c *fakeConsumer) FetchNoWait(n int) (jetstream.MessageBatch, error) {
	c.asked = append(c.asked, n)
	k := min(n, len(c.queue))
	ch := make(chan jetstream.Msg, k)
	for _, m := range c.queue[:k] {
		ch <- m
	}
	c.queue = c.queue[k:]
	close(ch)
	return &batch{msgs: ch}, nil
}

func seqsOf(b jetstream.MessageBatch) []uint64 {
	var out []uint64
	for m := range b.Messages() {
		md, _ := m.Metadata()
		out = append(out, md.Sequence.Stream)
	}
	return out
}

func TestTrackerRange(t *testing.T) {
	fc := &fakeConsumer{queue: []fakeMsg{{seq: 3, delivered: 1}, {seq: 4, delivered: 1}}}
	tr := NewTracker(5, 3)
	c := tr.Wrap(fc)

	b, _ := c.FetchNoWait(100)
	if got := seqsOf(b); !cmp.Equal(got, []uint64{3, 4}) {
		t.Fatalf("first batch = %v, want [3 4]", got)
	}
	tr.Settled(fakeMsg{seq: 3}, runner.SettledWritten)
	// 4 was NAKed: not settled, it comes back.
	if tr.Done(time.Now()) {
		t.Fatal("Done with message 4 outstanding")
	}
	fc.queue = []fakeMsg{{seq: 4, delivered: 2}, {seq: 5, delivered: 1}, {seq: 6, delivered: 1}, {seq: 7, delivered: 1}}
	b, _ = c.FetchNoWait(100)
	if got := seqsOf(b); !cmp.Equal(got, []uint64{4, 5}) {
		t.Fatalf("second batch = %v, want [4 5]", got)
	}
	tr.Settled(fakeMsg{seq: 4}, runner.SettledDuplicate)
	if tr.Done(time.Time{}) {
		t.Fatal("Done with message 5 outstanding")
	}
	tr.Settled(fakeMsg{seq: 5}, runner.SettledDeadLettered)
	if !tr.Done(time.Time{}) {
		t.Error("not Done: the range's 3 messages were delivered and settled")
	}
	if diff := cmp.Diff(ReplayCounts{Written: 1, Duplicates: 1, DeadLettered: 1}, tr.Counts()); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	// Fetches never ask for more than the range still needs: its 3
	// messages, then the 1 not yet delivered plus the 1 awaiting
	// redelivery.
	if want := []int{3, 2}; !cmp.Equal(fc.asked, want) {
		t.Errorf("fetch sizes = %v, want %v", fc.asked, want)
	}
}

// With an unknown total the end of the range shows as a delivery above
// it, which never reaches the runner.
func TestTrackerAboveEnd(t *testing.T) {
	fc := &fakeConsumer{queue: []fakeMsg{{seq: 3, delivered: 1}, {seq: 4, delivered: 1}, {seq: 5, delivered: 1}, {seq: 6, delivered: 1}}}
	tr := NewTracker(5, -1)
	b, _ := tr.Wrap(fc).FetchNoWait(100)
	if got := seqsOf(b); !cmp.Equal(got, []uint64{3, 4, 5}) {
		t.Fatalf("batch = %v, want [3 4 5]: 6 is above the end", got)
	}
	for seq := uint64(3); seq <= 5; seq++ {
		if tr.Done(time.Time{}) {
			t.Fatalf("Done with message %d outstanding", seq)
		}
		tr.Settled(fakeMsg{seq: seq}, runner.SettledWritten)
	}
	if !tr.Done(time.Time{}) {
		t.Error("not Done: every message of the range settled and one above the end was seen")
	}
}

func TestTrackerEmptyConsumer(t *testing.T) {
	tr := NewTracker(10, 1)
	block := make(chan struct{})
	started := make(chan struct{})
	fc := &fakeConsumer{}
	c := tr.Wrap(fc).(*trackedConsumer)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.fetch(1, func(int) (jetstream.MessageBatch, error) {
			close(started)
			<-block // the server delivered message 9 during this fetch
			ch := make(chan jetstream.Msg, 1)
			ch <- fakeMsg{seq: 9, delivered: 1}
			close(ch)
			return &batch{msgs: ch}, nil
		})
	}()
	<-started
	emptyAt := time.Now() // consumer info: nothing pending, 9 is on its way
	if tr.Done(emptyAt) {
		t.Error("Done while a fetch that began before the empty consumer info is still running")
	}
	close(block)
	<-done
	if tr.Done(emptyAt) {
		t.Error("Done with message 9 delivered and unsettled")
	}
	tr.Settled(fakeMsg{seq: 9}, runner.SettledGivenUp)
	if !tr.Done(emptyAt) {
		t.Error("not Done: nothing pending and nothing unsettled")
	}
	if got := tr.Counts().Failed; got != 1 {
		t.Errorf("failed = %d, want 1", got)
	}
}
