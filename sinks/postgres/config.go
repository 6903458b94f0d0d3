// Package postgres is the PostgreSQL sink (docs/sql.md#per-database): rows of the
// shared relational layout (docs/formats.md#sql-tables) written with pgx, one
// transaction per batch on one connection, one statement per table.
//
// The statement binds one array per column and reads the rows back with
// unnest, so its text is the same for every batch size: pgx caches one
// prepared statement per SQL text, and a multi-row VALUES list would create
// one per distinct row count.
package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sqlconfig"
)

// Config is the postgres sink's configuration (docs/sql.md#per-database and the shared
// keys of docs/sql.md). Default returns it with every default; Decode fills it from a
// "sink" object.
type Config struct {
	Type     string `json:"type" trim:"true" lower:"true" enum:"postgres" doc:"Sink type."`
	Host     string `json:"host" trim:"true" nonblank:"true" nocontrol:"true" doc:"Server host name, IP address, or Unix socket directory (an absolute path such as /var/run/postgresql)."`
	Port     int    `json:"port" min:"1" max:"65535" doc:"Server port."`
	Database string `json:"database" required:"true" trim:"true" nonblank:"true" nocontrol:"true" doc:"Database name."`
	User     string `json:"user" required:"true" trim:"true" nonblank:"true" nocontrol:"true" doc:"User name."`
	// Password, PasswordEnv and PasswordFile are the three sources of the
	// password; at most one may be set, and none means no password (trust,
	// peer over a Unix socket, client certificates). The environment
	// variable and the file are read when the sink opens, never during
	// validation.
	Password              *secret.Value `json:"password" secret:"true" nonblank:"true" nocontrol:"true" doc:"Password; at most one of password, password_env, password_file (none: the server authenticates without one, e.g. trust, peer or client certificates)."`
	PasswordEnv           *string       `json:"password_env" pattern:"^[A-Z_][A-Z0-9_]{0,127}$" doc:"Environment variable holding the password."`
	PasswordFile          *string       `json:"password_file" nonblank:"true" nocontrol:"true" doc:"File holding the password (one trailing newline removed)."`
	SSLMode               string        `json:"sslmode" enum:"disable,allow,prefer,require,verify-ca,verify-full" doc:"libpq sslmode."`
	SSLRootCert           *string       `json:"ssl_root_cert" nonblank:"true" nocontrol:"true" doc:"PEM file of the CAs trusted for the server certificate."`
	SSLCert               *string       `json:"ssl_cert" nonblank:"true" nocontrol:"true" doc:"Client certificate (requires ssl_key)."`
	SSLKey                *string       `json:"ssl_key" nonblank:"true" nocontrol:"true" doc:"Client key (requires ssl_cert)."`
	ConnectTimeoutSeconds int           `json:"connect_timeout_seconds" min:"1" max:"300" doc:"Connection timeout in seconds."`
	StatementTimeoutMS    int           `json:"statement_timeout_ms" min:"0" max:"3600000" doc:"Server-side statement timeout in milliseconds (0 = none)."`
	ApplicationName       string        `json:"application_name" nocontrol:"true" doc:"application_name reported to the server (PostgreSQL truncates it to 63 bytes)."`
	Mode                  string        `json:"mode" enum:"insert,insert_ignore,upsert" doc:"Write mode (docs/sql.md)."`
	UpsertUpdateColumns   *[]string     `json:"upsert_update_columns" doc:"Columns an upsert updates: null = every non-key mapped column, [] = none (redelivery is a no-op)."`
	Staging               Staging       `json:"staging" doc:"COPY-based write path."`
	PoolSize              int           `json:"pool_size" min:"1" max:"64" doc:"Maximum open connections (one per in-flight batch)."`
	AutoCreate            bool          `json:"auto_create" doc:"Create missing tables with the recommended DDL at start."`
	sqlconfig.Shared[sqlconfig.UpsertRoute]
}

// Staging is the "staging" object: with Enabled, each table's rows are
// COPYed into a temporary table and inserted from there.
type Staging struct {
	Enabled bool `json:"enabled" doc:"Use the COPY path: COPY into a temporary table, then insert … select."`
}

var _ fields.Validator = (*Config)(nil)

// Default returns the configuration with every default of docs/sql.md#per-database.
func Default() Config {
	return Config{
		Type:                  "postgres",
		Host:                  "127.0.0.1",
		Port:                  5432,
		SSLMode:               "prefer",
		ConnectTimeoutSeconds: 10,
		StatementTimeoutMS:    30000,
		ApplicationName:       "nats-sink",
		Mode:                  string(sqlmodel.Upsert),
		PoolSize:              4,
		Shared:                sqlmodel.DefaultShared[sqlconfig.UpsertRoute](sqlmodel.Postgres),
	}
}

// Decode validates one postgres "sink" object without I/O and returns its
// Config. Problems come back as one *sink.ConfigError with paths relative to
// the sink object.
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
// rules they cannot express: at most one password source, ssl_cert with ssl_key,
// and the shared relational rules of docs/sql.md with PostgreSQL's
// identifiers. Problems have paths relative to the sink object and come
// back as one *sink.ConfigError, or nil. Decode calls it on the decoded
// object, New before anything else, so a Config built in Go is checked like
// a loaded one.
func (c *Config) Validate() error { return fields.Validate(c, c.rules) }

func (c *Config) rules(p *fields.Problems) {
	for _, pr := range sqlmodel.SecretProblems("password", false, c.Password, c.PasswordEnv, c.PasswordFile) {
		p.Add(pr.Path, pr.Message)
	}
	if (c.SSLCert == nil) != (c.SSLKey == nil) {
		if c.SSLCert == nil {
			p.Add("ssl_cert", "required when ssl_key is set")
		} else {
			p.Add("ssl_key", "required when ssl_cert is set")
		}
	}
	if strings.Contains(c.Host, "/") && !strings.HasPrefix(c.Host, "/") {
		p.Add("host", fmt.Sprintf("must be a host name, an IP address or an absolute Unix socket directory (got %q)", c.Host))
	}
	sqlmodel.Check(&c.Shared, sqlmodel.Postgres, c.options(), p)
}

var _ sink.Warner = Config{}

// Warnings reports the accepted but weak TLS settings: sslmode prefer or
// allow (the connection falls back to plain text when the server offers no
// TLS, and the certificate is never verified) and disable, each only for a
// server reached over the network; a Unix socket or a loopback address
// never leaves the machine.
func (c Config) Warnings() []sink.Problem {
	if sqlmodel.LocalHost(c.Host) {
		return nil
	}
	switch c.SSLMode {
	case "prefer", "allow":
		return []sink.Problem{{Path: "sslmode", Message: c.SSLMode + " falls back to an unencrypted connection when the server offers no TLS and never verifies the server certificate; " +
			"set sslmode verify-full (with ssl_root_cert)"}}
	case "disable":
		return []sink.Problem{{Path: "sslmode", Message: "disable sends the credentials and rows to " + c.Host + " unencrypted; set sslmode verify-full (with ssl_root_cert)"}}
	}
	return nil
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
