package sqlmodel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/mapping"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sqlconfig"
)

// Mapped is the row shape of a table in the mapped layout
// (docs/sql.md#mapped-layout): the key columns, the included audit columns
// and the mapping columns, in that order, with the statements that write and
// delete one row. A mapped Table has Key and Update empty (its key is
// Cols[:NKey]), so the audit layout's batch reduction leaves its rows alone:
// they are written one statement per row, in delivery order, which applies
// repeated keys and deletes inside a batch in order.
type Mapped struct {
	Cols []*MCol
	// NKey is the number of key columns at the start of Cols.
	NKey int
	// Update holds the indexes into Cols of the columns an upsert or merge
	// updates (the version column last); empty means none.
	Update []int
	// Version is the index into Cols of version_column, or -1.
	Version int
	Mapping *mapping.Mapping
	// NeedsPayload is set when a row column or key reads the payload.
	NeedsPayload bool
	// Texts is set when an included audit column is a JSON text.
	Texts bool
	// DeleteHeader and DeleteEquals, or DeleteEmpty, say which messages
	// delete their key's row.
	DeleteHeader, DeleteEquals string
	DeleteEmpty                bool

	// Insert and Delete are the per-row statements, set by Prepare once
	// the table's column types are known.
	Insert, Delete string
	// Multi is PostgreSQL's multi-row statement for a group that Distinct
	// accepts, binding one array per column of element type Elems[i];
	// MultiReturning says a row can be left alone, and then MultiCheck,
	// binding the key columns' arrays, returns the keys of the rows the
	// transaction wrote (see prepareMulti). Set by Prepare on PostgreSQL
	// only.
	Multi, MultiCheck string
	Elems             []ArrayElem
	MultiReturning    bool
}

// MCol is one column of a mapped row: an audit field or a mapping column.
type MCol struct {
	// Name is the folded column name.
	Name string
	// Path is the configuration key that put the column in the row
	// ("mapping[2]", "include_columns[0]", "idempotency.columns[0]").
	Path string
	// Field is the audit field when MC is nil.
	Field Field
	MC    *mapping.Column
	// NotNull columns are declared not null by auto_create: keys, required
	// mapping columns and audit columns the audit DDL declares so.
	NotNull bool
	Key     bool
}

// Type returns the column's mapped type; an audit column counts as text,
// bigint or json by its kind.
func (c *MCol) Type() mapping.Type {
	switch {
	case c.MC != nil:
		return c.MC.Type
	case c.Field.Integer():
		return mapping.Type{Kind: mapping.BigInt}
	case c.Field.JSON():
		return mapping.Type{Kind: mapping.JSON}
	}
	return mapping.Type{Kind: mapping.Text}
}

// typePath is the key a type mismatch is reported at.
func (c *MCol) typePath() string {
	if c.MC != nil {
		return c.Path + ".type"
	}
	return c.Path
}

func (c *MCol) columnPath() string {
	if c.MC != nil {
		return c.Path + ".column"
	}
	return c.Path
}

// Profile returns the mapping profile of d: timestamp precision (µs, Oracle
// ns), earliest timestamp (MySQL 1000-01-01), U+0000 (PostgreSQL rejects
// it) and the identifier rule.
func (d Dialect) Profile() mapping.Profile {
	p := mapping.Profile{TimePrecision: time.Microsecond, CheckColumn: d.CheckColumn, Fold: d.Fold}
	switch d {
	case Oracle:
		p.TimePrecision = time.Nanosecond
	case MySQL:
		p.MinTime = time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)
	case Postgres:
		p.RejectNUL = true
	}
	return p
}

// mappedSpec is what one table of the mapped layout is compiled from.
type mappedSpec struct {
	items      []sqlconfig.MappingItem
	itemsPath  string
	incl       []string
	inclPath   string
	check      bool // report problems (false: inherited, already reported)
	lenient    bool
	version    *string
	deleteWhen *sqlconfig.DeleteWhen
}

