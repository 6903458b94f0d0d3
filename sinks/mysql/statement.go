package mysql

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
)

// statement is the SQL of one table, built once from identifiers that
// passed the allow-list (values are always bound):
//
//	insert into `T` (`C1`, …) values (?, …), (?, …)
//	insert ignore into `T` (`C1`, …) values (?, …)
//	insert into `T` (`C1`, …) values (?, …) on duplicate key update `U1` = values(`U1`), …
//	… on duplicate key update `K1` = `K1`    (upsert with no update columns)
type statement struct {
	mode sqlmodel.Mode
	head string // up to and including "values "
	row  string // "(?, ?, …)"
	tail string // "" or " on duplicate key update …"
	verb string // for error texts
	// update is the number of update columns; storedAtUpdated tells
	// whether every update changes the row (stored_at is rebuilt for each
	// delivery), which lets the affected-row count tell updates apart.
	update          int
	storedAtUpdated bool
	// mapped is set for a mapped table (see mappedStatement); versions,
	// when set, reads the key and version_column of n rows (see
	// tx.predict).
	mapped   bool
	versions func(n int) string
}

// mappedStatement is the multi-row form of mapped table t's per-row INSERT
// (sqlmodel's Mapped.Insert: "… values (?, …)" and its on duplicate key
// clause), whose row tuple is repeated for each row of a chunk. MySQL
// applies the rows of one INSERT one after another, each seeing the ones
// before it, exactly as the per-row statements would: a repeated key
// updates the row an earlier tuple inserted, under the same version guard.
func mappedStatement(m *sqlmodel.Model, t *sqlmodel.Table) statement {
	ins := t.Mapped.Insert
	i := strings.Index(ins, " values (") + len(" values ")
	j := i + strings.IndexByte(ins[i:], ')') + 1
	st := statement{mode: m.Mode, head: ins[:i], row: ins[i:j], tail: ins[j:], verb: string(m.Mode),
		update: len(t.Mapped.Update), mapped: true}
	mp := t.Mapped
	if m.Mode == sqlmodel.Upsert && len(mp.Update) > 0 && mp.Version >= 0 {
		d := m.Dialect
		var cols, keys []string
		for _, c := range mp.Cols[:mp.NKey] {
			cols = append(cols, "cast("+d.Quote(c.Name)+" as char)")
			keys = append(keys, d.Quote(c.Name))
		}
		head := "select " + strings.Join(cols, ", ") + ", cast(" + d.Quote(mp.Cols[mp.Version].Name) + " as char) from " + d.Quote(t.Name) + " where "
		one := "?"
		if len(keys) > 1 {
			head += "(" + strings.Join(keys, ", ") + ") in ("
			one = "(" + strings.TrimSuffix(strings.Repeat("?, ", len(keys)), ", ") + ")"
		} else {
			head += keys[0] + " in ("
		}
		st.versions = func(n int) string {
			return head + strings.TrimSuffix(strings.Repeat(one+", ", n), ", ") + ")"
		}
	}
	return st
}

func newStatement(m *sqlmodel.Model, t *sqlmodel.Table) statement {
	d := m.Dialect
	st := statement{mode: m.Mode, update: len(t.Update), storedAtUpdated: slices.Contains(t.Update, sqlmodel.StoredAtEpochNS)}
	insert := "insert into "
	st.verb = string(m.Mode)
	if m.Mode == sqlmodel.InsertIgnore {
		insert = "insert ignore into "
	}
	st.head = insert + d.Quote(t.Name) + " (" + d.QuoteAll(m.AllColumns()) + ") values "
	st.row = "(" + strings.TrimSuffix(strings.Repeat("?, ", int(sqlmodel.NumFields)), ", ") + ")"
	if m.Mode == sqlmodel.Upsert {
		var sets []string
		for _, f := range t.Update {
			c := d.Quote(m.Column(f))
			sets = append(sets, c+" = values("+c+")")
		}
		if len(sets) == 0 && len(t.Key) > 0 {
			// A self-assignment: the duplicate is detected and the row
			// left unchanged (0 affected rows), and unlike INSERT IGNORE
			// no other row error is downgraded to a warning.
			c := d.Quote(m.Column(t.Key[0]))
			sets = append(sets, c+" = "+c)
		}
		st.tail = " on duplicate key update " + strings.Join(sets, ", ")
	}
	return st
}

