package clickhouse

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/mapping"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
	"github.com/nats-sinks/nats-sink/internal/subject"
	"github.com/nats-sinks/nats-sink/sqlconfig"
)

// model is a validated configuration: the distinct tables with their row
// shapes, and the routes.
type model struct {
	db     string
	tables []*table // [0] is the sink's table
	routes []route
	// rows builds the audit values the SQL sinks bind (docs/formats.md);
	// only its PayloadMode is set.
	rows *sqlmodel.Model
}

type route struct {
	pattern string
	table   *table
}

// resolve returns the table for a subject: the first matching route, else
// the sink's table.
func (m *model) resolve(subj string) *table {
	for _, r := range m.routes {
		if subject.Match(r.pattern, subj) {
			return r.table
		}
	}
	return m.tables[0]
}

// table is one destination table and its row shape.
type table struct {
	name string
	// path is the key that names the table ("table",
	// "table_routes[2].table"), idemPath its idempotency object's and
	// mappingPath its mapping list's, for start-up errors.
	path, idemPath, mappingPath string

	mapped   bool
	strategy string
	audit    *sqlmodel.Table // strategy and payload field, for the audit values
	mapping  *mapping.Mapping

	cols    []*column // row order
	key     []*column
	version *column
	// enc holds each column's encoder, chosen at start from the column's
	// type on the server.
	enc []encoder
	// insertSQL is the INSERT query (identifiers only; rows go in the
	// body).
	insertSQL string
	// texts is set when a row stores an audit JSON text (payload,
	// headers, metadata); building them is most of an audit row's cost.
	texts bool
	// needsPayload is set when a mapping column reads the payload.
	needsPayload bool
}

// qualified returns `db`.`table`.
func (t *table) qualified(db string) string { return quote(db) + "." + quote(t.name) }

// column is one column of a row: an audit field or a mapping column.
type column struct {
	name string
	// path is the configuration key that puts the column in the row
	// ("columns.subject", "include_columns[1]", "mapping[2]", or
	// idempotency.columns[i] for a key).
	path  string
	field sqlmodel.Field  // audit field, when mc is nil
	mc    *mapping.Column // mapping column
	// plain columns are not Nullable: key, required and version columns,
	// and the audit columns the audit DDL declares plain.
	plain bool
	// jsonKey is the column's `"name":` in a row object.
	jsonKey []byte
	// keyPath is the idempotency.columns item naming a key column.
	keyPath string
	// added marks the stream-sequence version column a mapped row gets
	// when version_column is null.
	added bool
}

const labelsField = sqlmodel.Labels

func (c *column) mappedType() mapping.Type { return c.mc.Type }

// auditTypes are the ClickHouse types of the audit fields, and which the
// audit DDL declares plain.
var auditTypes = [sqlmodel.NumFields]struct {
	typ   string
	plain bool
}{
	{"String", true}, {"UInt64", true}, {"String", true}, {"String", false}, {"String", false},
	{"String", false}, {"String", false}, {"Int64", false}, {"Int64", false}, {"Int64", true},
	{"Int64", true}, {"String", true}, {"String", true}, {"String", true}, {"String", true}, {"String", true},
}

func (c *Columns) ptr(f sqlmodel.Field) *string {
	return [sqlmodel.NumFields]*string{
		&c.StreamName, &c.StreamSequence, &c.Subject, &c.MessageID, &c.Priority,
		&c.Classification, &c.Labels, &c.MessageCreatedAtEpochNS,
		&c.JetStreamTimestampEpochNS, &c.ReceivedAtEpochNS, &c.StoredAtEpochNS,
		&c.Payload, &c.Headers, &c.Metadata, &c.MissionMetadata, &c.SecurityLabels,
	}[f]
}

func (c *Columns) get(f sqlmodel.Field) string { return *c.ptr(f) }

// profile is the mapping profile of ClickHouse: nanosecond timestamps (a
// DateTime column floors them further), identifiers as for tables, case
// kept, and U+0000 allowed (String holds any bytes).
func profile() mapping.Profile {
	return mapping.Profile{TimePrecision: time.Nanosecond, CheckColumn: checkIdentifier}
}

