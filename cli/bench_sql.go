package cli

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sinks/mysql"
	"github.com/nats-sinks/nats-sink/sinks/postgres"
	"github.com/nats-sinks/nats-sink/sinks/sqlite"
	"github.com/nats-sinks/nats-sink/sqlconfig"
)

// The bare SQL phases (docs/performance.md#how-to-reproduce) write the rows
// a SQL sink's pipeline writes — built once, before the clock starts, by
// the model the sink itself builds rows with (internal/sqlmodel) — into a
// fresh table of the same layout, in transactions of the pipeline's batch
// size, with no NATS: the database's own bound for that pipeline. Methods:
//
//   - copy (PostgreSQL): binary COPY of each batch straight into the table;
//   - unnest (PostgreSQL, audit layout): one insert … select from unnest of
//     the column arrays, with the mode's conflict clause (the sink's
//     statement);
//   - values: multi-row insert … values with the mode's conflict clause,
//     one statement per batch (split under the database's parameter limit),
//     prepared once per text;
//   - values100: the same in statements of at most 100 rows (what the
//     MySQL sink measured fastest for itself);
//   - prepared: the single-row statement, prepared once, run per row
//     (PostgreSQL: all rows of a batch pipelined in one round trip).
//
// PostgreSQL and MySQL run as many writers as the pipeline has batches in
// flight (at most the pool size), each on its own connection; SQLite one.
var bareMethodsOf = map[sqlmodel.Dialect][]string{
	sqlmodel.Postgres: {"copy", "unnest", "values", "values100", "prepared"},
	sqlmodel.MySQL:    {"values", "values100", "prepared"},
	sqlmodel.SQLite:   {"values", "values100", "prepared"},
}

// bestBare is each dialect's fastest method, as measured on the 2-core
// machine with `--bare-sql all` (docs/performance.md).
var bestBare = map[sqlmodel.Dialect]string{
	sqlmodel.Postgres: "copy",
	sqlmodel.MySQL:    "values100",
	sqlmodel.SQLite:   "values100",
}

// bareMethods checks a --bare-sql value and returns the methods it names
// ("best", "all" or "off" as such).
func bareMethods(spec string) ([]string, error) {
	switch spec {
	case "best", "all", "off":
		return []string{spec}, nil
	}
	var out []string
	for _, m := range strings.Split(spec, ",") {
		m = strings.TrimSpace(m)
		switch m {
		case "copy", "unnest", "values", "values100", "prepared":
			out = append(out, m)
		default:
			return nil, fmt.Errorf("--bare-sql must be best, all, off, or methods copy, unnest, values, values100, prepared (got %q)", m)
		}
	}
	return out, nil
}

