package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/telemetry"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sinks/sqlmodel"
)

var (
	_ sink.Sink          = (*Sink)(nil)
	_ sink.HealthChecker = (*Sink)(nil)
)

const (
	// closeTimeout bounds the polite Terminate message when a connection
	// is closed.
	closeTimeout = 5 * time.Second
	// commitTimeout bounds COMMIT and ROLLBACK, which run without the
	// batch's ctx: cancelling a COMMIT in flight only turns a likely
	// success into an unknown outcome.
	commitTimeout = 30 * time.Second
	// stageTable is the COPY path's temporary table (sinks.md §5).
	stageTable = "nats_sink_stage"
)

// Sink writes batches into PostgreSQL. WriteBatch calls may run
// concurrently, each on its own pooled connection and transaction.
type Sink struct {
	model   *sqlmodel.Model
	pool    *pool
	staging bool
	target  string // host:port/database, for error texts (no credentials)

	// sql holds per table the insert statement and whether it returns the
	// key columns of inserted rows (see insertSQL). Until the table's
	// column types are known (see resolve) the statement casts every JSON
	// value to json.
	mu       sync.Mutex
	sql      map[*sqlmodel.Table]statement
	resolved atomic.Bool // every table's statement fits its column types

	w        sqlmodel.Writer
	exec     *telemetry.Histogram
	commit   *telemetry.Histogram
	dups     *telemetry.Counter
	stopOnce sync.Once
}

type statement struct {
	insert    string // unnest form, or the insert … select of the COPY path
	returning bool
}

// New checks c, resolves the password, connects once (so that wrong
// credentials or an unreachable server fail the start) and, with
// auto_create, creates the sink's tables. Build c from Default(): invalid
// values are reported as a *sink.ConfigError.
func New(ctx context.Context, c Config) (*Sink, error) {
	model, err := check(c)
	if err != nil {
		return nil, err
	}
	password, err := resolvePassword(c)
	if err != nil {
		return nil, err
	}
	cc, err := connConfig(c, password)
	if err != nil {
		return nil, err
	}
	s := &Sink{
		model:   model,
		pool:    newPool(cc, c.PoolSize),
		staging: c.Staging.Enabled,
		target:  fmt.Sprintf("%s:%d/%s", c.Host, c.Port, c.Database),
		sql:     map[*sqlmodel.Table]statement{},
	}
	for _, t := range model.Tables {
		s.sql[t] = statement{insert: insertSQL(model, t, s.staging, nil), returning: returning(model, t)}
	}
	if err := s.setup(ctx, c.AutoCreate); err != nil {
		_ = s.pool.close(context.Background())
		return nil, err
	}
	s.exec, _ = c.Metrics.NewHistogram("postgres_execute_seconds", "Time spent executing PostgreSQL statements per batch.", nil)
	s.commit, _ = c.Metrics.NewHistogram("postgres_commit_seconds", "Time spent in PostgreSQL COMMIT.", nil)
	s.dups, _ = c.Metrics.NewCounter("postgres_duplicates_total", "Rows PostgreSQL found already present (insert_ignore, upsert without update columns, or repeated keys inside a batch).")
	s.w = sqlmodel.Writer{
		Model:    model,
		Begin:    s.begin,
		Classify: func(err error) error { return classify(model.Mode, err) },
		// One multi-row statement cannot touch a key twice with ON
		// CONFLICT DO UPDATE, so repeated keys are reduced first.
		Reduce: true,
		Observe: func(st sqlmodel.Stats) {
			s.exec.Observe(st.Exec.Seconds())
			s.commit.Observe(st.Commit.Seconds())
			s.dups.Add(st.Duplicates)
		},
	}
	return s, nil
}

// check validates what a library user may have set by hand (Decode has
// already done so for configuration files) and compiles the model.
func check(c Config) (*sqlmodel.Model, error) {
	var p fields.Problems
	for _, pr := range c.problems() {
		p.Add(pr.Path, pr.Message)
	}
	if c.PoolSize < 1 || c.PoolSize > 64 {
		p.Addf("pool_size", "must be between 1 and 64 (got %d)", c.PoolSize)
	}
	if c.ConnectTimeoutSeconds < 1 || c.ConnectTimeoutSeconds > 300 {
		p.Addf("connect_timeout_seconds", "must be between 1 and 300 (got %d)", c.ConnectTimeoutSeconds)
	}
	if c.StatementTimeoutMS < 0 || c.StatementTimeoutMS > 3600000 {
		p.Addf("statement_timeout_ms", "must be between 0 and 3600000 (got %d)", c.StatementTimeoutMS)
	}
	model, err := c.Shared.Compile(sqlmodel.Postgres, c.options())
	if ce, ok := errors.AsType[*sink.ConfigError](err); ok {
		for _, pr := range ce.Problems {
			p.Add(pr.Path, pr.Message)
		}
	}
	if p.Len() > 0 {
		return nil, &sink.ConfigError{Problems: p.List()}
	}
	return model, nil
}

