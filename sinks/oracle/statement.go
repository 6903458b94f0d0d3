package oracle

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
)

// batchBind is the bind name of the staging batch id (docs/oracle.md).
const batchBind = "nats_sinks_batch_id"

// plan is the SQL of one table, built once from identifiers that passed the
// allow-list (values are always bound, by the names of docs/oracle.md). Oracle
// identifiers are left unquoted: the allow-list admits only names that need
// no quotes, and unquoted names fold to upper case as the spec requires.
type plan struct {
	// write is the direct statement (staging off): insert, append or MERGE.
	write string
	// stageInsert, stageMerge and stageDelete are the staging path
	// (stageDelete is "" with cleanup keep).
	stageInsert, stageMerge, stageDelete string
}

// newPlan builds the statements for t. staging is the folded staging table
// ("" when staging is off) and batchCol its batch id column.
func newPlan(m *sqlmodel.Model, t *sqlmodel.Table, staging, batchCol string, cleanup bool) plan {
	var p plan
	if staging == "" {
		switch m.Mode {
		case sqlmodel.Insert:
			p.write = insertSQL(m, t.Name, false)
		case sqlmodel.Append:
			p.write = insertSQL(m, t.Name, true)
		default:
			p.write = mergeSQL(m, t, dualSource(m))
		}
		return p
	}
	cols := m.AllColumns()
	p.stageInsert = "insert into " + staging + " (" + batchCol + ", " + strings.Join(cols, ", ") + ") values (:" + batchBind + ", " + strings.Join(bindList(), ", ") + ")"
	p.stageMerge = mergeSQL(m, t, "(select "+strings.Join(cols, ", ")+" from "+staging+" where "+batchCol+" = :"+batchBind+")")
	if cleanup {
		p.stageDelete = "delete from " + staging + " where " + batchCol + " = :" + batchBind
	}
	return p
}

// bindList returns ":stream_name, :stream_sequence, …" items in table order.
func bindList() []string {
	out := make([]string, sqlmodel.NumFields)
	for f := range sqlmodel.NumFields {
		out[f] = ":" + f.BindName()
	}
	return out
}

// insertSQL is "insert [/*+ append */ ]into T (C1, …) values (:stream_name, …)".
func insertSQL(m *sqlmodel.Model, table string, appendHint bool) string {
	head := "insert into "
	if appendHint {
		head = "insert /*+ append */ into "
	}
	return head + table + " (" + strings.Join(m.AllColumns(), ", ") + ") values (" + strings.Join(bindList(), ", ") + ")"
}

// dualSource is "(select :stream_name as C1, … from dual)".
func dualSource(m *sqlmodel.Model) string {
	items := make([]string, sqlmodel.NumFields)
	for f := range sqlmodel.NumFields {
		items[f] = ":" + f.BindName() + " as " + m.Column(f)
	}
	return "(select " + strings.Join(items, ", ") + " from dual)"
}

// mergeSQL is the MERGE of docs/oracle.md with the given source: insert_ignore
// has only "when not matched"; merge adds "when matched then update" when
// there are update columns.
func mergeSQL(m *sqlmodel.Model, t *sqlmodel.Table, source string) string {
	on := make([]string, len(t.Key))
	for i, f := range t.Key {
		c := m.Column(f)
		on[i] = "target." + c + " = source." + c
	}
	var b strings.Builder
	b.WriteString("merge into " + t.Name + " target using " + source + " source on (" + strings.Join(on, " and ") + ")")
	if m.Mode == sqlmodel.Merge && len(t.Update) > 0 {
		sets := make([]string, len(t.Update))
		for i, f := range t.Update {
			c := m.Column(f)
			sets[i] = "target." + c + " = source." + c
		}
		b.WriteString(" when matched then update set " + strings.Join(sets, ", "))
	}
	cols := m.AllColumns()
	vals := make([]string, len(cols))
	for i, c := range cols {
		vals[i] = "source." + c
	}
	b.WriteString(" when not matched then insert (" + strings.Join(cols, ", ") + ") values (" + strings.Join(vals, ", ") + ")")
	return b.String()
}

// rowBinds returns one named array argument per field for an array-bound
// (bulk) execution of rows: go-ora executes the statement once per array
// element in one round trip. Values are nil (NULL), string or int64, as
// sqlmodel built them.
func rowBinds(rows []*sqlmodel.Row) []namedArg {
	out := make([]namedArg, sqlmodel.NumFields)
	for f := range sqlmodel.NumFields {
		vals := make([]any, len(rows))
		for i, r := range rows {
			vals[i] = r.Values[f]
		}
		out[f] = namedArg{Name: f.BindName(), Value: vals}
	}
	return out
}

// namedArg is a bind by name; the sink turns it into sql.Named.
type namedArg struct {
	Name  string
	Value any
}

// ddl returns the auto_create statement for t: the Oracle DDL of
// docs/formats.md#sql-tables and, when the idempotency key is not the primary key, a
// unique constraint "<name>_idem" on the key columns. The spec gives that
// constraint for PostgreSQL and SQLite only; Oracle's MERGE needs no index
// to find matches, but without one two concurrent writers of the same key
// (scale-out, docs/delivery.md#scale-out) both insert, which the constraint turns into
// ORA-00001 (Temporary in insert_ignore: the retry then finds the row).
func ddl(m *sqlmodel.Model, t *sqlmodel.Table) string {
	base := m.DDL(t)
	if len(t.Key) == 0 || keyIsPrimary(t.Key) {
		return base
	}
	parts := strings.Split(t.Name, ".")
	cols := strings.ToLower(strings.Join(m.ColumnNames(t.Key), ", "))
	line := fmt.Sprintf(",\n    constraint %s\n        unique (%s)\n)", idemConstraint(parts[len(parts)-1]), cols)
	return strings.TrimSuffix(base, "\n)") + line
}

// idemConstraint is <name>_idem, shortened to Oracle's 128-character
// identifier limit with a hash of name when needed.
func idemConstraint(name string) string {
	if c := name + "_idem"; len(c) <= 128 {
		return c
	}
	sum := sha256.Sum256([]byte(name))
	return name[:114] + "_" + strings.ToUpper(hex.EncodeToString(sum[:])[:8]) + "_idem"
}

// keyIsPrimary reports whether the key columns are the primary key of the
// recommended DDL (stream name and sequence, in any order).
func keyIsPrimary(key []sqlmodel.Field) bool {
	k := slices.Clone(key)
	slices.Sort(k)
	return slices.Equal(k, []sqlmodel.Field{sqlmodel.StreamName, sqlmodel.StreamSequence})
}
