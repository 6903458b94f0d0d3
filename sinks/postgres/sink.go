package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
	"github.com/nats-sinks/nats-sink/sink"
)

var (
	_ sink.Sink          = (*Sink)(nil)
	_ sink.HealthChecker = (*Sink)(nil)
)

const (
	// commitTimeout bounds COMMIT and ROLLBACK, which run without the
	// batch's ctx: cancelling a COMMIT in flight only turns a likely
	// success into an unknown outcome.
	commitTimeout = 30 * time.Second
	// stageTable prefixes the COPY path's temporary tables (docs/sql.md#per-database),
	// one per target table: nats_sink_stage_0, nats_sink_stage_1, …
	stageTable = "nats_sink_stage"
)

// Sink writes batches into PostgreSQL. WriteBatch calls may run
// concurrently, each on its own pooled connection and transaction.
type Sink struct {
	model   *sqlmodel.Model
	pool    *pgxpool.Pool
	staging bool
	stage   map[*sqlmodel.Table]string // COPY path: each table's temporary table
	target  string                     // host:port/database, for error texts (no credentials)
	lz4     atomic.Bool                // sessions compress with lz4 (see chooseCompression)

	// sql holds per table the insert statement and whether it returns the
	// key columns of inserted rows (see insertSQL). Until the table's
	// column types are known (see resolve) the statement casts every JSON
	// value to json.
	mu       sync.Mutex
	sql      map[*sqlmodel.Table]statement
	jsonb    map[*sqlmodel.Table]map[string]bool // the jsonb columns of each resolved table
	resolved atomic.Bool                         // every table's statement fits its column types

	w        sqlmodel.Writer
	exec     sink.Histogram
	commit   sink.Histogram
	dups     sink.Counter
	deletes  sink.Counter
	stopOnce sync.Once
}

type statement struct {
	insert    string // insert … select from unnest, or from the COPY path's table
	returning bool
}

// New validates c (Config.Validate), resolves the password (through deps),
// connects once (so that wrong credentials or an unreachable server fail
// the start) and, with auto_create, creates the sink's tables. Build c
// from Default(): invalid values and an unresolvable password are reported
// as a *sink.ConfigError.
func New(ctx context.Context, c Config, deps sink.Deps) (*Sink, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	model, err := sqlmodel.Compile(&c.Shared, sqlmodel.Postgres, c.options())
	if err != nil {
		return nil, err
	}
	password, err := resolvePassword(c, deps)
	if err != nil {
		return nil, err
	}
	pc, err := poolConfig(c, password)
	if err != nil {
		return nil, err
	}
	s := &Sink{
		model:   model,
		staging: c.Staging.Enabled,
		stage:   map[*sqlmodel.Table]string{},
		target:  fmt.Sprintf("%s:%d/%s", c.Host, c.Port, c.Database),
		sql:     map[*sqlmodel.Table]statement{},
		jsonb:   map[*sqlmodel.Table]map[string]bool{},
	}
	for i, t := range model.Tables {
		if t.Mapped != nil {
			continue // per-row statements, prepared by setup
		}
		s.stage[t] = stageTable + "_" + strconv.Itoa(i)
		s.sql[t] = statement{insert: insertSQL(model, t, s.source(t), nil), returning: returning(model, t)}
	}
	pc.BeforeConnect = s.beforeConnect
	if s.staging {
		pc.AfterConnect = s.createStages
	}
	if s.pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
		return nil, fmt.Errorf("postgres connection settings: %w: %w", sink.ErrConfig, err)
	}
	if err := s.setup(ctx, c.AutoCreate); err != nil {
		s.pool.Close()
		return nil, err
	}
	m := deps.Meter()
	s.exec = sqlmodel.Histogram(m, "postgres_execute_seconds", "Time spent executing PostgreSQL statements per batch.")
	s.commit = sqlmodel.Histogram(m, "postgres_commit_seconds", "Time spent in PostgreSQL COMMIT.")
	s.dups = sqlmodel.Counter(m, "postgres_duplicates_total", "Rows PostgreSQL found already present (insert_ignore, upsert without update columns, or repeated keys inside a batch).")
	s.deletes = sqlmodel.DeletesCounter(m, sqlmodel.Postgres)
	s.w = sqlmodel.Writer{
		Model:    model,
		Begin:    s.begin,
		Classify: func(err error) error { return classify(model.Mode, err) },
		// One multi-row statement cannot touch a key twice with ON
		// CONFLICT DO UPDATE, so repeated keys are reduced first.
		Reduce:    true,
		KeyOrders: s.keyOrder,
		Observe: func(st sqlmodel.Stats) {
			s.exec.Observe(st.Exec.Seconds())
			s.commit.Observe(st.Commit.Seconds())
			s.dups.Add(st.Duplicates)
			s.deletes.Add(st.Deletes)
		},
	}
	return s, nil
}