// mapped compiles t's mapped row shape from sp, the idempotency object at
// idemPath and the update columns upd at updPath.
func (m *Model) mapped(t *Table, sp mappedSpec, idem *sqlconfig.Idempotency, idemPath string, upd *[]string, updPath string, p *fields.Problems) {
	if !sp.check {
		p = &fields.Problems{}
	}
	d := m.Dialect
	mp := &Mapped{Version: -1}
	t.Mapped = mp
	mp.Mapping = mapping.Compile(sp.items, sp.itemsPath, mapping.Options{Profile: d.Profile(), Lenient: sp.lenient}, p)
	mp.NeedsPayload = mp.Mapping.NeedsPayload || idem.Strategy == StrategyPayloadField
	inRow := map[string]string{} // lower-case name → path
	add := func(c *MCol) {
		inRow[strings.ToLower(c.Name)] = c.columnPath()
		mp.Cols = append(mp.Cols, c)
	}
	audit := func(f Field, path string) *MCol {
		return &MCol{Name: m.Columns[f], Path: path, Field: f, NotNull: strings.Contains(columnTypes[f][int(d)-1], "not null")}
	}
	keyCols := keyColumns(idem)
	if idem.Strategy == StrategyMapping && slices.Equal(idem.Columns, sqlconfig.DefaultKeyColumns()) {
		keyCols = nil
	}
	if len(keyCols) == 0 {
		p.Add(idemPath+".columns", "must list at least one mapping column with strategy mapping")
	}
	for i, name := range keyCols {
		path := fields.Index(idemPath+".columns", i)
		if _, dup := inRow[strings.ToLower(name)]; dup {
			p.Addf(path, "duplicate column %q", name)
			continue
		}
		if idem.Strategy == StrategyMapping {
			c, ok := mp.Mapping.Lookup(name)
			switch {
			case !ok && idemPath == "idempotency" && sp.itemsPath != "mapping":
				p.Addf(sp.itemsPath, "inherited key column %q (%s) is not a mapping column of this route", name, path)
				continue
			case !ok:
				p.Addf(path, "%q is not a mapping column", name)
				continue
			case c.KeyProblem() != "":
				p.Add(path, c.KeyProblem())
			}
			add(&MCol{Name: c.Name, Path: fields.Index(sp.itemsPath, c.Item), MC: c, NotNull: true, Key: true})
			continue
		}
		f, ok := m.lookup(name)
		if !ok {
			p.Addf(path, "%q is not a mapped column", name)
			continue
		}
		c := audit(f, path)
		c.Key, c.NotNull = true, true
		add(c)
	}
	mp.NKey = len(mp.Cols)
	for i, name := range sp.incl {
		path := fields.Index(sp.inclPath, i)
		f, ok := m.lookup(name)
		switch {
		case !ok:
			p.Addf(path, "%q is not an audit column (name it as in columns)", name)
			continue
		case inRow[strings.ToLower(m.Columns[f])] != "":
			if !slices.ContainsFunc(mp.Cols[:mp.NKey], func(c *MCol) bool { return c.MC == nil && c.Field == f }) {
				p.Addf(path, "duplicate column %q", name)
			}
			continue
		}
		// An included JSON text (the payload as the audit layout
		// normalises it, the headers, the metadata) is built as there.
		mp.Texts = mp.Texts || f.JSON()
		add(audit(f, path))
	}
	for _, c := range mp.Mapping.Columns {
		path := fields.Index(sp.itemsPath, c.Item)
		if prev, dup := inRow[strings.ToLower(c.Name)]; dup {
			isKey := slices.ContainsFunc(mp.Cols[:mp.NKey], func(k *MCol) bool { return k.MC == c })
			fromMapping := strings.HasPrefix(prev, sp.itemsPath+"[") // reported by mapping.Compile
			if !isKey && !fromMapping {
				p.Addf(path+".column", "duplicate column %q (also used by %s)", c.Name, prev)
			}
			continue
		}
		add(&MCol{Name: c.Name, Path: path, MC: c, NotNull: c.Required})
	}

	// Update columns: null = every non-key row column, [] = none.
	if m.Mode.Updates() {
		switch {
		case upd == nil:
			for i := mp.NKey; i < len(mp.Cols); i++ {
				mp.Update = append(mp.Update, i)
			}
		default:
			for i, name := range *upd {
				ip := fields.Index(updPath, i)
				j := slices.IndexFunc(mp.Cols, func(c *MCol) bool { return strings.EqualFold(c.Name, name) })
				switch {
				case j < 0:
					p.Addf(ip, "%q is not a row column", name)
				case j < mp.NKey:
					p.Addf(ip, "%q is a key column", name)
				case slices.Contains(mp.Update, j):
					p.Addf(ip, "duplicate column %q", name)
				default:
					mp.Update = append(mp.Update, j)
				}
			}
		}
	}
	if v := sp.version; v != nil {
		j := slices.IndexFunc(mp.Cols, func(c *MCol) bool { return strings.EqualFold(c.Name, *v) })
		ok := j >= mp.NKey
		if ok {
			c := mp.Cols[j]
			switch {
			case c.MC != nil:
				k := c.MC.Type.Kind
				ok = c.MC.Required && (k == mapping.BigInt || k == mapping.Integer || k == mapping.Timestamp)
			default:
				ok = c.Field == StreamSequence || c.Field == ReceivedAtEpochNS || c.Field == StoredAtEpochNS
			}
		}
		switch {
		case !m.Mode.Updates():
			p.Addf("version_column", "only allowed with mode %s (mode is %s)", d.UpdateMode(), m.Mode)
		case !ok:
			p.Addf("version_column", "must name a never-null row column of type bigint, integer or timestamp (got %q)", *v)
		default:
			mp.Version = j
			mp.Update = slices.DeleteFunc(mp.Update, func(i int) bool { return i == j })
			mp.Update = append(mp.Update, j)
		}
	}
	if dw := sp.deleteWhen; dw != nil {
		m.deleteWhen(mp, dw, idem.Strategy, p)
	}
}