// resolvePassword reads the one configured password source. A missing
// variable or unreadable file is a configuration problem (exit 2); the
// message never includes the value or the file's content.
func resolvePassword(c Config) (string, error) {
	problem := func(path, msg string) error {
		return &sink.ConfigError{Problems: []sink.Problem{{Path: path, Message: msg}}}
	}
	var v string
	switch {
	case c.Password != nil:
		v = c.Password.Reveal()
	case c.PasswordEnv != nil:
		var ok bool
		if c.Env != nil {
			v, ok = c.Env(*c.PasswordEnv)
		} else {
			v, ok = os.LookupEnv(*c.PasswordEnv)
		}
		if !ok {
			return "", problem("password_env", fmt.Sprintf("environment variable %s is not set", *c.PasswordEnv))
		}
	case c.PasswordFile != nil:
		data, err := os.ReadFile(*c.PasswordFile)
		if err != nil {
			return "", problem("password_file", fmt.Sprintf("cannot read password file: %v", err))
		}
		v = strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	}
	if strings.TrimSpace(v) == "" || fields.HasControl(v) {
		path := "password"
		switch {
		case c.PasswordEnv != nil:
			path = "password_env"
		case c.PasswordFile != nil:
			path = "password_file"
		}
		return "", problem(path, "the resolved password must be non-blank without control characters")
	}
	return v, nil
}

// connConfig builds pgx's connection configuration. Only validated,
// non-secret values go through the keyword/value string (each quoted);
// the password is set on the parsed struct so it never sits in a string.
func connConfig(c Config, password string) (*pgx.ConnConfig, error) {
	kv := []string{
		"host=" + quoteValue(c.Host),
		"port=" + strconv.Itoa(c.Port),
		"dbname=" + quoteValue(c.Database),
		"user=" + quoteValue(c.User),
		"sslmode=" + quoteValue(c.SSLMode),
		"connect_timeout=" + strconv.Itoa(c.ConnectTimeoutSeconds),
	}
	for _, o := range []struct {
		key string
		v   *string
	}{{"sslrootcert", c.SSLRootCert}, {"sslcert", c.SSLCert}, {"sslkey", c.SSLKey}} {
		if o.v != nil {
			kv = append(kv, o.key+"="+quoteValue(*o.v))
		}
	}
	cc, err := pgx.ParseConfig(strings.Join(kv, " "))
	if err != nil {
		// Unreadable certificate files land here: a configuration
		// problem found while starting (exit 2), like a missing env var.
		return nil, fmt.Errorf("postgres connection settings: %w: %w", sink.ErrConfig, err)
	}
	cc.Password = password
	// Runtime parameters are sent in the startup message, so every pooled
	// connection has them without an extra round trip.
	cc.RuntimeParams["application_name"] = c.ApplicationName
	cc.RuntimeParams["statement_timeout"] = strconv.Itoa(c.StatementTimeoutMS)
	return cc, nil
}

// quoteValue quotes a libpq keyword/value setting.
func quoteValue(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// setup connects once and runs the auto_create DDL.
func (s *Sink) setup(ctx context.Context, autoCreate bool) error {
	conn, _, err := s.pool.acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres connect to %s: %w", s.target, classify(s.model.Mode, err))
	}
	broken := false
	defer func() { s.pool.release(conn, broken) }()
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
			broken = true
			return fmt.Errorf("postgres create table %s: %w", t.Name, classify(s.model.Mode, err))
		}
	}
	s.resolve(ctx, conn)
	return nil
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
	if s.staging || s.resolved.Load() {
		// The COPY path's statement reads typed columns of a table
		// shaped like the target: no casts to choose.
		return
	}
	all := true
	for _, t := range s.model.Tables {
		jsonb, ok := jsonbColumns(ctx, conn, t.Name)
		if !ok {
			all = false
			continue
		}
		st := statement{insert: insertSQL(s.model, t, false, jsonb), returning: returning(s.model, t)}
		s.mu.Lock()
		s.sql[t] = st
		s.mu.Unlock()
	}
	s.resolved.Store(all)
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
// (sinks.md §0, §2, §5). Calls may run concurrently.
func (s *Sink) WriteBatch(ctx context.Context, batch []*sink.Envelope) []sink.Result {
	return s.w.WriteBatch(ctx, batch)
}