// resolvePassword reads the configured password source; with none it
// returns "" and the connection offers no password. A missing
// variable or unreadable file is a configuration problem (exit 2); the
// message never includes the value or the file's content.
func resolvePassword(c Config, deps sink.Deps) (string, error) {
	v, path, err := sqlmodel.ResolveSecret("password", c.Password, c.PasswordEnv, c.PasswordFile, deps.LookupEnv)
	if err != nil || path == "" {
		return "", err
	}
	if strings.TrimSpace(v) == "" || fields.HasControl(v) {
		return "", &sink.ConfigError{Problems: []sink.Problem{{Path: path, Message: "the resolved password must be non-blank without control characters"}}}
	}
	return v, nil
}

// setup connects once, runs the auto_create DDL, chooses the sessions'
// compression and fits the statements to the column types.
func (s *Sink) setup(ctx context.Context, autoCreate bool) error {
	c, err := s.acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres connect to %s: %w", s.target, classify(s.model.Mode, err))
	}
	conn := c.Conn()
	for _, t := range s.model.Tables {
		if !autoCreate {
			break
		}
		if _, err := conn.Exec(ctx, s.model.DDL(t), pgx.QueryExecModeSimpleProtocol); err != nil {
			if isAlreadyExists(err) {
				// Another process created it between "if not exists"
				// and the create.
				continue
			}
			discard(c)
			return fmt.Errorf("postgres create table %s: %w", t.Name, classify(s.model.Mode, err))
		}
	}
	err = s.model.StartMapped(ctx, sqlmodel.Catalog{
		Exec: func(ctx context.Context, q string) error {
			_, err := conn.Exec(ctx, q, pgx.QueryExecModeSimpleProtocol)
			return err
		},
		Columns: func(ctx context.Context, table string) (map[string]string, error) {
			return columnTypes(ctx, conn, table)
		},
		Exists: func(err error) bool {
			pe, ok := errors.AsType[*pgconn.PgError](err)
			return isAlreadyExists(err) || ok && pe.Code == "42701"
		},
	}, false)
	if err != nil {
		discard(c)
		if errors.Is(err, sink.ErrConfig) {
			return err
		}
		return fmt.Errorf("postgres %s: %w", s.target, classify(s.model.Mode, err))
	}
	s.chooseCompression(ctx, conn)
	s.resolve(ctx, conn)
	c.Release()
	return nil
}

// columnTypes returns a table's columns and their format_type text; nil
// when the table does not exist.
func columnTypes(ctx context.Context, conn *pgx.Conn, table string) (map[string]string, error) {
	rows, err := conn.Query(ctx, `select a.attname::text, pg_catalog.format_type(a.atttypid, a.atttypmod)
from pg_catalog.pg_attribute a
where a.attrelid = pg_catalog.to_regclass($1) and a.attnum > 0 and not a.attisdropped`,
		pgx.QueryExecModeExec, sqlmodel.Postgres.Quote(table))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out map[string]string
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			return nil, err
		}
		if out == nil {
			out = map[string]string{}
		}
		out[strings.ToLower(name)] = typ
	}
	return out, rows.Err()
}

