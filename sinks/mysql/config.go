// Package mysql is the MySQL/MariaDB sink (docs/sql.md#per-database): rows of the
// shared relational layout (docs/formats.md#sql-tables) written with multi-row INSERTs
// (server-side prepared statements of a few fixed row counts), inside one
// transaction per WriteBatch, through the pure-Go
// github.com/go-sql-driver/mysql driver.
//
// Redelivery is made harmless by the table's unique keys: insert_ignore
// skips rows whose key exists, upsert rewrites them, and insert/append
// dead-letter them (not recommended).
package mysql

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sqlconfig"
)

// Config is the mysql sink's configuration (docs/sql.md#per-database and the shared keys
// of docs/sql.md). Default returns it with every default; Decode fills it from a
// "sink" object.
type Config struct {
	Type     string `json:"type" trim:"true" lower:"true" enum:"mysql" doc:"Sink type."`
	Host     string `json:"host" trim:"true" nonblank:"true" nocontrol:"true" doc:"Server host name or address."`
	Port     int    `json:"port" min:"1" max:"65535" doc:"Server TCP port."`
	Database string `json:"database" required:"true" trim:"true" nonblank:"true" nocontrol:"true" doc:"Database (schema) holding the tables."`
	User     string `json:"user" required:"true" trim:"true" nonblank:"true" nocontrol:"true" doc:"User name; requires exactly one of password, password_env, password_file."`
	// Password, PasswordEnv and PasswordFile are the three sources of the
	// password; exactly one must be set. The file source is the
	// configuration-wide [ext] rule of docs/configuration.md#nats (every *_env secret can
	// come from a *_file instead).
	Password     *secret.Value `json:"password" secret:"true" nonblank:"true" nocontrol:"true" doc:"Password; only one of password, password_env, password_file."`
	PasswordEnv  *string       `json:"password_env" pattern:"^[A-Z_][A-Z0-9_]{0,127}$" doc:"Environment variable holding the password, read at start."`
	PasswordFile *string       `json:"password_file" nonblank:"true" nocontrol:"true" doc:"File holding the password (one trailing newline removed), read at start."`
	// ConnectionTimeout is the dial and handshake timeout in seconds,
	// rounded up to whole seconds (at least 1) as upstream's driver did.
	ConnectionTimeout float64 `json:"connection_timeout" xmin:"0" doc:"Connection timeout in seconds (> 0, rounded up to whole seconds)."`
	SSLCA             *string `json:"ssl_ca" nopad:"true" nocontrol:"true" doc:"CA certificate file (PEM) that verifies the server."`
	SSLCert           *string `json:"ssl_cert" nopad:"true" nocontrol:"true" doc:"Client certificate file (PEM); requires ssl_key."`
	SSLKey            *string `json:"ssl_key" nopad:"true" nocontrol:"true" doc:"Client private key file (PEM); requires ssl_cert."`
	SSLVerifyIdentity bool    `json:"ssl_verify_identity" doc:"Check the server certificate's host name when ssl_ca is set."`
	SSLDisabled       bool    `json:"ssl_disabled" doc:"Never use TLS; not allowed with any ssl_* file."`
	Mode              string  `json:"mode" enum:"insert,insert_ignore,upsert,append" doc:"Write mode (docs/sql.md)."`
	// UpsertUpdateColumns: nil = every non-key mapped column, [] = none.
	UpsertUpdateColumns *[]string `json:"upsert_update_columns" doc:"Columns an upsert updates: null = every non-key mapped column, [] = none (redelivery is a no-op)."`
	PoolName            *string   `json:"pool_name" pattern:"^[A-Za-z][A-Za-z0-9_.:-]{0,127}$" doc:"Sent as the connection attribute program_name."`
	PoolSize            int       `json:"pool_size" min:"1" max:"32" doc:"Maximum open connections."`
	AutoCreate          bool      `json:"auto_create" doc:"Create missing tables with the recommended DDL at start."`
	sqlconfig.Shared[sqlconfig.UpsertRoute]
}

var _ fields.Validator = (*Config)(nil)