// bareSQLPhases runs the bare phases of sinkType when it is a SQL sink:
// sqlite without --config, or the configuration's postgres, mysql or
// sqlite sink.
func (o *benchOptions) bareSQLPhases(ctx context.Context, env *Env, t *benchTarget, sinkType string) ([]benchRow, error) {
	if o.bareSQL == "off" {
		return nil, nil
	}
	var opener sink.Opener
	switch {
	case o.cfg != nil && sinkType == o.cfg.Sink.Type:
		opener = o.cfg.Sink.Opener
	case o.cfg == nil && sinkType == "sqlite":
		cfg, _, err := o.phaseConfig(env, t, sinkType, "bench-bare")
		if err != nil {
			return nil, err
		}
		opener = cfg.Sink.Opener
	default:
		return nil, nil
	}
	lookup := env.Getenv
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	b, err := openBare(ctx, opener, lookup)
	if b == nil || err != nil {
		return nil, err
	}
	defer b.close(context.WithoutCancel(ctx), o.keep)
	methods, _ := bareMethods(o.bareSQL)
	switch methods[0] {
	case "best":
		methods = []string{bestBare[b.d]}
	case "all":
		methods = bareMethodsOf[b.d]
	}
	var rows []benchRow
	for _, m := range methods {
		if !b.supports(m) {
			continue
		}
		row, err := b.phase(ctx, o, t, m)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// bareDB is one bare target: the model, the fresh table's statements and
// the connections.
type bareDB struct {
	d     sqlmodel.Dialect
	model *sqlmodel.Model
	table *sqlmodel.Table
	id    string
	// cols are the row's folded column names in bind order; head, tuple
	// and tail make the single-row statement "head values tuple tail",
	// tuple with PostgreSQL's placeholders $1….
	cols              []string
	head, tuple, tail string
	// pool is the most connections the sink would use.
	pool int

	pg      *pgx.ConnConfig
	db      *sql.DB // mysql, sqlite
	created []string
	file    string // sqlite: the bare database file

	// messages and batch are the phase's (for sizes); stmts holds the
	// prepared statements of the database/sql dialects by text.
	messages, batch int
	mu              sync.Mutex
	stmts           map[string]*sql.Stmt
}

// openBare compiles the model of opener's SQL sink for a fresh table and
// connects with its connection keys; nil (no error) for any other sink.
func openBare(ctx context.Context, opener sink.Opener, lookup func(string) (string, bool)) (*bareDB, error) {
	b := &bareDB{id: randomHex(8)}
	var shared sqlconfig.Shared[sqlconfig.UpsertRoute]
	var opts sqlmodel.Options
	switch c := opener.(type) {
	case postgres.Config:
		b.d, shared, b.pool = sqlmodel.Postgres, c.Shared, c.PoolSize
		opts = sqlmodel.Options{Mode: sqlmodel.Mode(c.Mode), UpdateColumns: c.UpsertUpdateColumns}
		pw, _, err := sqlmodel.ResolveSecret("password", c.Password, c.PasswordEnv, c.PasswordFile, lookup)
		if err != nil {
			return nil, err
		}
		conn := fmt.Sprintf("host=%s port=%d dbname=%s user=%s sslmode=%s", pgQuote(c.Host), c.Port, pgQuote(c.Database), pgQuote(c.User), c.SSLMode)
		for k, v := range map[string]*string{"sslrootcert": c.SSLRootCert, "sslcert": c.SSLCert, "sslkey": c.SSLKey} {
			if v != nil {
				conn += " " + k + "=" + pgQuote(*v)
			}
		}
		if b.pg, err = pgx.ParseConfig(conn); err != nil {
			return nil, fmt.Errorf("bare postgres: %w", err)
		}
		b.pg.Password = pw
	case mysql.Config:
		b.d, shared, b.pool = sqlmodel.MySQL, c.Shared, c.PoolSize
		opts = sqlmodel.Options{Mode: sqlmodel.Mode(c.Mode), UpdateColumns: c.UpsertUpdateColumns}
		pw, _, err := sqlmodel.ResolveSecret("password", c.Password, c.PasswordEnv, c.PasswordFile, lookup)
		if err != nil {
			return nil, err
		}
		dc := gomysql.NewConfig()
		dc.User, dc.Passwd, dc.Net, dc.DBName = c.User, pw, "tcp", c.Database
		dc.Addr = net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
		dc.Logger = &gomysql.NopLogger{}
		if !c.SSLDisabled {
			dc.TLSConfig = "preferred" // as the sink without ssl_* files
		}
		conn, err := gomysql.NewConnector(dc)
		if err != nil {
			return nil, fmt.Errorf("bare mysql: %w", err)
		}
		b.db = sql.OpenDB(conn)
	case sqlite.Config:
		b.d, shared, b.pool = sqlmodel.SQLite, c.Shared, 1
		opts = sqlmodel.Options{Mode: sqlmodel.Mode(c.Mode), UpdateColumns: c.UpsertUpdateColumns}
		abs, err := filepath.Abs(c.Path)
		if err != nil {
			return nil, fmt.Errorf("bare sqlite: %w", err)
		}
		// Next to the sink's database: the same disk.
		b.file = filepath.Join(filepath.Dir(abs), "nats-sink-bench-bare-"+b.id+".db")
		db, err := sql.Open("sqlite", fmt.Sprintf("file:%s?_pragma=busy_timeout(%d)&_pragma=page_size(16384)&_journal_mode=%s&_synchronous=%s",
			strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(b.file), c.BusyTimeoutMS, strings.ToUpper(c.JournalMode), strings.ToUpper(c.Synchronous)))
		if err != nil {
			return nil, fmt.Errorf("bare sqlite: %w", err)
		}
		db.SetMaxOpenConns(1)
		b.db = db
	default:
		return nil, nil
	}
	// The sink's layout, mode, columns and key on a fresh table in the
	// same schema; routes dropped (every bench message goes to one table).
	name := "nats_sink_bench_bare_" + b.id
	if i := strings.LastIndex(shared.Table, "."); i >= 0 {
		name = shared.Table[:i+1] + name
	}
	shared.Table, shared.TableRoutes = b.d.Fold(name), nil
	opts.AutoCreate = true
	m, err := sqlmodel.Compile(&shared, b.d, opts)
	if err != nil {
		b.close(ctx, false)
		return nil, fmt.Errorf("bare %s: %w", b.d, err)
	}
	b.model, b.table = m, m.Tables[0]
	if err := b.create(ctx); err != nil {
		b.close(ctx, false)
		return nil, fmt.Errorf("bare %s: create table %s: %w", b.d, b.table.Name, err)
	}
	b.statement()
	return b, nil
}

func pgQuote(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// create makes the table with the sink's DDL (mapped: its start-up with
// auto_create, which also prepares the row statements).
func (b *bareDB) create(ctx context.Context) error {
	exec := func(ctx context.Context, q string) error {
		if b.pg != nil {
			conn, err := pgx.ConnectConfig(ctx, b.pg)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			_, err = conn.Exec(ctx, q, pgx.QueryExecModeSimpleProtocol)
			return err
		}
		_, err := b.db.ExecContext(ctx, q)
		return err
	}
	b.created = append(b.created, b.table.Name)
	if b.table.Mapped == nil {
		return exec(ctx, b.model.DDL(b.table))
	}
	return b.model.StartMapped(ctx, sqlmodel.Catalog{
		Exec:    exec,
		Columns: b.columns,
		Exists:  func(error) bool { return false },
	}, true)
}

// columns reads the table's column types as the sinks' start-up checks do.
func (b *bareDB) columns(ctx context.Context, table string) (map[string]string, error) {
	var (
		rows interface {
			Next() bool
			Scan(...any) error
			Err() error
		}
		closeRows func()
	)
	switch b.d {
	case sqlmodel.Postgres:
		conn, err := pgx.ConnectConfig(ctx, b.pg)
		if err != nil {
			return nil, err
		}
		defer conn.Close(ctx)
		r, err := conn.Query(ctx, `select a.attname::text, pg_catalog.format_type(a.atttypid, a.atttypmod)
from pg_catalog.pg_attribute a where a.attrelid = pg_catalog.to_regclass($1) and a.attnum > 0 and not a.attisdropped`,
			pgx.QueryExecModeExec, b.d.Quote(table))
		if err != nil {
			return nil, err
		}
		rows, closeRows = r, r.Close
	case sqlmodel.MySQL:
		schema, name, ok := strings.Cut(table, ".")
		if !ok {
			schema, name = "", table
		}
		r, err := b.db.QueryContext(ctx, `select column_name, column_type from information_schema.columns
where table_schema = coalesce(nullif(?, ''), database()) and table_name = ?`, schema, name)
		if err != nil {
			return nil, err
		}
		rows, closeRows = r, func() { r.Close() }
	default:
		r, err := b.db.QueryContext(ctx, "select name, type from pragma_table_info(?)", table)
		if err != nil {
			return nil, err
		}
		rows, closeRows = r, func() { r.Close() }
	}
	defer closeRows()
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

var placeholder = regexp.MustCompile(`\$(\d+)`)

// statement sets the single-row statement: the mapped layout's own, or
// the audit layout's insert with the mode's conflict clause.
func (b *bareDB) statement() {
	d, m, t := b.d, b.model, b.table
	q := d.Quote(t.Name)
	if mp := t.Mapped; mp != nil {
		for _, c := range mp.Cols {
			b.cols = append(b.cols, c.Name)
		}
		i := strings.Index(mp.Insert, ") values (")
		rest := mp.Insert[i+len(") values "):]
		j := strings.IndexByte(rest, ')')
		b.head, b.tuple, b.tail = mp.Insert[:i+1], rest[:j+1], rest[j+1:]
		return
	}
	b.cols = m.AllColumns()
	verb := "insert into "
	if d == sqlmodel.MySQL && m.Mode == sqlmodel.InsertIgnore {
		verb = "insert ignore into "
	}
	b.head = verb + q + " (" + d.QuoteAll(b.cols) + ")"
	ph := make([]string, len(b.cols))
	for i := range ph {
		ph[i] = "?"
		if d == sqlmodel.Postgres {
			ph[i] = "$" + strconv.Itoa(i+1)
		}
	}
	b.tuple = "(" + strings.Join(ph, ", ") + ")"
	key := d.QuoteAll(m.ColumnNames(t.Key))
	var upd []string
	for _, f := range t.Update {
		c := d.Quote(m.Column(f))
		if d == sqlmodel.MySQL {
			upd = append(upd, c+" = values("+c+")")
		} else {
			upd = append(upd, c+" = excluded."+c)
		}
	}
	switch {
	case d == sqlmodel.MySQL && m.Mode == sqlmodel.Upsert && len(upd) > 0:
		b.tail = " on duplicate key update " + strings.Join(upd, ", ")
	case d == sqlmodel.MySQL && m.Mode == sqlmodel.Upsert:
		k := d.Quote(m.Column(t.Key[0]))
		b.tail = " on duplicate key update " + k + " = " + k
	case d != sqlmodel.MySQL && m.Mode == sqlmodel.InsertIgnore:
		b.tail = " on conflict do nothing"
	case d != sqlmodel.MySQL && m.Mode == sqlmodel.Upsert && len(upd) == 0:
		b.tail = " on conflict (" + key + ") do nothing"
	case d != sqlmodel.MySQL && m.Mode == sqlmodel.Upsert:
		b.tail = " on conflict (" + key + ") do update set " + strings.Join(upd, ", ")
	}
}

func (b *bareDB) supports(method string) bool {
	if !slices.Contains(bareMethodsOf[b.d], method) {
		return false
	}
	return method != "unnest" || b.table.Mapped == nil
}

// multi returns the statement inserting n rows at once.
func (b *bareDB) multi(n int) string {
	var s strings.Builder
	s.WriteString(b.head + " values ")
	for k := range n {
		if k > 0 {
			s.WriteString(", ")
		}
		if b.d != sqlmodel.Postgres {
			s.WriteString(b.tuple)
			continue
		}
		off := k * len(b.cols)
		s.WriteString(placeholder.ReplaceAllStringFunc(b.tuple, func(p string) string {
			n, _ := strconv.Atoi(p[1:])
			return "$" + strconv.Itoa(n+off)
		}))
	}
	s.WriteString(b.tail)
	return s.String()
}

// maxRows is the most rows one multi-row statement of method binds.
func (b *bareDB) maxRows(method string) int {
	limit := 65535
	if b.d == sqlmodel.SQLite {
		limit = 32766
	}
	n := max(1, limit/len(b.cols))
	if method == "values100" {
		n = min(n, 100)
	}
	return n
}

// buildRows builds the pipeline's rows of a bench round: one envelope per
// message as the runner receives it (stream, sequence, reply subject),
// then the sink model's bound values (PostgreSQL's JSON texts in jsonb key
// order, as the sink binds them for jsonb columns).
func (b *bareDB) buildRows(o *benchOptions, t *benchTarget) ([][]any, error) {
	var orders sqlmodel.KeyOrders
	if b.d == sqlmodel.Postgres {
		orders = func(*sqlmodel.Table, sqlmodel.Field) jsonx.KeyOrder { return jsonx.JSONBOrder }
	}
	now := time.Now()
	out := make([][]any, o.messages)
	var previous string
	for i := range o.messages {
		seq := i + 1
		reply := fmt.Sprintf("$JS.ACK.%s.bench-bare.1.%d.%d.%d.%d", t.stream, seq, seq, now.UnixNano(), o.messages-seq)
		data := benchPayload(i, o.payloadBytes)
		msg := intake.Message{Subject: t.subject + ".m", Reply: reply, Data: data}
		if o.keys != nil {
			msg.Header = o.keys.headers(msg.Subject, data, previous)
			previous = chainLink(data)
		}
		row, err := b.model.BuildRowOrdered(intake.Build(msg, nil, now), now, orders)
		if err != nil {
			return nil, fmt.Errorf("bare %s: row %d: %w", b.d, seq, err)
		}
		if row.Table.Mapped != nil {
			out[i] = row.M
		} else {
			out[i] = row.Args()
		}
	}
	return out, nil
}

// phase writes the round's rows with method into the table, emptied
// first, and checks that it holds one row per message afterwards.
func (b *bareDB) phase(ctx context.Context, o *benchOptions, t *benchTarget, method string) (benchRow, error) {
	rows, err := b.buildRows(o, t)
	if err != nil {
		return benchRow{}, err
	}
	empty := "truncate table "
	if b.d == sqlmodel.SQLite {
		empty = "delete from "
	}
	if err := b.exec(ctx, empty+b.d.Quote(b.table.Name)); err != nil {
		return benchRow{}, fmt.Errorf("bare %s: empty %s: %w", b.d, b.table.Name, err)
	}
	var batches [][][]any
	for i := 0; i < len(rows); i += o.batchSize {
		batches = append(batches, rows[i:min(i+o.batchSize, len(rows))])
	}
	writers := max(1, min(o.inFlight, b.pool))
	b.messages, b.batch = o.messages, o.batchSize
	if b.db != nil {
		b.db.SetMaxOpenConns(writers)
		b.db.SetMaxIdleConns(writers)
	}
	work := make(chan [][]any)
	errs := make(chan error, writers)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	for range writers {
		ready.Add(1)
		done.Go(func() {
			w, err := b.writer(wctx, method)
			ready.Done()
			if err != nil {
				errs <- err
				cancel()
				return
			}
			defer w.close()
			<-start
			for batch := range work {
				if err := w.write(wctx, batch); err != nil {
					errs <- err
					cancel()
					for range work {
					}
					return
				}
			}
		})
	}
	ready.Wait() // connections and statements before the clock
	mark := markCPU(o.dbProcesses(b.d.String()))
	began := time.Now()
	close(start)
feed:
	for _, batch := range batches {
		select {
		case work <- batch:
		case <-wctx.Done():
			break feed
		}
	}
	close(work)
	done.Wait()
	elapsed := time.Since(began)
	o.noteCPU(fmt.Sprintf("%s (bare, %s)", b.d, method), mark)
	close(errs)
	if err := <-errs; err != nil {
		return benchRow{}, fmt.Errorf("bare %s (%s): %w", b.d, method, err)
	}
	if err := ctx.Err(); err != nil {
		return benchRow{}, err
	}
	n, err := b.count(ctx)
	if err != nil {
		return benchRow{}, fmt.Errorf("bare %s: count: %w", b.d, err)
	}
	if n != o.messages {
		return benchRow{}, fmt.Errorf("bare %s (%s): table %s holds %d rows, want %d", b.d, method, b.table.Name, n, o.messages)
	}
	return benchRow{fmt.Sprintf("%s (bare, %s)", b.d, method), o.messages, elapsed.Seconds()}, nil
}

func (b *bareDB) exec(ctx context.Context, q string) error {
	if b.pg != nil {
		conn, err := pgx.ConnectConfig(ctx, b.pg)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, q)
		return err
	}
	_, err := b.db.ExecContext(ctx, q)
	return err
}

func (b *bareDB) count(ctx context.Context) (int, error) {
	q := "select count(*) from " + b.d.Quote(b.table.Name)
	var n int
	if b.pg != nil {
		conn, err := pgx.ConnectConfig(ctx, b.pg)
		if err != nil {
			return 0, err
		}
		defer conn.Close(ctx)
		err = conn.QueryRow(ctx, q).Scan(&n)
		return n, err
	}
	err := b.db.QueryRowContext(ctx, q).Scan(&n)
	return n, err
}

// close drops the bare table (kept with --keep) and disconnects.
func (b *bareDB) close(ctx context.Context, keep bool) {
	if !keep {
		for _, t := range b.created {
			b.exec(ctx, "drop table if exists "+b.d.Quote(t))
		}
	}
	for _, s := range b.stmts {
		s.Close()
	}
	if b.db != nil {
		b.db.Close()
	}
	if b.file != "" && !keep {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			os.Remove(b.file + suffix)
		}
	}
}

// bareWriter writes one batch per transaction on its own connection.
type bareWriter struct {
	write func(ctx context.Context, rows [][]any) error
	close func()
}

func (b *bareDB) writer(ctx context.Context, method string) (*bareWriter, error) {
	if b.pg != nil {
		conn, err := pgx.ConnectConfig(ctx, b.pg)
		if err != nil {
			return nil, err
		}
		w := &bareWriter{close: func() { conn.Close(context.Background()) }}
		w.write = func(ctx context.Context, rows [][]any) error {
			return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return b.pgWrite(ctx, tx, method, rows) })
		}
		return w, nil
	}
	// Statements prepared on the DB, not on a connection: Tx.StmtContext
	// prepares a DB statement once per pooled connection and reuses it,
	// where a connection's own statement would be prepared again in every
	// transaction.
	prepare := func(ctx context.Context, n int) (*sql.Stmt, error) {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.stmts == nil {
			b.stmts = map[string]*sql.Stmt{}
		}
		q := b.head + " values " + b.tuple + b.tail
		if method != "prepared" {
			q = b.multi(n)
		}
		if s, ok := b.stmts[q]; ok {
			return s, nil
		}
		s, err := b.db.PrepareContext(ctx, q)
		if err != nil {
			return nil, err
		}
		b.stmts[q] = s
		return s, nil
	}
	// Prepare every size the batches need before the clock starts
	// (preparing on the DB while every pooled connection is in a
	// transaction would wait forever).
	for _, n := range b.sizes(method) {
		if _, err := prepare(ctx, n); err != nil {
			return nil, err
		}
	}
	w := &bareWriter{close: func() {}}
	w.write = func(ctx context.Context, rows [][]any) error {
		tx, err := b.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := b.sqlWrite(ctx, tx, method, rows, prepare); err != nil {
			tx.Rollback()
			return err
		}
		return tx.Commit()
	}
	return w, nil
}