// compile checks every rule of the configuration and builds the model; the
// model is only meaningful when p received no problems.
func (c *Config) compile(p *fields.Problems) *model {
	c.checkKeys(p)
	m := &model{db: c.Database, rows: &sqlmodel.Model{PayloadMode: record.PayloadMode(c.PayloadMode)}}
	mapped := c.Layout == "mapped"
	switch c.Layout {
	case "audit", "mapped":
	default:
		p.Addf("layout", "must be one of audit, mapped (got %q)", c.Layout)
	}
	switch record.PayloadMode(c.PayloadMode) {
	case record.JSONOrEnvelope, record.JSONOnly:
	case record.TextEnvelope, record.BytesEnvelope:
		if mapped {
			p.Addf("payload_mode", "must be json_or_envelope or json_only with layout mapped (got %q)", c.PayloadMode)
		}
	default:
		p.Addf("payload_mode", "must be one of json_or_envelope, json_only, text_envelope, bytes_envelope (got %q)", c.PayloadMode)
	}
	if !mapped {
		only := func(key string, set bool) {
			if set {
				p.Add(key, "only allowed with layout mapped")
			}
		}
		only("mapping", len(c.Mapping) > 0)
		only("include_columns", len(c.IncludeColumns) > 0)
		only("lenient_strings", c.LenientStrings)
		only("auto_evolve", c.AutoEvolve)
		only("version_column", c.VersionColumn != nil)
		for i, r := range c.TableRoutes {
			only(fields.Index("table_routes", i)+".mapping", r.Mapping != nil)
			only(fields.Index("table_routes", i)+".include_columns", r.IncludeColumns != nil)
		}
	} else if len(c.Mapping) == 0 {
		p.Add("mapping", "must not be empty with layout mapped")
	}

	// Audit column names: valid and distinct ignoring case.
	colsOK := true
	seen := map[string]sqlmodel.Field{}
	for f := range sqlmodel.NumFields {
		name, path := c.Columns.get(f), "columns."+f.Key()
		if msg := checkIdentifier(name); msg != "" {
			p.Add(path, msg)
			colsOK = false
			continue
		}
		if prev, dup := seen[strings.ToLower(name)]; dup {
			p.Addf(path, "duplicate column %q (also used by columns.%s)", name, prev.Key())
			colsOK = false
			continue
		}
		if !mapped && c.AutoCreate && strings.EqualFold(name, "received_at") {
			p.Addf(path, "must not be %q: auto_create adds that column itself", name)
			colsOK = false
		}
		seen[strings.ToLower(name)] = f
	}

	base := c.table(c.Table, "table", &c.Idempotency, "idempotency", c.Mapping, "mapping", c.IncludeColumns, "include_columns", colsOK, p)
	m.tables = []*table{base}
	byName := map[string]*table{base.name: base}
	for i, r := range c.TableRoutes {
		rp := fields.Index("table_routes", i)
		if err := subject.Validate(r.Subject); err != nil {
			p.Add(rp+".subject", err.Error())
		}
		if msg := checkIdentifier(r.Table); msg != "" {
			p.Add(rp+".table", msg)
			continue
		}
		idem, idemPath := &c.Idempotency, "idempotency"
		if r.Idempotency != nil {
			idem, idemPath = r.Idempotency, rp+".idempotency"
		}
		items, itemsPath := c.Mapping, "mapping"
		if r.Mapping != nil {
			items, itemsPath = *r.Mapping, rp+".mapping"
		}
		incl, inclPath := c.IncludeColumns, "include_columns"
		if r.IncludeColumns != nil {
			incl, inclPath = *r.IncludeColumns, rp+".include_columns"
		}
		// What the route inherits was checked for the sink's table: report
		// problems only for what the route sets itself.
		own := r.Idempotency != nil || r.Mapping != nil || r.IncludeColumns != nil
		rq := p
		if !own {
			rq = &fields.Problems{}
		}
		t := c.table(r.Table, rp+".table", idem, idemPath, items, itemsPath, incl, inclPath, colsOK, rq)
		if prev, ok := byName[t.name]; ok {
			if prev.shape() != t.shape() {
				p.Addf(rp+".table", "routes to table %q must use the same row shape (idempotency, key, included and mapping columns with types, version_column) as %s", r.Table, prev.path)
			}
			t = prev
		} else {
			byName[t.name] = t
			m.tables = append(m.tables, t)
		}
		m.routes = append(m.routes, route{pattern: r.Subject, table: t})
	}
	return m
}

