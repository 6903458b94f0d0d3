package sqlmodel

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/subject"
	"github.com/nats-sinks/nats-sink/sqlconfig"
)

// Idempotency strategies (docs/sql.md), as sqlconfig spells them.
const (
	StrategyStreamSequence = sqlconfig.StrategyStreamSequence
	StrategyMessageID      = sqlconfig.StrategyMessageID
	StrategyPayloadField   = sqlconfig.StrategyPayloadField
	StrategyMapping        = sqlconfig.StrategyMapping
)

// Column returns the column c maps f to, as configured.
func Column(c *sqlconfig.Columns, f Field) string { return *columnPtr(c, f) }

func columnPtr(c *sqlconfig.Columns, f Field) *string {
	return [NumFields]*string{
		&c.StreamName, &c.StreamSequence, &c.Subject, &c.MessageID, &c.Priority,
		&c.Classification, &c.Labels, &c.MessageCreatedAtEpochNS,
		&c.JetStreamTimestampEpochNS, &c.ReceivedAtEpochNS, &c.StoredAtEpochNS,
		&c.Payload, &c.Headers, &c.Metadata, &c.MissionMetadata, &c.SecurityLabels,
	}[f]
}

// keyColumns returns the configured key columns after the derived default:
// columns left at the default switch to ["MESSAGE_ID"] for message_id and
// payload_field. "Left at the default" is judged by value (the spec says
// "left at its default", and a value comparison treats a file that spells
// the default out, or an environment override, the same as one that omits it).
func keyColumns(i *sqlconfig.Idempotency) []string {
	if i.Strategy != StrategyStreamSequence && slices.Equal(i.Columns, sqlconfig.DefaultKeyColumns()) {
		return []string{"MESSAGE_ID"}
	}
	return i.Columns
}

// routeSpec is a route item seen through the dialect-neutral lens.
type routeSpec struct {
	subject, table string
	idem           *sqlconfig.Idempotency
	update         *[]string
	updateSet      bool
	mapping        *[]sqlconfig.MappingItem
	include        *[]string
}

func specOf(r any) routeSpec {
	switch r := r.(type) {
	case sqlconfig.UpsertRoute:
		return routeSpec{r.Subject, r.Table, r.Idempotency, r.UpsertUpdateColumns, r.UpdateColumnsSet, r.Mapping, r.IncludeColumns}
	case sqlconfig.MergeRoute:
		return routeSpec{r.Subject, r.Table, r.Idempotency, r.MergeUpdateColumns, r.UpdateColumnsSet, r.Mapping, r.IncludeColumns}
	}
	panic("sqlmodel: unknown route type")
}

// DefaultShared returns the shared keys with the defaults for d.
func DefaultShared[R sqlconfig.Route](d Dialect) sqlconfig.Shared[R] {
	return sqlconfig.DefaultShared[R](d.DefaultTable())
}

// Options are the shared keys a dialect's Config declares itself because
// their enum, default or name differ per database.
type Options struct {
	Mode Mode
	// UpdateColumns is the value of Dialect.UpdateKey(): nil = all non-key
	// mapped columns, empty = none.
	UpdateColumns *[]string
	AutoCreate    bool
}

// Check adds every problem of the shared keys s to p, with paths relative
// to the sink object: a dialect's Config.Validate calls it among its rules.
func Check[R sqlconfig.Route](s *sqlconfig.Shared[R], d Dialect, o Options, p *fields.Problems) {
	compileShared(s, d, o, p)
}

