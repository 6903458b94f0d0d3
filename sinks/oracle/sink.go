package oracle

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	goora "github.com/sijms/go-ora/v2"

	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
	"github.com/nats-sinks/nats-sink/sink"
)

var (
	_ sink.Sink          = (*Sink)(nil)
	_ sink.HealthChecker = (*Sink)(nil)
)

// maxArrayRows bounds one array-bound execution. Oracle counts array DML
// iterations in 32 bits, but each execution buffers every bound value in
// one request; 1000 rows keeps a request within a few MiB for typical
// messages while a batch of 1000 (or less) is still one execution.
const maxArrayRows = 1000

// oraNameUsed is ORA-00955 ("name is already used by an existing object"),
// which auto_create ignores: Oracle has no "create table if not exists".
const oraNameUsed = 955

// Sink writes batches into Oracle tables. It is safe for concurrent
// WriteBatch calls: each takes its own pooled connection and transaction.
type Sink struct {
	model   *sqlmodel.Model
	db      *sql.DB
	plans   map[*sqlmodel.Table]plan
	staging bool

	w sqlmodel.Writer
	m sqlmodel.DBMetrics // oracle_* of docs/oracle.md

	stopOnce sync.Once
}

// New validates c, resolves the secrets (through deps), prepares the connection pool and, with
// auto_create, creates the tables (the only start-up step that needs the
// server: without it, an unreachable server or a missing table is reported
// by WriteBatch and Healthcheck, so that the runner can retry instead of
// the process failing to start). Build c from Default(): invalid values
// (Config.Validate, run first) and unresolvable secrets are reported as a
// *sink.ConfigError.
func New(ctx context.Context, c Config, deps sink.Deps) (*Sink, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	model, err := sqlmodel.Compile(&c.Shared, sqlmodel.Oracle, c.options())
	if err != nil {
		return nil, err
	}
	descriptor, err := parseDSN(c.DSN)
	if err != nil {
		return nil, problem("dsn", err.Error())
	}
	pw, _, err := c.secret("password", c.Password, c.PasswordEnv, c.PasswordFile, deps.LookupEnv)
	if err != nil {
		return nil, err
	}
	var wallet, walletPW string
	if c.WalletLocation != nil {
		wallet = *c.WalletLocation
		if walletPW, _, err = c.secret("wallet_password", c.WalletPassword, c.WalletPasswordEnv, c.WalletPasswordFile, deps.LookupEnv); err != nil {
			return nil, err
		}
	}
	inner, ok := goora.NewConnector(driverURL(c.User, pw, descriptor, wallet, walletPW)).(*goora.OracleConnector)
	if !ok {
		return nil, errors.New("oracle: unexpected go-ora connector type")
	}
	if c.TCPConnectTimeout != nil {
		// A dialer bounds only the TCP connect. go-ora's own TIMEOUT option
		// would also become the deadline of every later read and write.
		inner.Dialer(&net.Dialer{Timeout: time.Duration(*c.TCPConnectTimeout * float64(time.Second))})
	}
	conn := &connector{inner: inner, mode: model.Mode}
	if c.RetryCount != nil {
		conn.retries = *c.RetryCount
	}
	if c.RetryDelay != nil {
		conn.delay = time.Duration(*c.RetryDelay) * time.Second
	}
	if c.DisableParallelDML {
		conn.setup = append(conn.setup, "alter session disable parallel dml")
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(c.PoolMax)
	db.SetMaxIdleConns(c.PoolMin)

	s, err := newSink(model, c, db, deps.Meter())
	if err != nil {
		db.Close()
		return nil, err
	}
	if c.AutoCreate {
		if err := s.autoCreate(ctx, c); err != nil {
			db.Close()
			return nil, err
		}
	}
	if err := model.StartMapped(ctx, s.catalog(), false); err != nil {
		db.Close()
		if errors.Is(err, sink.ErrConfig) {
			return nil, err
		}
		return nil, fmt.Errorf("oracle: %w", s.classify(err))
	}
	return s, nil
}

// oraColumnExists is ORA-01430: the column being added already exists.
const oraColumnExists = 1430

// catalog is the mapped layout's start-up access: DDL, and the columns of
// all_tab_columns rendered as type texts ("number(19,0)", "varchar2(36)",
// "timestamp(9) with time zone").
func (s *Sink) catalog() sqlmodel.Catalog {
	return sqlmodel.Catalog{
		Exec: func(ctx context.Context, q string) error {
			_, err := s.db.ExecContext(ctx, q)
			return err
		},
		Columns: func(ctx context.Context, table string) (map[string]string, error) {
			owner, name, ok := strings.Cut(table, ".")
			if !ok {
				owner, name = "", table
			}
			rows, err := s.db.QueryContext(ctx, columnsQuery, owner, name)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			var out map[string]string
			for rows.Next() {
				var col, typ string
				var prec, scale, length sql.NullInt64
				if err := rows.Scan(&col, &typ, &prec, &scale, &length); err != nil {
					return nil, err
				}
				if out == nil {
					out = map[string]string{}
				}
				out[strings.ToLower(col)] = oracleType(typ, prec, scale, length)
			}
			return out, rows.Err()
		},
		Exists: func(err error) bool {
			code, ok := errorCode(err)
			return ok && (code == oraColumnExists || code == oraNameUsed)
		},
	}
}

// columnsQuery reads a table's columns; an unqualified name is the
// connecting user's.
const columnsQuery = `select column_name, data_type, data_precision, data_scale, char_length from all_tab_columns
where owner = coalesce(:1, user) and table_name = :2`

// oracleType renders an all_tab_columns row as the type text the mapped
// layout's check compares.
func oracleType(typ string, prec, scale, length sql.NullInt64) string {
	t := strings.ToLower(typ)
	switch t {
	case "number":
		if prec.Valid {
			return fmt.Sprintf("number(%d,%d)", prec.Int64, scale.Int64)
		}
	case "varchar2", "nvarchar2", "char", "nchar", "raw":
		if length.Valid {
			return fmt.Sprintf("%s(%d)", t, length.Int64)
		}
	}
	return t
}

// newSink builds the Sink around db (nil in tests that drive the Writer
// with a fake transaction), with its metrics registered on m.
func newSink(model *sqlmodel.Model, c Config, db *sql.DB, m sink.Metrics) (*Sink, error) {
	s := &Sink{model: model, db: db, plans: map[*sqlmodel.Table]plan{}, staging: c.Staging.Enabled}
	var stage, batchCol string
	if c.Staging.Enabled && c.Staging.Table != nil {
		d := sqlmodel.Oracle
		stage, batchCol = d.Fold(*c.Staging.Table), d.Fold(c.Staging.BatchIDColumn)
	}
	for _, t := range model.Tables {
		if t.Mapped == nil {
			s.plans[t] = newPlan(model, t, stage, batchCol, c.Staging.Cleanup == CleanupDeleteOnSuccess)
		}
	}
	s.m = sqlmodel.NewDBMetrics(m, sqlmodel.Oracle, "one array-bound statement", "ORA-00001")
	s.w = sqlmodel.Writer{
		Model:    model,
		Begin:    s.begin,
		Classify: s.classify,
		// Repeated keys in one batch are reduced before the statement:
		// the staging MERGE cannot match one target row twice (ORA-30926)
		// nor insert one key twice (ORA-00001, Temporary in insert_ignore,
		// which would retry forever). insert and append keep every row so
		// that the database reports the violation.
		Reduce:  true,
		Observe: s.m.Observe,
	}
	return s, nil
}

// autoCreate runs the recommended DDL for every table and, with staging,
// for the staging table; ORA-00955 (the name exists) is ignored.
func (s *Sink) autoCreate(ctx context.Context, c Config) error {
	stmts := make([]string, 0, len(s.model.Tables)+1)
	names := make([]string, 0, cap(stmts))
	for _, t := range s.model.Tables {
		stmts = append(stmts, ddl(s.model, t))
		names = append(names, t.Name)
	}
	if c.Staging.Enabled && c.Staging.Table != nil {
		d := sqlmodel.Oracle
		st := d.Fold(*c.Staging.Table)
		stmts = append(stmts, s.model.StagingDDL(st, d.Fold(c.Staging.BatchIDColumn)))
		names = append(names, st)
	}
	for i, q := range stmts {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			if code, ok := errorCode(err); ok && code == oraNameUsed {
				continue
			}
			return fmt.Errorf("oracle: create table %s: %w", names[i], s.classify(err))
		}
	}
	return nil
}

