package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-sinks/nats-sink/sink"
)

// batchOf returns n envelopes of stream S with sequences from first on,
// each with a payload of about pad bytes.
func batchOf(first uint64, n, pad int) []*sink.Envelope {
	body := `{"pad":"` + strings.Repeat("x", pad) + `"}`
	b := make([]*sink.Envelope, n)
	for i := range b {
		b[i] = env("chunked", "S", first+uint64(i), fmt.Sprintf("id-%d", first+uint64(i)), body)
	}
	return b
}

// wantAll fails unless every result is want.
func wantAll(t *testing.T, what string, rs []sink.Result, want sink.Outcome) {
	t.Helper()
	for i, r := range rs {
		if r.Outcome != want {
			t.Fatalf("%s: message %d = %v (%v), want %v", what, i, r.Outcome, r.Err, want)
		}
	}
}

// storedSeqs checks that table holds exactly the sequences 1..n, once each.
func storedSeqs(t *testing.T, srv *server, table string, n int) {
	t.Helper()
	got := srv.query(t, "select count(*), count(distinct STREAM_SEQUENCE), min(STREAM_SEQUENCE), max(STREAM_SEQUENCE) from `"+table+"`")
	want := []any{int64(n), int64(n), int64(1), int64(n)}
	if fmt.Sprint(got[0]) != fmt.Sprint(want) {
		t.Errorf("rows, distinct sequences, min, max = %v, want %v", got[0], want)
	}
}

// TestChunkedBatch writes 2.5 chunks in one batch, in both idempotent
// modes: every row is stored once, and redelivery (which runs the
// statements cached by the first write) changes nothing.
func TestChunkedBatch(t *testing.T) {
	t.Parallel()
	srv := testServer(t)
	for _, mode := range []string{"upsert", "insert_ignore"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			table := srv.table(t)
			c := srv.config(table)
			c.Mode = mode
			s := open(t, c)
			n := 2*chunkRows + chunkRows/2
			b := batchOf(1, n, 100)
			wantAll(t, "first write", s.WriteBatch(t.Context(), b), sink.Committed)
			storedSeqs(t, srv, table, n)
			for round := range 2 {
				wantAll(t, fmt.Sprintf("redelivery %d", round), s.WriteBatch(t.Context(), b), sink.Duplicate)
			}
			storedSeqs(t, srv, table, n)
			if got := s.prep.size(s.model.Tables[0]); got != 2 {
				t.Errorf("cached statements = %d, want 2 (full chunk and tail)", got)
			}
		})
	}
}

// TestInsertIgnoreWarningsAfterPreparedExecute: under insert_ignore the
// server only warns about a too-long value; the warning check must still
// fail the batch when the row is in a later chunk run by a cached
// prepared statement.
func TestInsertIgnoreWarningsAfterPreparedExecute(t *testing.T) {
	t.Parallel()
	srv := testServer(t)
	table := srv.table(t)
	c := srv.config(table)
	c.Mode = "insert_ignore"
	s := open(t, c)
	n := 2*chunkRows + 3
	wantAll(t, "first write", s.WriteBatch(t.Context(), batchOf(1, n, 10)), sink.Committed)

	b := batchOf(uint64(n+1), n, 10)
	long := strings.Repeat("m", 600) // MESSAGE_ID is varchar(512)
	b[chunkRows+5] = env("chunked", "S", uint64(n+1+chunkRows+5), long, `{}`)
	for i, r := range s.WriteBatch(t.Context(), b) {
		if r.Outcome != sink.Permanent || !r.Shared {
			t.Fatalf("message %d = %+v, want Shared Permanent", i, r)
		}
		if strings.Contains(r.Err.Error(), long[:100]) {
			t.Fatalf("message %d error quotes the message id", i)
		}
	}
	if got := s.prep.size(s.model.Tables[0]); got != 2 {
		t.Errorf("cached statements = %d, want 2: the failing batch should have used them", got)
	}
	if got := srv.count(t, table); got != int64(n) {
		t.Errorf("rows = %d, want %d (the failed batch rolled back)", got, n)
	}
}