// table compiles one table's row shape.
func (c *Config) table(name, path string, idem *Idempotency, idemPath string, items []sqlconfig.MappingItem, itemsPath string,
	incl []string, inclPath string, colsOK bool, p *fields.Problems) *table {
	mapped := c.Layout == "mapped"
	t := &table{name: name, path: path, idemPath: idemPath, mappingPath: itemsPath, mapped: mapped, strategy: idem.Strategy}
	t.audit = &sqlmodel.Table{Name: name, Strategy: idem.Strategy}
	switch idem.Strategy {
	case "stream_sequence", "message_id", "payload_field":
	case "mapping":
		if !mapped {
			p.Add(idemPath+".strategy", "mapping is only allowed with layout mapped")
		}
	default:
		p.Addf(idemPath+".strategy", "must be one of stream_sequence, message_id, payload_field, mapping (got %q)", idem.Strategy)
	}
	if idem.Strategy == "payload_field" {
		switch {
		case idem.PayloadField == nil:
			p.Add(idemPath+".payload_field", "required for strategy payload_field")
		default:
			if msg := checkPayloadField(*idem.PayloadField); msg != "" {
				p.Add(idemPath+".payload_field", msg)
			} else {
				t.audit.PayloadField = strings.Split(*idem.PayloadField, ".")
			}
		}
	} else if idem.PayloadField != nil {
		p.Add(idemPath+".payload_field", "only allowed with strategy payload_field")
	}
	if mapped {
		t.mapping = mapping.Compile(items, itemsPath, mapping.Options{Profile: profile(), Lenient: c.LenientStrings}, p)
		t.needsPayload = t.mapping.NeedsPayload
	}
	if !colsOK {
		return t
	}
	lookupAudit := func(name string) (sqlmodel.Field, bool) {
		for f := range sqlmodel.NumFields {
			if strings.EqualFold(c.Columns.get(f), name) {
				return f, true
			}
		}
		return 0, false
	}
	inRow := map[string]string{} // lower-case name → path that put it in the row
	add := func(col *column) {
		inRow[strings.ToLower(col.name)] = col.path
		t.cols = append(t.cols, col)
	}
	auditColumn := func(f sqlmodel.Field, path string) *column {
		return &column{name: c.Columns.get(f), path: path, field: f, plain: auditTypes[f].plain}
	}

	// Key columns.
	keyCols := idem.Columns
	if (idem.Strategy == "message_id" || idem.Strategy == "payload_field") && slices.Equal(keyCols, defaultKeyColumns()) {
		keyCols = []string{"message_id"}
		if f, ok := lookupAudit(c.Columns.MessageID); ok {
			keyCols = []string{c.Columns.get(f)}
		}
	}
	if len(keyCols) == 0 {
		p.Add(idemPath+".columns", "must not be empty (the key is the table's ORDER BY)")
	}
	for i, name := range keyCols {
		kp := fields.Index(idemPath+".columns", i)
		if _, dup := inRow[strings.ToLower(name)]; dup {
			p.Addf(kp, "duplicate column %q", name)
			continue
		}
		var col *column
		if idem.Strategy == "mapping" {
			if t.mapping == nil {
				continue
			}
			mc, ok := t.mapping.Lookup(name)
			if !ok {
				p.Addf(kp, "%q is not a mapping column", name)
				continue
			}
			if msg := mc.KeyProblem(); msg != "" {
				p.Add(kp, msg)
				continue
			}
			col = &column{name: mc.Name, path: fields.Index(itemsPath, mc.Item), mc: mc}
		} else {
			f, ok := lookupAudit(name)
			if !ok {
				p.Addf(kp, "%q is not an audit column (named as in columns)", name)
				continue
			}
			col = auditColumn(f, kp)
		}
		col.plain, col.keyPath = true, kp
		t.key = append(t.key, col)
		add(col)
	}

	if !mapped {
		for f := range sqlmodel.NumFields {
			if _, isKey := inRow[strings.ToLower(c.Columns.get(f))]; isKey {
				continue
			}
			add(auditColumn(f, "columns."+f.Key()))
		}
		t.cols = t.auditOrder(c)
		t.version = t.find(c.Columns.StreamSequence)
		t.texts = true
		return t
	}

	// Included audit columns not in the key, then the other mapping
	// columns, then the default version column.
	for i, name := range incl {
		ip := fields.Index(inclPath, i)
		f, ok := lookupAudit(name)
		if !ok {
			p.Addf(ip, "%q is not an audit column (named as in columns)", name)
			continue
		}
		if prev, dup := inRow[strings.ToLower(name)]; dup {
			if !strings.HasPrefix(prev, idemPath) {
				p.Addf(ip, "duplicate column %q (also used by %s)", name, prev)
			}
			continue
		}
		add(auditColumn(f, ip))
		if f == sqlmodel.Payload || f == sqlmodel.Headers || f == sqlmodel.Metadata {
			t.texts = true
		}
	}
	if t.mapping != nil {
		for _, mc := range t.mapping.Columns {
			if slices.ContainsFunc(t.key, func(k *column) bool { return k.mc == mc }) {
				continue
			}
			cp := fields.Index(itemsPath, mc.Item)
			if prev, dup := inRow[strings.ToLower(mc.Name)]; dup {
				if !strings.HasPrefix(prev, itemsPath+"[") { // mapping.Compile reported those
					p.Addf(cp+".column", "duplicate column %q (also used by %s)", mc.Name, prev)
				}
				continue
			}
			add(&column{name: mc.Name, path: cp, mc: mc, plain: mc.Required})
		}
	}
	if c.VersionColumn == nil {
		if v := t.find(c.Columns.StreamSequence); v != nil {
			if v.mc != nil {
				p.Addf(v.path+".column", "%q is the stream-sequence column the row adds as its version; rename it or set version_column", v.name)
			}
			t.version = v
		} else {
			v := auditColumn(sqlmodel.StreamSequence, "version_column")
			v.added = true
			add(v)
			t.version = v
		}
	} else {
		v := t.find(*c.VersionColumn)
		switch {
		case v == nil || slices.Contains(t.key, v) || !neverNullVersion(v):
			p.Addf("version_column", "must name a never-null row column of type bigint, integer or timestamp (got %q)", *c.VersionColumn)
		default:
			v.plain = true
			t.version = v
		}
	}
	return t
}