// resolve fits each table's statement to its column types: a JSON value
// bound for a jsonb column is cast to jsonb directly, which parses it
// once, where the json cast validates it and the assignment to jsonb
// parses it again (measured: about a quarter of the server's CPU per
// batch of 1000 rows goes away). A json or text column keeps the json cast, so it stores the
// canonical text unchanged, as jsonb would not (it reorders keys).
// A table that cannot be looked up yet (missing, no privilege, a failed
// query) keeps the json-cast statement, which works for every column
// type, and is tried again at the next batch. It runs outside any
// transaction, so a failure here cannot abort a batch.
func (s *Sink) resolve(ctx context.Context, conn *pgx.Conn) {
	if s.resolved.Load() {
		return
	}
	all := true
	for _, t := range s.model.Tables {
		if t.Mapped != nil {
			continue
		}
		jsonb, ok := jsonbColumns(ctx, conn, t.Name)
		if !ok {
			all = false
			continue
		}
		st := statement{insert: insertSQL(s.model, t, s.source(t), jsonb), returning: returning(s.model, t)}
		s.mu.Lock()
		s.sql[t] = st
		s.jsonb[t] = jsonb
		s.mu.Unlock()
	}
	s.resolved.Store(all)
}

// keyOrder is the key order of the JSON text bound to field f of table t:
// jsonb's own order for a jsonb column, canonical for every other column
// (json and text store the text as it is) and for a table not resolved
// yet. PostgreSQL parses each jsonb value and sorts every object's keys by
// length, then bytes; its sort returns after one pass when they already
// are, which saves about a fifth of the parse of the metadata document
// (docs/performance.md). The stored value is the same either way.
func (s *Sink) keyOrder(t *sqlmodel.Table, f sqlmodel.Field) jsonx.KeyOrder {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.jsonb[t][s.model.Column(f)] {
		return jsonx.JSONBOrder
	}
	return jsonx.CanonicalOrder
}

// jsonbColumns returns the names of table's jsonb columns; ok is false
// when the table is not found or the catalog cannot be read.
func jsonbColumns(ctx context.Context, conn *pgx.Conn, table string) (cols map[string]bool, ok bool) {
	// to_regclass resolves the quoted name like the insert does (search
	// path included) and returns null rather than failing when the
	// table does not exist.
	rows, err := conn.Query(ctx, `select a.attname::text, a.atttypid = 'pg_catalog.jsonb'::pg_catalog.regtype
from pg_catalog.pg_attribute a
where a.attrelid = pg_catalog.to_regclass($1) and a.attnum > 0 and not a.attisdropped`,
		pgx.QueryExecModeExec, sqlmodel.Postgres.Quote(table))
	if err != nil {
		return nil, false
	}
	defer rows.Close()
	cols = map[string]bool{}
	found := false
	for rows.Next() {
		var name string
		var isJSONB bool
		if err := rows.Scan(&name, &isJSONB); err != nil {
			return nil, false
		}
		found = true
		if isJSONB {
			cols[name] = true
		}
	}
	return cols, found && rows.Err() == nil
}

// isAlreadyExists reports the errors a concurrent "create table if not
// exists" can still raise: duplicate_table, or a unique violation on the
// catalog's type-name index.
func isAlreadyExists(err error) bool {
	pe, ok := errors.AsType[*pgconn.PgError](err)
	return ok && (pe.Code == "42P07" || pe.Code == "23505" || pe.Code == "42710")
}

// Type returns "postgres".
func (s *Sink) Type() string { return "postgres" }

// WriteBatch writes batch in one transaction on one pooled connection
// (docs/library.md#the-sink-boundary, docs/sql.md, docs/sql.md#per-database). Calls may run concurrently.
func (s *Sink) WriteBatch(ctx context.Context, batch []*sink.Envelope) []sink.Result {
	return s.w.WriteBatch(ctx, batch)
}