// Type returns "oracle".
func (s *Sink) Type() string { return "oracle" }

// WriteBatch writes batch in one transaction (docs/library.md#the-sink-boundary, docs/sql.md, docs/oracle.md): per
// table one array-bound execution of the mode's statement (or the staging
// insert, MERGE and cleanup), then COMMIT. Calls may run concurrently,
// each on its own connection.
func (s *Sink) WriteBatch(ctx context.Context, batch []*sink.Envelope) []sink.Result {
	return s.w.WriteBatch(ctx, batch)
}

// execer is the part of *sqlmodel.ConnTx a transaction uses; tests provide
// a fake.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	Commit() error
	Rollback() error
}

// begin starts a transaction on a connection of its own (see
// sqlmodel.BeginConn: COMMIT is kept out of reach of ctx).
func (s *Sink) begin(ctx context.Context) (sqlmodel.Tx, error) {
	c, err := sqlmodel.BeginConn(ctx, s.db)
	if err != nil {
		return nil, err
	}
	return &tx{s: s, x: c}, nil
}

// tx is one transaction on one connection. Counters for the metrics are
// collected per transaction and published only after COMMIT succeeds.
type tx struct {
	s *Sink
	// x is a *sqlmodel.ConnTx, whose Commit and Rollback also return the
	// connection to the pool.
	x execer
	// newBatchID returns a staging batch id; nil means batchID.
	newBatchID func() string

	n sqlmodel.ModeCounts
}

