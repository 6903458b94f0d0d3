package sqlmodel

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// columnTypes holds each field's column type per dialect, in table order
// (docs/formats.md#sql-tables). The received_at column, filled by the database, is not
// a mapped field; DDL inserts it after labels.
var columnTypes = [NumFields][4]string{ // sqlite, postgres, mysql, oracle
	{"text not null", "varchar(255) not null", "varchar(255) not null", "varchar2(255) not null"},
	{"integer not null", "bigint not null", "bigint not null", "number not null"},
	{"text not null", "text not null", "text not null", "clob not null"},
	{"text", "varchar(512)", "varchar(512)", "varchar2(512)"},
	{"text", "text", "text", "clob"},
	{"text", "text", "text", "clob"},
	{"text", "text", "text", "clob"},
	{"integer", "bigint", "bigint", "number(19)"},
	{"integer", "bigint", "bigint", "number(19)"},
	{"integer not null", "bigint not null", "bigint not null", "number(19) not null"},
	{"integer not null", "bigint not null", "bigint not null", "number(19) not null"},
	{"text", "jsonb", "json", "json"},
	{"text", "jsonb", "json", "json"},
	{"text", "jsonb", "json", "json"},
	{"text", "jsonb", "json", "json"},
	{"text", "jsonb", "json", "json"},
}

var receivedAt = [4]struct{ name, typ string }{
	{"received_at", "text not null default (strftime('%Y-%m-%dT%H:%M:%fZ','now'))"},
	{"received_at", "timestamptz not null default now()"},
	{"RECEIVED_AT", "timestamp(6) not null default current_timestamp(6)"},
	{"received_at", "timestamp default systimestamp not null"},
}

// DDL returns the recommended create-table statement for t (data-shapes
// docs/delivery.md#ordering), with the mapped column names. PostgreSQL, SQLite and MySQL use
// "create table if not exists"; Oracle has no such clause, so its caller
// ignores ORA-00955 ("name is already used"). For PostgreSQL and SQLite a
// key that differs from the primary key adds the "<table>_idem" unique
// constraint that "on conflict (<keys>)" needs.
func (m *Model) DDL(t *Table) string {
	if t.Mapped != nil {
		return m.mappedDDL(t)
	}
	return m.ddl(t, "")
}

// StagingDDL returns Oracle's staging table: the same columns preceded by
// batchColumn varchar2(64) not null, and no primary key.
func (m *Model) StagingDDL(staging, batchColumn string) string {
	return m.ddl(&Table{Name: staging}, batchColumn)
}

func (m *Model) ddl(t *Table, batchColumn string) string {
	d := m.Dialect
	di := int(d) - 1
	var lines []string
	line := func(name, typ string) {
		switch d {
		case Postgres, SQLite:
			lines = append(lines, fmt.Sprintf("    %-30s %s", d.Quote(name), typ))
		case MySQL:
			lines = append(lines, fmt.Sprintf("    %s %s", d.Quote(name), typ))
		case Oracle:
			lines = append(lines, fmt.Sprintf("    %-17s %s", strings.ToLower(name), typ))
		}
	}
	if batchColumn != "" {
		line(batchColumn, "varchar2(64) not null")
	}
	for f := range NumFields {
		line(m.Columns[f], columnTypes[f][di])
		if f == Labels {
			line(receivedAt[di].name, receivedAt[di].typ)
		}
	}
	parts := strings.Split(t.Name, ".")
	last := parts[len(parts)-1]
	pk := []string{m.Columns[StreamName], m.Columns[StreamSequence]}
	if batchColumn == "" {
		switch d {
		case Oracle:
			lines = append(lines, fmt.Sprintf("    constraint %s_pk\n        primary key (%s)", last, strings.ToLower(strings.Join(pk, ", "))))
		case MySQL:
			lines = append(lines, fmt.Sprintf("    constraint %s primary key (%s)", d.Quote(mysqlConstraint(last)), d.QuoteAll(pk)))
		default:
			lines = append(lines, fmt.Sprintf("    constraint %s primary key (%s)", d.Quote(last+"_pk"), d.QuoteAll(pk)))
			if key := m.ColumnNames(t.Key); len(key) > 0 && !slices.Equal(key, pk) {
				lines = append(lines, fmt.Sprintf("    constraint %s unique (%s)", d.Quote(last+"_idem"), d.QuoteAll(key)))
			}
		}
	}
	head := "create table if not exists "
	if d == Oracle {
		head = "create table "
	}
	return head + d.Quote(t.Name) + " (\n" + strings.Join(lines, ",\n") + "\n)"
}

// mysqlConstraint is MySQL's primary-key constraint name: <name>_pk, or when
// that exceeds 64 characters the first 55 characters of name, "_", and the
// first 8 hex digits of sha256(name).
func mysqlConstraint(name string) string {
	if c := name + "_pk"; len(c) <= 64 {
		return c
	}
	sum := sha256.Sum256([]byte(name))
	return name[:55] + "_" + hex.EncodeToString(sum[:])[:8]
}