// begin acquires a connection and opens a transaction on it. When BEGIN
// fails, the connection is closed and another one tried, at most once per
// pooled connection and once more: nothing of the batch has been sent yet,
// so this is safe, and it keeps one server restart from failing a batch
// per idle connection (pgxpool pings only connections idle for more than a
// second).
func (s *Sink) begin(ctx context.Context) (sqlmodel.Tx, error) {
	for attempt := 0; ; attempt++ {
		c, err := s.acquire(ctx)
		if err != nil {
			return nil, fmt.Errorf("connect to %s: %w", s.target, err)
		}
		if !s.resolved.Load() {
			s.resolve(ctx, c.Conn())
		}
		tx, err := c.Begin(ctx)
		if err == nil {
			return &pgTx{s: s, conn: c, tx: tx}, nil
		}
		discard(c)
		if attempt >= int(s.pool.Config().MaxConns) || ctx.Err() != nil {
			return nil, err
		}
	}
}

type pgTx struct {
	s    *Sink
	conn *pgxpool.Conn
	tx   pgx.Tx
}

// Exec writes one table's rows with one statement: the rows travel either
// as 16 column arrays bound to the unnest statement, or (COPY path) as one
// binary COPY into the connection's temporary table that the statement
// then reads. When the statement returns the keys of the rows it
// inserted, the other rows are marked Duplicate.
func (t *pgTx) Exec(ctx context.Context, g sqlmodel.Group) (int64, error) {
	if g.Table.Mapped != nil {
		return t.execMapped(ctx, g)
	}
	t.s.mu.Lock()
	st := t.s.sql[g.Table]
	t.s.mu.Unlock()
	conn := t.conn.Conn()
	var params [][]byte
	var formats []int16
	if t.s.staging {
		d := sqlmodel.Postgres
		copySQL := "copy " + d.Quote(t.s.stage[g.Table]) + " (" + d.QuoteAll(t.s.model.AllColumns()) + ") from stdin (format binary)"
		if _, err := conn.PgConn().CopyFrom(ctx, bytes.NewReader(encodeCopy(g.Rows)), copySQL); err != nil {
			return 0, err
		}
	} else {
		params = encodeArrays(g.Rows)
		formats = make([]int16, len(params))
		for i := range formats {
			formats[i] = pgx.BinaryFormatCode
		}
	}
	// Preparing under the SQL text itself caches the statement on the
	// connection, once per text: pgx names it by a digest of the text.
	sd, err := conn.Prepare(ctx, st.insert, st.insert)
	if err != nil {
		return 0, err
	}
	// Result columns (the returned keys) come back as text.
	rr := conn.PgConn().ExecPrepared(ctx, sd.Name, params, formats, nil)
	var returned []string
	for rr.NextRow() {
		if st.returning {
			returned = append(returned, textKey(rr.Values(), g.Table.Key))
		}
	}
	tag, err := rr.Close()
	if err != nil {
		return 0, err
	}
	if st.returning {
		markDuplicates(g, returned)
	}
	return tag.RowsAffected(), nil
}

// execMapped writes a mapped group. A group without deletes or repeated
// keys goes through one multi-row statement (see execMulti); any other
// group is written one statement per row, in delivery order (repeated keys
// and deletes apply in order), sent as one pipelined batch: one round trip
// for the group, each statement prepared once per connection.
func (t *pgTx) execMapped(ctx context.Context, g sqlmodel.Group) (int64, error) {
	if mp := g.Table.Mapped; mp.Multi != "" && len(g.Rows) > 1 {
		if keys, ok := g.Distinct(); ok {
			if params, ok := encodeMapped(g.Rows, mp.Elems); ok {
				return t.execMulti(ctx, g, keys, params)
			}
		}
	}
	stmts := sqlmodel.MappedStmts(g)
	var b pgx.Batch
	for _, st := range stmts {
		b.Queue(st.SQL, st.Args...)
	}
	br := t.tx.SendBatch(ctx, &b)
	affected := make([]int64, len(stmts))
	for i := range stmts {
		tag, err := br.Exec()
		if err != nil {
			br.Close()
			return 0, fmt.Errorf("row %d of the batch: %w", g.Rows[i].Index, err)
		}
		affected[i] = tag.RowsAffected()
	}
	if err := br.Close(); err != nil {
		return 0, err
	}
	return sqlmodel.ApplyAffected(g, affected), nil
}