// TestByteBudgetCutsChunks writes rows so large that the byte budget, not
// the row count, ends each statement, plus one row larger than the budget
// (which goes alone, its long value sent in packets of its own).
func TestByteBudgetCutsChunks(t *testing.T) {
	t.Parallel()
	srv := testServer(t)
	table := srv.table(t)
	c := srv.config(table)
	c.Mode = "insert_ignore"
	s := open(t, c)
	b := batchOf(1, 40, 300<<10)
	b[17] = batchOf(18, 1, maxExecuteBytes+(1<<20))[0]
	rows := rowsOf(t, s, b)
	cs := chunks(rows)
	if len(cs) < 4 {
		t.Fatalf("chunks = %d, want the byte budget to cut the batch into at least 4", len(cs))
	}
	for _, ch := range cs {
		if len(ch) >= chunkRows {
			t.Fatalf("chunk of %d rows: the row count, not the budget, ended it", len(ch))
		}
	}
	wantAll(t, "first write", s.WriteBatch(t.Context(), b), sink.Committed)
	storedSeqs(t, srv, table, 40)
	wantAll(t, "redelivery", s.WriteBatch(t.Context(), b), sink.Duplicate)
	storedSeqs(t, srv, table, 40)
	got := srv.query(t, "select length(PAYLOAD_JSON) from `"+table+"` where STREAM_SEQUENCE = 18")
	if want := int64(maxExecuteBytes + (1 << 20) + len(`{"pad":""}`)); got[0][0] != want {
		t.Errorf("length of the oversized row's payload = %v, want %d", got[0][0], want)
	}
}

// TestStatementCacheBounded writes batches of many different sizes: the
// cache never holds more than maxStmtsPerTable statements for the table,
// and keeps the full chunk's statement through all of them.
func TestStatementCacheBounded(t *testing.T) {
	t.Parallel()
	srv := testServer(t)
	table := srv.table(t)
	s := open(t, srv.config(table))
	seq := uint64(1)
	write := func(n int) {
		t.Helper()
		wantAll(t, fmt.Sprintf("batch of %d", n), s.WriteBatch(t.Context(), batchOf(seq, n, 10)), sink.Committed)
		seq += uint64(n)
	}
	tbl := s.model.Tables[0]
	write(chunkRows + 1)
	for n := 2; n < 3*maxStmtsPerTable; n++ {
		write(n)
		if got := s.prep.size(tbl); got > maxStmtsPerTable {
			t.Fatalf("after a batch of %d: %d cached statements, want at most %d", n, got, maxStmtsPerTable)
		}
	}
	write(1) // prepares the last size on the DB before it takes a connection
	if got := s.prep.size(tbl); got != maxStmtsPerTable {
		t.Errorf("cached statements = %d, want %d", got, maxStmtsPerTable)
	}
	if !s.prep.has(stmtKey{tbl, chunkRows}) {
		t.Errorf("the full chunk's statement was evicted")
	}
	storedSeqs(t, srv, table, int(seq-1))
}

// TestSmallPoolConcurrentNewSizes: with one connection and concurrent
// batches of sizes not cached yet, preparing never waits for a second
// connection (it would wait forever).
func TestSmallPoolConcurrentNewSizes(t *testing.T) {
	t.Parallel()
	srv := testServer(t)
	table := srv.table(t)
	c := srv.config(table)
	c.PoolSize = 1
	s := open(t, c)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for round := range 5 {
				n := 1 + g + 4*round
				first := uint64(1 + 1000*g + 100*round)
				for i, r := range s.WriteBatch(ctx, batchOf(first, n, 10)) {
					if r.Outcome != sink.Committed {
						t.Errorf("goroutine %d round %d message %d = %v (%v)", g, round, i, r.Outcome, r.Err)
					}
				}
			}
		})
	}
	wg.Wait()
	var want int64
	for g := range 4 {
		for round := range 5 {
			want += int64(1 + g + 4*round)
		}
	}
	if got := srv.count(t, table); got != want {
		t.Errorf("rows = %d, want %d", got, want)
	}
}

// TestStopClosesStatements: Stop closes the cached statements (and the
// pool); a second Stop does nothing.
func TestStopClosesStatements(t *testing.T) {
	t.Parallel()
	srv := testServer(t)
	table := srv.table(t)
	s := open(t, srv.config(table))
	// The second write prepares the first one's sizes on the DB.
	for _, first := range []uint64{1, chunkRows + 3} {
		wantAll(t, "write", s.WriteBatch(t.Context(), batchOf(first, chunkRows+2, 10)), sink.Committed)
	}
	tbl := s.model.Tables[0]
	stmts := []*sql.Stmt{s.prep.get(stmtKey{tbl, chunkRows}), s.prep.get(stmtKey{tbl, 2})}
	for i, st := range stmts {
		if st == nil {
			t.Fatalf("statement %d not cached before Stop", i)
		}
	}
	if err := s.Stop(t.Context()); err != nil {
		t.Fatalf("Stop = %v", err)
	}
	if err := s.Stop(t.Context()); err != nil {
		t.Errorf("second Stop = %v", err)
	}
	if got := s.prep.size(tbl); got != 0 {
		t.Errorf("cached statements after Stop = %d, want 0", got)
	}
	for i, st := range stmts {
		if _, err := st.ExecContext(t.Context()); err == nil || !strings.Contains(err.Error(), "statement is closed") {
			t.Errorf("statement %d after Stop: Exec = %v, want sql: statement is closed", i, err)
		}
	}
}