// batchID returns 32 random hex characters (docs/oracle.md).
func batchID() string {
	b := make([]byte, 16)
	rand.Read(b) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b)
}

func (t *tx) exec(ctx context.Context, q string, args []namedArg) (sql.Result, error) {
	a := make([]any, len(args))
	for i, n := range args {
		a[i] = sql.Named(n.Name, n.Value)
	}
	start := time.Now()
	res, err := t.x.ExecContext(ctx, q, a...)
	t.s.m.Execute.Observe(time.Since(start).Seconds())
	return res, err
}

// Exec writes the rows of g (already reduced by the Writer) and returns
// the number of rows that were new to the table or rewritten, so that the
// Writer's "attempted − affected" counts duplicates.
func (t *tx) Exec(ctx context.Context, g sqlmodel.Group) (int64, error) {
	if g.Table.Mapped != nil {
		return t.execMapped(ctx, g)
	}
	p := t.s.plans[g.Table]
	mode := t.s.model.Mode
	var affected int64
	known := true
	add := func(res sql.Result) {
		n, err := res.RowsAffected()
		if err != nil || n < 0 {
			known = false
			return
		}
		affected += n
	}
	if t.s.staging {
		// A batch id per table group: with cleanup keep, a later group of
		// the same transaction must not merge an earlier group's rows into
		// its own table.
		newID := t.newBatchID
		if newID == nil {
			newID = batchID
		}
		id := newID()
		for _, chunk := range chunks(g.Rows) {
			ids := make([]any, len(chunk))
			for i := range ids {
				ids[i] = id
			}
			args := append([]namedArg{{Name: batchBind, Value: ids}}, rowBinds(chunk)...)
			if _, err := t.exec(ctx, p.stageInsert, args); err != nil {
				return 0, fmt.Errorf("insert into staging (%s): %w", sqlmodel.SeqRange(chunk), err)
			}
		}
		res, err := t.exec(ctx, p.stageMerge, []namedArg{{Name: batchBind, Value: id}})
		if err != nil {
			return 0, fmt.Errorf("merge from staging (batch %s): %w", id, err)
		}
		add(res)
		if p.stageDelete != "" {
			if _, err := t.exec(ctx, p.stageDelete, []namedArg{{Name: batchBind, Value: id}}); err != nil {
				return 0, fmt.Errorf("delete from staging (batch %s): %w", id, err)
			}
		}
	} else {
		for _, chunk := range chunks(g.Rows) {
			res, err := t.exec(ctx, p.write, rowBinds(chunk))
			if err != nil {
				return 0, fmt.Errorf("%s (%s): %w", mode, sqlmodel.SeqRange(chunk), err)
			}
			add(res)
		}
	}
	if !known {
		return -1, nil
	}
	n := int64(len(g.Rows))
	if affected == 0 && mode.NeedsKey() {
		// Nothing was written: every row was already present.
		for _, r := range g.Rows {
			r.Duplicate = true
		}
	}
	dups := int(max(0, n-affected))
	switch {
	case mode == sqlmodel.InsertIgnore:
		t.n.Ignored += dups
	case mode == sqlmodel.Merge && len(g.Table.Update) == 0:
		t.n.Noop += dups
	case mode == sqlmodel.Merge:
		// Inserted and updated rows both count as affected: which
		// happened to each row is unknown.
		t.n.Unknown += len(g.Rows)
	}
	if mode == sqlmodel.Merge {
		t.n.Rows += len(g.Rows)
	}
	return affected, nil
}

// Commit commits; the commit time is observed from the Writer's Stats.
func (t *tx) Commit(context.Context) error {
	if err := t.x.Commit(); err != nil {
		return err
	}
	t.s.m.Publish(t.n)
	return nil
}

// Rollback rolls back.
func (t *tx) Rollback() error { return t.x.Rollback() }

