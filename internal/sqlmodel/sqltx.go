package sqlmodel

import (
	"context"
	"database/sql"
	"fmt"
)

// ConnTx is one database/sql transaction on a connection of its own, the
// way the database/sql sinks (mysql, oracle) run a WriteBatch. Commit and
// Rollback return the connection to the pool; database/sql discards one
// broken by a cancelled statement instead.
type ConnTx struct {
	Conn *sql.Conn
	Tx   *sql.Tx
}

// BeginConn takes a connection from db, honouring ctx while it waits for
// one, and starts a transaction whose own context is never cancelled: the
// Writer checks ctx between statements and rolls back itself, and keeping
// cancellation away from COMMIT avoids turning a likely success into an
// unknown outcome. (database/sql would roll back a transaction whose
// BeginTx context ends, even between the last statement and COMMIT.)
// Errors are the driver's, for the dialect to sanitize and classify.
func BeginConn(ctx context.Context, db *sql.DB) (*ConnTx, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := conn.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &ConnTx{Conn: conn, Tx: tx}, nil
}

// ExecContext runs one statement in the transaction.
func (t *ConnTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.Tx.ExecContext(ctx, query, args...)
}

// Commit commits and returns the connection to the pool. An error means
// the outcome is unknown.
func (t *ConnTx) Commit() error {
	err := t.Tx.Commit()
	t.Conn.Close()
	return err
}

// Rollback rolls back and returns the connection to the pool.
func (t *ConnTx) Rollback() error {
	err := t.Tx.Rollback()
	t.Conn.Close()
	return err
}

// SeqRange describes the stream sequences of rows (one statement's chunk)
// for error messages: "stream seq 7…9", with "?" for a row without one.
func SeqRange(rows []*Row) string {
	if len(rows) == 0 {
		return "stream seq none"
	}
	return fmt.Sprintf("stream seq %v…%v", seqOf(rows[0]), seqOf(rows[len(rows)-1]))
}

func seqOf(r *Row) any {
	if v := r.Values[StreamSequence]; v != nil {
		return v
	}
	return "?"
}

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
