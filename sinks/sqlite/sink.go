package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
	"github.com/nats-sinks/nats-sink/sink"
)

var (
	_ sink.Sink          = (*Sink)(nil)
	_ sink.HealthChecker = (*Sink)(nil)
)

// Sink writes batches into one SQLite database file. WriteBatch calls are
// serialised on one writer connection: SQLite has one writer at a time
// anyway, and one connection keeps BEGIN IMMEDIATE, the prepared
// statements and COMMIT on the same handle.
type Sink struct {
	cfg   Config
	model *sqlmodel.Model
	path  string // absolute database path
	db    *sql.DB

	// mu serialises every use of conn and stmts. A write holds it from
	// Begin to Commit or Rollback only: rows are built before, so that
	// concurrent WriteBatch calls build theirs while another batch is in
	// the database (on two cores this overlaps the JSON encoding with
	// SQLite's work).
	mu    sync.Mutex
	conn  *sql.Conn
	stmts map[*sqlmodel.Table]insert
	// chunks holds each table's multi-row statement of chunk rows (see
	// Exec); chunk is chunkRows, 1 in tests that compare with row-by-row
	// execution.
	chunks map[*sqlmodel.Table]*sql.Stmt
	chunk  int
	// mapped holds the mapped layout's prepared statements by text.
	mapped map[string]*sql.Stmt
	// open is true while a transaction may be open on conn (a failed
	// ROLLBACK leaves it so); the next Begin rolls it back first.
	open bool

	w        sqlmodel.Writer
	commit   sink.Histogram
	dups     sink.Counter
	deletes  sink.Counter
	stopOnce sync.Once
}

// New validates c (Config.Validate), opens (and creates) the database,
// applies the durability pragmas and, with auto_create, creates the sink's
// tables. Build c from Default(): invalid values are reported as a
// *sink.ConfigError.
func New(ctx context.Context, c Config, deps sink.Deps) (*Sink, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	model, err := sqlmodel.Compile(&c.Shared, sqlmodel.SQLite, c.options())
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(c.Path)
	if err != nil {
		return nil, fmt.Errorf("sqlite path %s: %w", c.Path, err)
	}
	if err := makeParent(abs, c.CreateDirectory); err != nil {
		return nil, err
	}
	if err := writable(abs); err != nil {
		return nil, err
	}
	if err := createFile(abs); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", dsn(abs, c))
	if err != nil {
		return nil, fmt.Errorf("open sqlite database %s: %w", abs, err)
	}
	// One connection: SQLite allows one writer, and a second pooled
	// connection would only wait on the first one's lock.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	s := &Sink{cfg: c, model: model, path: abs, db: db, stmts: map[*sqlmodel.Table]insert{}, chunks: map[*sqlmodel.Table]*sql.Stmt{}, chunk: chunkRows, mapped: map[string]*sql.Stmt{}}
	if s.conn, err = db.Conn(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open sqlite database %s: %w", abs, classify(model.Mode, err))
	}
	if err := s.setup(ctx); err != nil {
		s.conn.Close()
		db.Close()
		return nil, err
	}
	m := deps.Meter()
	s.commit = sqlmodel.Histogram(m, "sqlite_commit_seconds", "Time spent in SQLite COMMIT.")
	s.dups = sqlmodel.Counter(m, "sqlite_duplicates_total", "Rows SQLite found already present (insert_ignore, or upsert without update columns).")
	s.deletes = sqlmodel.DeletesCounter(m, sqlmodel.SQLite)
	s.w = sqlmodel.Writer{
		Model:    model,
		Begin:    s.begin,
		Classify: func(err error) error { return classify(model.Mode, err) },
		Observe: func(st sqlmodel.Stats) {
			s.commit.Observe(st.Commit.Seconds())
			s.dups.Add(st.Duplicates)
			s.deletes.Add(st.Deletes)
		},
	}
	return s, nil
}