// begin acquires a connection and opens a transaction on it. When BEGIN
// fails on a reused idle connection (one that died with a server restart
// or an idle timeout), it is closed and the next one tried: nothing of the
// batch has been sent yet, so this is safe, and it keeps one restart from
// failing a batch per idle connection.
func (s *Sink) begin(ctx context.Context) (sqlmodel.Tx, error) {
	for {
		conn, reused, err := s.pool.acquire(ctx)
		if err != nil {
			return nil, fmt.Errorf("connect to %s: %w", s.target, err)
		}
		if !s.resolved.Load() {
			s.resolve(ctx, conn)
		}
		tx, err := conn.Begin(ctx)
		if err == nil {
			return &pgTx{s: s, conn: conn, tx: tx}, nil
		}
		s.pool.release(conn, true)
		if !reused || ctx.Err() != nil {
			return nil, err
		}
	}
}

type pgTx struct {
	s    *Sink
	conn *pgx.Conn
	tx   pgx.Tx
}

// Exec writes one table's rows with one statement (plus, on the COPY
// path, the temporary table around it). When the statement returns the
// keys of the rows it inserted, the other rows are marked Duplicate.
func (t *pgTx) Exec(ctx context.Context, g sqlmodel.Group) (int64, error) {
	t.s.mu.Lock()
	st := t.s.sql[g.Table]
	t.s.mu.Unlock()
	if !t.s.staging {
		return t.unnest(ctx, g, st)
	}
	rows, err := t.stage(ctx, g, st)
	if err != nil {
		return 0, err
	}
	inserted, ok := map[string]bool{}, st.returning
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			rows.Close()
			return 0, err
		}
		if k, good := returnedKey(vals); good {
			inserted[k] = true
		} else {
			ok = false
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	affected := rows.CommandTag().RowsAffected()
	if ok {
		for _, r := range g.Rows {
			if k, hasKey := rowKey(r, g.Table.Key); hasKey && !inserted[k] {
				r.Duplicate = true
			}
		}
	}
	if _, err := t.tx.Exec(ctx, "drop table "+sqlmodel.Postgres.Quote(stageTable), pgx.QueryExecModeExec); err != nil {
		return 0, err
	}
	return affected, nil
}

// unnest runs the unnest statement with the 16 column arrays encoded here
// (see encodeArrays) and passed to the prepared statement as they are.
// When the statement returns the keys of the rows it inserted, the other
// rows are marked Duplicate.
func (t *pgTx) unnest(ctx context.Context, g sqlmodel.Group, st statement) (int64, error) {
	// Preparing under the SQL text itself caches the statement on the
	// connection, once per text: pgx names it by a digest of the text.
	sd, err := t.conn.Prepare(ctx, st.insert, st.insert)
	if err != nil {
		return 0, err
	}
	params := encodeArrays(g.Rows)
	formats := make([]int16, len(params))
	for i := range formats {
		formats[i] = pgx.BinaryFormatCode
	}
	// Result columns (the returned keys) come back as text.
	rr := t.conn.PgConn().ExecPrepared(ctx, sd.Name, params, formats, nil)
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

// stage runs the COPY path (sinks.md §5): a temporary table shaped like
// the target, COPY into it, then insert … select with the same conflict
// clause. The temporary table is dropped after use so that another table
// group of the same transaction can create it again.
func (t *pgTx) stage(ctx context.Context, g sqlmodel.Group, st statement) (pgx.Rows, error) {
	d := sqlmodel.Postgres
	create := "create temp table " + d.Quote(stageTable) + " (like " + d.Quote(g.Table.Name) + " including defaults) on commit drop"
	if _, err := t.tx.Exec(ctx, create, pgx.QueryExecModeExec); err != nil {
		return nil, err
	}
	src := make([][]any, len(g.Rows))
	for i, r := range g.Rows {
		src[i] = r.Args()
	}
	if _, err := t.tx.CopyFrom(ctx, pgx.Identifier{stageTable}, t.s.model.AllColumns(), pgx.CopyFromRows(src)); err != nil {
		return nil, err
	}
	// Exec mode, not the statement cache: the temporary table is a new
	// relation in every transaction.
	return t.tx.Query(ctx, st.insert, pgx.QueryExecModeExec)
}

// Commit commits without the batch's ctx (bounded by commitTimeout) and
// returns the connection to the pool.
func (t *pgTx) Commit(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	err := t.tx.Commit(cctx)
	t.s.pool.release(t.conn, err != nil)
	return err
}

// Rollback rolls back and closes the connection: the failure that led
// here may have left it in any state (a cancelled query, a stale cached
// statement for a table that was dropped and recreated), and a fresh
// connection is cheap next to a wrong one.
func (t *pgTx) Rollback() error {
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	err := t.tx.Rollback(ctx)
	t.s.pool.release(t.conn, true)
	return err
}

// Element type OIDs of the unnest arrays.
const (
	textOID = 25
	int8OID = 20
)

// encodeArrays returns the 16 parameters of the unnest statement in
// PostgreSQL's binary array format (array_recv): one one-dimensional
// array per column, text or bigint, NULL elements for nil values, all in
// one allocation. pgx's own encoding of []*string arrays reflects on
// every element and grows its buffer by appending (about 20 ms of CPU per
// 1000 rows, more than building the rows); this is a single pass
// (about 3 ms).
func encodeArrays(rows []*sqlmodel.Row) [][]byte {
	const header = 20 // ndim, has-null flag, element type, length, lower bound
	size := int(sqlmodel.NumFields) * header
	for _, r := range rows {
		for f := range sqlmodel.NumFields {
			size += 4
			switch v := r.Values[f].(type) {
			case int64:
				size += 8
			case string:
				size += len(v)
			}
		}
	}
	buf := make([]byte, 0, size)
	params := make([][]byte, sqlmodel.NumFields)
	for f := range sqlmodel.NumFields {
		start := len(buf)
		elem := uint32(textOID)
		if f.Integer() {
			elem = int8OID
		}
		buf = binary.BigEndian.AppendUint32(buf, 1)
		buf = binary.BigEndian.AppendUint32(buf, 0) // has-null flag, set below
		buf = binary.BigEndian.AppendUint32(buf, elem)
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(rows)))
		buf = binary.BigEndian.AppendUint32(buf, 1)
		for _, r := range rows {
			switch v := r.Values[f].(type) {
			case int64:
				buf = binary.BigEndian.AppendUint32(buf, 8)
				buf = binary.BigEndian.AppendUint64(buf, uint64(v))
			case string:
				buf = binary.BigEndian.AppendUint32(buf, uint32(len(v)))
				buf = append(buf, v...)
			default: // nil: SQL NULL
				buf = binary.BigEndian.AppendUint32(buf, math.MaxUint32) // -1
				binary.BigEndian.PutUint32(buf[start+4:], 1)
			}
		}
		params[f] = buf[start:len(buf):len(buf)]
	}
	return params
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