// execMulti writes a mapped group whose keys are distinct (keys[i] is row
// i's, see Group.Distinct) with one statement binding one array per
// column: the server plans and executes one statement instead of one per
// row (measured: docs/performance.md#sql-mapped-layout-issue-16). Each
// row affects at most one table row, so the result is the one the per-row
// statements give. Where a row can be left alone (an older version, or
// nothing to update) and the count says some were, a second query reads
// which keys this transaction wrote; the others are Duplicate, as a
// per-row statement affecting nothing is. A value the database refuses
// fails the whole statement, as it fails the pipelined batch: the runner
// bisects the Shared result to its message.
func (t *pgTx) execMulti(ctx context.Context, g sqlmodel.Group, keys []string, params [][]byte) (int64, error) {
	mp := g.Table.Mapped
	tag, err := t.execPrepared(ctx, mp.Multi, params, nil)
	if err != nil {
		return 0, err
	}
	n := int64(len(g.Rows))
	switch affected := tag.RowsAffected(); {
	case affected == n || !mp.MultiReturning:
		return affected, nil
	case affected == 0:
		for _, r := range g.Rows {
			r.Duplicate = true
		}
		return 0, nil
	}
	written := make(map[string]bool, len(keys))
	var b strings.Builder
	_, err = t.execPrepared(ctx, mp.MultiCheck, params[:mp.NKey], func(vals [][]byte) {
		b.Reset()
		for _, v := range vals {
			b.WriteString(strconv.Itoa(len(v)))
			b.WriteByte(':')
			b.Write(v)
		}
		written[b.String()] = true
	})
	if err != nil {
		return 0, err
	}
	matched := 0
	for _, k := range keys {
		if written[k] {
			matched++
		}
	}
	if matched != len(written) {
		// A returned key matches no row (a char(n) key column pads the
		// text, say): leave every row Committed, which is safe, as both
		// outcomes are acknowledged.
		return n, nil
	}
	for i, r := range g.Rows {
		if !written[keys[i]] {
			r.Duplicate = true
			n--
		}
	}
	return n, nil
}

// execPrepared runs sql (prepared once per connection under its own text)
// with binary parameters, calling row, when set, with each result row's
// values in text format.
func (t *pgTx) execPrepared(ctx context.Context, sql string, params [][]byte, row func([][]byte)) (pgconn.CommandTag, error) {
	conn := t.conn.Conn()
	sd, err := conn.Prepare(ctx, sql, sql)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	formats := make([]int16, len(params))
	for i := range formats {
		formats[i] = pgx.BinaryFormatCode
	}
	rr := conn.PgConn().ExecPrepared(ctx, sd.Name, params, formats, nil)
	for rr.NextRow() {
		if row != nil {
			row(rr.Values())
		}
	}
	return rr.Close()
}

// markDuplicates marks the rows of g whose keys the statement did not
// return as Duplicate. When a returned key matches no row, the key
// columns' text differs from the bound values (a char(n) column pads
// them, say): then nothing is marked, which is safe, as both outcomes are
// acknowledged.
func markDuplicates(g sqlmodel.Group, returned []string) {
	keys := make(map[string]bool, len(g.Rows))
	for _, r := range g.Rows {
		if k, ok := rowKey(r, g.Table.Key); ok {
			keys[k] = false
		}
	}
	for _, k := range returned {
		if _, ok := keys[k]; !ok {
			return
		}
		keys[k] = true
	}
	for _, r := range g.Rows {
		if k, ok := rowKey(r, g.Table.Key); ok && !keys[k] {
			r.Duplicate = true
		}
	}
}

// Commit commits without the batch's ctx (bounded by commitTimeout) and
// returns the connection to the pool.
func (t *pgTx) Commit(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	if err := t.tx.Commit(cctx); err != nil {
		discard(t.conn)
		return err
	}
	t.conn.Release()
	return nil
}