// dsn builds the modernc DSN. The path is a "file:" URI, so the characters
// URI syntax gives meaning to are percent-encoded; the pragmas come from
// validated enums and an integer, never from free text.
//
// modernc runs the _pragma list (busy_timeout first, the rest sorted by
// name) before the _journal_mode and _synchronous keys, so page_size is
// set before journal_mode=WAL writes the first page of a new database:
// page_size only takes effect on a database that has no content yet, and
// an existing file keeps its own.
func dsn(abs string, c Config) string {
	r := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")
	return fmt.Sprintf("file:%s?_pragma=busy_timeout(%d)&_pragma=page_size(%d)&_journal_mode=%s&_synchronous=%s",
		r.Replace(abs), c.BusyTimeoutMS, pageSize, strings.ToUpper(c.JournalMode), strings.ToUpper(c.Synchronous))
}

// pageSize is the page size of databases the sink creates. Rows of the
// relational layout are about 2 KB: with SQLite's default 4 KB pages
// every page holds two rows, and each commit writes one WAL frame (one
// write call and checksum) per page. 16 KB pages hold eight rows; in our
// measurements they cut the sink's CPU per row by about a fifth
// (docs/performance.md). 8 KB gained less, 32 and 64 KB no more.
const pageSize = 16384

// makeParent creates the database's parent directory when allowed.
func makeParent(abs string, create bool) error {
	dir := filepath.Dir(abs)
	st, err := os.Stat(dir)
	switch {
	case err == nil && !st.IsDir():
		return &sink.ConfigError{Problems: []sink.Problem{{Path: "path", Message: fmt.Sprintf("parent %s exists and is not a directory", dir)}}}
	case err == nil:
		return nil
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("sqlite path %s: %w", abs, err)
	case !create:
		return &sink.ConfigError{Problems: []sink.Problem{{Path: "path", Message: fmt.Sprintf("directory %s does not exist and create_directory is false", dir)}}}
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("create sqlite directory %s: %w", dir, err)
	}
	return nil
}

// createFile creates a missing database file, empty and with mode 0600
// (SQLite would create it 0644 less the umask): rows hold message
// payloads, which the file sink also keeps 0600. SQLite gives the -wal and
// -shm files it creates next to it the database file's mode. An existing
// file keeps its mode: the operator chose it.
func createFile(abs string) error {
	f, err := os.OpenFile(abs, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case errors.Is(err, os.ErrExist):
		return nil
	case err != nil:
		return fmt.Errorf("create sqlite database %s: %w", abs, err)
	}
	return f.Close()
}

// writable reports a database file or directory the process cannot write
// (read-only file system, permissions) as a Destination error. SQLite would
// otherwise open such a file read-only without complaint, and BEGIN
// IMMEDIATE succeeds on it too: only the first write would fail.
func writable(abs string) error {
	for _, p := range []string{abs, filepath.Dir(abs)} {
		// The directory matters as much as the file: the journal and WAL
		// files are created next to it.
		if err := unix.Access(p, unix.W_OK); err != nil && !errors.Is(err, unix.ENOENT) {
			return sink.AsDestination(fmt.Errorf("sqlite %s is not writable: %w", p, err))
		}
	}
	return nil
}

// setup verifies that the pragmas took effect and runs the DDL.
func (s *Sink) setup(ctx context.Context) error {
	// The pragmas run when the connection opens; SQLite silently keeps
	// another journal mode when it cannot switch (e.g. WAL on some file
	// systems), so the durable settings are read back, not assumed.
	var jm string
	var sync int
	if err := s.conn.QueryRowContext(ctx, "pragma journal_mode").Scan(&jm); err != nil {
		return fmt.Errorf("sqlite %s: read journal_mode: %w", s.path, classify(s.model.Mode, err))
	}
	if err := s.conn.QueryRowContext(ctx, "pragma synchronous").Scan(&sync); err != nil {
		return fmt.Errorf("sqlite %s: read synchronous: %w", s.path, classify(s.model.Mode, err))
	}
	wantSync := map[string]int{"full": 2, "extra": 3}[s.cfg.Synchronous]
	if !strings.EqualFold(jm, s.cfg.JournalMode) || sync != wantSync {
		return fmt.Errorf("sqlite %s: journal_mode %s, synchronous %d in effect (want %s, %d)", s.path, jm, sync, s.cfg.JournalMode, wantSync)
	}
	for _, t := range s.model.Tables {
		if !s.cfg.AutoCreate {
			break
		}
		if _, err := s.conn.ExecContext(ctx, s.model.DDL(t)); err != nil {
			return fmt.Errorf("sqlite %s: create table %s: %w", s.path, t.Name, classify(s.model.Mode, err))
		}
	}
	err := s.model.StartMapped(ctx, sqlmodel.Catalog{
		Exec: func(ctx context.Context, q string) error {
			_, err := s.conn.ExecContext(ctx, q)
			return err
		},
		Columns: s.columns,
		Exists:  func(err error) bool { return strings.Contains(err.Error(), "duplicate column name") },
	}, false)
	if err != nil && !errors.Is(err, sink.ErrConfig) {
		return fmt.Errorf("sqlite %s: %w", s.path, classify(s.model.Mode, err))
	}
	return err
}