// headerName reports a header name of 1 to 128 token characters.
func headerName(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || strings.ContainsRune("!#$%&'*+.^_`|~-", r)) {
			return false
		}
	}
	return true
}

func (m *Model) deleteWhen(mp *Mapped, dw *sqlconfig.DeleteWhen, strategy string, p *fields.Problems) {
	header := dw.Header != nil || dw.Equals != nil
	switch {
	case header && dw.EmptyPayload:
		p.Add("delete_when", `set either {"header": …, "equals": …} or {"empty_payload": true}`)
		return
	case !header && !dw.EmptyPayload:
		p.Add("delete_when", `must be {"header": <name>, "equals": <value>} or {"empty_payload": true}`)
		return
	case strategy == StrategyStreamSequence:
		p.Add("delete_when", "needs idempotency strategy message_id, payload_field or mapping; stream_sequence keys name each message's own row, so a delete would never match")
		return
	}
	if header {
		switch {
		case dw.Header == nil:
			p.Add("delete_when.header", "required with equals")
		case !headerName(*dw.Header):
			p.Addf("delete_when.header", "must be a header name of 1 to 128 token characters (got %q)", *dw.Header)
		}
		switch {
		case dw.Equals == nil:
			p.Add("delete_when.equals", "required with header")
		case *dw.Equals == "" || len(*dw.Equals) > 2048 || fields.HasControl(*dw.Equals):
			p.Add("delete_when.equals", "must be 1 to 2048 characters without control characters")
		}
		if dw.Header != nil && dw.Equals != nil {
			mp.DeleteHeader, mp.DeleteEquals = *dw.Header, *dw.Equals
		}
		return
	}
	ok := strategy == StrategyMessageID
	if strategy == StrategyMapping {
		ok = true
		for _, c := range mp.Cols[:mp.NKey] {
			if ptr, special := c.MC.Source(); ptr || strings.HasPrefix(special, "$labels") || special == "$stream_sequence" || special == "$received_at" {
				ok = false
			}
		}
	}
	if !ok {
		p.Add("delete_when.empty_payload", "an empty payload carries no key; use strategy message_id or key paths from $subject or $header:<Name>")
		return
	}
	mp.DeleteEmpty = true
}

// isDelete reports whether e deletes its key's row.
func (mp *Mapped) isDelete(e *sink.Envelope) bool {
	switch {
	case mp.DeleteHeader != "":
		v, ok := e.Headers.Get(mp.DeleteHeader)
		return ok && v == mp.DeleteEquals
	case mp.DeleteEmpty:
		return !e.Payload.Omitted && len(e.Data) == 0
	}
	return false
}

