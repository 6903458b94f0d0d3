package sqlmodel

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	_ "modernc.org/sqlite" // a real database/sql driver for ConnTx
)

func TestChunk(t *testing.T) {
	rows := make([]*Row, 10)
	for i := range rows {
		rows[i] = &Row{Index: i}
	}
	sizes := func(cs [][]*Row) []int {
		var out []int
		for _, c := range cs {
			out = append(out, len(c))
		}
		return out
	}
	for _, tt := range []struct {
		maxRows, maxParams, extra int
		want                      []int
	}{
		{0, 65535, 0, []int{10}},
		{4, 65535, 0, []int{4, 4, 2}},
		{0, 48, 0, []int{3, 3, 3, 1}},
		{0, 48, 8, []int{2, 2, 2, 2, 2}},
		{0, 1, 0, []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
	} {
		if got := sizes(Chunk(rows, tt.maxRows, tt.maxParams, tt.extra)); !cmp.Equal(got, tt.want) {
			t.Errorf("Chunk(10 rows, %d, %d, %d) sizes = %v, want %v", tt.maxRows, tt.maxParams, tt.extra, got, tt.want)
		}
	}
	if Chunk(nil, 1, 100, 0) != nil {
		t.Error("Chunk(nil) is not nil")
	}
}

// TestConnTx: a transaction from BeginConn commits even when the context
// it began with ends before COMMIT, and Commit and Rollback return the
// connection to the pool.
func TestConnTx(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // a connection not returned would block the next query
	if _, err := db.Exec("create table t (n integer)"); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		t.Helper()
		var n int
		if err := db.QueryRow("select count(*) from t").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	ctx, cancel := context.WithCancel(t.Context())
	tx, err := BeginConn(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "insert into t values (1)"); err != nil {
		t.Fatal(err)
	}
	cancel() // shutdown begins between the last statement and COMMIT
	if err := tx.Commit(); err != nil {
		t.Fatalf("Commit after the begin context ended: %v", err)
	}
	if n, inUse := count(), db.Stats().InUse; n != 1 || inUse != 0 {
		t.Errorf("after Commit: %d rows, %d connections in use; want 1, 0", n, inUse)
	}

	tx, err = BeginConn(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(t.Context(), "insert into t values (2)"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n, inUse := count(), db.Stats().InUse; n != 1 || inUse != 0 {
		t.Errorf("after Rollback: %d rows, %d connections in use; want 1, 0", n, inUse)
	}

	if _, err := BeginConn(ctx, db); !errors.Is(err, context.Canceled) {
		t.Errorf("BeginConn(ended ctx) error = %v, want context.Canceled", err)
	}
	if inUse := db.Stats().InUse; inUse != 0 {
		t.Errorf("after a failed BeginConn: %d connections in use", inUse)
	}
}

func TestSeqRange(t *testing.T) {
	r := func(seq any) *Row {
		var row Row
		row.Values[StreamSequence] = seq
		return &row
	}
	for _, tt := range []struct {
		rows []*Row
		want string
	}{
		{[]*Row{r(int64(7))}, "stream seq 7…7"},
		{[]*Row{r(int64(7)), r(nil), r(int64(9))}, "stream seq 7…9"},
		{[]*Row{r(nil), r(int64(9))}, "stream seq ?…9"},
	} {
		if got := SeqRange(tt.rows); got != tt.want {
			t.Errorf("SeqRange(%d rows) = %q, want %q", len(tt.rows), got, tt.want)
		}
	}
}