// columns reads a table's declared column types (pragma table_info); nil
// when the table does not exist.
func (s *Sink) columns(ctx context.Context, table string) (map[string]string, error) {
	q := "pragma table_info(" + sqlmodel.SQLite.Quote(table) + ")"
	if schema, name, ok := strings.Cut(table, "."); ok {
		q = "pragma " + sqlmodel.SQLite.Quote(schema) + ".table_info(" + sqlmodel.SQLite.Quote(name) + ")"
	}
	rows, err := s.conn.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out map[string]string
	for rows.Next() {
		var cid, notNull, pk int
		var name, typ string
		var dflt any
		if err := rows.Scan(&cid, &name, &typ, &notNull, &dflt, &pk); err != nil {
			return nil, err
		}
		if out == nil {
			out = map[string]string{}
		}
		out[strings.ToLower(name)] = typ
	}
	return out, rows.Err()
}

// Type returns "sqlite".
func (s *Sink) Type() string { return "sqlite" }

// Path returns the absolute database path.
func (s *Sink) Path() string { return s.path }

// WriteBatch writes batch in one BEGIN IMMEDIATE … COMMIT transaction
// (docs/library.md#the-sink-boundary, docs/sql.md, docs/sql.md#per-database). Transactions are serialised; the rows of
// concurrent calls are built in parallel.
func (s *Sink) WriteBatch(ctx context.Context, batch []*sink.Envelope) []sink.Result {
	return s.w.WriteBatch(ctx, batch)
}

// begin takes mu and starts BEGIN IMMEDIATE: the write lock is taken now,
// so a busy database fails here (Temporary) rather than at the first
// insert. mu is released by the Tx's Commit or Rollback (Writer calls
// exactly one of them after a successful begin), or here on failure.
func (s *Sink) begin(ctx context.Context) (sqlmodel.Tx, error) {
	s.mu.Lock()
	t, err := s.beginLocked(ctx)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	return t, nil
}

func (s *Sink) beginLocked(ctx context.Context) (tx, error) {
	if s.conn == nil {
		return tx{}, errors.New("sqlite sink is stopped")
	}
	if s.open {
		// A previous ROLLBACK failed: make sure no transaction is left.
		_, _ = s.conn.ExecContext(context.WithoutCancel(ctx), "rollback")
		s.open = false
	}
	if _, err := s.conn.ExecContext(ctx, "begin immediate"); err != nil {
		return tx{}, err
	}
	s.open = true
	return tx{s}, nil
}

// tx is the transaction open on s.conn; s.mu is held until Commit or
// Rollback.
type tx struct{ s *Sink }

