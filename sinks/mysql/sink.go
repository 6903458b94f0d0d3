package mysql

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
	"github.com/nats-sinks/nats-sink/sink"
)

var (
	_ sink.Sink          = (*Sink)(nil)
	_ sink.HealthChecker = (*Sink)(nil)
)

// Sink writes batches into MySQL or MariaDB tables. It is safe for
// concurrent WriteBatch calls: each takes its own pooled connection and
// transaction.
type Sink struct {
	model *sqlmodel.Model
	db    *sql.DB
	addr  string
	stmts map[*sqlmodel.Table]statement
	prep  *stmtCache

	w sqlmodel.Writer
	m sqlmodel.DBMetrics // mysql_* of docs/sql.md#per-database

	stopOnce sync.Once
}

// New validates c, resolves the password, prepares the connection pool and, with
// auto_create, creates the tables (the only start-up step that needs the
// server: without it, an unreachable server or a missing table is reported
// by WriteBatch and Healthcheck, so that the runner can retry instead of
// the process failing to start). Build c from Default(): invalid values
// (Config.Validate, run first) and an unresolvable password are reported
// as a *sink.ConfigError.
func New(ctx context.Context, c Config, deps sink.Deps) (*Sink, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	model, err := sqlmodel.Compile(&c.Shared, sqlmodel.MySQL, c.options())
	if err != nil {
		return nil, err
	}
	pw, err := c.password(deps.LookupEnv)
	if err != nil {
		return nil, err
	}
	dc, err := driverConfig(c, pw)
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(dc)
	if err != nil {
		return nil, fmt.Errorf("mysql %s: %w", dc.Addr, err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(c.PoolSize)
	db.SetMaxIdleConns(c.PoolSize)
	// Servers drop idle connections after wait_timeout (8 h by default);
	// recycling earlier avoids a failed first statement after a quiet night.
	db.SetConnMaxIdleTime(5 * time.Minute)

	s := &Sink{model: model, db: db, addr: dc.Addr, stmts: map[*sqlmodel.Table]statement{}, prep: newStmtCache(db)}
	for _, t := range model.Tables {
		if t.Mapped == nil {
			s.stmts[t] = newStatement(model, t)
		}
	}
	s.m = sqlmodel.NewDBMetrics(deps.Meter(), sqlmodel.MySQL, "one multi-row INSERT statement", "1062")
	s.w = sqlmodel.Writer{
		Model:    model,
		Begin:    s.begin,
		Classify: s.classify,
		// Reduction happens in tx.Exec, which counts the dropped rows per
		// table for the insert_ignore/upsert metrics.
		Reduce:  false,
		Observe: s.m.Observe,
	}
	if c.AutoCreate {
		for _, t := range model.Tables {
			if _, err := db.ExecContext(ctx, ddl(model, t)); err != nil {
				db.Close()
				return nil, fmt.Errorf("mysql %s: create table %s: %w", s.addr, t.Name, s.classify(sanitize(err)))
			}
		}
	}
	err = model.StartMapped(ctx, sqlmodel.Catalog{
		Exec: func(ctx context.Context, q string) error {
			_, err := db.ExecContext(ctx, q)
			return err
		},
		Columns: func(ctx context.Context, table string) (map[string]string, error) { return columnTypes(ctx, db, table) },
		Exists: func(err error) bool {
			me, ok := errors.AsType[*mysql.MySQLError](err)
			return ok && (me.Number == 1060 || me.Number == 1050)
		},
	}, false)
	if err != nil {
		db.Close()
		if errors.Is(err, sink.ErrConfig) {
			return nil, err
		}
		return nil, fmt.Errorf("mysql %s: %w", s.addr, s.classify(sanitize(err)))
	}
	for _, t := range model.Tables {
		if t.Mapped != nil {
			s.stmts[t] = mappedStatement(model, t) // Insert is set by StartMapped
		}
	}
	return s, nil
}

// columnTypes returns a table's columns and their column_type; nil when
// the table does not exist. A schema-qualified name looks in that schema,
// else the connection's database.
func columnTypes(ctx context.Context, db *sql.DB, table string) (map[string]string, error) {
	schema, name, ok := strings.Cut(table, ".")
	if !ok {
		schema, name = "", table
	}
	rows, err := db.QueryContext(ctx, `select column_name, column_type from information_schema.columns
where table_schema = coalesce(nullif(?, ''), database()) and table_name = ?`, schema, name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out map[string]string
	for rows.Next() {
		var col, typ string
		if err := rows.Scan(&col, &typ); err != nil {
			return nil, err
		}
		if out == nil {
			out = map[string]string{}
		}
		out[strings.ToLower(col)] = typ
	}
	return out, rows.Err()
}

// driverConfig builds the driver's configuration. It is a struct, not a DSN
// string, so no value needs escaping and the password never passes through
// a URL.
func driverConfig(c Config, password string) (*mysql.Config, error) {
	dc := mysql.NewConfig()
	dc.User = c.User
	dc.Passwd = password
	dc.Net = "tcp"
	dc.Addr = net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
	dc.DBName = c.Database
	dc.Timeout = time.Duration(max(1, math.Ceil(c.ConnectionTimeout))) * time.Second
	// 0 = ask the server at connect: the driver then refuses a packet
	// the server would reject (ErrPktTooLarge) without breaking the
	// connection, and sends values too long for one execute packet
	// separately.
	dc.MaxAllowedPacket = 0
	// InterpolateParams stays off: values are bound server-side (see
	// chunkRows), never escaped into the statement text.
	// Affected rows must be rows changed (the default): an upsert that
	// leaves a row unchanged then counts 0, which is how duplicates are
	// told apart.
	dc.ClientFoundRows = false
	// The driver's own log lines go to a process-global logger; the
	// errors they describe are returned to us anyway.
	dc.Logger = &mysql.NopLogger{}
	dc.Params = map[string]string{
		// Strict mode turns a too-long value or a NULL in a NOT NULL
		// column into an error instead of a silently altered row (the
		// server default on current versions, enforced here for servers
		// configured otherwise).
		"sql_mode": "concat_ws(',', nullif(@@sql_mode, ''), 'STRICT_ALL_TABLES')",
		// insert_ignore reads every warning of a statement (see
		// tx.checkWarnings); the default keeps only 64.
		"max_error_count": "65535",
	}
	if c.PoolName != nil {
		dc.ConnectionAttributes = "program_name:" + *c.PoolName
	}
	t, fallback, err := tlsConfig(c)
	if err != nil {
		return nil, err
	}
	dc.TLS = t
	dc.AllowFallbackToPlaintext = fallback
	return dc, nil
}

// tlsConfig maps the ssl_* keys onto a tls.Config, following upstream's
// driver (mysql-connector): TLS is preferred but not required and not
// verified when no file is configured; ssl_ca verifies the chain, and the
// host name too with ssl_verify_identity; ssl_disabled never uses TLS.
func tlsConfig(c Config) (cfg *tls.Config, fallback bool, err error) {
	if c.SSLDisabled {
		return nil, false, nil
	}
	if c.SSLCA == nil && c.SSLCert == nil {
		//nolint:gosec // "preferred" mode, as upstream: encryption without authentication.
		return &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, true, nil
	}
	cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	if c.SSLCert != nil && c.SSLKey != nil {
		pair, err := tls.LoadX509KeyPair(*c.SSLCert, *c.SSLKey)
		if err != nil {
			return nil, false, problem("ssl_cert", fmt.Sprintf("cannot load client certificate and key: %v", err))
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	if c.SSLCA == nil {
		//nolint:gosec // client certificate without ssl_ca: the server is not verified, as upstream.
		cfg.InsecureSkipVerify = true
		return cfg, false, nil
	}
	pem, err := os.ReadFile(*c.SSLCA)
	if err != nil {
		return nil, false, problem("ssl_ca", fmt.Sprintf("cannot read CA file: %v", err))
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, false, problem("ssl_ca", fmt.Sprintf("no PEM certificate found in %s", *c.SSLCA))
	}
	cfg.RootCAs = pool
	if c.SSLVerifyIdentity {
		cfg.ServerName = c.Host
		return cfg, false, nil
	}
	// Verify the chain against ssl_ca but not the host name: the standard
	// library offers no such mode, so verification is done here.
	cfg.InsecureSkipVerify = true //nolint:gosec // chain verified below
	cfg.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return errors.New("mysql server presented no certificate")
		}
		certs := make([]*x509.Certificate, len(raw))
		for i, r := range raw {
			if certs[i], err = x509.ParseCertificate(r); err != nil {
				return err
			}
		}
		inter := x509.NewCertPool()
		for _, ct := range certs[1:] {
			inter.AddCert(ct)
		}
		_, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter})
		return err
	}
	return cfg, false, nil
}

// Type returns "mysql".
func (s *Sink) Type() string { return "mysql" }

// WriteBatch writes batch in one transaction (docs/library.md#the-sink-boundary, docs/sql.md, docs/sql.md#per-database): per
// table, multi-row INSERTs of chunkRows rows through prepared statements,
// then COMMIT. Calls may run concurrently, each on its own connection.
func (s *Sink) WriteBatch(ctx context.Context, batch []*sink.Envelope) []sink.Result {
	return s.w.WriteBatch(ctx, batch)
}

// begin starts a transaction on a connection of its own (see
// sqlmodel.BeginConn: COMMIT is kept out of reach of ctx). A statement
// cancelled by ctx is interrupted by the driver, which closes the
// connection; the server then rolls the transaction back.
func (s *Sink) begin(ctx context.Context) (sqlmodel.Tx, error) {
	s.prep.prepareWanted(ctx, s.text) // before holding a connection: see stmtCache
	c, err := sqlmodel.BeginConn(ctx, s.db)
	if err != nil {
		return nil, sanitize(err)
	}
	return &tx{s: s, c: c, stmts: map[stmtKey]*sql.Stmt{}}, nil
}

// text returns the INSERT statement for k.
func (s *Sink) text(k stmtKey) string { return s.stmts[k.table].text(k.rows) }

// tx is one transaction on one connection. Counters for the metrics are
// collected per transaction and published only after COMMIT succeeds.
type tx struct {
	s *Sink
	c *sqlmodel.ConnTx

	// stmts are the statements used in this transaction; missed are the
	// sizes it prepared itself because none was cached.
	stmts  map[stmtKey]*sql.Stmt
	missed []stmtKey

	n sqlmodel.ModeCounts
}

// Exec writes the rows of g. Rows whose key repeats inside the group are
// reduced first (insert_ignore keeps the first, upsert the last) and
// reported Duplicate. The returned count is the number of rows that were
// new to the table, so the Writer's "attempted − affected" is the number of
// duplicates (see statement.effective).
func (t *tx) Exec(ctx context.Context, g sqlmodel.Group) (int64, error) {
	if g.Table.Mapped != nil {
		return t.execMapped(ctx, g)
	}
	st := t.s.stmts[g.Table]
	mode := t.s.model.Mode
	kept, dropped := g.Reduce(mode)
	for _, r := range dropped {
		r.Duplicate = true
	}
	var fresh int64
	for _, chunk := range chunks(kept) {
		start := time.Now()
		res, err := t.exec(ctx, stmtKey{g.Table, len(chunk)}, args(chunk))
		t.s.m.Execute.Observe(time.Since(start).Seconds())
		if err != nil {
			return 0, fmt.Errorf("%s (%s): %w", st.verb, sqlmodel.SeqRange(chunk), sanitize(err))
		}
		if mode == sqlmodel.InsertIgnore {
			if err := t.checkWarnings(ctx); err != nil {
				return 0, fmt.Errorf("%s (%s): %w", st.verb, sqlmodel.SeqRange(chunk), err)
			}
		}
		affected, err := res.RowsAffected()
		if err != nil {
			return 0, err
		}
		n, unknown := st.effective(chunk, affected)
		fresh += n
		if unknown {
			t.n.Unknown += len(chunk)
		}
	}
	dups := len(g.Rows) - int(fresh)
	switch {
	case mode == sqlmodel.InsertIgnore:
		t.n.Ignored += dups
	case mode == sqlmodel.Upsert && len(g.Table.Update) == 0:
		t.n.Noop += dups
	}
	if mode == sqlmodel.Upsert {
		t.n.Rows += len(kept)
	}
	return fresh, nil
}

// execMapped writes a mapped group in delivery order: each run of rows
// between deletes goes in multi-row INSERTs of chunkRows rows (see
// mappedStatement: repeated keys apply in order), each delete as its own
// statement where it comes. insert_ignore reads the warnings after every
// INSERT, as the audit layout does. Rows are Duplicate where the count
// proves it (see statement.effective).
func (t *tx) execMapped(ctx context.Context, g sqlmodel.Group) (int64, error) {
	st := t.s.stmts[g.Table]
	var deleteStmt *sql.Stmt
	defer func() {
		if deleteStmt != nil {
			deleteStmt.Close()
		}
	}()
	var fresh int64
	write := func(rows []*sqlmodel.Row) error {
		for _, chunk := range chunks(rows) {
			start := time.Now()
			var pred *prediction
			if st.versions != nil {
				var err error
				if pred, err = t.predict(ctx, g.Table, chunk); err != nil {
					return fmt.Errorf("rows %d…%d of the batch: read versions: %w", chunk[0].Index, chunk[len(chunk)-1].Index, sanitize(err))
				}
			}
			res, err := t.exec(ctx, stmtKey{g.Table, len(chunk)}, args(chunk))
			t.s.m.Execute.Observe(time.Since(start).Seconds())
			if err != nil {
				return fmt.Errorf("rows %d…%d of the batch: %w", chunk[0].Index, chunk[len(chunk)-1].Index, sanitize(err))
			}
			if t.s.model.Mode == sqlmodel.InsertIgnore {
				if err := t.checkWarnings(ctx); err != nil {
					return fmt.Errorf("rows %d…%d of the batch: %w", chunk[0].Index, chunk[len(chunk)-1].Index, err)
				}
			}
			affected, err := res.RowsAffected()
			if err != nil {
				return err
			}
			if pred != nil && pred.affected == affected {
				for i, r := range chunk {
					r.Duplicate = pred.dup[i]
				}
				fresh += int64(len(chunk) - pred.dups)
				continue
			}
			n, _ := st.effective(chunk, affected)
			fresh += n
		}
		return nil
	}
	run := 0
	for i, r := range g.Rows {
		if !r.Delete {
			continue
		}
		if err := write(g.Rows[run:i]); err != nil {
			return 0, err
		}
		run = i + 1
		if deleteStmt == nil {
			var err error
			if deleteStmt, err = t.c.Tx.PrepareContext(ctx, g.Table.Mapped.Delete); err != nil {
				return 0, sanitize(err)
			}
		}
		start := time.Now()
		_, err := deleteStmt.ExecContext(ctx, r.M...)
		t.s.m.Execute.Observe(time.Since(start).Seconds())
		if err != nil {
			return 0, fmt.Errorf("row %d of the batch: %w", r.Index, sanitize(err))
		}
		fresh++ // a delete is never a duplicate
	}
	if err := write(g.Rows[run:]); err != nil {
		return 0, err
	}
	return fresh, nil
}

// A prediction is what a chunk of mapped upserts with a version_column
// will do, from the versions stored before it: the affected-row count
// MySQL will report (1 per insert, 2 per update, 0 per row the guard
// leaves alone) and which rows are left alone.
type prediction struct {
	affected int64
	dup      []bool
	dups     int
}

// predict reads the stored version of every key of chunk (a consistent,
// non-locking read in the transaction, so it adds no lock another batch
// could wait for) and applies the rows to them in order as the version
// guard will. The caller trusts it only when the INSERT's count matches:
// a concurrent writer, or keys the column's collation folds together,
// make it differ, and then the count alone decides (see
// statement.effective).
func (t *tx) predict(ctx context.Context, tb *sqlmodel.Table, chunk []*sqlmodel.Row) (*prediction, error) {
	mp := tb.Mapped
	keys := map[string]int{}
	var kargs []any
	rowKeys := make([]string, len(chunk))
	for i, r := range chunk {
		k, ok := sqlmodel.MappedKey(r, mp.NKey)
		if !ok {
			return nil, nil
		}
		rowKeys[i] = k
		if _, seen := keys[k]; !seen {
			keys[k] = len(keys)
			kargs = append(kargs, r.M[:mp.NKey]...)
		}
	}
	st, err := t.stmt(ctx, stmtKey{tb, -len(keys)})
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, kargs...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	// stored holds each present key's version text (nil: SQL NULL).
	stored := map[string]*string{}
	vals := make([]*string, mp.NKey+1)
	dest := make([]any, len(vals))
	for i := range vals {
		dest[i] = &vals[i]
	}
	var b strings.Builder
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		b.Reset()
		for _, v := range vals[:mp.NKey] {
			if v == nil {
				return nil, nil
			}
			b.WriteString(strconv.Itoa(len(*v)) + ":" + *v)
		}
		stored[b.String()] = vals[mp.NKey]
		vals = make([]*string, mp.NKey+1)
		for i := range vals {
			dest[i] = &vals[i]
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	p := &prediction{dup: make([]bool, len(chunk))}
	for i, r := range chunk {
		v, ok := versionText(r.M[mp.Version])
		if !ok {
			return nil, nil
		}
		old, present := stored[rowKeys[i]]
		switch {
		case !present:
			p.affected++
		case old == nil || newer(v, *old):
			p.affected += 2
		default:
			p.dup[i] = true
			p.dups++
			continue
		}
		stored[rowKeys[i]] = &v
	}
	return p, nil
}

// versionText is a bound version value as MySQL's cast to char renders
// it: an integer's digits, a datetime(6) as bound ("YYYY-MM-DD
// HH:MM:SS.ffffff").
func versionText(v any) (string, bool) {
	switch x := v.(type) {
	case int64:
		return strconv.FormatInt(x, 10), true
	case string:
		return x, true
	}
	return "", false
}

// newer reports whether version a is greater than b: integers by value,
// datetimes (fixed width) by their text.
func newer(a, b string) bool {
	x, err1 := strconv.ParseInt(a, 10, 64)
	y, err2 := strconv.ParseInt(b, 10, 64)
	if err1 == nil && err2 == nil {
		return x > y
	}
	return a > b
}

// stmt returns the prepared statement for k in this transaction (see
// exec).
func (t *tx) stmt(ctx context.Context, k stmtKey) (*sql.Stmt, error) {
	st, ok := t.stmts[k]
	if !ok {
		if shared := t.s.prep.get(k); shared != nil {
			st = t.c.Tx.StmtContext(ctx, shared)
		} else {
			var err error
			if st, err = t.c.Tx.PrepareContext(ctx, t.s.text(k)); err != nil {
				return nil, err
			}
			t.missed = append(t.missed, k)
		}
		t.stmts[k] = st
	}
	return st, nil
}

// exec runs the statement for k: the cached one (which database/sql
// prepares on this connection the first time it runs here), or else one
// prepared for this transaction alone and closed when it ends.
func (t *tx) exec(ctx context.Context, k stmtKey, args []any) (sql.Result, error) {
	st, err := t.stmt(ctx, k)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

// checkWarnings reads the warnings of the last statement. INSERT IGNORE
// downgrades every row error to a warning, not only duplicate keys: a
// too-long value is truncated, a NULL for a NOT NULL column becomes the
// column's implicit default, a row failing a CHECK (MariaDB's json_valid)
// is skipped. Those rows would be acknowledged altered or lost, so any
// warning other than a duplicate key fails the statement with the
// warning's code, classified like the error the plain INSERT would raise.
func (t *tx) checkWarnings(ctx context.Context) error {
	rows, err := t.c.Tx.QueryContext(ctx, "show warnings")
	if err != nil {
		return sanitize(err)
	}
	defer rows.Close()
	var bad *mysql.MySQLError
	for rows.Next() {
		var level, msg string
		var code uint16
		if err := rows.Scan(&level, &code, &msg); err != nil {
			return err
		}
		if code == errDupEntry || level == "Note" || bad != nil {
			continue
		}
		bad = &mysql.MySQLError{Number: code, Message: msg}
	}
	if err := rows.Err(); err != nil {
		return sanitize(err)
	}
	if bad != nil {
		// Unknown warning codes are still about row content (the
		// statement itself succeeded), so they are Permanent, never
		// retried forever.
		err := fmt.Errorf("row rejected (warning under insert ignore): %w", sanitize(bad))
		if c := classifyCode(sqlmodel.Insert, bad.Number); c == classTemporary {
			return sink.AsPermanent(err)
		}
		return err
	}
	return nil
}

// Commit commits and returns the connection to the pool; the commit time
// is observed from the Writer's Stats.
func (t *tx) Commit(context.Context) error {
	if err := t.c.Commit(); err != nil {
		return sanitize(err)
	}
	t.s.m.Publish(t.n)
	// Only sizes that prepared and ran without error are worth caching.
	t.s.prep.want(t.missed)
	return nil
}

// Rollback rolls back and returns the connection to the pool (database/sql
// discards one broken by a cancelled statement).
func (t *tx) Rollback() error { return t.c.Rollback() }

// Healthcheck runs "select 1" (docs/sql.md#per-database) and, so that test-sink reports
// a missing table or column before the first message does, a statement
// reading every mapped column of each table that returns no rows.
func (s *Sink) Healthcheck(ctx context.Context) error {
	var one int
	if err := s.db.QueryRowContext(ctx, "select 1").Scan(&one); err != nil {
		return fmt.Errorf("mysql healthcheck %s: %w", s.addr, s.classify(sanitize(err)))
	}
	d := s.model.Dialect
	for _, t := range s.model.Tables {
		q := "select " + d.QuoteAll(s.model.TableColumns(t)) + " from " + d.Quote(t.Name) + " where 1 = 0"
		rows, err := s.db.QueryContext(ctx, q)
		if err != nil {
			return fmt.Errorf("mysql healthcheck %s: table %s: %w", s.addr, t.Name, s.classify(sanitize(err)))
		}
		rows.Close()
	}
	return nil
}

// Stop closes the prepared statements and the connection pool. The runner
// calls it once, after the last WriteBatch; later calls do nothing.
func (s *Sink) Stop(context.Context) error {
	var err error
	s.stopOnce.Do(func() { err = errors.Join(s.prep.close(), s.db.Close()) })
	return err
}

// keyIsPrimary reports whether the key columns are the primary key of the
// recommended DDL (stream name and sequence, in any order).
func keyIsPrimary(key []sqlmodel.Field) bool {
	k := slices.Clone(key)
	slices.Sort(k)
	return slices.Equal(k, []sqlmodel.Field{sqlmodel.StreamName, sqlmodel.StreamSequence})
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
	return s.model.ReadDB(ctx, s.db, name, limit, func(r sqlmodel.StoredRow) error {
		return fn(name, r.Stream, r.Seq, r.Payload, r.Metadata)
	})
}