// Compile validates the shared keys s and returns the Model a dialect
// writes with. Problems come back as a *sink.ConfigError.
func Compile[R sqlconfig.Route](s *sqlconfig.Shared[R], d Dialect, o Options) (*Model, error) {
	var p fields.Problems
	m := compileShared(s, d, o, &p)
	if err := p.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// compileShared checks every rule and builds the model; the model is only
// meaningful when p received no problems.
func compileShared[R sqlconfig.Route](s *sqlconfig.Shared[R], d Dialect, o Options, p *fields.Problems) *Model {
	m := &Model{Dialect: d, Mode: o.Mode, PayloadMode: record.PayloadMode(s.PayloadMode), AutoEvolve: s.AutoEvolve}
	if !slices.Contains(d.Modes(), o.Mode) {
		names := make([]string, 0, 4)
		for _, md := range d.Modes() {
			names = append(names, string(md))
		}
		p.Addf("mode", "must be one of %s (got %q)", strings.Join(names, ", "), o.Mode)
	}
	switch record.PayloadMode(s.PayloadMode) {
	case record.JSONOrEnvelope, record.JSONOnly, record.TextEnvelope, record.BytesEnvelope:
	default:
		p.Addf("payload_mode", "must be one of json_or_envelope, json_only, text_envelope, bytes_envelope (got %q)", s.PayloadMode)
	}

	// Columns: legacy aliases override, then every name must be valid and
	// distinct ignoring case.
	mapped := s.Layout == sqlconfig.LayoutMapped
	switch s.Layout {
	case sqlconfig.LayoutAudit, sqlconfig.LayoutMapped:
	default:
		p.Addf("layout", "must be one of audit, mapped (got %q)", s.Layout)
	}
	if mapped {
		switch record.PayloadMode(s.PayloadMode) {
		case record.TextEnvelope, record.BytesEnvelope:
			p.Addf("payload_mode", "must be json_or_envelope or json_only with layout mapped (got %q)", s.PayloadMode)
		}
		if len(s.Mapping) == 0 {
			p.Add("mapping", "must not be empty with layout mapped")
		}
	} else {
		only := func(key string, set bool) {
			if set {
				p.Add(key, "only allowed with layout mapped")
			}
		}
		only("mapping", len(s.Mapping) > 0)
		only("include_columns", len(s.IncludeColumns) > 0)
		only("lenient_strings", s.LenientStrings)
		only("auto_evolve", s.AutoEvolve)
		only("version_column", s.VersionColumn != nil)
		only("delete_when", s.DeleteWhen != nil)
		for i, r := range s.TableRoutes {
			rs := specOf(r)
			only(fields.Index("table_routes", i)+".mapping", rs.mapping != nil)
			only(fields.Index("table_routes", i)+".include_columns", rs.include != nil)
		}
	}
	spec := func(items *[]sqlconfig.MappingItem, itemsPath string, incl *[]string, inclPath string, check bool) *mappedSpec {
		if !mapped {
			return nil
		}
		sp := &mappedSpec{items: s.Mapping, itemsPath: "mapping", incl: s.IncludeColumns, inclPath: "include_columns",
			check: check, lenient: s.LenientStrings, version: s.VersionColumn, deleteWhen: s.DeleteWhen}
		if items != nil {
			sp.items, sp.itemsPath, sp.check = *items, itemsPath, true
		}
		if incl != nil {
			sp.incl, sp.inclPath, sp.check = *incl, inclPath, true
		}
		return sp
	}

	cols := s.Columns
	colPath := func(f Field) string { return "columns." + f.Key() }
	paths := [NumFields]string{}
	for f := range NumFields {
		paths[f] = colPath(f)
	}
	if s.PayloadColumn != nil {
		cols.Payload, paths[Payload] = *s.PayloadColumn, "payload_column"
	}
	if s.HeadersColumn != nil {
		cols.Headers, paths[Headers] = *s.HeadersColumn, "headers_column"
	}
	seen := map[string]Field{}
	colsOK := true
	for f := range NumFields {
		name := Column(&cols, f)
		if msg := d.CheckColumn(name); msg != "" {
			p.Add(paths[f], msg)
			colsOK = false
			continue
		}
		folded := strings.ToLower(name)
		if prev, dup := seen[folded]; dup {
			p.Addf(paths[f], "duplicate column %q (also used by %s)", name, paths[prev])
			colsOK = false
			continue
		}
		if o.AutoCreate && folded == "received_at" {
			// The recommended DDL has its own received_at column (filled
			// by the database); a mapped column of that name would make
			// the auto-created table invalid.
			p.Addf(paths[f], "must not be %q: auto_create adds that column itself", name)
			colsOK = false
			continue
		}
		seen[folded] = f
		m.Columns[f] = d.Fold(name)
	}

	// The default table and the sink-level idempotency and update columns.
	if msg := d.CheckTable(s.Table); msg != "" {
		p.Add("table", msg)
	}
	base := m.table(d.Fold(s.Table), &s.Idempotency, o.UpdateColumns, "idempotency", d.UpdateKey(), colsOK, colsOK, "", spec(nil, "", nil, "", true), p)
	m.Tables = []*Table{base}
	// Folded names identify a table: PostgreSQL, SQLite and Oracle fold
	// case, and MySQL table names are case-sensitive on most systems.
	type seenTable struct {
		table *Table
		by    string // what configured it first, for the consistency message
	}
	byName := map[string]seenTable{base.Name: {base, "the sink's table"}}

	for i, r := range s.TableRoutes {
		rs := specOf(r)
		rp := fields.Index("table_routes", i)
		if err := subject.Validate(rs.subject); err != nil {
			p.Add(rp+".subject", err.Error())
		}
		if msg := d.CheckTable(rs.table); msg != "" {
			p.Add(rp+".table", msg)
			continue
		}
		idem, idemPath := &s.Idempotency, "idempotency"
		if rs.idem != nil {
			idem, idemPath = rs.idem, rp+".idempotency"
		}
		upd, updPath, inherited := o.UpdateColumns, d.UpdateKey(), rp
		if rs.updateSet {
			upd, updPath, inherited = rs.update, rp+"."+d.UpdateKey(), ""
		}
		// Inherited values were checked at the sink level; check what the
		// route sets itself, and inherited update columns only against
		// the route's own key, so each problem is reported once.
		sp := spec(rs.mapping, rp+".mapping", rs.include, rp+".include_columns", rs.idem != nil || rs.updateSet)
		t := m.table(d.Fold(rs.table), idem, upd, idemPath, updPath, colsOK && rs.idem != nil, colsOK, inherited, sp, p)
		if !colsOK {
			continue
		}
		if prev, ok := byName[t.Name]; ok {
			if !prev.table.sameRules(t) {
				p.Addf(rp+".table", "routes to table %q must use the same idempotency strategy, key columns, payload field and update columns as %s", rs.table, prev.by)
			}
			t = prev.table
		} else {
			byName[t.Name] = seenTable{t, rp}
			m.Tables = append(m.Tables, t)
		}
		m.routes = append(m.routes, route{pattern: rs.subject, table: t})
	}
	return m
}

// table builds one resolved table. It reports idempotency problems when
// checkIdem and update-column problems when checkUpd; inheritedAt, when
// set, names the route that inherits the sink's update columns: only their
// clash with the route's own key is reported there (the rest was reported
// at the sink level).
func (m *Model) table(name string, idem *sqlconfig.Idempotency, upd *[]string, idemPath, updPath string, checkIdem, checkUpd bool, inheritedAt string, sp *mappedSpec, p *fields.Problems) *Table {
	t := &Table{Name: name, Strategy: idem.Strategy}
	discard := &fields.Problems{}
	ip := p
	if !checkIdem {
		ip = discard
	}
	mode := m.Mode
	switch idem.Strategy {
	case StrategyStreamSequence, StrategyMessageID, StrategyPayloadField:
	case StrategyMapping:
		if sp == nil {
			ip.Add(idemPath+".strategy", "mapping is only allowed with layout mapped")
			return t
		}
	default:
		ip.Addf(idemPath+".strategy", "must be one of stream_sequence, message_id, payload_field, mapping (got %q)", idem.Strategy)
	}
	if idem.Strategy == StrategyPayloadField {
		switch {
		case idem.PayloadField == nil:
			ip.Add(idemPath+".payload_field", "required for strategy payload_field")
		default:
			if msg := checkPayloadField(*idem.PayloadField); msg != "" {
				ip.Add(idemPath+".payload_field", msg)
			} else {
				t.PayloadField = strings.Split(*idem.PayloadField, ".")
			}
		}
	}
	if sp != nil {
		sp.check = sp.check && checkUpd // checkUpd: the column names are valid
		m.mapped(t, *sp, idem, idemPath, upd, updPath, p)
		return t
	}
	keyCols := keyColumns(idem)
	if mode.NeedsKey() && len(keyCols) == 0 {
		ip.Addf(idemPath+".columns", "must not be empty with mode %s", mode)
	}
	keySeen := map[Field]bool{}
	for i, c := range keyCols {
		path := fields.Index(idemPath+".columns", i)
		f, ok := m.lookup(c)
		switch {
		case !ok:
			ip.Addf(path, "%q is not a mapped column", c)
		case keySeen[f]:
			ip.Addf(path, "duplicate column %q", c)
		default:
			keySeen[f] = true
			t.Key = append(t.Key, f)
		}
	}
	if !checkUpd {
		p = discard
	}
	if upd != nil && !mode.Updates() {
		if inheritedAt == "" {
			p.Addf(updPath, "only allowed with mode %s (mode is %s)", m.Dialect.UpdateMode(), mode)
		}
		return t
	}
	t.Update = m.resolveUpdate(upd, t.Key, updPath, inheritedAt, p)
	return t
}

// resolveUpdate applies the update-column rule: nil = all non-key mapped
// columns in table order, [] = none, a list = those columns (mapped,
// non-key, unique) in the listed order. With inheritedAt set, only key
// clashes are reported, at that path.
func (m *Model) resolveUpdate(upd *[]string, key []Field, path, inheritedAt string, p *fields.Problems) []Field {
	if !m.Mode.Updates() {
		return nil
	}
	if upd == nil {
		out := []Field{}
		for f := range NumFields {
			if !slices.Contains(key, f) {
				out = append(out, f)
			}
		}
		return out
	}
	other := p
	if inheritedAt != "" {
		other = &fields.Problems{}
	}
	out := []Field{}
	for i, c := range *upd {
		ip := fields.Index(path, i)
		f, ok := m.lookup(c)
		switch {
		case !ok:
			other.Addf(ip, "%q is not a mapped column", c)
		case slices.Contains(key, f) && inheritedAt != "":
			p.Addf(inheritedAt, "inherited %s %q is one of this route's key columns", ip, c)
		case slices.Contains(key, f):
			p.Addf(ip, "%q is a key column", c)
		case slices.Contains(out, f):
			other.Addf(ip, "duplicate column %q", c)
		default:
			out = append(out, f)
		}
	}
	return out
}

// lookup finds the mapped field whose column is name, ignoring case (the
// spec matches key and update columns to mapped columns case-insensitively).
func (m *Model) lookup(name string) (Field, bool) {
	for f := range NumFields {
		if m.Columns[f] != "" && strings.EqualFold(m.Columns[f], name) {
			return f, true
		}
	}
	return 0, false
}

// checkPayloadField returns the problem with a payload_field path, or "".
func checkPayloadField(s string) string {
	switch {
	case strings.TrimSpace(s) == "":
		return "must not be empty"
	case strings.ContainsAny(s, "\x00\r\n"):
		return "must not contain NUL, CR or LF"
	case slices.Contains(strings.Split(s, "."), ""):
		return fmt.Sprintf("must be a dotted path without empty segments (got %q)", s)
	}
	return ""
}
