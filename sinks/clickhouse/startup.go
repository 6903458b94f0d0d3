package clickhouse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/sink"
)

// features are what the server offers, detected by name in its catalogs
// (forks and backports make version numbers unreliable). A catalog that
// cannot be read means "absent".
type features struct {
	version             string
	dateTime64          bool // system.data_type_families
	token               bool // system.settings insert_deduplication_token
	nonReplicatedWindow bool // system.merge_tree_settings non_replicated_deduplication_window
	asyncInsert         bool
	nullAsDefault       bool
	distributedSync     bool
}

// names runs a one-column read and returns its values.
func (c *client) names(ctx context.Context, op, sql string) ([]string, error) {
	var out []string
	err := c.query(ctx, op, sql+" FORMAT JSONEachRow", func(line []byte) error {
		var row struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(line, &row); err != nil {
			return err
		}
		out = append(out, row.Name)
		return nil
	})
	return out, err
}

// detect reads the server version and features.
func detect(ctx context.Context, c *client) (features, error) {
	var f features
	err := c.query(ctx, "select version()", "SELECT version() AS name FORMAT JSONEachRow", func(line []byte) error {
		var row struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(line, &row); err != nil {
			return err
		}
		f.version = row.Name
		return nil
	})
	if err != nil {
		return f, err
	}
	if types, err := c.names(ctx, "read system.data_type_families",
		"SELECT name FROM system.data_type_families WHERE name = 'DateTime64'"); err == nil {
		f.dateTime64 = slices.Contains(types, "DateTime64")
	}
	if settings, err := c.names(ctx, "read system.settings",
		"SELECT name FROM system.settings WHERE name IN ('insert_deduplication_token', 'async_insert', 'input_format_null_as_default', 'insert_distributed_sync')"); err == nil {
		f.token = slices.Contains(settings, "insert_deduplication_token")
		f.asyncInsert = slices.Contains(settings, "async_insert")
		f.nullAsDefault = slices.Contains(settings, "input_format_null_as_default")
		f.distributedSync = slices.Contains(settings, "insert_distributed_sync")
	}
	if mts, err := c.names(ctx, "read system.merge_tree_settings",
		"SELECT name FROM system.merge_tree_settings WHERE name = 'non_replicated_deduplication_window'"); err == nil {
		f.nonReplicatedWindow = slices.Contains(mts, "non_replicated_deduplication_window")
	}
	return f, nil
}

// createDDL returns t's CREATE TABLE IF NOT EXISTS statement.
func (t *table) createDDL(db string, f features, auditLayout bool) string {
	var cols []string
	for _, c := range t.cols {
		cols = append(cols, c.columnDDL(f))
		if auditLayout && c.mc == nil && c.field == labelsField {
			// Filled by the server; MATERIALIZED, not DEFAULT: 18.x fills
			// a field omitted from JSONEachRow with the type's zero value,
			// not with its default.
			cols = append(cols, "`received_at` DateTime('UTC') MATERIALIZED now()")
		}
	}
	key := make([]string, len(t.key))
	for i, k := range t.key {
		key[i] = quote(k.name)
	}
	ddl := "CREATE TABLE IF NOT EXISTS " + t.qualified(db) + " (" + strings.Join(cols, ", ") + ") ENGINE = ReplacingMergeTree("
	if t.version != nil {
		ddl += quote(t.version.name)
	}
	ddl += ") ORDER BY (" + strings.Join(key, ", ") + ")"
	if !auditLayout && f.token && f.nonReplicatedWindow {
		ddl += " SETTINGS non_replicated_deduplication_window = 1000"
	}
	return ddl
}

// tableInfo is a table's row of system.tables.
type tableInfo struct {
	Engine       string `json:"engine"`
	EngineFull   string `json:"engine_full"`
	SortingKey   string `json:"sorting_key"`
	PartitionKey string `json:"partition_key"`
}

// literal renders an identifier (already checked against the identifier
// pattern, so it holds no quote or backslash) as a string literal.
func literal(s string) string { return "'" + s + "'" }

