package mysql

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"

	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
)

// Chunking of a table's rows into INSERT statements. Values are bound
// through server-side prepared statements (binary protocol): the server
// neither lexes nor un-escapes them, which made MariaDB's parser about a
// fifth of the machine's CPU when every value was interpolated into the
// statement text. A prepared statement has a fixed row count, so rows go
// in full chunks of chunkRows (the one statement nearly every execution
// reuses) and a tail of its own size.
//
// chunkRows was measured (BenchmarkWriteBatch upsert, batch 1000, 256-byte
// payloads, MariaDB 10.11 on 2 cores): 50 or 100 rows ~20,000 msgs/s,
// 250 ~18,000, 500 and 1000 ~17,000 (larger statements cost the server
// more per row than the round trips they save on loopback; fewer rows
// would add round trips on a real network). 100 is also the default
// delivery.batch_size, so a default batch is one full chunk. It must stay
// within the protocol's 65,535 placeholders per statement (NumFields per
// row).
//
// maxExecuteBytes bounds one execute packet: a chunk whose rows would
// exceed it is cut shorter (a single larger row goes alone; the driver
// then sends its long values in separate packets). The packet must fit
// the server's max_allowed_packet, whose smallest default among supported
// servers is 4 MiB; the driver refuses a larger one (ErrPktTooLarge).
const (
	chunkRows       = 100
	maxExecuteBytes = 4<<20 - 1<<10
)

// maxStmtsPerTable bounds the prepared statements kept per table: the
// full chunk's and the most recently used other sizes (tails and chunks
// the byte budget cut). Each costs server memory on every pooled
// connection, in proportion to its row count.
const maxStmtsPerTable = 8

// chunks splits rows into statements: runs of chunkRows rows, cut shorter
// where the rows would exceed maxExecuteBytes.
func chunks(rows []*sqlmodel.Row) [][]*sqlmodel.Row {
	var out [][]*sqlmodel.Row
	start, size := 0, 0
	for i, r := range rows {
		n := rowSize(r)
		if i > start && (size+n > maxExecuteBytes || i-start >= chunkRows) {
			out = append(out, rows[start:i:i])
			start, size = i, 0
		}
		size += n
	}
	if start < len(rows) {
		out = append(out, rows[start:])
	}
	return out
}

// rowSize is an upper bound of a row's share of a COM_STMT_EXECUTE packet:
// per value a 2-byte type, a NULL-bitmap bit, and the value (8 bytes for an
// integer, a length prefix of at most 9 bytes plus the bytes for a string).
func rowSize(r *sqlmodel.Row) int {
	vals := values(r)
	n := 2*len(vals) + (len(vals)+7)/8
	for _, v := range vals {
		switch v := v.(type) {
		case string:
			n += 9 + len(v)
		case []byte:
			n += 9 + len(v)
		case nil:
		default:
			n += 8
		}
	}
	return n
}

func args(rows []*sqlmodel.Row) []any {
	if len(rows) == 0 {
		return nil
	}
	out := make([]any, 0, len(rows)*len(values(rows[0])))
	for _, r := range rows {
		out = append(out, values(r)...)
	}
	return out
}

// values returns the bound values of r: a mapped row's, else the audit
// row's.
func values(r *sqlmodel.Row) []any {
	if r.Table != nil && r.Table.Mapped != nil {
		return r.M
	}
	return r.Values[:]
}

// stmtKey names one prepared statement: table and row count.
type stmtKey struct {
	table *sqlmodel.Table
	rows  int
}

// stmtCache keeps the prepared statements of one Sink. They are prepared
// on the *sql.DB and used inside transactions through Tx.StmtContext,
// which prepares them again on each pooled connection the first time it
// runs there.
//
// A statement is never prepared on the DB while a transaction holds a
// connection: that needs a second connection, and with every connection
// of the pool held by a transaction doing the same, it would wait
// forever. So a transaction prepares an uncached size on its own
// connection (closed when it ends), notes it after committing, and the
// next transaction prepares it on the DB before it takes a connection.
type stmtCache struct {
	db *sql.DB

	mu      sync.Mutex
	tables  map[*sqlmodel.Table][]*cachedStmt // per table, least recently used first
	pending []stmtKey                         // sizes to prepare on the DB
	closed  bool
}

type cachedStmt struct {
	rows int
	stmt *sql.Stmt
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, tables: map[*sqlmodel.Table][]*cachedStmt{}}
}

// get returns the cached statement for k, or nil, and marks it used.
func (c *stmtCache) get(k stmtKey) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	list := c.tables[k.table]
	i := slices.IndexFunc(list, func(cs *cachedStmt) bool { return cs.rows == k.rows })
	if i < 0 {
		return nil
	}
	cs := list[i]
	c.tables[k.table] = append(slices.Delete(list, i, i+1), cs)
	return cs.stmt
}

// want records sizes a committed transaction prepared on its own
// connection, for prepareWanted.
func (c *stmtCache) want(keys []stmtKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		if !slices.Contains(c.pending, k) {
			c.pending = append(c.pending, k)
		}
	}
}

// prepareWanted prepares the pending sizes on the DB and caches them,
// evicting each table's least recently used statement other than the full
// chunk's beyond maxStmtsPerTable. The caller holds no connection. A
// failure only leaves the size uncached: the transaction that needs it
// prepares it itself and reports the error there.
func (c *stmtCache) prepareWanted(ctx context.Context, text func(stmtKey) string) {
	c.mu.Lock()
	keys := c.pending
	c.pending = nil
	c.mu.Unlock()
	for _, k := range keys {
		if c.has(k) {
			continue
		}
		st, err := c.db.PrepareContext(ctx, text(k))
		if err != nil {
			continue
		}
		c.add(k, &cachedStmt{rows: k.rows, stmt: st})
	}
}

func (c *stmtCache) has(k stmtKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.ContainsFunc(c.tables[k.table], func(cs *cachedStmt) bool { return cs.rows == k.rows })
}

// add caches cs for k's table. Closing an evicted statement is safe while
// a transaction still uses it: database/sql closes it on that connection
// only when the connection returns to the pool, and a transaction that
// reaches Tx.StmtContext with a closed statement prepares its own.
func (c *stmtCache) add(k stmtKey, cs *cachedStmt) {
	c.mu.Lock()
	defer c.mu.Unlock()
	list := c.tables[k.table]
	if c.closed || slices.ContainsFunc(list, func(o *cachedStmt) bool { return o.rows == k.rows }) {
		cs.stmt.Close()
		return
	}
	if len(list) >= maxStmtsPerTable {
		if i := slices.IndexFunc(list, func(o *cachedStmt) bool { return o.rows != chunkRows }); i >= 0 {
			list[i].stmt.Close()
			list = slices.Delete(list, i, i+1)
		}
	}
	c.tables[k.table] = append(list, cs)
}

// size returns the number of statements cached for t.
func (c *stmtCache) size(t *sqlmodel.Table) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.tables[t])
}

// close closes every cached statement; later adds close theirs at once.
func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for t, list := range c.tables {
		for _, cs := range list {
			errs = append(errs, cs.stmt.Close())
		}
		delete(c.tables, t)
	}
	c.pending = nil
	return errors.Join(errs...)
}