// Rollback rolls back and closes the connection (see discard).
func (t *pgTx) Rollback() error {
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	err := t.tx.Rollback(ctx)
	discard(t.conn)
	return err
}

// textKey encodes one returned key row, in text result format, like
// rowKey encodes the bound values: integer fields as their decimal text,
// the others as strings.
func textKey(vals [][]byte, key []sqlmodel.Field) string {
	var b strings.Builder
	for i, f := range key {
		if i >= len(vals) {
			break
		}
		if f.Integer() {
			b.WriteString("i")
		} else {
			b.WriteString("s" + strconv.Itoa(len(vals[i])) + ":")
		}
		b.Write(vals[i])
		b.WriteByte(0)
	}
	return b.String()
}

// returning reports whether t's statement returns the keys of the rows it
// inserted: in the modes where a conflicting row is left alone
// (insert_ignore, upsert with no update columns), the rows not returned are
// the ones already present, reported as Duplicate.
func returning(m *sqlmodel.Model, t *sqlmodel.Table) bool {
	if len(t.Key) == 0 {
		return false
	}
	return m.Mode == sqlmodel.InsertIgnore || (m.Mode == sqlmodel.Upsert && len(t.Update) == 0)
}

// source returns the FROM clause of t's statement (see sourceSQL).
func (s *Sink) source(t *sqlmodel.Table) string {
	if s.staging {
		return sourceSQL(s.model, s.stage[t])
	}
	return sourceSQL(s.model, "")
}

// sourceSQL returns the FROM clause of a statement: the unnest of the 16
// bound column arrays, whose text is constant for every batch size and is
// prepared once per connection, or the COPY path's temporary table stage.
func sourceSQL(m *sqlmodel.Model, stage string) string {
	d := m.Dialect
	if stage != "" {
		return d.Quote(stage)
	}
	arrays := make([]string, sqlmodel.NumFields)
	for f := range sqlmodel.NumFields {
		typ := "text[]"
		if f.Integer() {
			typ = "bigint[]"
		}
		arrays[f] = fmt.Sprintf("$%d::%s", int(f)+1, typ)
	}
	return "unnest(" + strings.Join(arrays, ", ") + ") as u (" + d.QuoteAll(m.AllColumns()) + ")"
}

// insertSQL builds t's statement (docs/sql.md#per-database): insert … select from the
// given source, whose columns are named like the mapped columns and hold
// text and bigint values. JSON values are cast to jsonb for the columns
// named in jsonb (one parse), else to json, which keeps the canonical text
// as it is and converts by assignment to a json, jsonb or text column.
func insertSQL(m *sqlmodel.Model, t *sqlmodel.Table, from string, jsonb map[string]bool) string {
	d := m.Dialect
	var b strings.Builder
	b.WriteString("insert into " + d.Quote(t.Name) + " (" + d.QuoteAll(m.AllColumns()) + ") select ")
	for f := range sqlmodel.NumFields {
		if f > 0 {
			b.WriteString(", ")
		}
		b.WriteString(d.Quote(m.Column(f)))
		switch {
		case f.JSON() && jsonb[m.Column(f)]:
			b.WriteString("::jsonb")
		case f.JSON():
			b.WriteString("::json")
		}
	}
	b.WriteString(" from " + from)
	key := d.QuoteAll(m.ColumnNames(t.Key))
	switch m.Mode {
	case sqlmodel.InsertIgnore:
		b.WriteString(" on conflict do nothing")
	case sqlmodel.Upsert:
		b.WriteString(" on conflict (" + key + ")")
		if len(t.Update) == 0 {
			b.WriteString(" do nothing")
			break
		}
		b.WriteString(" do update set ")
		for i, f := range t.Update {
			if i > 0 {
				b.WriteString(", ")
			}
			c := d.Quote(m.Column(f))
			b.WriteString(c + " = excluded." + c)
		}
	}
	if returning(m, t) {
		b.WriteString(" returning " + key)
	}
	return b.String()
}

