package sqlmodel

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	_ "modernc.org/sqlite" // a real database/sql driver for the adapter

	"github.com/nats-sinks/nats-sink/sink"
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

// TestSQLTxWithWriter drives Writer through SQLTx on a real database/sql
// driver, with a multi-row builder as a dialect would write it.
func TestSQLTxWithWriter(t *testing.T) {
	m := compile(t, SQLite, `{"mode":"insert_ignore"}`)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(m.DDL(m.Tables[0])); err != nil {
		t.Fatal(err)
	}
	d := m.Dialect
	build := func(g Group) ([]Statement, error) {
		var out []Statement
		for _, c := range Chunk(g.Rows, 2, 32766, 0) {
			tuple := "(" + strings.TrimSuffix(strings.Repeat("?, ", int(NumFields)), ", ") + ")"
			st := Statement{SQL: "insert into " + d.Quote(g.Table.Name) + " (" + d.QuoteAll(m.AllColumns()) + ") values " +
				strings.TrimSuffix(strings.Repeat(tuple+", ", len(c)), ", ") + " on conflict do nothing"}
			for _, r := range c {
				st.Args = append(st.Args, r.Args()...)
			}
			out = append(out, st)
		}
		return out, nil
	}
	var stats []Stats
	w := Writer{
		Model: m,
		Begin: func(ctx context.Context) (Tx, error) {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return nil, err
			}
			return SQLTx{Tx: tx, Build: build}, nil
		},
		Classify: func(err error) error { return err },
		Observe:  func(s Stats) { stats = append(stats, s) },
	}
	batch := []*sink.Envelope{goldenEnvelope(), goldenEnvelope(), goldenEnvelope()}
	batch[1].StreamSequence, batch[2].StreamSequence = 43, 44
	for _, r := range w.WriteBatch(t.Context(), batch) {
		if r.Outcome != sink.Committed {
			t.Fatalf("first write: %+v", r)
		}
	}
	batch = append(batch, goldenEnvelope())
	batch[3].StreamSequence = 45
	w.WriteBatch(t.Context(), batch)
	var n int
	db.QueryRow("select count(*) from nats_sink_events").Scan(&n)
	if n != 4 || len(stats) != 2 || stats[1].Duplicates != 3 || stats[1].Rows != 4 {
		t.Errorf("rows %d, stats %+v; want 4 rows and 3 duplicates in the second write", n, stats)
	}

	// A builder error rolls back and is classified as a shared failure.
	errBuild := errors.New("cannot build")
	w.Begin = func(ctx context.Context) (Tx, error) {
		tx, err := db.BeginTx(ctx, nil)
		return SQLTx{Tx: tx, Build: func(Group) ([]Statement, error) { return nil, errBuild }}, err
	}
	w.Classify = sink.AsPermanent
	rs := w.WriteBatch(t.Context(), batch[:1])
	if rs[0].Outcome != sink.Permanent || !rs[0].Shared || !errors.Is(rs[0].Err, errBuild) {
		t.Errorf("builder failure = %+v", rs[0])
	}
}
