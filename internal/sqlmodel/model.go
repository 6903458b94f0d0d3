package sqlmodel

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/subject"
	"github.com/nats-sinks/nats-sink/sink"
)

// A Model is a validated SQL sink configuration in dialect-neutral form:
// folded column names, the resolved tables with their keys and update
// columns, and the subject routes. It is immutable and safe for concurrent
// use.
type Model struct {
	Dialect     Dialect
	Mode        Mode
	PayloadMode record.PayloadMode
	// Columns holds the folded column name of each field, in table order.
	Columns [NumFields]string
	// Tables lists every distinct table: Tables[0] is the sink's table,
	// then route tables in first-appearance order. auto_create runs the
	// DDL of each.
	Tables []*Table
	// AutoEvolve is auto_evolve (layout mapped).
	AutoEvolve bool

	routes []route
}

type route struct {
	pattern string
	table   *Table
}

// A Table is one resolved destination table and the rules that apply to it.
type Table struct {
	// Name is the folded table name as configured ("events", "main.events").
	Name string
	// Strategy is the idempotency strategy.
	Strategy string
	// Key lists the key (conflict) columns as fields, in configured order.
	Key []Field
	// Update lists the columns an upsert or merge updates, resolved from
	// the update-columns key (nil = all non-key columns in table order,
	// [] = none). Empty outside upsert and merge.
	Update []Field
	// PayloadField is the split payload_field path (strategy payload_field).
	PayloadField []string
	// Mapped is the row shape in the mapped layout; nil in the audit
	// layout.
	Mapped *Mapped
}

// sameRules reports whether t and u may share one physical table.
func (t *Table) sameRules(u *Table) bool {
	return t.Strategy == u.Strategy && slices.Equal(t.Key, u.Key) &&
		slices.Equal(t.PayloadField, u.PayloadField) && slices.Equal(t.Update, u.Update) &&
		t.Mapped.shape() == u.Mapped.shape()
}

// Column returns the folded column name of f.
func (m *Model) Column(f Field) string { return m.Columns[f] }

// ColumnNames returns the folded names of fs.
func (m *Model) ColumnNames(fs []Field) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = m.Columns[f]
	}
	return out
}

// AllColumns returns the folded names of every mapped column in table order.
func (m *Model) AllColumns() []string { return m.Columns[:] }

// Resolve returns the table for subject: the first route whose pattern
// matches, else the sink's table.
func (m *Model) Resolve(subj string) *Table {
	for _, r := range m.routes {
		if subject.Match(r.pattern, subj) {
			return r.table
		}
	}
	return m.Tables[0]
}

// A Row is one message's bound values, ready for a statement.
type Row struct {
	// Index is the envelope's position in the WriteBatch.
	Index int
	// Table is where the row goes.
	Table *Table
	// Values holds the bound value of every field in table order: nil
	// (SQL NULL), string or int64. JSON columns hold ascii JSON text.
	Values [NumFields]any
	// Duplicate is set by a dialect's Tx.Exec when it knows the row was
	// already present (e.g. one execution per row affected nothing).
	Duplicate bool
	// M holds a mapped row's bound values in Table.Mapped.Cols order (for
	// a delete, the key columns only); Delete marks a delete.
	M      []any
	Delete bool
}

// Args returns the values in table order as a new slice, for a statement
// that binds every mapped column.
func (r *Row) Args() []any { return slices.Clone(r.Values[:]) }

// Integer reports whether the field is bound as an integer (stream_sequence
// and the four epoch-ns fields); the others are text.
func (f Field) Integer() bool {
	switch f {
	case StreamSequence, MessageCreatedAtEpochNS, JetStreamTimestampEpochNS, ReceivedAtEpochNS, StoredAtEpochNS:
		return true
	}
	return false
}

// BuildRow resolves e's table and builds its bound values (docs/formats.md#sql-tables),
// with storedAt as the row build time and every JSON text in canonical key
// order. A message whose row cannot be built
// gets an error that sink.Failed turns into a Permanent result:
// SerializationError for payload normalisation, ValidationError for missing
// idempotency material, PermanentSinkError for a value no column can hold.
func (m *Model) BuildRow(e *sink.Envelope, storedAt time.Time) (*Row, error) {
	return m.BuildRowOrdered(e, storedAt, nil)
}