// mappedRow builds the bound values of e for mapped table t: every row
// column, or for a delete only the key columns. A value that does not
// convert fails this message alone (a ValidationError naming the column,
// the path and the reason).
func (m *Model) mappedRow(e *sink.Envelope, t *Table, storedAt time.Time) ([]any, bool, error) {
	mp := t.Mapped
	del := mp.isDelete(e)
	cols := mp.Cols
	if del {
		cols = cols[:mp.NKey]
	}
	var payload any
	needs := mp.NeedsPayload
	if del {
		needs = false
		for _, c := range cols {
			if c.MC != nil {
				if ptr, _ := c.MC.Source(); ptr {
					needs = true
				}
			}
		}
		needs = needs || t.Strategy == StrategyPayloadField
	}
	if needs {
		obj, err := mapping.Payload(e, m.PayloadMode)
		if err != nil {
			return nil, false, err
		}
		payload = obj
	}
	var audit [NumFields]any
	if slices.ContainsFunc(cols, func(c *MCol) bool { return c.MC == nil }) || t.Strategy != StrategyMapping {
		var err error
		if mp.Texts && !del {
			audit, err = m.values(e, t, storedAt, nil, true)
		} else {
			audit, err = m.values(e, t, storedAt, nil, false)
		}
		if err != nil {
			return nil, false, err
		}
	}
	out := make([]any, len(cols))
	for i, c := range cols {
		if c.MC == nil {
			out[i] = audit[c.Field]
			continue
		}
		v, err := c.MC.Value(e, payload)
		if err != nil {
			return nil, false, err
		}
		if v == nil && c.Key {
			return nil, false, sink.AsPermanentType(sink.ValidationError, fmt.Errorf("mapping column %q (path %q): required value is missing", c.Name, c.MC.Path))
		}
		out[i] = m.Dialect.bind(c.MC.Type, v)
	}
	return out, del, nil
}

// bind turns a converted mapping value into what the dialect's driver binds.
func (d Dialect) bind(t mapping.Type, v any) any {
	switch v := v.(type) {
	case nil:
		return nil
	case mapping.Decimal:
		return string(v)
	case mapping.JSONText:
		return string(v)
	case bool:
		if d == SQLite || d == Oracle {
			if v {
				return int64(1)
			}
			return int64(0)
		}
		return v
	case time.Time:
		switch d {
		case SQLite:
			return v.UTC().Format("2006-01-02T15:04:05.000000Z")
		case MySQL:
			return v.UTC().Format("2006-01-02 15:04:05.000000")
		}
		return v.UTC()
	case mapping.CivilDate:
		if d == Oracle {
			return v.Time()
		}
		return v.String()
	}
	return v
}

// SQLType returns the type auto_create and auto_evolve declare for a mapped
// type (a key text column gets a bounded type where the database cannot
// index unbounded text).
func (d Dialect) SQLType(t mapping.Type, key bool) string {
	switch t.Kind {
	case mapping.Text:
		switch {
		case d == MySQL && key:
			return "varchar(512)"
		case d == MySQL:
			return "longtext"
		case d == Oracle && key:
			return "varchar2(512)"
		case d == Oracle:
			return "clob"
		}
		return "text"
	case mapping.BigInt:
		return [...]string{"integer", "bigint", "bigint", "number(19)"}[d-1]
	case mapping.Integer:
		return [...]string{"integer", "integer", "int", "number(10)"}[d-1]
	case mapping.Double:
		return [...]string{"real", "double precision", "double", "binary_double"}[d-1]
	case mapping.Numeric:
		ps := fmt.Sprintf("(%d,%d)", t.Precision, t.Scale)
		return [...]string{"text", "numeric" + ps, "decimal" + ps, "number" + ps}[d-1]
	case mapping.Boolean:
		return [...]string{"integer", "boolean", "boolean", "number(1)"}[d-1]
	case mapping.Timestamp:
		return [...]string{"text", "timestamptz", "datetime(6)", "timestamp(9) with time zone"}[d-1]
	case mapping.Date:
		return [...]string{"text", "date", "date", "date"}[d-1]
	case mapping.JSON:
		return [...]string{"text", "jsonb", "json", "json"}[d-1]
	case mapping.UUID:
		return [...]string{"text", "uuid", "char(36)", "varchar2(36)"}[d-1]
	case mapping.Bytes:
		return [...]string{"blob", "bytea", "longblob", "blob"}[d-1]
	}
	return "text"
}

// colType is the DDL type of c, with not null where it applies.
func (m *Model) colType(c *MCol) string {
	if c.MC == nil {
		typ := columnTypes[c.Field][int(m.Dialect)-1]
		if c.Key && !strings.Contains(typ, "not null") {
			typ += " not null"
		}
		return typ
	}
	typ := m.Dialect.SQLType(c.MC.Type, c.Key)
	if c.NotNull {
		typ += " not null"
	}
	return typ
}