// neverNullVersion reports whether c can be a version column: an included
// stream_sequence, received_at_epoch_ns or stored_at_epoch_ns, or a
// required mapping column of type bigint, integer or timestamp.
func neverNullVersion(c *column) bool {
	if c.mc == nil {
		return c.field == sqlmodel.StreamSequence || c.field == sqlmodel.ReceivedAtEpochNS || c.field == sqlmodel.StoredAtEpochNS
	}
	switch c.mc.Type.Kind {
	case mapping.BigInt, mapping.Integer, mapping.Timestamp:
		return c.mc.Required
	}
	return false
}

// auditOrder returns the audit row's columns in field order (the key's
// columns keep their place in the table; only ORDER BY lists the key).
func (t *table) auditOrder(c *Config) []*column {
	out := make([]*column, 0, len(t.cols))
	for f := range sqlmodel.NumFields {
		if col := t.find(c.Columns.get(f)); col != nil {
			out = append(out, col)
		}
	}
	return out
}

func (t *table) find(name string) *column {
	for _, c := range t.cols {
		if strings.EqualFold(c.name, name) {
			return c
		}
	}
	return nil
}

// shape renders what must agree between routes to one table.
func (t *table) shape() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v %s %v|", t.mapped, t.strategy, t.audit.PayloadField)
	for _, c := range t.cols {
		fmt.Fprintf(&b, "%s:%s:%v,", c.name, c.typeKey(), c.plain)
	}
	for _, c := range t.key {
		b.WriteString(c.name + ",")
	}
	if t.version != nil {
		b.WriteString("|" + t.version.name)
	}
	return b.String()
}

// typeKey names the column's type for shape comparison.
func (c *column) typeKey() string {
	if c.mc == nil {
		return auditTypes[c.field].typ
	}
	mc := c.mc
	return fmt.Sprintf("%s/%s/%v/%v", mc.Type, mc.Path, mc.Required, mc.Default)
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

// quote back-quotes an identifier that passed checkIdentifier.
func quote(name string) string { return "`" + name + "`" }
