// Package sqlmodel is the relational model shared by the SQL sinks (oracle,
// mysql, postgres, sqlite): the configuration keys of docs/sql.md, the
// identifier rules of each database, the bound row values of docs/formats.md#sql-tables,
// routing and grouping of rows per table, update-column resolution, the
// auto_create DDL texts, and a transactional write skeleton (Writer) into
// which a dialect plugs its SQL and its error classifier.
//
// Values are always bound, never spliced into SQL text: the only text a
// dialect builds from configuration is identifiers, and every identifier has
// passed its database's allow-list regexp (Dialect.CheckTable, CheckColumn)
// before a Model exists.
package sqlmodel

import (
	"fmt"
	"regexp"
	"strings"
)

// Dialect names one database family and carries its identifier rules.
type Dialect int

// The four SQL dialects.
const (
	SQLite Dialect = iota + 1
	Postgres
	MySQL
	Oracle
)

// Identifier allow-lists (docs/oracle.md). They are anchored and ASCII-only,
// so a name that passes can be quoted (or, for Oracle, left unquoted)
// without escaping.
var (
	pgIdent     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)
	mysqlIdent  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]{0,63}$`)
	oracleIdent = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_$#]{0,127}$`)
)

// String returns the sink type name ("sqlite", "postgres", "mysql", "oracle").
func (d Dialect) String() string {
	switch d {
	case SQLite:
		return "sqlite"
	case Postgres:
		return "postgres"
	case MySQL:
		return "mysql"
	case Oracle:
		return "oracle"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

// DefaultTable is the default of the table key (docs/sql.md).
func (d Dialect) DefaultTable() string {
	if d == Postgres || d == SQLite {
		return "nats_sink_events"
	}
	return "NATS_SINK_EVENTS"
}

// UpdateKey is the name of the update-columns key: merge_update_columns for
// Oracle, upsert_update_columns for the others.
func (d Dialect) UpdateKey() string {
	if d == Oracle {
		return "merge_update_columns"
	}
	return "upsert_update_columns"
}

// UpdateMode is the mode in which the update-columns key applies: Merge for
// Oracle, Upsert for the others.
func (d Dialect) UpdateMode() Mode {
	if d == Oracle {
		return Merge
	}
	return Upsert
}

// Modes lists the modes the dialect accepts, in the order of its docs/sql.md
// table.
func (d Dialect) Modes() []Mode {
	switch d {
	case Oracle:
		return []Mode{Insert, InsertIgnore, Merge, Append}
	case MySQL:
		return []Mode{Insert, InsertIgnore, Upsert, Append}
	}
	return []Mode{Insert, InsertIgnore, Upsert}
}

func (d Dialect) ident() *regexp.Regexp {
	switch d {
	case MySQL:
		return mysqlIdent
	case Oracle:
		return oracleIdent
	}
	return pgIdent
}

// Fold applies the dialect's identifier case rule: PostgreSQL and SQLite
// lower-case, Oracle upper-cases, MySQL preserves case. It is applied to
// names that passed the allow-list, which are ASCII.
func (d Dialect) Fold(name string) string {
	switch d {
	case Postgres, SQLite:
		return strings.ToLower(name)
	case Oracle:
		return strings.ToUpper(name)
	}
	return name
}

// CheckColumn returns "" when name is a valid single-part column identifier,
// else the problem message.
func (d Dialect) CheckColumn(name string) string {
	re := d.ident()
	if !re.MatchString(name) {
		return fmt.Sprintf("must be a valid %s column name matching %s (got %q)", d, re, name)
	}
	return ""
}

// CheckTable returns "" when name is a valid table name (name or
// schema.name, each part on the identifier allow-list), else the problem.
func (d Dialect) CheckTable(name string) string {
	re := d.ident()
	parts := strings.Split(name, ".")
	ok := len(parts) <= 2
	for _, p := range parts {
		ok = ok && re.MatchString(p)
	}
	if !ok {
		return fmt.Sprintf("must be a valid %s table name (name or schema.name, each part matching %s) (got %q)", d, re, name)
	}
	return ""
}

// Quote returns a checked, folded identifier as it appears in SQL text:
// double quotes for PostgreSQL and SQLite, back-ticks for MySQL, bare for
// Oracle (whose allow-list admits only unquoted identifiers). Dotted table
// names are quoted part by part.
func (d Dialect) Quote(name string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		switch d {
		case Postgres, SQLite:
			parts[i] = `"` + p + `"`
		case MySQL:
			parts[i] = "`" + p + "`"
		}
	}
	return strings.Join(parts, ".")
}

// QuoteAll quotes each name with Quote and joins them with ", ".
func (d Dialect) QuoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = d.Quote(n)
	}
	return strings.Join(q, ", ")
}

