// Package postgres is the PostgreSQL sink (spec sinks.md §5): rows of the
// shared relational layout (data-shapes §9) written with pgx, one
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

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/telemetry"
)

// Config is the postgres sink's configuration (sinks.md §5 and the shared
// keys of §2). Default returns it with every default; Decode fills it from a
// "sink" object.
type Config struct {
	Type     string `json:"type" trim:"true" lower:"true" enum:"postgres" doc:"Sink type."`
	Host     string `json:"host" trim:"true" nonblank:"true" nocontrol:"true" doc:"Server host name, IP address or Unix socket directory."`
	Port     int    `json:"port" min:"1" max:"65535" doc:"Server port."`
	Database string `json:"database" required:"true" trim:"true" nonblank:"true" nocontrol:"true" doc:"Database name."`
	User     string `json:"user" required:"true" trim:"true" nonblank:"true" nocontrol:"true" doc:"User name."`
	// Password, PasswordEnv and PasswordFile are the three sources of the
	// password; exactly one is required. The environment variable and the
	// file are read when the sink opens, never during validation.
	Password              *secret.Value `json:"password" secret:"true" nonblank:"true" nocontrol:"true" doc:"Password; only one of password, password_env, password_file."`
	PasswordEnv           *string       `json:"password_env" pattern:"^[A-Z_][A-Z0-9_]{0,127}$" doc:"Environment variable holding the password."`
	PasswordFile          *string       `json:"password_file" nonblank:"true" nocontrol:"true" doc:"File holding the password (one trailing newline removed)."`
	SSLMode               string        `json:"sslmode" enum:"disable,allow,prefer,require,verify-ca,verify-full" doc:"libpq sslmode."`
	SSLRootCert           *string       `json:"ssl_root_cert" nonblank:"true" nocontrol:"true" doc:"PEM file of the CAs trusted for the server certificate."`
	SSLCert               *string       `json:"ssl_cert" nonblank:"true" nocontrol:"true" doc:"Client certificate (requires ssl_key)."`
	SSLKey                *string       `json:"ssl_key" nonblank:"true" nocontrol:"true" doc:"Client key (requires ssl_cert)."`
	ConnectTimeoutSeconds int           `json:"connect_timeout_seconds" min:"1" max:"300" doc:"Connection timeout in seconds."`
	StatementTimeoutMS    int           `json:"statement_timeout_ms" min:"0" max:"3600000" doc:"Server-side statement timeout in milliseconds (0 = none)."`
	ApplicationName       string        `json:"application_name" nocontrol:"true" doc:"application_name reported to the server (PostgreSQL truncates it to 63 bytes)."`
	Mode                  string        `json:"mode" enum:"insert,insert_ignore,upsert" doc:"Write mode (sinks.md §2)."`
	UpsertUpdateColumns   *[]string     `json:"upsert_update_columns" doc:"Columns an upsert updates: null = every non-key mapped column, [] = none (redelivery is a no-op)."`
	Staging               Staging       `json:"staging" doc:"COPY-based write path."`
	PoolSize              int           `json:"pool_size" min:"1" max:"64" doc:"Maximum open connections (one per in-flight batch)."`
	AutoCreate            bool          `json:"auto_create" doc:"Create missing tables with the recommended DDL at start."`
	sqlmodel.Shared[sqlmodel.UpsertRoute]

	// Metrics, when set (by the CLI), receives postgres_execute_seconds,
	// postgres_commit_seconds and postgres_duplicates_total. Nil means no
	// sink metrics.
	Metrics *telemetry.Metrics `json:"-"`
	// Env looks up environment variables for password_env; nil means the
	// process environment. Tests set it.
	Env config.Env `json:"-"`
}

// Staging is the "staging" object: with Enabled, each table's rows are
// COPYed into a temporary table and inserted from there.
type Staging struct {
	Enabled bool `json:"enabled" doc:"Use the COPY path: COPY into a temporary table, then insert … select."`
}

var _ fields.Validator = (*Config)(nil)

// Default returns the configuration with every default of sinks.md §5.
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
		Shared:                sqlmodel.DefaultShared[sqlmodel.UpsertRoute](sqlmodel.Postgres),
	}
}

// Decode validates one postgres "sink" object without I/O and returns its
// Config. Problems come back as one *sink.ConfigError with paths relative to
// the sink object.
func Decode(raw json.RawMessage) (sink.Opener, error) {
	c := Default()
	if err := fields.DecodeSink(raw, &c); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Config) options() sqlmodel.Options {
	return sqlmodel.Options{Mode: sqlmodel.Mode(c.Mode), UpdateColumns: c.UpsertUpdateColumns, AutoCreate: c.AutoCreate}
}

// Validate checks the rules the struct tags cannot express: one password
// source, ssl_cert with ssl_key, and the shared relational rules.
// fields.DecodeSink calls it after decoding.
func (c *Config) Validate(p *fields.Problems) {
	for _, pr := range c.problems() {
		p.Add(pr.Path, pr.Message)
	}
	c.Shared.Validate(sqlmodel.Postgres, c.options(), p)
}

// problems returns the connection-key problems in schema order. New runs
// it too, for Configs built by hand rather than decoded.
func (c *Config) problems() []sink.Problem {
	out := sqlmodel.SecretProblems("password", true, c.Password, c.PasswordEnv, c.PasswordFile)
	if (c.SSLCert == nil) != (c.SSLKey == nil) {
		if c.SSLCert == nil {
			out = append(out, sink.Problem{Path: "ssl_cert", Message: "required when ssl_key is set"})
		} else {
			out = append(out, sink.Problem{Path: "ssl_key", Message: "required when ssl_cert is set"})
		}
	}
	return out
}

// Open starts the sink; it is New behind the sink.Opener interface.
func (c Config) Open(ctx context.Context) (sink.Sink, error) {
	s, err := New(ctx, c)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// WithEnv returns c reading its *_env keys through env (nil: the process
// environment); pipeline.OpenSink passes the environment it was given.
func (c Config) WithEnv(env config.Env) sink.Opener {
	c.Env = env
	return c
}

// WithMetrics returns c with its sink metrics reported to m; the CLI calls it
// for every sink that has metrics of its own.
func (c Config) WithMetrics(m *telemetry.Metrics) sink.Opener {
	c.Metrics = m
	return c
}