// KeyOrders tells BuildRowOrdered the key order of the JSON text bound to
// field f (Payload, Headers or Metadata) of table t. Only a PostgreSQL jsonb
// column should get jsonx.JSONBOrder: the server stores the same value
// whatever the order, and skips its key sort when the text is already in
// its order. Every other column stores the text as it is, so it must stay
// canonical.
type KeyOrders func(t *Table, f Field) jsonx.KeyOrder

// BuildRowOrdered is BuildRow with the JSON texts of each column in the key
// order that orders gives (nil: canonical).
func (m *Model) BuildRowOrdered(e *sink.Envelope, storedAt time.Time, orders KeyOrders) (*Row, error) {
	t := m.Resolve(e.Subject)
	r := &Row{Table: t}
	if t.Mapped != nil {
		var err error
		if r.M, r.Delete, err = m.mappedRow(e, t, storedAt); err != nil {
			return nil, fmt.Errorf("%s row for subject %s (stream seq %d): %w", m.Dialect, e.Subject, e.StreamSequence, err)
		}
		return r, nil
	}
	v, err := m.Values(e, t, storedAt, orders)
	if err != nil {
		return nil, fmt.Errorf("%s row for subject %s (stream seq %d): %w", m.Dialect, e.Subject, e.StreamSequence, err)
	}
	r.Values = v
	return r, nil
}

// Values builds e's bound values of docs/formats.md#sql-tables for table t, which only
// needs Strategy and PayloadField (and m only PayloadMode), so that a sink
// with its own tables and DDL (clickhouse) builds the same row. Errors are
// those of BuildRow without its "<dialect> row for subject …" prefix.
func (m *Model) Values(e *sink.Envelope, t *Table, storedAt time.Time, orders KeyOrders) ([NumFields]any, error) {
	return m.values(e, t, storedAt, orders, true)
}

// ScalarValues is Values without the three JSON texts (Payload, Headers,
// Metadata are nil; the two always-null documents are still "null"), for a
// row that stores none of them: encoding them is most of a row's cost.
func (m *Model) ScalarValues(e *sink.Envelope, t *Table, storedAt time.Time) ([NumFields]any, error) {
	return m.values(e, t, storedAt, nil, false)
}