// Default returns the configuration with every default of docs/sql.md#per-database.
func Default() Config {
	return Config{
		Type:              "mysql",
		Host:              "127.0.0.1",
		Port:              3306,
		ConnectionTimeout: 10,
		SSLVerifyIdentity: true,
		Mode:              string(sqlmodel.Upsert),
		PoolSize:          4,
		Shared:            sqlmodel.DefaultShared[sqlconfig.UpsertRoute](sqlmodel.MySQL),
	}
}

// Decode validates one mysql "sink" object without I/O and returns its
// Config. Problems come back as one *sink.ConfigError with paths relative
// to the sink object. Secrets named by password_env and password_file are
// not read here (docs/configuration.md#how-a-file-is-loaded).
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
// rules they cannot express: the password sources, the TLS file pairs, and
// the shared relational rules of docs/sql.md with MySQL's identifiers.
// Problems have paths relative to the sink object and come back as one
// *sink.ConfigError, or nil. Decode calls it on the decoded object, New
// before anything else, so a Config built in Go is checked like a loaded
// one.
func (c *Config) Validate() error { return fields.Validate(c, c.rules) }

func (c *Config) rules(p *fields.Problems) {
	switch n := countSet(c.Password != nil, c.PasswordEnv != nil, c.PasswordFile != nil); {
	case n == 0:
		p.Add("user", "requires one of password, password_env, password_file")
	case n > 1:
		p.Add("password", "set only one of password, password_env, password_file")
	}
	if (c.SSLCert == nil) != (c.SSLKey == nil) {
		if c.SSLCert == nil {
			p.Add("ssl_key", "requires ssl_cert")
		} else {
			p.Add("ssl_cert", "requires ssl_key")
		}
	}
	if c.SSLDisabled && (c.SSLCA != nil || c.SSLCert != nil || c.SSLKey != nil) {
		p.Add("ssl_disabled", "must not be true when ssl_ca, ssl_cert or ssl_key is set")
	}
	sqlmodel.Check(&c.Shared, sqlmodel.MySQL, c.options(), p)
}

var _ sink.Warner = Config{}

// Warnings reports the accepted but weak TLS settings for a server reached
// over the network (a loopback address never leaves the machine): TLS
// without ssl_ca (encrypted when the server offers it, but never verified,
// and plain text when it does not), ssl_ca without ssl_verify_identity
// (any certificate the CA signed is accepted, for any host), and
// ssl_disabled.
func (c Config) Warnings() []sink.Problem {
	if sqlmodel.LocalHost(c.Host) {
		return nil
	}
	const fix = "; set ssl_ca to the server's CA and keep ssl_verify_identity true"
	switch {
	case c.SSLDisabled:
		return []sink.Problem{{Path: "ssl_disabled", Message: "sends the credentials and rows to " + c.Host + " unencrypted" + fix}}
	case c.SSLCA == nil:
		return []sink.Problem{{Path: "ssl_ca", Message: "not set: TLS is used when the server offers it but the server certificate is never verified, and the connection falls back to plain text" + fix}}
	case !c.SSLVerifyIdentity:
		return []sink.Problem{{Path: "ssl_verify_identity", Message: "false accepts a certificate the CA issued to any host" + fix}}
	}
	return nil
}

func countSet(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// password resolves the configured password source through lookupEnv (nil:
// the process environment). Environment variables and files are read here,
// when the sink starts, never during validation. Errors are
// *sink.ConfigError (exit 2 in the CLI) and never carry the value.
func (c *Config) password(lookupEnv func(string) (string, bool)) (string, error) {
	v, path, err := sqlmodel.ResolveSecret("password", c.Password, c.PasswordEnv, c.PasswordFile, lookupEnv)
	switch {
	case err != nil:
		return "", err
	case path == "":
		return "", problem("user", "requires one of password, password_env, password_file")
	case strings.TrimSpace(v) == "":
		return "", problem(path, "resolved password must not be empty")
	case fields.HasControl(v):
		return "", problem(path, "resolved password must not contain control characters")
	}
	return v, nil
}

func problem(path, msg string) error {
	return &sink.ConfigError{Problems: []sink.Problem{{Path: path, Message: msg}}}
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
