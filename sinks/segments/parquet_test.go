package segments

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/parquet-go/parquet-go"
	"golang.org/x/sys/unix"

	"github.com/nats-sinks/nats-sink/sink"
)

func parquetConfig(t *testing.T) Config {
	c := testConfig(t)
	c.Format = "parquet"
	return c
}

// writeHeldBatch writes batch and checks every result is Held.
func writeHeldBatch(t *testing.T, s *Sink, batch []*sink.Envelope) []sink.Hold {
	t.Helper()
	var holds []sink.Hold
	for i, r := range s.WriteBatch(t.Context(), batch) {
		if r.Outcome != sink.Held || r.Hold == nil {
			t.Fatalf("WriteBatch result %d = %v (%v), want held with a hold", i, r.Outcome, r.Err)
		}
		holds = append(holds, r.Hold)
	}
	return holds
}

func settled(h sink.Hold) bool {
	select {
	case <-h.Done():
		return true
	default:
		return false
	}
}

// checkSettled waits (commits run in their own goroutines) for every hold
// to settle, and checks its outcome.
func checkSettled(t *testing.T, holds []sink.Hold, want sink.Outcome) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for i, h := range holds {
		select {
		case <-h.Done():
		case <-deadline:
			t.Fatalf("hold %d not settled, want %v", i, want)
		}
		if h.Outcome() != want {
			t.Fatalf("hold %d outcome = %v (%v), want %v", i, h.Outcome(), h.Err(), want)
		}
	}
}

func checkPending(t *testing.T, holds []sink.Hold) {
	t.Helper()
	for i, h := range holds {
		if settled(h) {
			t.Fatalf("hold %d settled %v before its segment was committed", i, h.Outcome())
		}
	}
}