func (m *Model) values(e *sink.Envelope, t *Table, storedAt time.Time, orders KeyOrders, texts bool) ([NumFields]any, error) {
	var v [NumFields]any
	fail := func(err error) ([NumFields]any, error) { return [NumFields]any{}, err }
	order := func(f Field) jsonx.KeyOrder {
		if orders == nil {
			return jsonx.CanonicalOrder
		}
		return orders(t, f)
	}
	// The payload's text, straight from its bytes; only payload_field
	// needs the parsed tree, to walk it.
	payload := func(dst []byte) ([]byte, error) {
		return record.AppendPayload(dst, e, m.PayloadMode, jsonx.ASCII, order(Payload))
	}
	var tree any
	var err error
	if t.Strategy == StrategyPayloadField {
		p, err := record.NormalisePayload(e, m.PayloadMode)
		if err != nil {
			return fail(err)
		}
		tree = p.Value
		payload = func(dst []byte) ([]byte, error) {
			return jsonx.AppendOrdered(dst, p.Value, jsonx.ASCII, order(Payload)), nil
		}
	}

	var msgID any
	if e.MessageID != "" {
		msgID = e.MessageID
	}
	switch t.Strategy {
	case StrategyStreamSequence:
		if e.Stream == "" || e.StreamSequence == 0 {
			return fail(sink.AsPermanentType(sink.ValidationError, errors.New("stream_sequence idempotency requires JetStream stream and sequence metadata")))
		}
	case StrategyMessageID:
		if e.MessageID == "" {
			return fail(sink.AsPermanentType(sink.ValidationError, errors.New("message_id idempotency requires a message id header")))
		}
	case StrategyPayloadField:
		v, err := PayloadFieldValue(tree, t.PayloadField)
		if err != nil {
			return fail(sink.AsPermanentType(sink.ValidationError, err))
		}
		msgID = v
	}

	if e.StreamSequence > math.MaxInt64 {
		return fail(sink.AsPermanent(errors.New("stream sequence does not fit a signed 64-bit column")))
	}
	stored := record.Micro(storedAt)
	created := record.CreatedAt(e)
	v[StreamName] = nullString(e.Stream)
	if e.StreamSequence != 0 {
		v[StreamSequence] = int64(e.StreamSequence)
	}
	v[Subject] = e.Subject
	v[MessageID] = msgID
	v[Priority] = nullString(e.Priority)
	v[Classification] = nullString(e.Classification)
	v[Labels] = record.JoinLabels(e.Labels, ";")
	if created.Source != record.SourceMissing {
		if v[MessageCreatedAtEpochNS], err = epochNS(created.Time, "message creation time"); err != nil {
			return fail(err)
		}
	}
	if !e.Timestamp.IsZero() {
		if v[JetStreamTimestampEpochNS], err = epochNS(record.JetStreamTime(e.Timestamp), "JetStream timestamp"); err != nil {
			return fail(err)
		}
	}
	if v[ReceivedAtEpochNS], err = epochNS(record.Micro(e.ReceivedAt), "receive time"); err != nil {
		return fail(err)
	}
	if v[StoredAtEpochNS], err = epochNS(stored, "store time"); err != nil {
		return fail(err)
	}
	if texts {
		if v[Payload], v[Headers], v[Metadata], err = jsonTexts(e, payload, stored, order); err != nil {
			return fail(err)
		}
	}
	v[MissionMetadata] = "null"
	v[SecurityLabels] = "null"
	return v, nil
}

// jsonTexts encodes the payload (with the given function), headers and
// metadata texts of a row into one buffer and returns them as three
// substrings of one string: one allocation and copy instead of one per
// document, and no tree (the row's JSON was about a fifth of the whole
// pipeline's CPU per message before).
func jsonTexts(e *sink.Envelope, payload func([]byte) ([]byte, error), stored time.Time, order func(Field) jsonx.KeyOrder) (p, h, m string, err error) {
	buf := scratch.Get().(*[]byte)
	defer func() {
		if cap(*buf) <= maxScratch {
			scratch.Put(buf)
		}
	}()
	b, err := payload((*buf)[:0])
	if err != nil {
		return "", "", "", err
	}
	endPayload := len(b)
	b = record.AppendHeaders(b, e, jsonx.ASCII, order(Headers))
	endHeaders := len(b)
	b = record.AppendMetadata(b, e, stored, true, jsonx.ASCII, order(Metadata))
	*buf = b
	s := string(b)
	return s[:endPayload], s[endPayload:endHeaders], s[endHeaders:], nil
}

// scratch holds the buffers jsonTexts encodes into (a stack array escapes
// through the encoder's interface values). A row of the relational layout
// with a small payload is about 2 KB of JSON; buffers grown past
// maxScratch by a large payload are left to the GC rather than pooled.
var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

const maxScratch = 64 << 10

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// epochNS returns the epoch-ns integer of t, or a PermanentSinkError when
// it does not fit int64 (a Nats-Time-Stamp after 2262 is legal input; the
// metadata JSON keeps it exactly, but no bigint column can).
func epochNS(t time.Time, what string) (any, error) {
	switch n := record.EpochNS(t).(type) {
	case int64:
		return n, nil
	default:
		return nil, sink.AsPermanent(fmt.Errorf("%s is outside the 64-bit epoch-ns range", what))
	}
}