// mappedDDL is the create table statement of a mapped table.
func (m *Model) mappedDDL(t *Table) string {
	d := m.Dialect
	mp := t.Mapped
	var lines []string
	for _, c := range mp.Cols {
		lines = append(lines, "    "+d.Quote(c.Name)+" "+m.colType(c))
	}
	parts := strings.Split(t.Name, ".")
	last := parts[len(parts)-1]
	key := make([]string, mp.NKey)
	for i, c := range mp.Cols[:mp.NKey] {
		key[i] = c.Name
	}
	switch d {
	case MySQL:
		lines = append(lines, fmt.Sprintf("    constraint %s primary key (%s)", d.Quote(mysqlConstraint(last)), d.QuoteAll(key)))
	default:
		lines = append(lines, fmt.Sprintf("    constraint %s primary key (%s)", d.Quote(last+"_pk"), d.QuoteAll(key)))
	}
	head := "create table if not exists "
	if d == Oracle {
		head = "create table "
	}
	return head + d.Quote(t.Name) + " (\n" + strings.Join(lines, ",\n") + "\n)"
}

// AddColumnSQL is the auto_evolve statement adding c (always nullable:
// existing rows have no value).
func (m *Model) AddColumnSQL(t *Table, c *MCol) string {
	d := m.Dialect
	typ := strings.TrimSuffix(m.colType(c), " not null")
	switch d {
	case Postgres:
		return "alter table " + d.Quote(t.Name) + " add column if not exists " + d.Quote(c.Name) + " " + typ
	case Oracle:
		return "alter table " + d.Quote(t.Name) + " add (" + d.Quote(c.Name) + " " + typ + ")"
	}
	return "alter table " + d.Quote(t.Name) + " add column " + d.Quote(c.Name) + " " + typ
}

// CheckColumns compares the found column types of mapped table t (lower-case name
// → the catalog's type text) with its row: it returns the columns that
// auto_evolve may add, or a *sink.ConfigError naming the first problems
// (a type mismatch, a missing key column, a missing column without
// evolve).
func (m *Model) CheckColumns(t *Table, found map[string]string, evolve bool) ([]*MCol, error) {
	var p fields.Problems
	var missing []*MCol
	for _, c := range t.Mapped.Cols {
		typ, ok := found[strings.ToLower(c.Name)]
		switch {
		case !ok && c.Key:
			p.Addf(c.columnPath(), "key column %q is missing from table %q; auto_evolve never adds key columns", c.Name, t.Name)
		case !ok && evolve:
			missing = append(missing, c)
		case !ok:
			p.Addf(c.columnPath(), "column %q is missing from table %q (set auto_evolve: true to add it)", c.Name, t.Name)
		case !m.Dialect.Accepts(c.Type(), typ):
			p.Addf(c.typePath(), "column %q of table %q has type %s, not compatible with mapped type %s", c.Name, t.Name, strings.ToLower(typ), c.Type())
		}
	}
	if err := p.Err(); err != nil {
		return nil, err
	}
	return missing, nil
}