// sizes returns the row counts of the statements method runs for the
// phase's batches.
func (b *bareDB) sizes(method string) []int {
	if method == "prepared" {
		return []int{1}
	}
	var out []int
	for i := 0; i < b.messages; i += b.batch {
		n := min(b.batch, b.messages-i)
		step := b.maxRows(method)
		for j := 0; j < n; j += step {
			if k := min(step, n-j); !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	return out
}

// sqlWrite writes rows in tx (MySQL, SQLite).
func (b *bareDB) sqlWrite(ctx context.Context, tx *sql.Tx, method string, rows [][]any, prepare func(context.Context, int) (*sql.Stmt, error)) error {
	if method == "prepared" {
		s, err := prepare(ctx, 1)
		if err != nil {
			return err
		}
		ts := tx.StmtContext(ctx, s)
		for _, r := range rows {
			if _, err := ts.ExecContext(ctx, r...); err != nil {
				return err
			}
		}
		return nil
	}
	step := b.maxRows(method)
	for i := 0; i < len(rows); i += step {
		chunk := rows[i:min(i+step, len(rows))]
		s, err := prepare(ctx, len(chunk))
		if err != nil {
			return err
		}
		if _, err := tx.StmtContext(ctx, s).ExecContext(ctx, flatten(chunk)...); err != nil {
			return err
		}
	}
	return nil
}

func flatten(rows [][]any) []any {
	out := make([]any, 0, len(rows)*len(rows[0]))
	for _, r := range rows {
		out = append(out, r...)
	}
	return out
}

// pgWrite writes rows in tx (PostgreSQL).
func (b *bareDB) pgWrite(ctx context.Context, tx pgx.Tx, method string, rows [][]any) error {
	switch method {
	case "copy":
		_, err := tx.CopyFrom(ctx, pgx.Identifier(strings.Split(b.table.Name, ".")), b.cols, pgx.CopyFromRows(rows))
		return err
	case "unnest":
		_, err := tx.Exec(ctx, b.unnestSQL(), unnestArgs(rows)...)
		return err
	case "prepared":
		var batch pgx.Batch
		q := b.head + " values " + b.tuple + b.tail
		for _, r := range rows {
			batch.Queue(q, r...)
		}
		return tx.SendBatch(ctx, &batch).Close()
	}
	step := b.maxRows(method)
	for i := 0; i < len(rows); i += step {
		chunk := rows[i:min(i+step, len(rows))]
		if _, err := tx.Exec(ctx, b.multi(len(chunk)), flatten(chunk)...); err != nil {
			return err
		}
	}
	return nil
}

// unnestSQL is the audit layout's insert … select from unnest of one
// text[] or bigint[] array per column, JSON columns cast to jsonb.
func (b *bareDB) unnestSQL() string {
	d, m := b.d, b.model
	arrays := make([]string, sqlmodel.NumFields)
	sel := make([]string, sqlmodel.NumFields)
	for f := range sqlmodel.NumFields {
		typ := "text[]"
		if f.Integer() {
			typ = "bigint[]"
		}
		arrays[f] = fmt.Sprintf("$%d::%s", int(f)+1, typ)
		sel[f] = d.Quote(m.Column(f))
		if f.JSON() {
			sel[f] += "::jsonb"
		}
	}
	return b.head + " select " + strings.Join(sel, ", ") + " from unnest(" + strings.Join(arrays, ", ") + ") as u (" +
		d.QuoteAll(b.cols) + ")" + b.tail
}

// unnestArgs transposes audit rows (nil, string or int64 values) into one
// array per column.
func unnestArgs(rows [][]any) []any {
	args := make([]any, sqlmodel.NumFields)
	for f := range sqlmodel.NumFields {
		if f.Integer() {
			col := make([]*int64, len(rows))
			for i, r := range rows {
				if v, ok := r[f].(int64); ok {
					col[i] = &v
				}
			}
			args[f] = col
			continue
		}
		col := make([]*string, len(rows))
		for i, r := range rows {
			if v, ok := r[f].(string); ok {
				col[i] = &v
			}
		}
		args[f] = col
	}
	return args
}
