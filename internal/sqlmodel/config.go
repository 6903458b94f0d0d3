package sqlmodel

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/subject"
	"github.com/nats-sinks/nats-sink/sink"
)

// Idempotency strategies (sinks.md §2).
const (
	StrategyStreamSequence = "stream_sequence"
	StrategyMessageID      = "message_id"
	StrategyPayloadField   = "payload_field"
)

// Columns maps the 16 fields to column names (the "columns" object,
// data-shapes §9). Names are as configured; the Model holds them folded.
type Columns struct {
	StreamName                string `json:"stream_name" doc:"Column for the stream name."`
	StreamSequence            string `json:"stream_sequence" doc:"Column for the stream sequence."`
	Subject                   string `json:"subject" doc:"Column for the subject."`
	MessageID                 string `json:"message_id" doc:"Column for the message id (or the payload_field value)."`
	Priority                  string `json:"priority" doc:"Column for the priority."`
	Classification            string `json:"classification" doc:"Column for the classification."`
	Labels                    string `json:"labels" doc:"Column for the ;-joined labels."`
	MessageCreatedAtEpochNS   string `json:"message_created_at_epoch_ns" doc:"Column for the message creation time (epoch ns)."`
	JetStreamTimestampEpochNS string `json:"jetstream_timestamp_epoch_ns" doc:"Column for the JetStream timestamp (epoch ns)."`
	ReceivedAtEpochNS         string `json:"received_at_epoch_ns" doc:"Column for the receive time (epoch ns)."`
	StoredAtEpochNS           string `json:"stored_at_epoch_ns" doc:"Column for the store time (epoch ns)."`
	Payload                   string `json:"payload" doc:"JSON column for the normalised payload."`
	Headers                   string `json:"headers" doc:"JSON column for the headers."`
	Metadata                  string `json:"metadata" doc:"JSON column for the standard metadata document."`
	MissionMetadata           string `json:"mission_metadata" doc:"JSON column for mission metadata (always null)."`
	SecurityLabels            string `json:"security_labels" doc:"JSON column for security labels (always null)."`
}

// DefaultColumns returns the default mapping (data-shapes §9), before
// folding.
func DefaultColumns() Columns {
	var c Columns
	for f := range NumFields {
		*c.ptr(f) = f.DefaultColumn()
	}
	return c
}

// Get returns the column configured for f.
func (c *Columns) Get(f Field) string { return *c.ptr(f) }

func (c *Columns) ptr(f Field) *string {
	return [NumFields]*string{
		&c.StreamName, &c.StreamSequence, &c.Subject, &c.MessageID, &c.Priority,
		&c.Classification, &c.Labels, &c.MessageCreatedAtEpochNS,
		&c.JetStreamTimestampEpochNS, &c.ReceivedAtEpochNS, &c.StoredAtEpochNS,
		&c.Payload, &c.Headers, &c.Metadata, &c.MissionMetadata, &c.SecurityLabels,
	}[f]
}

// Idempotency is the "idempotency" object (sinks.md §2).
type Idempotency struct {
	Strategy     string   `json:"strategy" enum:"stream_sequence,message_id,payload_field" doc:"What identifies a message: stream and sequence, message id, or a payload field (written to the message_id column)."`
	Columns      []string `json:"columns" doc:"Key columns (mapped column names). Left at the default, strategies message_id and payload_field use [\"MESSAGE_ID\"]."`
	PayloadField *string  `json:"payload_field" doc:"Dotted path into the normalised payload; required for strategy payload_field."`
}

// DefaultKeyColumns are the default idempotency columns.
func DefaultKeyColumns() []string { return []string{"STREAM_NAME", "STREAM_SEQUENCE"} }

// DefaultIdempotency returns the default idempotency object.
func DefaultIdempotency() Idempotency {
	return Idempotency{Strategy: StrategyStreamSequence, Columns: DefaultKeyColumns()}
}

// SetDefaults implements fields.Defaulter for route items.
func (i *Idempotency) SetDefaults() { *i = DefaultIdempotency() }

// keyColumns returns the configured key columns after the derived default:
// columns left at the default switch to ["MESSAGE_ID"] for message_id and
// payload_field. "Left at the default" is judged by value (the spec says
// "left at its default", and a value comparison treats a file that spells
// the default out, or an environment override, the same as one that omits it).
func (i *Idempotency) keyColumns() []string {
	if i.Strategy != StrategyStreamSequence && slices.Equal(i.Columns, DefaultKeyColumns()) {
		return []string{"MESSAGE_ID"}
	}
	return i.Columns
}

// UpsertRoute is a table_routes item of the postgres, mysql and sqlite
// sinks.
type UpsertRoute struct {
	Subject             string       `json:"subject" required:"true" doc:"Subject pattern; the first matching route wins."`
	Table               string       `json:"table" required:"true" doc:"Table for matching messages."`
	Idempotency         *Idempotency `json:"idempotency" doc:"Idempotency for this table; absent means the sink's idempotency."`
	UpsertUpdateColumns *[]string    `json:"upsert_update_columns" doc:"Update columns for this table; absent means the sink's, null all non-key mapped columns."`
	// UpdateColumnsSet tells an explicit null (all columns) from absence
	// (inherit the sink's value).
	UpdateColumnsSet bool `json:"-" presence:"upsert_update_columns"`
}