// Accepts reports whether a found column type (catalog text, any case) can
// hold mapped type t.
func (d Dialect) Accepts(t mapping.Type, found string) bool {
	f := strings.ToLower(strings.TrimSpace(found))
	base, args := f, ""
	if i := strings.IndexByte(f, '('); i >= 0 {
		base, args = strings.TrimSpace(f[:i]), f[i:]
	}
	num := func() (p, s int, ok bool) {
		_, err := fmt.Sscanf(strings.ReplaceAll(args, " ", ""), "(%d,%d)", &p, &s)
		if err != nil {
			if _, err := fmt.Sscanf(args, "(%d)", &p); err != nil {
				return 0, 0, false
			}
		}
		return p, s, true
	}
	unsigned := strings.Contains(f, "unsigned")
	k := t.Kind
	switch d {
	case SQLite:
		return sqliteAffinity(f) == map[mapping.Kind]string{
			mapping.Text: "text", mapping.Numeric: "text", mapping.Timestamp: "text", mapping.Date: "text",
			mapping.JSON: "text", mapping.UUID: "text", mapping.BigInt: "integer", mapping.Integer: "integer",
			mapping.Boolean: "integer", mapping.Double: "real", mapping.Bytes: "blob",
		}[k]
	case Postgres:
		switch k {
		case mapping.Text:
			return slices.Contains([]string{"text", "character varying", "character", "varchar", "char"}, base)
		case mapping.BigInt:
			return f == "bigint"
		case mapping.Integer:
			return f == "integer" || f == "bigint"
		case mapping.Double:
			return f == "double precision"
		case mapping.Numeric:
			if f == "numeric" {
				return true
			}
			p, s, ok := num()
			return base == "numeric" && ok && p >= t.Precision && s == t.Scale
		case mapping.Boolean:
			return f == "boolean"
		case mapping.Timestamp:
			return f == "timestamp with time zone" || f == "timestamptz"
		case mapping.Date:
			return f == "date"
		case mapping.JSON:
			return f == "jsonb" || f == "json"
		case mapping.UUID:
			return f == "uuid"
		case mapping.Bytes:
			return f == "bytea"
		}
	case MySQL:
		switch k {
		case mapping.Text:
			return slices.Contains([]string{"longtext", "varchar", "char", "tinytext", "text", "mediumtext"}, base)
		case mapping.BigInt:
			return base == "bigint" && !unsigned
		case mapping.Integer:
			return (base == "int" || base == "bigint") && !unsigned
		case mapping.Double:
			return base == "double"
		case mapping.Numeric:
			p, s, ok := num()
			return base == "decimal" && ok && p >= t.Precision && s == t.Scale
		case mapping.Boolean:
			return base == "tinyint" || base == "boolean"
		case mapping.Timestamp:
			return f == "datetime(6)"
		case mapping.Date:
			return f == "date"
		case mapping.JSON:
			return f == "json" || f == "longtext"
		case mapping.UUID:
			p, _, ok := num()
			return f == "char(36)" || (base == "varchar" && ok && p >= 36) || f == "uuid"
		case mapping.Bytes:
			return slices.Contains([]string{"longblob", "blob", "mediumblob", "varbinary"}, base)
		}
	case Oracle:
		p, s, ok := num()
		switch k {
		case mapping.Text:
			return slices.Contains([]string{"clob", "varchar2", "nvarchar2", "char", "nclob"}, base)
		case mapping.BigInt:
			return f == "number" || (base == "number" && ok && p >= 19 && s == 0)
		case mapping.Integer:
			return f == "number" || (base == "number" && ok && p >= 10 && s == 0)
		case mapping.Double:
			return f == "binary_double"
		case mapping.Numeric:
			return f == "number" || (base == "number" && ok && p >= t.Precision && s == t.Scale)
		case mapping.Boolean:
			return base == "number" && ok && p == 1 && s == 0
		case mapping.Timestamp:
			return strings.HasPrefix(f, "timestamp") && strings.HasSuffix(f, "with time zone")
		case mapping.Date:
			return f == "date"
		case mapping.JSON:
			return f == "json" || f == "clob" || f == "blob"
		case mapping.UUID:
			return f == "char(36)" || (base == "varchar2" && ok && p >= 36)
		case mapping.Bytes:
			return f == "blob" || base == "raw"
		}
	}
	return false
}

// sqliteAffinity is SQLite's type affinity of a declared type.
func sqliteAffinity(decl string) string {
	u := strings.ToUpper(decl)
	switch {
	case strings.Contains(u, "INT"):
		return "integer"
	case strings.Contains(u, "CHAR"), strings.Contains(u, "CLOB"), strings.Contains(u, "TEXT"):
		return "text"
	case u == "" || strings.Contains(u, "BLOB"):
		return "blob"
	case strings.Contains(u, "REAL"), strings.Contains(u, "FLOA"), strings.Contains(u, "DOUB"):
		return "real"
	}
	return "numeric"
}