// text returns the statement for n rows; a negative n is the versions
// query for -n keys.
func (st statement) text(n int) string {
	if n < 0 {
		return st.versions(-n)
	}
	var b strings.Builder
	b.Grow(len(st.head) + n*(len(st.row)+2) + len(st.tail))
	b.WriteString(st.head)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(st.row)
	}
	b.WriteString(st.tail)
	return b.String()
}

// effective interprets the affected-row count of one statement over rows
// (MySQL counts 1 per inserted row, 2 per updated row and 0 per row an
// upsert left unchanged or INSERT IGNORE skipped). It returns how many rows
// were new to the table, marks rows Duplicate when the count proves that
// each of them already existed, and reports unknown when an upsert with
// update columns could not be told apart row by row.
func (st statement) effective(rows []*sqlmodel.Row, affected int64) (fresh int64, unknown bool) {
	n := int64(len(rows))
	all := func() {
		for _, r := range rows {
			r.Duplicate = true
		}
	}
	switch {
	case st.mode != sqlmodel.Upsert && st.mode != sqlmodel.InsertIgnore:
		return affected, false
	case st.mapped && st.mode == sqlmodel.Upsert && st.update > 0:
		// A mapped row that updates a business key's row is a new
		// version, not a duplicate: only a row left unchanged (an older
		// version, equal values) is one, and the count proves that only
		// when no row changed. Otherwise every row is reported
		// Committed, which is safe, as both outcomes are acknowledged.
		if affected == 0 {
			all()
			return 0, false
		}
		return n, false
	case st.mode == sqlmodel.InsertIgnore || st.update == 0:
		if affected == 0 {
			all()
		}
		return min(max(affected, 0), n), false
	case affected == 0:
		// Every row existed and was rewritten with equal values.
		all()
		return 0, false
	case st.storedAtUpdated:
		// No row can be left unchanged (stored_at differs on every
		// delivery), so affected = inserted + 2 × updated.
		updated := min(max(affected-n, 0), n)
		if updated == n {
			all()
		}
		return n - updated, updated > 0 && updated < n
	case affected == 2*n:
		all()
		return 0, false
	}
	return min(affected, n), true
}

// ddl returns the auto_create statement for t: the recommended DDL of
// docs/formats.md#sql-tables and, when the idempotency key is not the primary key
// (strategies message_id and payload_field, or custom key columns), a
// unique constraint on the key columns named <table>_idem. The spec gives
// that constraint for PostgreSQL and SQLite only; MySQL needs it just as
// much: INSERT IGNORE and ON DUPLICATE KEY UPDATE detect duplicates only
// through a unique index, so without it a message_id key would never
// de-duplicate anything.
func ddl(m *sqlmodel.Model, t *sqlmodel.Table) string {
	base := m.DDL(t)
	if len(t.Key) == 0 || keyIsPrimary(t.Key) {
		return base
	}
	parts := strings.Split(t.Name, ".")
	name := idemConstraint(parts[len(parts)-1])
	d := m.Dialect
	line := fmt.Sprintf(",\n    constraint %s unique (%s)\n)", d.Quote(name), d.QuoteAll(m.ColumnNames(t.Key)))
	return strings.TrimSuffix(base, "\n)") + line
}

// idemConstraint is <name>_idem, or when that exceeds MySQL's 64-character
// identifier limit, the first 50 characters of name, "_", the first 8 hex
// digits of sha256(name) and "_idem" (the primary-key rule of data-shapes
// docs/kafka.md, with a suffix that cannot collide with the primary key's name).
func idemConstraint(name string) string {
	if c := name + "_idem"; len(c) <= 64 {
		return c
	}
	sum := sha256.Sum256([]byte(name))
	return name[:50] + "_" + hex.EncodeToString(sum[:])[:8] + "_idem"
}