func (c *client) tableInfo(ctx context.Context, db, name string) (*tableInfo, error) {
	var info *tableInfo
	err := c.query(ctx, "read system.tables",
		"SELECT engine, engine_full, sorting_key, partition_key FROM system.tables WHERE database = "+literal(db)+
			" AND name = "+literal(name)+" FORMAT JSONEachRow",
		func(line []byte) error {
			info = &tableInfo{}
			return json.Unmarshal(line, info)
		})
	return info, err
}

type columnInfo struct {
	Name           string `json:"name"`
	Type           string `json:"type"`
	InPartitionKey uint8  `json:"is_in_partition_key"`
}

func (c *client) columns(ctx context.Context, db, name string) ([]columnInfo, error) {
	var out []columnInfo
	err := c.query(ctx, "read system.columns",
		"SELECT name, type, is_in_partition_key FROM system.columns WHERE database = "+literal(db)+
			" AND table = "+literal(name)+" FORMAT JSONEachRow",
		func(line []byte) error {
			var ci columnInfo
			if err := json.Unmarshal(line, &ci); err != nil {
				return err
			}
			out = append(out, ci)
			return nil
		})
	return out, err
}

// firstIdentifierArg returns the first engine argument that is a bare (or
// back-quoted) identifier, the version column of a *ReplacingMergeTree:
// "ReplicatedReplacingMergeTree('/p', '{replica}', ver) ORDER BY …" → "ver".
func firstIdentifierArg(engineFull string) string {
	open := strings.IndexByte(engineFull, '(')
	if open < 0 {
		return ""
	}
	depth, start := 0, open+1
	var args []string
	inQuote := false
	for i := open; i < len(engineFull); i++ {
		ch := engineFull[i]
		switch {
		case inQuote:
			if ch == '\\' {
				i++
			} else if ch == '\'' {
				inQuote = false
			}
		case ch == '\'':
			inQuote = true
		case ch == '(':
			depth++
		case ch == ')':
			depth--
			if depth == 0 {
				args = append(args, engineFull[start:i])
				goto done
			}
		case ch == ',' && depth == 1:
			args = append(args, engineFull[start:i])
			start = i + 1
		}
	}
done:
	for _, a := range args {
		a = strings.Trim(strings.TrimSpace(a), "`")
		if bareIdentifier.MatchString(a) {
			return a
		}
	}
	return ""
}

var bareIdentifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// startup runs auto_create and checks every table, then chooses each
// column's encoder. Configuration mismatches are a *sink.ConfigError; a
// missing table or an unreachable server is a plain error.
func (s *Sink) startup(ctx context.Context) error {
	c, m := s.client, s.model
	f, err := detect(ctx, c)
	if err != nil {
		return err
	}
	s.features = f
	s.log.Info("clickhouse server", "version", f.version, "datetime64", f.dateTime64, "deduplication_token", f.token)
	var problems fields.Problems
	for _, t := range m.tables {
		if s.cfg.AutoCreate {
			if err := c.exec(ctx, "create table "+t.qualified(m.db), t.createDDL(m.db, f, !t.mapped)); err != nil {
				return err
			}
		}
		info, err := c.tableInfo(ctx, m.db, t.name)
		if err != nil {
			return err
		}
		if info == nil {
			return fmt.Errorf("clickhouse table %q does not exist (create it or set auto_create: true)", m.db+"."+t.name)
		}
		cols, err := c.columns(ctx, m.db, t.name)
		if err != nil {
			return err
		}
		if s.cfg.RequireReplacingEngine {
			s.checkEngine(t, info, cols, &problems)
		}
		var first fields.Problems
		evolved, err := s.checkColumns(ctx, t, cols, s.cfg.AutoEvolve, &first)
		if err != nil {
			return err
		}
		if !evolved {
			for _, pr := range first.List() {
				problems.Add(pr.Path, pr.Message)
			}
		} else {
			// Check again what the ALTERs left, so processes starting
			// together converge on one result.
			if cols, err = c.columns(ctx, m.db, t.name); err != nil {
				return err
			}
			if _, err := s.checkColumns(ctx, t, cols, false, &problems); err != nil {
				return err
			}
		}
	}
	if problems.Len() > 0 {
		return &sink.ConfigError{Problems: problems.List()}
	}
	return nil
}