// PayloadFieldValue walks path through the objects of a normalised payload
// and renders the scalar it finds as text (docs/sql.md): strings as they
// are, integers in decimal, floats per docs/formats.md#json-encoding, booleans True/False;
// the result is trimmed and must not be empty. Errors name the path, never
// the value.
func PayloadFieldValue(payload any, path []string) (string, error) {
	dotted := strings.Join(path, ".")
	cur := payload
	for _, seg := range path {
		var next any
		var ok bool
		switch o := cur.(type) {
		case map[string]any:
			next, ok = o[seg]
		case jsonx.Object:
			next, ok = o.Get(seg)
		default:
			return "", fmt.Errorf("payload field %q not found: the payload is not an object at %q", dotted, seg)
		}
		if !ok {
			return "", fmt.Errorf("payload field %q not found", dotted)
		}
		cur = next
	}
	var s string
	switch v := cur.(type) {
	case nil:
		return "", fmt.Errorf("payload field %q is null", dotted)
	case string:
		s = v
	case jsonx.Integer:
		s = string(v)
	case int64:
		s = strconv.FormatInt(v, 10)
	case int:
		s = strconv.Itoa(v)
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return "", fmt.Errorf("payload field %q is not a finite number", dotted)
		}
		s = jsonx.FormatFloat(v)
	case bool:
		// Python's str(True), as upstream rendered it.
		s = "False"
		if v {
			s = "True"
		}
	default:
		return "", fmt.Errorf("payload field %q is not a scalar (got %s)", dotted, jsonKind(v))
	}
	s = strings.TrimFunc(s, isPySpace)
	if s == "" {
		return "", fmt.Errorf("payload field %q is blank", dotted)
	}
	return s, nil
}

// isPySpace is Python's str.isspace, which str.strip() uses: Unicode
// White_Space plus the C0 separators U+001C–U+001F.
func isPySpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }

func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any, jsonx.Object:
		return "object"
	case []any:
		return "array"
	}
	return fmt.Sprintf("%T", v)
}

// A Group is the rows of one table, in delivery order.
type Group struct {
	Table *Table
	Rows  []*Row
}

// GroupRows groups rows per table in first-appearance order, keeping
// delivery order inside each group.
func GroupRows(rows []*Row) []Group {
	var out []Group
	idx := map[*Table]int{}
	for _, r := range rows {
		i, ok := idx[r.Table]
		if !ok {
			i = len(out)
			idx[r.Table] = i
			out = append(out, Group{Table: r.Table})
		}
		out[i].Rows = append(out[i].Rows, r)
	}
	return out
}

// Reduce removes rows whose key values repeat inside the group, for
// dialects whose one multi-row statement cannot touch a key twice
// (PostgreSQL's ON CONFLICT DO UPDATE): upsert keeps the last row, insert_ignore
// and merge-without-updates the first. Rows with a NULL key value never
// conflict and are kept, and insert/append keep everything so that the
// database reports the violation. kept stays in delivery order; the caller
// reports dropped rows as Duplicate once the transaction commits.
func (g Group) Reduce(mode Mode) (kept, dropped []*Row) {
	if !mode.NeedsKey() || len(g.Table.Key) == 0 {
		return g.Rows, nil
	}
	keepLast := mode.Updates() && len(g.Table.Update) > 0
	winner := map[string]int{}
	keys := make([]string, len(g.Rows))
	for i, r := range g.Rows {
		k, ok := rowKey(r, g.Table.Key)
		if !ok {
			continue
		}
		keys[i] = k
		if _, seen := winner[k]; !seen || keepLast {
			winner[k] = i
		}
	}
	for i, r := range g.Rows {
		if keys[i] != "" && winner[keys[i]] != i {
			dropped = append(dropped, r)
			continue
		}
		kept = append(kept, r)
	}
	return kept, dropped
}

// rowKey encodes the key values of r unambiguously; ok is false when one
// of them is NULL.
func rowKey(r *Row, key []Field) (string, bool) {
	var b strings.Builder
	for _, f := range key {
		switch v := r.Values[f].(type) {
		case nil:
			return "", false
		case int64:
			b.WriteString("i")
			b.WriteString(strconv.FormatInt(v, 10))
		case string:
			b.WriteString("s")
			b.WriteString(strconv.Itoa(len(v)))
			b.WriteString(":")
			b.WriteString(v)
		}
		b.WriteByte(0)
	}
	return b.String(), true
}