// Healthcheck runs "select 1 from dual" (docs/oracle.md) and, so that
// test-sink reports a missing table or column before the first message
// does, a query reading every mapped column of each table (and the staging
// table) that returns no rows.
func (s *Sink) Healthcheck(ctx context.Context) error {
	var one int
	if err := s.db.QueryRowContext(ctx, "select 1 from dual").Scan(&one); err != nil {
		return fmt.Errorf("oracle healthcheck: %w", s.classify(err))
	}
	for _, q := range s.healthQueries() {
		rows, err := s.db.QueryContext(ctx, q)
		if err != nil {
			return fmt.Errorf("oracle healthcheck: %s: %w", q, s.classify(err))
		}
		rows.Close()
	}
	return nil
}

// execMapped writes a mapped group one statement per row (a merge, or an
// insert in modes insert and append; a delete for a delete), in delivery
// order, with positional binds; staging does not apply to mapped rows.
func (t *tx) execMapped(ctx context.Context, g sqlmodel.Group) (int64, error) {
	stmts := sqlmodel.MappedStmts(g)
	affected := make([]int64, len(stmts))
	for i, st := range stmts {
		start := time.Now()
		res, err := t.x.ExecContext(ctx, st.SQL, st.Args...)
		t.s.m.Execute.Observe(time.Since(start).Seconds())
		if err != nil {
			return 0, fmt.Errorf("row %d of the batch: %w", g.Rows[i].Index, err)
		}
		if affected[i], err = res.RowsAffected(); err != nil {
			affected[i] = -1
		}
	}
	return sqlmodel.ApplyAffected(g, affected), nil
}

// healthQueries are the per-table probes of Healthcheck.
func (s *Sink) healthQueries() []string {
	var out []string
	for _, t := range s.model.Tables {
		out = append(out, "select "+strings.Join(s.model.TableColumns(t), ", ")+" from "+t.Name+" where 1 = 0")
	}
	return out
}

// chunks splits rows into consecutive array-bound executions of at most
// maxArrayRows rows.
func chunks(rows []*sqlmodel.Row) [][]*sqlmodel.Row {
	var out [][]*sqlmodel.Row
	for len(rows) > 0 {
		k := min(maxArrayRows, len(rows))
		out = append(out, rows[:k:k])
		rows = rows[k:]
	}
	return out
}

// Stop closes the connection pool. The runner calls it once, after the
// last WriteBatch; later calls do nothing.
func (s *Sink) Stop(context.Context) error {
	var err error
	s.stopOnce.Do(func() {
		if s.db != nil {
			err = s.db.Close()
		}
	})
	return err
}

// connector wraps go-ora's connector with what the driver does not do
// itself: connection retries (retry_count, retry_delay) and the per-session
// set-up statements (disable_parallel_dml).
type connector struct {
	inner   driver.Connector
	mode    sqlmodel.Mode
	retries int
	delay   time.Duration
	setup   []string
	// wait sleeps d or until ctx ends; nil means a timer. Tests replace it.
	wait func(ctx context.Context, d time.Duration) error
}

// Connect opens a session, retrying up to retries times with delay between
// attempts. Failures that another attempt cannot fix (bad credentials,
// unknown service: the Destination class) are not retried.
func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	for attempt := 0; ; attempt++ {
		conn, err := c.inner.Connect(ctx)
		if err == nil {
			if err := c.prepare(ctx, conn); err != nil {
				conn.Close()
				return nil, err
			}
			return conn, nil
		}
		if attempt >= c.retries || ctx.Err() != nil {
			return nil, err
		}
		if code, ok := errorCode(err); ok && classifyCode(c.mode, code) == classDestination {
			return nil, err
		}
		if err := c.sleep(ctx, c.delay); err != nil {
			return nil, err
		}
	}
}

func (c *connector) sleep(ctx context.Context, d time.Duration) error {
	if c.wait != nil {
		return c.wait(ctx, d)
	}
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// prepare runs the set-up statements on a new session.
func (c *connector) prepare(ctx context.Context, conn driver.Conn) error {
	if len(c.setup) == 0 {
		return nil
	}
	ex, ok := conn.(driver.ExecerContext)
	if !ok {
		return errors.New("oracle: driver connection cannot execute session set-up")
	}
	for _, q := range c.setup {
		if _, err := ex.ExecContext(ctx, q, nil); err != nil {
			return fmt.Errorf("oracle session set-up %q: %w", q, err)
		}
	}
	return nil
}

// Driver returns go-ora's driver.
func (c *connector) Driver() driver.Driver { return c.inner.Driver() }

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
	return s.model.ReadDB(ctx, s.db, name, limit, func(r sqlmodel.StoredRow) error {
		return fn(name, r.Stream, r.Seq, r.Payload, r.Metadata)
	})
}