// Prepare builds t's per-row statements. found holds the column types the
// start-up check read (PostgreSQL casts each placeholder to its column's
// type, so that text-bound values reach uuid, numeric, date and json columns).
func (m *Model) Prepare(t *Table, found map[string]string) {
	d := m.Dialect
	mp := t.Mapped
	n := 0
	ph := func(c *MCol) string {
		n++
		switch d {
		case Postgres:
			return fmt.Sprintf("$%d", n) + m.pgCast(c, found)
		case Oracle:
			return fmt.Sprintf(":%d", n)
		}
		return "?"
	}
	names := make([]string, len(mp.Cols))
	for i, c := range mp.Cols {
		names[i] = c.Name
	}
	q := d.Quote(t.Name)
	key := names[:mp.NKey]
	var b strings.Builder
	switch d {
	case Oracle:
		// merge into T using (select :1 c1, … from dual) s on (key) when
		// matched then update … [where] when not matched then insert.
		b.WriteString("merge into " + q + " t using (select ")
		for i, c := range mp.Cols {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(ph(c) + " " + d.Quote(c.Name))
		}
		b.WriteString(" from dual) s on (")
		for i, k := range key {
			if i > 0 {
				b.WriteString(" and ")
			}
			b.WriteString("t." + d.Quote(k) + " = s." + d.Quote(k))
		}
		b.WriteString(")")
		if m.Mode == Merge && len(mp.Update) > 0 {
			b.WriteString(" when matched then update set ")
			for i, j := range mp.Update {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString("t." + d.Quote(names[j]) + " = s." + d.Quote(names[j]))
			}
			if mp.Version >= 0 {
				v := d.Quote(names[mp.Version])
				b.WriteString(" where t." + v + " is null or s." + v + " > t." + v)
			}
		}
		b.WriteString(" when not matched then insert (" + d.QuoteAll(names) + ") values (")
		for i, nme := range names {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("s." + d.Quote(nme))
		}
		b.WriteString(")")
		if m.Mode == Insert || m.Mode == Append {
			b.Reset()
			n = 0
			b.WriteString("insert into " + q + " (" + d.QuoteAll(names) + ") values (")
			for i, c := range mp.Cols {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(ph(c))
			}
			b.WriteString(")")
		}
	default:
		verb := "insert into "
		if d == MySQL && m.Mode == InsertIgnore {
			verb = "insert ignore into "
		}
		b.WriteString(verb + q + " (" + d.QuoteAll(names) + ") values (")
		for i, c := range mp.Cols {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(ph(c))
		}
		b.WriteString(")")
		switch {
		case d == MySQL && m.Mode == Upsert && len(mp.Update) > 0:
			b.WriteString(" on duplicate key update ")
			for i, j := range mp.Update {
				if i > 0 {
					b.WriteString(", ")
				}
				u := d.Quote(names[j])
				if mp.Version >= 0 {
					v := d.Quote(names[mp.Version])
					b.WriteString(u + " = if(" + v + " is null or values(" + v + ") > " + v + ", values(" + u + "), " + u + ")")
				} else {
					b.WriteString(u + " = values(" + u + ")")
				}
			}
		case d == MySQL && m.Mode == Upsert:
			// No update columns: a redelivery changes nothing.
			k := d.Quote(key[0])
			b.WriteString(" on duplicate key update " + k + " = " + k)
		case d != MySQL && (m.Mode == InsertIgnore || m.Mode == Upsert && len(mp.Update) == 0):
			b.WriteString(" on conflict (" + d.QuoteAll(key) + ") do nothing")
		case d != MySQL && m.Mode == Upsert:
			b.WriteString(" on conflict (" + d.QuoteAll(key) + ") do update set ")
			for i, j := range mp.Update {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(d.Quote(names[j]) + " = excluded." + d.Quote(names[j]))
			}
			if mp.Version >= 0 {
				v := d.Quote(names[mp.Version])
				b.WriteString(" where " + q + "." + v + " is null or excluded." + v + " > " + q + "." + v)
			}
		}
	}
	mp.Insert = b.String()
	n = 0
	b.Reset()
	b.WriteString("delete from " + q + " where ")
	for i, c := range mp.Cols[:mp.NKey] {
		if i > 0 {
			b.WriteString(" and ")
		}
		b.WriteString(d.Quote(c.Name) + " = " + ph(c))
	}
	mp.Delete = b.String()
	if d == Postgres {
		m.prepareMulti(t, found)
	}
}

// pgCast is the placeholder cast of c on PostgreSQL: values pgx binds as
// text go through text to the column's found type.
func (m *Model) pgCast(c *MCol, found map[string]string) string {
	switch c.Type().Kind {
	case mapping.BigInt, mapping.Integer:
		return "::bigint"
	case mapping.Double:
		return "::float8"
	case mapping.Boolean:
		return "::boolean"
	case mapping.Timestamp:
		return "::timestamptz"
	case mapping.Bytes:
		return "::bytea"
	}
	if c.Type().Kind == mapping.Text {
		// Assignment to a varchar(n) or char(n) column checks the length;
		// an explicit cast to it would silently truncate.
		return "::text"
	}
	typ := m.Dialect.SQLType(c.Type(), c.Key)
	if f, ok := found[strings.ToLower(c.Name)]; ok {
		typ = f
	}
	// The cast names the base type only: the column's type modifier is
	// applied by the assignment, which raises an error where an explicit
	// cast would round or truncate.
	if i := strings.IndexByte(typ, '('); i >= 0 {
		typ = typ[:i]
	}
	return "::text::" + typ
}