// checkEngine applies require_replacing_engine's checks to one table.
func (s *Sink) checkEngine(t *table, info *tableInfo, cols []columnInfo, p *fields.Problems) {
	qn := fmt.Sprintf("%q", s.model.db+"."+t.name)
	if !strings.HasSuffix(info.Engine, "ReplacingMergeTree") {
		p.Addf(t.path, "table %s has engine %s; the duplicate model needs a *ReplacingMergeTree engine (or set require_replacing_engine: false)", qn, info.Engine)
		return
	}
	key := make([]string, len(t.key))
	for i, k := range t.key {
		key[i] = k.name
	}
	sorting := strings.NewReplacer(" ", "", "`", "").Replace(info.SortingKey)
	if sorting != strings.Join(key, ",") {
		p.Addf(t.idemPath+".columns", "table %s is ordered by (%s); the idempotency key is (%s)", qn, strings.ReplaceAll(sorting, ",", ", "), strings.Join(key, ", "))
	}
	for _, ci := range cols {
		if ci.InPartitionKey != 0 && !slices.ContainsFunc(t.key, func(k *column) bool { return k.name == ci.Name }) {
			p.Addf(t.path, "partition key of %s uses column %q, which is not a key column; duplicates in different partitions never collapse", qn, ci.Name)
		}
	}
	got := firstIdentifierArg(info.EngineFull)
	switch {
	case got == "":
		s.log.Warn("clickhouse table has no version column: among duplicates the last inserted row wins",
			"table", s.model.db+"."+t.name)
	case t.version != nil && got != t.version.name:
		p.Addf("version_column", "table %s has version column %q; configured %q", qn, got, t.version.name)
	}
}

// checkColumns checks each row column against the table's columns and
// chooses its encoder. With evolve it adds absent non-key columns and
// reports whether it did.
func (s *Sink) checkColumns(ctx context.Context, t *table, found []columnInfo, evolve bool, p *fields.Problems) (bool, error) {
	byName := map[string]string{}
	for _, ci := range found {
		byName[ci.Name] = ci.Type
	}
	qn := fmt.Sprintf("%q", t.name)
	evolved := false
	t.enc = make([]encoder, len(t.cols))
	for i, col := range t.cols {
		typ, ok := byName[col.name]
		isKey := slices.Contains(t.key, col)
		switch {
		case !ok && isKey:
			p.Addf(col.keyPath, "key column %q is missing from table %s; auto_evolve never adds key columns", col.name, qn)
		case !ok && evolve:
			stmt := "ALTER TABLE " + t.qualified(s.model.db) + " ADD COLUMN " + quote(col.name) + " Nullable(" + col.ddlType(s.features) + ")"
			err := s.client.exec(ctx, "add column to "+t.qualified(s.model.db), stmt)
			var se *serverError
			if err != nil && !(errors.As(err, &se) && se.code == 44) { // 44: already exists
				return false, err
			}
			s.log.Info("clickhouse column added", "table", s.model.db+"."+t.name, "column", col.name)
			evolved = true
		case !ok && t.mapped:
			p.Addf(col.errPath(), "column %q is missing from table %s (set auto_evolve: true to add it)", col.name, qn)
		case !ok:
			p.Addf(col.errPath(), "column %q is missing from table %s", col.name, qn)
		case col.mc == nil:
			if base := baseType(typ); base != auditTypes[col.field].typ {
				p.Addf(col.errPath(), "column %q of table %s has type %s; the audit column needs %s", col.name, qn, typ, auditTypes[col.field].typ)
			} else {
				t.enc[i] = encoder{enc: encAudit}
			}
		default:
			e, ok := accept(col.mc.Type, baseType(typ))
			if !ok {
				p.Addf(col.path+".type", "column %q of table %s has type %s, not compatible with mapped type %s", col.name, qn, typ, col.mc.Type)
			}
			t.enc[i] = e
		}
	}
	return evolved, nil
}

// errPath is where a problem with the column is reported: a mapping
// column's item ("mapping[2].column"), else the key that put it in the row.
func (c *column) errPath() string {
	if c.mc != nil {
		return c.path + ".column"
	}
	if c.keyPath != "" {
		return c.keyPath
	}
	return c.path
}
