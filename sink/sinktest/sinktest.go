// Package sinktest is the conformance suite every sink passes (the
// testing/fstest pattern): a sink package's test supplies a Harness that
// opens the sink and reads back what it stored, and Run checks the contract
// of package sink against a real destination.
//
// Run checks:
//
//   - write: every result of a fresh batch is Committed, and each record is
//     stored once;
//   - redelivery: the same batch again is Committed or Duplicate and still
//     stored once (skipped unless Harness.Idempotent);
//   - poison: a message that cannot be written (by default one without
//     stream metadata and message id, so no idempotency material) is
//     Permanent and not Shared, and the rest of its batch is Committed — for
//     transactional sinks this is the "row cannot be built" rule, for
//     per-message sinks the per-message outcome;
//   - cancellation: with ctx already cancelled no result is Committed or
//     Duplicate and nothing new is stored;
//   - stop after failure: Stop returns nil after a failed WriteBatch;
//   - concurrency: four goroutines writing disjoint batches at once store
//     every record once.
//
// Each check writes to its own stream name, so checks share one destination
// and ReadBack may return everything stored.
package sinktest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/sink"
)

// Stored identifies one stored record by its JetStream origin.
type Stored struct {
	Stream   string
	Sequence uint64
}

// Harness connects Run to one sink configuration and its destination.
type Harness struct {
	// Open starts a new sink on the destination. Run stops every sink it
	// opens. Required.
	Open func(t *testing.T) sink.Sink
	// ReadBack returns every record stored in the destination, one entry
	// per stored record (a record stored twice appears twice). Required.
	ReadBack func(t *testing.T) []Stored
	// Transactional marks sinks that write a batch in one transaction
	// (oracle, mysql, postgres, sqlite). It only changes failure texts:
	// both kinds must report an unbuildable message as unshared Permanent.
	Transactional bool
	// Idempotent declares that redelivery of a stored message is Committed
	// or Duplicate and stores nothing new (false for insert modes and
	// overwrite-style policies that dead-letter or rewrite).
	Idempotent bool
	// Poison, when set, returns an envelope the sink must reject as
	// Permanent, for stream and seq. Nil means an envelope without stream
	// metadata and without message id.
	Poison func(stream string, seq uint64) *sink.Envelope
}

// Envelope builds an envelope the way the runner does (intake.Build), from a
// JetStream ACK reply subject carrying stream and seq, with a small JSON
// body.
func Envelope(subject, stream string, seq uint64) *sink.Envelope {
	reply := fmt.Sprintf("$JS.ACK.%s.c.1.%d.%d.1780048800123456000.0", stream, seq, seq)
	body := fmt.Sprintf(`{"stream":%q,"seq":%d}`, stream, seq)
	return intake.Build(intake.Message{Subject: subject, Reply: reply, Data: []byte(body)}, nil, time.Now())
}