// Exec writes the group's rows in order. Where no row can be skipped
// silently (modes upsert with update columns, insert, append), full chunks
// of chunkRows rows go through one multi-row statement each: per-row
// execution opened and closed the table and index cursors and crossed
// database/sql and the driver once per row, which a chunk does once
// (measured: about a tenth less CPU per row, see docs/performance.md).
// SQLite applies the rows of a VALUES list one after another, exactly as
// the same statements run row by row would, repeated keys included. The
// other rows, and every row in insert_ignore and upsert without update
// columns, run the one-row statement, whose 0 rows changed tells which
// rows were already present.
func (t tx) Exec(ctx context.Context, g sqlmodel.Group) (int64, error) {
	if g.Table.Mapped != nil {
		return t.execMapped(ctx, g)
	}
	st, err := t.s.stmt(ctx, g.Table)
	if err != nil {
		return 0, err
	}
	// The driver watches a cancellable context with a goroutine per
	// statement; a row takes microseconds, so cancellation is checked
	// between statements instead, which is as prompt and cheaper.
	rowCtx := context.WithoutCancel(ctx)
	// What the received_at column's default would store, from the same
	// clock, without SQLite formatting it per row (strftime took a fifth
	// of the time inside the write lock): one value per batch and table,
	// as PostgreSQL's now() gives one per transaction.
	stamp := time.Now().UTC().Format(receivedAtLayout)
	rows := g.Rows
	var affected int64
	n := t.s.chunk
	if chunked(t.s.model.Mode, g.Table) && n > 1 && len(rows) >= n {
		chunk, err := t.s.chunkStmt(ctx, g.Table, st.receivedAt)
		if err != nil {
			return 0, err
		}
		args := make([]any, 0, n*(int(sqlmodel.NumFields)+1))
		for len(rows) >= n {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			args = args[:0]
			for _, r := range rows[:n] {
				args = append(args, r.Values[:]...)
				if st.receivedAt {
					args = append(args, stamp)
				}
			}
			res, err := chunk.ExecContext(rowCtx, args...)
			if err != nil {
				return 0, fmt.Errorf("stream seq %v to %v: %w", rows[0].Values[sqlmodel.StreamSequence], rows[n-1].Values[sqlmodel.StreamSequence], err)
			}
			changed, err := res.RowsAffected()
			if err != nil {
				return 0, err
			}
			affected += changed
			rows = rows[n:]
		}
	}
	args := make([]any, sqlmodel.NumFields, sqlmodel.NumFields+1)
	for _, r := range rows {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		copy(args, r.Values[:])
		if st.receivedAt {
			args = append(args[:sqlmodel.NumFields], stamp)
		}
		res, err := st.ExecContext(rowCtx, args...)
		if err != nil {
			return 0, fmt.Errorf("stream seq %v: %w", r.Values[sqlmodel.StreamSequence], err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, err
		}
		if n == 0 {
			r.Duplicate = true
		}
		affected += n
	}
	return affected, nil
}

// execMapped writes a mapped group one statement per row, in delivery
// order (so repeated keys and deletes apply in order), through statements
// prepared once per text.
func (t tx) execMapped(ctx context.Context, g sqlmodel.Group) (int64, error) {
	rowCtx := context.WithoutCancel(ctx)
	stmts := sqlmodel.MappedStmts(g)
	affected := make([]int64, len(stmts))
	for i, st := range stmts {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		ps, ok := t.s.mapped[st.SQL]
		if !ok {
			var err error
			if ps, err = t.s.conn.PrepareContext(rowCtx, st.SQL); err != nil {
				return 0, err
			}
			t.s.mapped[st.SQL] = ps
		}
		res, err := ps.ExecContext(rowCtx, st.Args...)
		if err != nil {
			return 0, fmt.Errorf("row %d of the batch: %w", g.Rows[i].Index, err)
		}
		if affected[i], err = res.RowsAffected(); err != nil {
			return 0, err
		}
	}
	return sqlmodel.ApplyAffected(g, affected), nil
}

// Commit commits without ctx: once the batch is written, an interrupted
// COMMIT would only turn a likely success into an unknown outcome. It
// releases the write mutex.
func (t tx) Commit(ctx context.Context) error {
	defer t.s.mu.Unlock()
	_, err := t.s.conn.ExecContext(context.WithoutCancel(ctx), "commit")
	if err == nil {
		t.s.open = false
	}
	return err
}

// Rollback rolls back and releases the write mutex.
func (t tx) Rollback() error {
	defer t.s.mu.Unlock()
	_, err := t.s.conn.ExecContext(context.Background(), "rollback")
	if err == nil {
		t.s.open = false
	}
	return err
}

// chunkRows is the number of rows of a multi-row statement: 64 × 18
// parameters stays far below SQLite's limit of 32,766. A prototype gained
// from 1 to 16 to 64 rows per statement; beyond that the per-statement cost
// is already spread thin (not measured further).
const chunkRows = 64

// chunked reports whether t's rows may be written in multi-row
// statements: not when the statement may leave a row alone (insert_ignore,
// upsert without update columns), because only a row's own execution tells
// that it was already present.
func chunked(mode sqlmodel.Mode, t *sqlmodel.Table) bool {
	switch mode {
	case sqlmodel.Upsert:
		return len(t.Update) > 0
	case sqlmodel.InsertIgnore:
		return false
	}
	return true
}

// chunkStmt returns the table's s.chunk-row statement, preparing it on
// first use (after stmt, which decides receivedAt).
func (s *Sink) chunkStmt(ctx context.Context, t *sqlmodel.Table, receivedAt bool) (*sql.Stmt, error) {
	if st, ok := s.chunks[t]; ok {
		return st, nil
	}
	st, err := s.conn.PrepareContext(ctx, insertRowsSQL(s.model, t, receivedAt, s.chunk))
	if err != nil {
		return nil, err
	}
	s.chunks[t] = st
	return st, nil
}

// insert is one table's prepared statement.
type insert struct {
	*sql.Stmt
	// receivedAt: the statement binds the received_at column as its last
	// parameter (see receivedAtDefault).
	receivedAt bool
}

// receivedAtDefault is the default of the received_at column in the
// recommended DDL (docs/formats.md#sql-tables), as PRAGMA table_info reports it, and
// receivedAtLayout the Go layout of the text it produces: UTC, whole
// milliseconds, truncated like SQLite's %f.
const (
	receivedAtDefault = "strftime('%Y-%m-%dT%H:%M:%fZ','now')"
	receivedAtLayout  = "2006-01-02T15:04:05.000Z"
)

// stmt returns the table's prepared statement, preparing it on first use.
// Preparing lazily lets a missing table surface as a Destination result
// rather than a start failure, and lets a table created later be used.
func (s *Sink) stmt(ctx context.Context, t *sqlmodel.Table) (insert, error) {
	if st, ok := s.stmts[t]; ok {
		return st, nil
	}
	withReceivedAt, err := s.hasReceivedAtDefault(ctx, t)
	if err != nil {
		return insert{}, err
	}
	st, err := s.conn.PrepareContext(ctx, insertSQL(s.model, t, withReceivedAt))
	if err != nil {
		return insert{}, err
	}
	s.stmts[t] = insert{Stmt: st, receivedAt: withReceivedAt}
	return s.stmts[t], nil
}

// hasReceivedAtDefault reports whether t has an unmapped received_at
// column whose default is exactly the recommended DDL's: then the sink
// binds the value that default would compute instead of letting SQLite
// evaluate strftime for every row. Any other column (another default, a
// user's own schema) is left to the database.
func (s *Sink) hasReceivedAtDefault(ctx context.Context, t *sqlmodel.Table) (bool, error) {
	for _, c := range s.model.AllColumns() {
		if strings.EqualFold(c, "received_at") {
			return false, nil
		}
	}
	schema, name, ok := strings.Cut(t.Name, ".")
	if !ok {
		schema, name = "main", t.Name
	}
	// Identifiers passed the allow-list, so they can be bound as the
	// table-valued pragma's arguments.
	rows, err := s.conn.QueryContext(ctx, "select name, dflt_value from pragma_table_info(?, ?)", name, schema)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	found := false
	for rows.Next() {
		var col string
		var dflt sql.NullString
		if err := rows.Scan(&col, &dflt); err != nil {
			return false, err
		}
		if strings.EqualFold(col, "received_at") {
			found = dflt.Valid && strings.TrimSpace(dflt.String) == receivedAtDefault
		}
	}
	return found, rows.Err()
}

// insertSQL is the statement for one row of t (docs/sql.md#per-database shapes with ?
// placeholders), with the received_at column bound last when receivedAt.
func insertSQL(m *sqlmodel.Model, t *sqlmodel.Table, receivedAt bool) string {
	return insertRowsSQL(m, t, receivedAt, 1)
}

// insertRowsSQL is insertSQL with a VALUES list of n rows.
func insertRowsSQL(m *sqlmodel.Model, t *sqlmodel.Table, receivedAt bool, n int) string {
	d := m.Dialect
	params := int(sqlmodel.NumFields)
	var b strings.Builder
	b.WriteString("insert into ")
	b.WriteString(d.Quote(t.Name))
	b.WriteString(" (")
	b.WriteString(d.QuoteAll(m.AllColumns()))
	if receivedAt {
		b.WriteString(", " + d.Quote("received_at"))
		params++
	}
	b.WriteString(") values ")
	tuple := "(" + strings.TrimSuffix(strings.Repeat("?, ", params), ", ") + ")"
	b.WriteString(strings.TrimSuffix(strings.Repeat(tuple+", ", n), ", "))
	switch m.Mode {
	case sqlmodel.InsertIgnore:
		b.WriteString(" on conflict do nothing")
	case sqlmodel.Upsert:
		b.WriteString(" on conflict (")
		b.WriteString(d.QuoteAll(m.ColumnNames(t.Key)))
		b.WriteString(")")
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
	return b.String()
}

// classify maps a SQLite error to its class (docs/sql.md#per-database) by its extended
// result code.
func classify(mode sqlmodel.Mode, err error) error {
	var se *msqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	code := se.Code()
	switch code & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR:
		return err
	case sqlite3.SQLITE_CONSTRAINT:
		if (code == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY || code == sqlite3.SQLITE_CONSTRAINT_UNIQUE) && mode == sqlmodel.InsertIgnore {
			// Cannot come from the DO NOTHING clause itself; treated as a
			// writer race, as the spec does for every database.
			return err
		}
		return sink.AsPermanent(err)
	case sqlite3.SQLITE_TOOBIG:
		return sink.AsPermanent(err)
	case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH:
		return sink.AsDestination(err)
	case sqlite3.SQLITE_ERROR:
		msg := se.Error()
		// The schema does not fit the configuration: every message fails
		// the same way until an operator fixes it.
		if strings.Contains(msg, "no such table") || strings.Contains(msg, "no such column") ||
			strings.Contains(msg, "has no column named") || strings.Contains(msg, "does not match any PRIMARY KEY or UNIQUE constraint") {
			return sink.AsDestination(err)
		}
	}
	return err
}

// Healthcheck proves the database is writable without writing: the file
// and its directory are writable, BEGIN IMMEDIATE takes the write lock,
// then ROLLBACK. It also prepares each table's statement, so a missing
// table is reported here too.
func (s *Sink) Healthcheck(ctx context.Context) error {
	if err := writable(s.path); err != nil {
		return fmt.Errorf("sqlite healthcheck: %w", err)
	}
	t, err := s.begin(ctx) // holds mu until the Rollback below
	if err != nil {
		return fmt.Errorf("sqlite healthcheck %s: %w", s.path, classify(s.model.Mode, err))
	}
	for _, tb := range s.model.Tables {
		if tb.Mapped != nil {
			var ps *sql.Stmt
			if ps, err = s.conn.PrepareContext(ctx, tb.Mapped.Insert); err != nil {
				err = fmt.Errorf("sqlite healthcheck %s: table %s: %w", s.path, tb.Name, classify(s.model.Mode, err))
				break
			}
			ps.Close()
			continue
		}
		if _, err = s.stmt(ctx, tb); err != nil {
			err = fmt.Errorf("sqlite healthcheck %s: table %s: %w", s.path, tb.Name, classify(s.model.Mode, err))
			break
		}
	}
	if rbErr := t.Rollback(); err == nil && rbErr != nil {
		err = fmt.Errorf("sqlite healthcheck %s: %w", s.path, classify(s.model.Mode, rbErr))
	}
	return err
}

// Stop closes the statements and the database. The runner calls it once,
// after the last WriteBatch; later calls do nothing.
func (s *Sink) Stop(ctx context.Context) error {
	var err error
	s.stopOnce.Do(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, st := range s.stmts {
			st.Close()
		}
		for _, st := range s.chunks {
			st.Close()
		}
		s.stmts, s.chunks = nil, nil
		if s.conn != nil {
			err = s.conn.Close()
			s.conn = nil
		}
		err = errors.Join(err, s.db.Close())
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
	// The sink's one connection: the pool holds no other.
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.model.ReadDB(ctx, s.conn, name, limit, func(r sqlmodel.StoredRow) error {
		return fn(name, r.Stream, r.Seq, r.Payload, r.Metadata)
	})
}