// rowKey encodes r's key values; ok is false when one is NULL (a NULL key
// never conflicts, so such a row is always inserted).
func rowKey(r *sqlmodel.Row, key []sqlmodel.Field) (string, bool) {
	vals := make([]any, len(key))
	for i, f := range key {
		if r.Values[f] == nil {
			return "", false
		}
		vals[i] = r.Values[f]
	}
	return encodeKey(vals)
}

func encodeKey(vals []any) (string, bool) {
	var b strings.Builder
	for _, v := range vals {
		switch x := v.(type) {
		case int64:
			b.WriteString("i" + strconv.FormatInt(x, 10))
		case string:
			b.WriteString("s" + strconv.Itoa(len(x)) + ":" + x)
		default:
			return "", false
		}
		b.WriteByte(0)
	}
	return b.String(), true
}

// classify maps a PostgreSQL error to its class by SQLSTATE (docs/sql.md#per-database).
// Errors without a SQLSTATE (dial failures, timeouts, a lost connection)
// are Temporary.
func classify(mode sqlmodel.Mode, err error) error {
	pe, ok := errors.AsType[*pgconn.PgError](err)
	if !ok {
		return err
	}
	switch code := pe.Code; {
	case code == "23505":
		if mode == sqlmodel.InsertIgnore {
			// ON CONFLICT DO NOTHING cannot raise it for the rows
			// themselves: a concurrent writer raced us (docs/migrating.md Q11).
			return err
		}
		return sink.AsPermanent(err)
	case strings.HasPrefix(code, "22"), code == "23502", code == "23514":
		return sink.AsPermanent(err)
	case strings.HasPrefix(code, "28"), code == "3D000", code == "3F000", code == "42501",
		code == "42P01", code == "42703", code == "42601":
		return sink.AsDestination(err)
	}
	return err
}

// Healthcheck proves the server is reachable and every table has the
// mapped columns, without writing: it selects them with limit 0.
func (s *Sink) Healthcheck(ctx context.Context) error {
	c, err := s.acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres healthcheck %s: %w", s.target, classify(s.model.Mode, err))
	}
	d := s.model.Dialect
	for _, t := range s.model.Tables {
		q := "select " + d.QuoteAll(s.model.TableColumns(t)) + " from " + d.Quote(t.Name) + " limit 0"
		if _, err := c.Exec(ctx, q, pgx.QueryExecModeExec); err != nil {
			discard(c)
			return fmt.Errorf("postgres healthcheck %s: table %s: %w", s.target, t.Name, classify(s.model.Mode, err))
		}
	}
	c.Release()
	return nil
}

// Stop closes the pool: it waits for connections in use to be released
// (the runner calls Stop after the last WriteBatch, so there are none) or
// for ctx. Later calls do nothing.
func (s *Sink) Stop(ctx context.Context) error {
	var err error
	s.stopOnce.Do(func() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.pool.Close()
		}()
		select {
		case <-done:
		case <-ctx.Done():
			err = fmt.Errorf("postgres stop: %w", ctx.Err())
		}
	})
	return err
}

// ReadStored reads back the rows of table (the sink's table when empty; the
// audit layout only) in stream and stream-sequence order, at most limit
// rows when limit > 0, and calls fn with the folded table name, each row's
// stream and stream sequence columns and its payload and metadata JSON
// texts (nil for NULL). `nats-sink verify-custody --table` reads through it.
func (s *Sink) ReadStored(ctx context.Context, table string, limit int, fn func(table, stream string, seq int64, payload, metadata []byte) error) error {
	name, err := s.model.ReadTable(table)
	if err != nil {
		return fmt.Errorf("%w: %v", sink.ErrConfig, err)
	}
	rows, err := s.pool.Query(ctx, s.model.ReadQuery(name, limit), pgx.QueryExecModeExec)
	if err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	defer rows.Close()
	err = sqlmodel.ReadRows(rows, func(r sqlmodel.StoredRow) error {
		return fn(name, r.Stream, r.Seq, r.Payload, r.Metadata)
	})
	if err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	return nil
}