// Mode is a write mode (docs/sql.md).
type Mode string

// Write modes. Append is Oracle/MySQL only, Merge Oracle only, Upsert the
// others.
const (
	Insert       Mode = "insert"
	Append       Mode = "append"
	InsertIgnore Mode = "insert_ignore"
	Upsert       Mode = "upsert"
	Merge        Mode = "merge"
)

// NeedsKey reports whether the mode needs key columns (insert_ignore,
// upsert, merge).
func (m Mode) NeedsKey() bool { return m == InsertIgnore || m == Upsert || m == Merge }

// Updates reports whether the mode updates existing rows (upsert, merge).
func (m Mode) Updates() bool { return m == Upsert || m == Merge }

// Field is one of the 16 mapped fields of docs/formats.md#sql-tables, in table order:
// the order of columns in statements, rows and DDL.
type Field int

// The mapped fields in table order.
const (
	StreamName Field = iota
	StreamSequence
	Subject
	MessageID
	Priority
	Classification
	Labels
	MessageCreatedAtEpochNS
	JetStreamTimestampEpochNS
	ReceivedAtEpochNS
	StoredAtEpochNS
	Payload
	Headers
	Metadata
	MissionMetadata
	SecurityLabels
	// NumFields is the number of mapped fields.
	NumFields
)

// fieldInfo is per field: the columns key, the default column, and the
// Oracle bind name.
var fieldInfo = [NumFields]struct{ key, column, bind string }{
	{"stream_name", "STREAM_NAME", "stream_name"},
	{"stream_sequence", "STREAM_SEQUENCE", "stream_sequence"},
	{"subject", "SUBJECT", "subject"},
	{"message_id", "MESSAGE_ID", "message_id"},
	{"priority", "PRIORITY", "priority"},
	{"classification", "CLASSIFICATION", "classification"},
	{"labels", "LABELS", "labels"},
	{"message_created_at_epoch_ns", "MESSAGE_CREATED_AT_EPOCH_NS", "message_created_at_epoch_ns"},
	{"jetstream_timestamp_epoch_ns", "JETSTREAM_TIMESTAMP_EPOCH_NS", "jetstream_timestamp_epoch_ns"},
	{"received_at_epoch_ns", "RECEIVED_AT_EPOCH_NS", "received_at_epoch_ns"},
	{"stored_at_epoch_ns", "STORED_AT_EPOCH_NS", "stored_at_epoch_ns"},
	{"payload", "PAYLOAD_JSON", "payload_json"},
	{"headers", "HEADERS_JSON", "headers_json"},
	{"metadata", "METADATA_JSON", "metadata_json"},
	{"mission_metadata", "MISSION_METADATA_JSON", "mission_metadata_json"},
	{"security_labels", "SECURITY_LABELS_JSON", "security_labels_json"},
}

// Key returns the field's key in the columns object ("payload").
func (f Field) Key() string { return fieldInfo[f].key }

// DefaultColumn returns the default column name, before folding
// ("PAYLOAD_JSON").
func (f Field) DefaultColumn() string { return fieldInfo[f].column }

// BindName returns the Oracle bind variable name ("payload_json").
func (f Field) BindName() string { return fieldInfo[f].bind }

// JSON reports whether the field is a JSON column (bound as ascii JSON text).
func (f Field) JSON() bool { return f >= Payload }

// String returns Key.
func (f Field) String() string { return f.Key() }