// MergeRoute is a table_routes item of the oracle sink.
type MergeRoute struct {
	Subject            string       `json:"subject" required:"true" doc:"Subject pattern; the first matching route wins."`
	Table              string       `json:"table" required:"true" doc:"Table for matching messages."`
	Idempotency        *Idempotency `json:"idempotency" doc:"Idempotency for this table; absent means the sink's idempotency."`
	MergeUpdateColumns *[]string    `json:"merge_update_columns" doc:"Update columns for this table; absent means the sink's, null all non-key mapped columns."`
	// UpdateColumnsSet tells an explicit null from absence.
	UpdateColumnsSet bool `json:"-" presence:"merge_update_columns"`
}

// Route is the type set of table_routes items.
type Route interface{ UpsertRoute | MergeRoute }

// routeSpec is a route item seen through the dialect-neutral lens.
type routeSpec struct {
	subject, table string
	idem           *Idempotency
	update         *[]string
	updateSet      bool
}

func specOf(r any) routeSpec {
	switch r := r.(type) {
	case UpsertRoute:
		return routeSpec{r.Subject, r.Table, r.Idempotency, r.UpsertUpdateColumns, r.UpdateColumnsSet}
	case MergeRoute:
		return routeSpec{r.Subject, r.Table, r.Idempotency, r.MergeUpdateColumns, r.UpdateColumnsSet}
	}
	panic("sqlmodel: unknown route type")
}

// Shared holds the keys of sinks.md §2 that every SQL sink declares the same
// way. A dialect's Config embeds it (fields decodes embedded structs inline)
// after its own keys and the three shared keys whose default, enum or name
// differ per database (mode, the update-columns key, auto_create), which it
// passes to Compile as Options.
type Shared[R Route] struct {
	Table         string             `json:"table" doc:"Default table (name or schema.name)."`
	TableRoutes   []R                `json:"table_routes" doc:"Per-subject tables; the first route whose subject pattern matches wins, else table."`
	PayloadMode   record.PayloadMode `json:"payload_mode" enum:"json_or_envelope,json_only,text_envelope,bytes_envelope" doc:"How the payload is normalised (data-shapes §4)."`
	PayloadColumn *string            `json:"payload_column" doc:"Legacy alias overriding columns.payload."`
	HeadersColumn *string            `json:"headers_column" doc:"Legacy alias overriding columns.headers."`
	Columns       Columns            `json:"columns" doc:"Field to column mapping (data-shapes §9)."`
	Idempotency   Idempotency        `json:"idempotency" doc:"Key columns and how a message is identified."`
}

// DefaultShared returns the shared keys with the defaults for d.
func DefaultShared[R Route](d Dialect) Shared[R] {
	return Shared[R]{
		Table:       d.DefaultTable(),
		TableRoutes: []R{},
		PayloadMode: record.JSONOrEnvelope,
		Columns:     DefaultColumns(),
		Idempotency: DefaultIdempotency(),
	}
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

// Validate adds every problem of the shared keys to p, with paths relative
// to the sink object. Dialect Configs must declare their own
// Validate(*fields.Problems) that calls it: this promoted method has a
// different signature, so it does not make the Config a fields.Validator.
func (s *Shared[R]) Validate(d Dialect, o Options, p *fields.Problems) {
	s.compile(d, o, p)
}

// Compile validates the shared keys and returns the Model a dialect writes
// with. Problems come back as a *sink.ConfigError.
func (s *Shared[R]) Compile(d Dialect, o Options) (*Model, error) {
	var p fields.Problems
	m := s.compile(d, o, &p)
	if p.Len() > 0 {
		return nil, &sink.ConfigError{Problems: p.List()}
	}
	return m, nil
}

// compile checks every rule and builds the model; the model is only
// meaningful when p received no problems.
func (s *Shared[R]) compile(d Dialect, o Options, p *fields.Problems) *Model {
	m := &Model{Dialect: d, Mode: o.Mode, PayloadMode: s.PayloadMode}
	if !slices.Contains(d.Modes(), o.Mode) {
		names := make([]string, 0, 4)
		for _, md := range d.Modes() {
			names = append(names, string(md))
		}
		p.Addf("mode", "must be one of %s (got %q)", strings.Join(names, ", "), o.Mode)
	}
	switch s.PayloadMode {
	case record.JSONOrEnvelope, record.JSONOnly, record.TextEnvelope, record.BytesEnvelope:
	default:
		p.Addf("payload_mode", "must be one of json_or_envelope, json_only, text_envelope, bytes_envelope (got %q)", s.PayloadMode)
	}

	// Columns: legacy aliases override, then every name must be valid and
	// distinct ignoring case.
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
		name := cols.Get(f)
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
	base := m.table(d.Fold(s.Table), &s.Idempotency, o.UpdateColumns, "idempotency", d.UpdateKey(), colsOK, colsOK, "", p)
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
		t := m.table(d.Fold(rs.table), idem, upd, idemPath, updPath, colsOK && rs.idem != nil, colsOK, inherited, p)
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
func (m *Model) table(name string, idem *Idempotency, upd *[]string, idemPath, updPath string, checkIdem, checkUpd bool, inheritedAt string, p *fields.Problems) *Table {
	t := &Table{Name: name, Strategy: idem.Strategy}
	discard := &fields.Problems{}
	ip := p
	if !checkIdem {
		ip = discard
	}
	mode := m.Mode
	switch idem.Strategy {
	case StrategyStreamSequence, StrategyMessageID, StrategyPayloadField:
	default:
		ip.Addf(idemPath+".strategy", "must be one of stream_sequence, message_id, payload_field (got %q)", idem.Strategy)
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
	keyCols := idem.keyColumns()
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