// Run runs the conformance checks as subtests of t.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Open == nil || h.ReadBack == nil {
		t.Fatal("sinktest: Harness.Open and Harness.ReadBack are required")
	}
	open := func(t *testing.T) sink.Sink {
		t.Helper()
		s := h.Open(t)
		t.Cleanup(func() {
			if err := s.Stop(context.Background()); err != nil {
				t.Errorf("Stop: %v", err)
			}
		})
		return s
	}
	batch := func(stream string, from, n uint64) []*sink.Envelope {
		var b []*sink.Envelope
		for seq := from; seq < from+n; seq++ {
			b = append(b, Envelope("sinktest."+stream, stream, seq))
		}
		return b
	}
	poison := func(stream string, seq uint64) *sink.Envelope {
		if h.Poison != nil {
			return h.Poison(stream, seq)
		}
		e := intake.Build(intake.Message{Subject: "sinktest." + stream, Data: []byte(`{"poison":true}`)}, nil, time.Now())
		return e
	}

	t.Run("write", func(t *testing.T) {
		s := open(t)
		rs := s.WriteBatch(t.Context(), batch("W", 1, 5))
		expect(t, rs, all(5, sink.Committed))
		expectStored(t, h, "W", seqs(1, 5))
	})

	t.Run("redelivery", func(t *testing.T) {
		if !h.Idempotent {
			t.Skip("sink configuration declared not idempotent")
		}
		s := open(t)
		b := batch("R", 1, 5)
		expect(t, s.WriteBatch(t.Context(), b), all(5, sink.Committed))
		for i, r := range s.WriteBatch(t.Context(), b) {
			if !r.Outcome.Acked() {
				t.Errorf("redelivered message %d: %v (%v), want committed or duplicate", i, r.Outcome, r.Err)
			}
		}
		// A new sink (a restarted process) sees the same records.
		s2 := open(t)
		for i, r := range s2.WriteBatch(t.Context(), b) {
			if !r.Outcome.Acked() {
				t.Errorf("redelivered message %d after restart: %v (%v)", i, r.Outcome, r.Err)
			}
		}
		expectStored(t, h, "R", seqs(1, 5))
	})

	t.Run("poison", func(t *testing.T) {
		s := open(t)
		b := batch("P", 1, 3)
		b[1] = poison("P", 2)
		rs := s.WriteBatch(t.Context(), b)
		if len(rs) != 3 {
			t.Fatalf("WriteBatch returned %d results for 3 envelopes", len(rs))
		}
		if rs[1].Outcome != sink.Permanent || rs[1].Shared || rs[1].Err == nil || rs[1].ErrorType == "" {
			kind := "per-message sink"
			if h.Transactional {
				kind = "transactional sink (row cannot be built, so not Shared)"
			}
			t.Errorf("poison message = %+v, want unshared Permanent with an error type and error (%s)", rs[1], kind)
		}
		for _, i := range []int{0, 2} {
			if rs[i].Outcome != sink.Committed {
				t.Errorf("message %d beside the poison = %v (%v), want committed", i, rs[i].Outcome, rs[i].Err)
			}
		}
		expectStored(t, h, "P", []uint64{1, 3})
	})

	t.Run("cancelled", func(t *testing.T) {
		s := open(t)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		rs := s.WriteBatch(ctx, batch("C", 1, 3))
		if len(rs) != 3 {
			t.Fatalf("WriteBatch returned %d results for 3 envelopes", len(rs))
		}
		for i, r := range rs {
			if r.Outcome.Acked() {
				t.Errorf("message %d with a cancelled context = %v, want not committed", i, r.Outcome)
			}
		}
		expectStored(t, h, "C", nil)
	})

	t.Run("stop after failure", func(t *testing.T) {
		s := h.Open(t)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		s.WriteBatch(ctx, batch("F", 1, 2))
		s.WriteBatch(t.Context(), []*sink.Envelope{poison("F", 3)})
		if err := s.Stop(context.Background()); err != nil {
			t.Errorf("Stop after a failed WriteBatch: %v", err)
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		s := open(t)
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i, r := range s.WriteBatch(t.Context(), batch("K", uint64(g*10+1), 10)) {
					if r.Outcome != sink.Committed {
						t.Errorf("goroutine %d message %d: %v (%v)", g, i, r.Outcome, r.Err)
					}
				}
			})
		}
		wg.Wait()
		expectStored(t, h, "K", seqs(1, 40))
	})
}

func all(n int, o sink.Outcome) []sink.Outcome {
	out := make([]sink.Outcome, n)
	for i := range out {
		out[i] = o
	}
	return out
}

func seqs(from, n uint64) []uint64 {
	var out []uint64
	for s := from; s < from+n; s++ {
		out = append(out, s)
	}
	return out
}

func expect(t *testing.T, rs []sink.Result, want []sink.Outcome) {
	t.Helper()
	if len(rs) != len(want) {
		t.Fatalf("WriteBatch returned %d results, want %d", len(rs), len(want))
	}
	for i, r := range rs {
		if r.Outcome != want[i] {
			t.Errorf("message %d = %v (%v), want %v", i, r.Outcome, r.Err, want[i])
		}
	}
}

// expectStored checks that stream's records are exactly want, each once.
func expectStored(t *testing.T, h Harness, stream string, want []uint64) {
	t.Helper()
	var got []uint64
	for _, s := range h.ReadBack(t) {
		if s.Stream == stream {
			got = append(got, s.Sequence)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("stored sequences of stream %s = %v, want %v (each exactly once)", stream, got, want)
	}
}
