package sqlmodel

import (
	"context"
	"database/sql"
	"fmt"
)

// A Statement is one execution: SQL text and its bound arguments.
type Statement struct {
	SQL  string
	Args []any
}

// A Builder turns one table group into the statements that write it, for
// example one multi-row INSERT per Chunk. It holds the dialect's SQL text
// rules; values go into Args, never into SQL.
type Builder func(g Group) ([]Statement, error)

// SQLTx adapts a database/sql transaction to Tx for dialects whose driver
// speaks database/sql (mysql, oracle): the dialect writes a Builder and a
// classifier, and Begin becomes
//
//	func (s *Sink) begin(ctx context.Context) (sqlmodel.Tx, error) {
//		tx, err := s.db.BeginTx(ctx, nil)
//		if err != nil {
//			return nil, err
//		}
//		return sqlmodel.SQLTx{Tx: tx, Build: s.build}, nil
//	}
//
// database/sql rolls a transaction back by itself when the BeginTx context
// is cancelled, and Commit then fails: Writer reports that as Temporary,
// which is right, as nothing was committed.
type SQLTx struct {
	Tx    *sql.Tx
	Build Builder
}

// Exec runs the group's statements in order and sums their affected-row
// counts; the sum is -1 when the driver reports none for any statement.
func (t SQLTx) Exec(ctx context.Context, g Group) (int64, error) {
	stmts, err := t.Build(g)
	if err != nil {
		return 0, err
	}
	var total int64
	for i, st := range stmts {
		res, err := t.Tx.ExecContext(ctx, st.SQL, st.Args...)
		if err != nil {
			return 0, fmt.Errorf("statement %d of %d: %w", i+1, len(stmts), err)
		}
		n, err := res.RowsAffected()
		if err != nil || n < 0 || total < 0 {
			total = -1
			continue
		}
		total += n
	}
	return total, nil
}

// Commit commits the transaction.
func (t SQLTx) Commit(context.Context) error { return t.Tx.Commit() }

// Rollback rolls the transaction back.
func (t SQLTx) Rollback() error { return t.Tx.Rollback() }

// Chunk splits rows into consecutive slices of at most maxRows rows whose
// bound parameters (NumFields per row, plus extra per row) stay within
// maxParams, for multi-row statements (PostgreSQL allows 65,535
// parameters, MySQL prepared statements as many, SQLite 32,766). A limit
// below one row's worth still yields one row per chunk. maxRows <= 0 means
// no row limit.
func Chunk(rows []*Row, maxRows, maxParams, extra int) [][]*Row {
	per := int(NumFields) + extra
	n := max(1, maxParams/per)
	if maxRows > 0 {
		n = min(n, maxRows)
	}
	var out [][]*Row
	for len(rows) > 0 {
		k := min(n, len(rows))
		out = append(out, rows[:k:k])
		rows = rows[k:]
	}
	return out
}
