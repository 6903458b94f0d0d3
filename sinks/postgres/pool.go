package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
	"github.com/nats-sinks/nats-sink/sink"
)

// closeTimeout bounds the polite Terminate message when a connection is
// closed.
const closeTimeout = 5 * time.Second

// poolConfig builds pgxpool's configuration: at most pool_size connections
// (one per in-flight batch), opened on demand, so that a server that is
// down at start is reported by the first write, not hidden in a background
// dial loop. Only validated, non-secret values go through the
// keyword/value string (each quoted); the password is set on the parsed
// struct so it never sits in a string. pgxpool pings a connection that was
// idle for more than a second before handing it out, and closes
// connections after an hour and idle ones after 30 minutes (its defaults).
func poolConfig(c Config, password string) (*pgxpool.Config, error) {
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
	pc, err := pgxpool.ParseConfig(strings.Join(kv, " "))
	if err != nil {
		// Unreadable certificate files land here: a configuration
		// problem found while starting (exit 2), like a missing env var.
		return nil, fmt.Errorf("postgres connection settings: %w: %w", sink.ErrConfig, err)
	}
	pc.ConnConfig.Password = password
	// Runtime parameters are sent in the startup message, so every pooled
	// connection has them without an extra round trip.
	pc.ConnConfig.RuntimeParams["application_name"] = c.ApplicationName
	pc.ConnConfig.RuntimeParams["statement_timeout"] = strconv.Itoa(c.StatementTimeoutMS)
	pc.MaxConns = int32(c.PoolSize)
	pc.MinConns = 0
	return pc, nil
}

// quoteValue quotes a libpq keyword/value setting.
func quoteValue(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// beforeConnect adds the session settings learnt at start (see
// chooseCompression) to every new connection's startup message.
func (s *Sink) beforeConnect(_ context.Context, cc *pgx.ConnConfig) error {
	if s.lz4.Load() {
		cc.RuntimeParams["default_toast_compression"] = "lz4"
	}
	return nil
}

// chooseCompression makes the sink's sessions compress large values with
// lz4 instead of pglz when the server supports it (PostgreSQL 14+ built
// with lz4) and nobody chose a default_toast_compression for this server,
// database or role. Rows of the relational layout are about 2.5 KB, so
// PostgreSQL compresses their JSON columns: with pglz that was a quarter
// of the server's CPU per row in our profiles, lz4 costs a fraction of it
// and compresses these documents about as well (docs/performance.md). The
// stored values read back the same; a column with its own COMPRESSION
// setting keeps it. Any failure leaves the server's default in place.
func (s *Sink) chooseCompression(ctx context.Context, conn *pgx.Conn) {
	var use bool
	err := conn.QueryRow(ctx, `select coalesce((select source = 'default' and 'lz4' = any(enumvals)
from pg_catalog.pg_settings where name = 'default_toast_compression'), false)`, pgx.QueryExecModeExec).Scan(&use)
	if err != nil || !use {
		return
	}
	if _, err := conn.Exec(ctx, "set default_toast_compression = lz4", pgx.QueryExecModeExec); err != nil {
		return
	}
	s.lz4.Store(true)
}

// createStages creates, on a new connection of the COPY path, one
// temporary table per target table: text and bigint columns named like
// the target's, emptied at every commit (on commit delete rows). Creating
// it once per connection rather than once per batch keeps catalog inserts
// and deletes out of every transaction; the insert … select casts its
// columns as the unnest statement casts its arrays.
func (s *Sink) createStages(ctx context.Context, conn *pgx.Conn) error {
	d := sqlmodel.Postgres
	for _, t := range s.model.Tables {
		if t.Mapped != nil {
			continue
		}
		var b strings.Builder
		b.WriteString("create temp table if not exists " + d.Quote(s.stage[t]) + " (")
		for f := range sqlmodel.NumFields {
			if f > 0 {
				b.WriteString(", ")
			}
			typ := "text"
			if f.Integer() {
				typ = "bigint"
			}
			b.WriteString(d.Quote(s.model.Column(f)) + " " + typ)
		}
		b.WriteString(") on commit delete rows")
		if _, err := conn.Exec(ctx, b.String(), pgx.QueryExecModeExec); err != nil {
			return fmt.Errorf("create staging table: %w", err)
		}
	}
	return nil
}

// acquire takes a pooled connection.
func (s *Sink) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	return s.pool.Acquire(ctx)
}

// discard closes c and removes it from the pool: the failure that led
// here may have left it in any state (a cancelled query, a stale cached
// statement for a table that was dropped and recreated), and a fresh
// connection is cheap next to a wrong one.
func discard(c *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_ = c.Conn().Close(ctx)
	c.Release() // a closed connection is destroyed, not pooled
}
