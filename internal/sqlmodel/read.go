package sqlmodel

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
)

// StoredRow is one audit-layout row read back: its stream and stream
// sequence columns (for naming the row) and its payload and metadata JSON
// texts (nil for SQL NULL).
type StoredRow struct {
	Stream            string
	Seq               int64
	Payload, Metadata []byte
}

// ReadTable resolves the table a read-back uses: name when set (checked
// against the identifier allow-list and folded), else the sink's table. It
// fails for a table in the mapped layout, whose rows hold no payload
// document to verify.
func (m *Model) ReadTable(name string) (string, error) {
	if name == "" {
		name = m.Tables[0].Name
	} else {
		if p := m.Dialect.CheckTable(name); p != "" {
			return "", fmt.Errorf("--table: %s", p)
		}
		name = m.Dialect.Fold(name)
	}
	for _, t := range m.Tables {
		if t.Name == name && t.Mapped != nil {
			return "", fmt.Errorf("table %s uses the mapped layout; reading rows back needs the audit layout", name)
		}
	}
	return name, nil
}

// ReadQuery returns the SELECT that reads table's stream, stream sequence,
// payload and metadata columns (audit layout) in (stream, stream sequence)
// order, a stable order for reports; at most limit rows when limit > 0.
// table is a name ReadTable returned.
func (m *Model) ReadQuery(table string, limit int) string {
	d := m.Dialect
	col := func(f Field) string {
		c := d.Quote(m.Columns[f])
		if d == Postgres && f.JSON() {
			c += "::text" // jsonb columns scan as text too
		}
		return c
	}
	var b strings.Builder
	fmt.Fprintf(&b, "SELECT %s, %s, %s, %s FROM %s ORDER BY %s, %s",
		col(StreamName), col(StreamSequence), col(Payload), col(Metadata), d.Quote(table),
		d.Quote(m.Columns[StreamName]), d.Quote(m.Columns[StreamSequence]))
	if limit > 0 {
		if d == Oracle {
			b.WriteString(" FETCH FIRST " + strconv.Itoa(limit) + " ROWS ONLY")
		} else {
			b.WriteString(" LIMIT " + strconv.Itoa(limit))
		}
	}
	return b.String()
}

// Scanner is what ReadRows needs of a result set: *sql.Rows and pgx.Rows
// both have it.
type Scanner interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// ReadRows scans each row of rows (a ReadQuery result) into a StoredRow and
// calls fn with it, stopping at fn's first error.
func ReadRows(rows Scanner, fn func(StoredRow) error) error {
	for rows.Next() {
		var stream, payload, meta sql.NullString
		var seq sql.NullInt64
		if err := rows.Scan(&stream, &seq, &payload, &meta); err != nil {
			return err
		}
		r := StoredRow{Stream: stream.String, Seq: seq.Int64}
		if payload.Valid {
			r.Payload = []byte(payload.String)
		}
		if meta.Valid {
			r.Metadata = []byte(meta.String)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Querier is a *sql.DB or a *sql.Conn.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// ReadDB runs ReadQuery(table, limit) on db and calls fn per row, for the
// database/sql dialects.
func (m *Model) ReadDB(ctx context.Context, db Querier, table string, limit int, fn func(StoredRow) error) error {
	rows, err := db.QueryContext(ctx, m.ReadQuery(table, limit))
	if err != nil {
		return fmt.Errorf("read %s: %w", table, err)
	}
	defer rows.Close()
	if err := ReadRows(rows, fn); err != nil {
		return fmt.Errorf("read %s: %w", table, err)
	}
	return nil
}