func TestHeldNothingCommittedBeforeClose(t *testing.T) {
	c := parquetConfig(t)
	s := newSink(t, c)
	if got, want := s.MaxHeld(), 20000; got != want {
		t.Errorf("MaxHeld() = %d, want %d (2 × the held-mode max_records)", got, want)
	}
	holds := writeHeldBatch(t, s, envs("S", 1, 5))
	checkPending(t, holds)
	final, open := finals(t, c.Directory)
	if len(final) != 0 || len(open) != 1 || !strings.HasSuffix(open[0], ".parquet.open") {
		t.Fatalf("before close: final %v, open %v; want no final and one .parquet.open", final, open)
	}
	if err := s.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkSettled(t, holds, sink.Committed)
	final, open = finals(t, c.Directory)
	if len(final) != 1 || len(open) != 0 {
		t.Fatalf("after Flush: final %v, open %v; want one final segment", final, open)
	}
	if !strings.HasPrefix(final[0], "00000000000000000001-00000000000000000005-") || !strings.HasSuffix(final[0], ".parquet") {
		t.Errorf("final name %s, want 1-5 and .parquet", final[0])
	}
	rep, err := Verify(c.Directory, []Expect{{Stream: "S", First: 1, Last: 5}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Records != 5 || rep.Distinct != 5 || rep.Unreadable != 0 || rep.Streams[0].Missing != 0 {
		t.Errorf("Verify = %+v, want 5 records, 5 distinct, none missing", rep)
	}
}

func TestHeldRollsByRecords(t *testing.T) {
	c := parquetConfig(t)
	three := 3
	c.MaxRecords = &three
	s := newSink(t, c)
	holds := writeHeldBatch(t, s, envs("S", 1, 7))
	checkSettled(t, holds[:6], sink.Committed)
	checkPending(t, holds[6:])
	final, _ := finals(t, c.Directory)
	if len(final) != 2 {
		t.Fatalf("final segments %v, want 2 of 3 records", final)
	}
	s.Flush(t.Context())
	checkSettled(t, holds[6:], sink.Committed)
}

func TestHeldBudgetClosesOldest(t *testing.T) {
	c := parquetConfig(t)
	c.Partition = "{subject}"
	four := 4
	c.MaxHeldMessages = &four
	s := newSink(t, c)
	first := writeHeldBatch(t, s, envs("S", 1, 3))
	b := envs("S", 4, 6)
	for _, e := range b {
		e.Subject = "other"
	}
	second := writeHeldBatch(t, s, b)
	checkSettled(t, first, sink.Committed) // closed for held_limit
	checkPending(t, second)
	s.hs.mu.Lock()
	n := s.hs.n
	s.hs.mu.Unlock()
	if n != 3 {
		t.Errorf("held = %d, want 3", n)
	}
}

func TestHeldRedeliveryJoinsHold(t *testing.T) {
	c := parquetConfig(t)
	s := newSink(t, c)
	a := writeHeldBatch(t, s, envs("S", 1, 2))
	b := writeHeldBatch(t, s, envs("S", 2, 3))
	if a[1] != b[0] {
		t.Errorf("redelivery of seq 2 got another hold, want the one it joined")
	}
	s.Flush(t.Context())
	rep, err := Verify(c.Directory, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Records != 3 || rep.Duplicates != 0 {
		t.Errorf("Verify = %+v, want 3 records and no duplicate", rep)
	}
}

func TestHeldStopWithoutFlushRedelivers(t *testing.T) {
	c := parquetConfig(t)
	s, err := New(t.Context(), c, sink.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	holds := writeHeldBatch(t, s, envs("S", 1, 3))
	s.Stop(t.Context())
	checkSettled(t, holds, sink.Temporary)
	if got := files(t, c.Directory); len(got) != 0 {
		t.Errorf("files after Stop = %v, want none", got)
	}
}

func TestHeldFlushDeadlineAbandons(t *testing.T) {
	c := parquetConfig(t)
	s := newSink(t, c)
	holds := writeHeldBatch(t, s, envs("S", 1, 3))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Flush(ctx); err == nil {
		t.Error("Flush after the deadline = nil, want the context's error")
	}
	checkSettled(t, holds, sink.Temporary)
	if got := files(t, c.Directory); len(got) != 0 {
		t.Errorf("files = %v, want none", got)
	}
}

func TestHeldCrashBeforeCloseDiscarded(t *testing.T) {
	c := parquetConfig(t)
	s := newSink(t, c)
	holds := writeHeldBatch(t, s, envs("S", 1, 3))
	// A crash: the process dies holding the segment; its lock goes with it.
	s.mu.Lock()
	for dir, seg := range s.open {
		seg.closed = true
		unix.Close(seg.fd)
		unix.Close(seg.dirfd)
		delete(s.open, dir)
	}
	s.mu.Unlock()
	checkPending(t, holds)
	if _, open := finals(t, c.Directory); len(open) != 1 {
		t.Fatalf("open segments %v, want the crashed one", open)
	}
	newSink(t, c)
	if got := files(t, c.Directory); len(got) != 0 {
		t.Errorf("files after restart = %v, want the open segment discarded", got)
	}
}

func TestParquetColumns(t *testing.T) {
	c := parquetConfig(t)
	c.Partition = ""
	s := newSink(t, c)
	e := env("S", 7)
	e.MessageID = "m-7"
	e.Labels = []string{"a", "b"}
	e.Headers = sink.Headers{"X-A": "1"}
	writeHeldBatch(t, s, []*sink.Envelope{e})
	s.Flush(t.Context())
	final, _ := finals(t, c.Directory)
	rows, err := parquet.ReadFile[row](filepath.Join(c.Directory, final[0]))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("rows = %d, want 1", len(rows))
	}
	r := rows[0]
	got := []any{r.StreamName, r.Subject, r.StreamSequence, *r.MessageID, r.Priority, r.IdempotencyKey, r.Labels,
		r.ReceivedAt, r.PayloadFormat, r.Payload, r.HeadersJSON, r.MetadataJSON != nil}
	want := []any{"S", "orders.new", int64(7), "m-7", (*string)(nil), "stream-sequence:S:7", []string{"a", "b"},
		e.ReceivedAt.UnixNano(), "json", `{"n":7}`, `{"X-A":"1"}`, true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("row mismatch (-want +got):\n%s", diff)
	}
	f, _ := os.Open(filepath.Join(c.Directory, final[0]))
	defer f.Close()
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	if codec := pf.Metadata().RowGroups[0].Columns[0].MetaData.Codec.String(); codec != "ZSTD" {
		t.Errorf("codec = %s, want ZSTD by default", codec)
	}
	if v, _ := pf.Lookup("nats_sinks.records"); v != "1" {
		t.Errorf("nats_sinks.records = %q, want 1", v)
	}
}

func TestVerifyUnreadableParquet(t *testing.T) {
	c := parquetConfig(t)
	c.Partition = ""
	s := newSink(t, c)
	writeHeldBatch(t, s, envs("S", 1, 3))
	s.Flush(t.Context())
	final, _ := finals(t, c.Directory)
	p := filepath.Join(c.Directory, final[0])
	data, _ := os.ReadFile(p)
	os.WriteFile(p, data[:len(data)/2], 0o600)
	rep, err := Verify(c.Directory, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Unreadable != 1 || rep.Records != 0 {
		t.Errorf("Verify of a cut parquet segment = %+v, want it unreadable", rep)
	}
}

func TestParquetConfigProblems(t *testing.T) {
	for _, tt := range []struct {
		doc  string
		want []string
	}{
		{`{"type":"segments","directory":"d","format":"parquet"}`, nil},
		{`{"type":"segments","directory":"d","format":"parquet","compression":"snappy","row_group_records":100,"max_held_messages":1000,"commit_timeout_ms":5000}`, nil},
		{`{"type":"segments","directory":"d","compression":"snappy"}`, []string{"compression: snappy is only allowed with format parquet"}},
		{`{"type":"segments","directory":"d","row_group_records":5}`, []string{"row_group_records: only allowed with format parquet"}},
		{`{"type":"segments","directory":"d","max_held_messages":5}`, []string{"max_held_messages: only allowed with format parquet or target s3"}},
		{`{"type":"segments","directory":"d","format":"parquet","compression":"snappy","compression_level":3}`, []string{"compression_level: must be null with compression snappy"}},
		{`{"type":"segments","directory":"d","format":"parquet","compression_level":19}`, nil},
	} {
		got := problems(t, tt.doc)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Decode(%s) problems (-want +got):\n%s", tt.doc, diff)
		}
	}
}

func TestParquetStreamsRowGroups(t *testing.T) {
	c := parquetConfig(t)
	c.Partition = ""
	hundred := 100
	c.RowGroupRecords = &hundred
	s := newSink(t, c)
	batch := envs("S", 1, 250)
	for _, e := range batch {
		// Incompressible payloads, so that the row groups outgrow the
		// writer's 32 KiB output buffer.
		e.Data = fmt.Appendf(nil, `{"r":"%s"}`, randomHex(400))
	}
	writeHeldBatch(t, s, batch)
	_, open := finals(t, c.Directory)
	st, err := os.Stat(filepath.Join(c.Directory, open[0]))
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() == 0 {
		t.Errorf("open segment is empty after 250 rows with row_group_records 100, want full row groups on disk")
	}
	s.Flush(t.Context())
	final, _ := finals(t, c.Directory)
	f, _ := os.Open(filepath.Join(c.Directory, final[0]))
	defer f.Close()
	fst, _ := f.Stat()
	pf, err := parquet.OpenFile(f, fst.Size())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(pf.RowGroups()); n != 3 {
		t.Errorf("row groups = %d, want 3", n)
	}
	if n := pf.NumRows(); n != 250 {
		t.Errorf("rows = %d, want 250", n)
	}
}

func randomHex(n int) string {
	b := make([]byte, n/2)
	crand.Read(b)
	return hex.EncodeToString(b)
}