// insertSQL builds t's statement (sinks.md §5). The unnest form binds one
// array per column, so the text is constant for every batch size and is
// prepared once per connection. JSON values are cast to jsonb for the
// columns named in jsonb (one parse), else to json, which keeps the
// canonical text as it is and converts by assignment to a json, jsonb or
// text column. With staging, the rows come from the COPY table.
func insertSQL(m *sqlmodel.Model, t *sqlmodel.Table, staging bool, jsonb map[string]bool) string {
	d := m.Dialect
	cols := d.QuoteAll(m.AllColumns())
	var b strings.Builder
	b.WriteString("insert into " + d.Quote(t.Name) + " (" + cols + ") select ")
	if staging {
		b.WriteString(cols + " from " + d.Quote(stageTable))
	} else {
		sel := make([]string, sqlmodel.NumFields)
		arrays := make([]string, sqlmodel.NumFields)
		for f := range sqlmodel.NumFields {
			c := d.Quote(m.Column(f))
			sel[f] = c
			typ := "text[]"
			switch {
			case f.Integer():
				typ = "bigint[]"
			case f.JSON() && jsonb[m.Column(f)]:
				sel[f] = c + "::jsonb"
			case f.JSON():
				sel[f] = c + "::json"
			}
			arrays[f] = fmt.Sprintf("$%d::%s", int(f)+1, typ)
		}
		b.WriteString(strings.Join(sel, ", ") + " from unnest(" + strings.Join(arrays, ", ") + ") as u (" + cols + ")")
	}
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

// returnedKey encodes one returned key row like rowKey; ok is false for
// a column type the sink does not bind (then no row is marked Duplicate,
// which is safe: both outcomes are acknowledged).
func returnedKey(vals []any) (string, bool) {
	for i, v := range vals {
		switch x := v.(type) {
		case int32:
			vals[i] = int64(x)
		case int16:
			vals[i] = int64(x)
		}
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

// classify maps a PostgreSQL error to its class by SQLSTATE (sinks.md §5).
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
			// themselves: a concurrent writer raced us (README Q11).
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
	conn, _, err := s.pool.acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres healthcheck %s: %w", s.target, classify(s.model.Mode, err))
	}
	broken := false
	defer func() { s.pool.release(conn, broken) }()
	d := s.model.Dialect
	for _, t := range s.model.Tables {
		q := "select " + d.QuoteAll(s.model.AllColumns()) + " from " + d.Quote(t.Name) + " limit 0"
		if _, err := conn.Exec(ctx, q, pgx.QueryExecModeExec); err != nil {
			broken = true
			return fmt.Errorf("postgres healthcheck %s: table %s: %w", s.target, t.Name, classify(s.model.Mode, err))
		}
	}
	return nil
}

// Stop closes the pool. The runner calls it once, after the last
// WriteBatch; later calls do nothing.
func (s *Sink) Stop(ctx context.Context) error {
	var err error
	s.stopOnce.Do(func() { err = s.pool.close(ctx) })
	return err
}
