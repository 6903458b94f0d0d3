// Package sqlite is the embedded SQLite sink (docs/sql.md#per-database): rows of the
// shared relational layout (docs/formats.md#sql-tables) written through one writer
// connection, one BEGIN IMMEDIATE … COMMIT per batch, with a pure-Go driver
// (modernc.org/sqlite, no cgo).
//
// Only durable settings are accepted: synchronous FULL or EXTRA, so that a
// committed batch survives a power loss before its messages are
// acknowledged.
package sqlite

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sqlconfig"
)

// Config is the sqlite sink's configuration (docs/sql.md#per-database and the shared
// keys of docs/sql.md). Default returns it with every default; Decode fills it from a
// "sink" object.
type Config struct {
	Type                string    `json:"type" trim:"true" lower:"true" enum:"sqlite" doc:"Sink type."`
	Path                string    `json:"path" nonblank:"true" doc:"Database file."`
	CreateDirectory     bool      `json:"create_directory" doc:"Create the database file's parent directory when missing."`
	JournalMode         string    `json:"journal_mode" enum:"wal,delete" doc:"SQLite journal mode."`
	Synchronous         string    `json:"synchronous" enum:"full,extra" doc:"SQLite synchronous setting; only durable settings are accepted."`
	BusyTimeoutMS       int       `json:"busy_timeout_ms" min:"0" max:"600000" doc:"How long a write waits for another process's lock, in milliseconds."`
	Mode                string    `json:"mode" enum:"insert,insert_ignore,upsert" doc:"Write mode (docs/sql.md)."`
	UpsertUpdateColumns *[]string `json:"upsert_update_columns" doc:"Columns an upsert updates: null = every non-key mapped column, [] = none (redelivery is a no-op)."`
	AutoCreate          bool      `json:"auto_create" doc:"Create missing tables with the recommended DDL at start."`
	sqlconfig.Shared[sqlconfig.UpsertRoute]
}

var _ fields.Validator = (*Config)(nil)

// Default returns the configuration with every default of docs/sql.md#per-database.
func Default() Config {
	return Config{
		Type:            "sqlite",
		Path:            "nats-sinks.db",
		CreateDirectory: true,
		JournalMode:     "wal",
		Synchronous:     "full",
		BusyTimeoutMS:   5000,
		Mode:            string(sqlmodel.Upsert),
		AutoCreate:      true,
		Shared:          sqlmodel.DefaultShared[sqlconfig.UpsertRoute](sqlmodel.SQLite),
	}
}

// Decode validates one sqlite "sink" object without I/O and returns its
// Config. Problems come back as one *sink.ConfigError with paths relative
// to the sink object.
func Decode(raw json.RawMessage) (sink.Opener, error) {
	c := Default()
	if err := fields.DecodeSinkExact(raw, &c); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Config) options() sqlmodel.Options {
	return sqlmodel.Options{Mode: sqlmodel.Mode(c.Mode), UpdateColumns: c.UpsertUpdateColumns, AutoCreate: c.AutoCreate}
}

// Validate checks c: the rules of the struct tags and, when they pass, the
// rules they cannot express (the path, and the shared relational rules of
// docs/sql.md with SQLite's identifiers). Problems have paths relative to
// the sink object and come back as one *sink.ConfigError, or nil. Decode
// calls it on the decoded object, New before anything else, so a Config
// built in Go is checked like a loaded one.
func (c *Config) Validate() error { return fields.Validate(c, c.rules) }

func (c *Config) rules(p *fields.Problems) {
	if strings.ContainsRune(c.Path, 0) {
		p.Add("path", "must not contain NUL")
	}
	sqlmodel.Check(&c.Shared, sqlmodel.SQLite, c.options(), p)
}

// Open starts the sink; it is New behind the sink.Opener interface.
func (c Config) Open(ctx context.Context, deps sink.Deps) (sink.Sink, error) {
	s, err := New(ctx, c, deps)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// PayloadReads lists the settings that read payload fields (mapped layout);
// the loader refuses them where payload encryption applies
// (sink.PayloadReader).
func (c Config) PayloadReads() []string { return sqlmodel.PayloadReads(c.Shared) }
