package sqlmodel

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-sinks/nats-sink/internal/mapping"
)

// An ArrayElem is the element type of the array a PostgreSQL multi-row
// statement binds for one mapped column (see Mapped.Multi).
type ArrayElem int

// The array element types. Values the driver binds as text (numeric,
// date, json, uuid) travel as text and are cast by the statement, as the
// per-row statement casts them.
const (
	ElemText ArrayElem = iota + 1
	ElemInt8
	ElemFloat8
	ElemBool
	ElemTimestamptz
	ElemBytea
)

// pgElem is the array element type of c.
func (c *MCol) pgElem() ArrayElem {
	switch c.Type().Kind {
	case mapping.BigInt, mapping.Integer:
		return ElemInt8
	case mapping.Double:
		return ElemFloat8
	case mapping.Boolean:
		return ElemBool
	case mapping.Timestamp:
		return ElemTimestamptz
	case mapping.Bytes:
		return ElemBytea
	}
	return ElemText
}

var elemSQL = map[ArrayElem]string{
	ElemText: "text[]", ElemInt8: "int8[]", ElemFloat8: "float8[]", ElemBool: "bool[]",
	ElemTimestamptz: "timestamptz[]", ElemBytea: "bytea[]",
}

// prepareMulti builds the PostgreSQL multi-row statement of mapped table t
// (docs/sql.md#per-database): one array per column, unnested into rows,
// with the per-row statement's casts and conflict clause. When a
// conflicting row can be left alone (insert_ignore, upsert without update
// columns, or an older version) and the statement's count says it
// wrote nothing for some rows, MultiCheck finds the keys of the rows this
// transaction wrote, as text (see KeyText), so that the others are
// reported Duplicate.
func (m *Model) prepareMulti(t *Table, found map[string]string) {
	d := m.Dialect
	mp := t.Mapped
	q := d.Quote(t.Name)
	names := make([]string, len(mp.Cols))
	arrays := make([]string, len(mp.Cols))
	sel := make([]string, len(mp.Cols))
	mp.Elems = make([]ArrayElem, len(mp.Cols))
	for i, c := range mp.Cols {
		names[i] = c.Name
		mp.Elems[i] = c.pgElem()
		arrays[i] = fmt.Sprintf("$%d::%s", i+1, elemSQL[mp.Elems[i]])
		sel[i] = "u." + d.Quote(c.Name) + m.pgCast(c, found)
	}
	key := d.QuoteAll(names[:mp.NKey])
	var b strings.Builder
	b.WriteString("insert into " + q + " (" + d.QuoteAll(names) + ") select " + strings.Join(sel, ", "))
	b.WriteString(" from unnest(" + strings.Join(arrays, ", ") + ") as u (" + d.QuoteAll(names) + ")")
	mp.MultiReturning = false
	switch {
	case m.Mode == InsertIgnore || m.Mode == Upsert && len(mp.Update) == 0:
		b.WriteString(" on conflict (" + key + ") do nothing")
		mp.MultiReturning = true
	case m.Mode == Upsert:
		b.WriteString(" on conflict (" + key + ") do update set ")
		for i, j := range mp.Update {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(d.Quote(names[j]) + " = excluded." + d.Quote(names[j]))
		}
		if mp.Version >= 0 {
			v := d.Quote(names[mp.Version])
			b.WriteString(" where " + q + "." + v + " is null or excluded." + v + " > " + q + "." + v)
			mp.MultiReturning = true
		}
	}
	if mp.MultiReturning {
		// The rows of these keys that this transaction wrote: their
		// xmin is its transaction id (an insert and an update both
		// write a new row version; a skipped update and do nothing
		// leave the row as it was).
		ret := make([]string, mp.NKey)
		on := make([]string, mp.NKey)
		for i, c := range mp.Cols[:mp.NKey] {
			col := "t." + d.Quote(c.Name)
			ret[i] = keyTextSQL(c, col)
			on[i] = col + " = " + sel[i]
		}
		mp.MultiCheck = "select " + strings.Join(ret, ", ") + " from " + q + " as t join unnest(" + strings.Join(arrays[:mp.NKey], ", ") +
			") as u (" + key + ") on " + strings.Join(on, " and ") + " where t.xmin = pg_catalog.pg_current_xact_id()::xid"
	}
	mp.Multi = b.String()
}

// keyTextSQL renders key column col in the text KeyText gives its bound
// value, independent of the session's DateStyle and TimeZone.
func keyTextSQL(c *MCol, col string) string {
	switch c.Type().Kind {
	case mapping.Timestamp:
		return "to_char(" + col + " at time zone 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US')"
	case mapping.Date:
		return "to_char(" + col + ", 'YYYY-MM-DD')"
	}
	return col + "::text"
}

// KeyText renders one bound key value as the multi-row statement returns
// it (see keyTextSQL); ok is false for a value it cannot render.
func KeyText(v any) (string, bool) {
	switch x := v.(type) {
	case int64:
		return strconv.FormatInt(x, 10), true
	case string:
		return x, true
	case time.Time:
		return x.UTC().Format("2006-01-02T15:04:05.000000"), true
	}
	return "", false
}

// MappedKey encodes the key values of mapped row r unambiguously (length-
// prefixed texts); ok is false when one cannot be rendered.
func MappedKey(r *Row, nkey int) (string, bool) {
	var b strings.Builder
	for _, v := range r.M[:min(nkey, len(r.M))] {
		s, ok := KeyText(v)
		if !ok {
			return "", false
		}
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	return b.String(), true
}

// Distinct reports whether mapped group g can be written by one multi-row
// statement with the same result as one statement per row in delivery
// order: no row is a delete and no key repeats (ON CONFLICT DO UPDATE
// cannot touch a row twice in one statement, and a delete must run
// between the writes around it). It returns each row's key (MappedKey).
func (g Group) Distinct() ([]string, bool) {
	mp := g.Table.Mapped
	keys := make([]string, len(g.Rows))
	seen := make(map[string]struct{}, len(g.Rows))
	for i, r := range g.Rows {
		if r.Delete {
			return nil, false
		}
		k, ok := MappedKey(r, mp.NKey)
		if !ok {
			return nil, false
		}
		if _, dup := seen[k]; dup {
			return nil, false
		}
		seen[k] = struct{}{}
		keys[i] = k
	}
	return keys, true
}