// A Stmt is one statement of a mapped group with its arguments.
type Stmt struct {
	SQL  string
	Args []any
}

// MappedStmts returns the statements of a mapped group, one per row in
// delivery order.
func MappedStmts(g Group) []Stmt {
	out := make([]Stmt, len(g.Rows))
	for i, r := range g.Rows {
		s := g.Table.Mapped.Insert
		if r.Delete {
			s = g.Table.Mapped.Delete
		}
		out[i] = Stmt{SQL: s, Args: r.M}
	}
	return out
}

// ApplyAffected marks the rows of a mapped group whose statement affected
// nothing as Duplicate (a delete of a missing row is a success, not a
// duplicate) and returns, for Tx.Exec, the number of rows that were not,
// so that the Writer's attempted − affected counts the duplicates.
func ApplyAffected(g Group, affected []int64) int64 {
	n := int64(len(g.Rows))
	for i, r := range g.Rows {
		if !r.Delete && i < len(affected) && affected[i] == 0 {
			r.Duplicate = true
			n--
		}
	}
	return n
}

// ErrNoTable is wrapped by the start-up check's error for a missing table.
var ErrNoTable = errors.New("table does not exist")

// shape describes the row shape for the check that routes to one table
// agree; "" for the audit layout.
func (mp *Mapped) shape() string {
	if mp == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range mp.Cols {
		fmt.Fprintf(&b, "%s %s %v %v;", strings.ToLower(c.Name), c.Type(), c.Key, c.NotNull)
	}
	fmt.Fprintf(&b, "%v %d %s %s %v", mp.Update, mp.Version, mp.DeleteHeader, mp.DeleteEquals, mp.DeleteEmpty)
	return b.String()
}

// A Catalog is what the mapped layout's start-up needs from a dialect.
type Catalog struct {
	// Exec runs one DDL statement.
	Exec func(ctx context.Context, sql string) error
	// Columns returns the table's columns (lower-case name → the
	// catalog's type text); a nil map means the table does not exist.
	Columns func(ctx context.Context, table string) (map[string]string, error)
	// Exists reports a DDL error that says the table or column already
	// exists (another process got there first); it is ignored.
	Exists func(err error) bool
}

// StartMapped runs the start-up of every mapped table (docs/sql.md#mapped-layout):
// with auto_create the create table statement; then the column check; with
// auto_evolve each missing non-key column is added (nullable) and the
// columns are read and checked again, so processes starting together
// converge; finally the per-row statements are prepared for the found
// types. A missing table is a destination failure; a type mismatch or a
// missing column that may not be added is a *sink.ConfigError.
func (m *Model) StartMapped(ctx context.Context, c Catalog, autoCreate bool) error {
	for _, t := range m.Tables {
		if t.Mapped == nil {
			continue
		}
		if autoCreate {
			if err := c.Exec(ctx, m.DDL(t)); err != nil && !c.Exists(err) {
				return fmt.Errorf("%s create table %s: %w", m.Dialect, t.Name, err)
			}
		}
		found, err := c.Columns(ctx, t.Name)
		if err != nil {
			return fmt.Errorf("%s read columns of %s: %w", m.Dialect, t.Name, err)
		}
		if found == nil {
			return sink.AsDestination(fmt.Errorf("%s table %s: %w", m.Dialect, t.Name, ErrNoTable))
		}
		missing, err := m.CheckColumns(t, found, m.AutoEvolve)
		if err != nil {
			return err
		}
		if len(missing) > 0 {
			for _, col := range missing {
				if err := c.Exec(ctx, m.AddColumnSQL(t, col)); err != nil && !c.Exists(err) {
					return fmt.Errorf("%s add column %s to %s: %w", m.Dialect, col.Name, t.Name, err)
				}
			}
			if found, err = c.Columns(ctx, t.Name); err != nil {
				return fmt.Errorf("%s read columns of %s: %w", m.Dialect, t.Name, err)
			}
			if _, err := m.CheckColumns(t, found, false); err != nil {
				return err
			}
		}
		m.Prepare(t, found)
	}
	return nil
}

// TableColumns returns the folded names of every column t's rows write:
// the mapped row's columns, or every audit column.
func (m *Model) TableColumns(t *Table) []string {
	if t.Mapped == nil {
		return m.AllColumns()
	}
	out := make([]string, len(t.Mapped.Cols))
	for i, c := range t.Mapped.Cols {
		out[i] = c.Name
	}
	return out
}
