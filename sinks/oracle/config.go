// Package oracle is the Oracle Database sink (docs/oracle.md): rows of the
// shared relational layout (docs/formats.md#sql-tables) written through the pure-Go
// github.com/sijms/go-ora/v2 driver, one transaction per WriteBatch, one
// array-bound execution of the spec's statement per table (insert, insert
// with the append hint, or MERGE), or the staging path (array insert into
// a staging table, one MERGE from it, optional cleanup).
//
// Redelivery is made harmless by the MERGE statements: insert_ignore inserts
// only keys that are missing, merge rewrites the update columns, and
// insert/append dead-letter a redelivered row (not recommended).
package oracle

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

// notSupported is the spec's text for a connection key that the go-ora
// driver (and this package on top of it) cannot honour (docs/oracle.md).
const notSupported = "not supported by this build"

// Config is the oracle sink's configuration (docs/oracle.md and the shared keys
// of docs/sql.md). Default returns it with every default; Decode fills it from a
// "sink" object.
type Config struct {
	Type string `json:"type" trim:"true" lower:"true" enum:"oracle" doc:"Sink type."`
	// DSN is an Easy Connect string ([tcp://|tcps://][//]host[:port]/service[:server][/instance])
	// or a connect descriptor ("(DESCRIPTION=...)"). Net service aliases
	// need config_dir, which this build rejects.
	DSN  string `json:"dsn" required:"true" trim:"true" nonblank:"true" nocontrol:"true" doc:"Easy Connect string (host[:port]/service) or connect descriptor."`
	User string `json:"user" required:"true" trim:"true" nonblank:"true" nocontrol:"true" doc:"Database user; requires exactly one of password, password_env, password_file."`
	// Password, PasswordEnv and PasswordFile are the three sources of the
	// password; exactly one is required. The file source is the
	// configuration-wide [ext] rule of docs/configuration.md#nats.
	Password     *secret.Value `json:"password" secret:"true" nonblank:"true" nocontrol:"true" doc:"Password; only one of password, password_env, password_file."`
	PasswordEnv  *string       `json:"password_env" pattern:"^[A-Z_][A-Z0-9_]{0,127}$" doc:"Environment variable holding the password, read at start."`
	PasswordFile *string       `json:"password_file" nonblank:"true" nocontrol:"true" doc:"File holding the password (one trailing newline removed), read at start."`
	// ConfigDir would name the directory of tnsnames.ora. go-ora resolves
	// no aliases, so any value is rejected at validation.
	ConfigDir      *string `json:"config_dir" doc:"Directory with tnsnames.ora (not supported by this build)."`
	WalletLocation *string `json:"wallet_location" nonblank:"true" nocontrol:"true" doc:"Wallet directory (cwallet.sso, or ewallet.p12 with wallet_password) for mutual TLS."`
	// WalletPassword, WalletPasswordEnv and WalletPasswordFile: at most one,
	// and only with wallet_location.
	WalletPassword     *secret.Value `json:"wallet_password" secret:"true" nonblank:"true" nocontrol:"true" doc:"Password of ewallet.p12; requires wallet_location."`
	WalletPasswordEnv  *string       `json:"wallet_password_env" pattern:"^[A-Z_][A-Z0-9_]{0,127}$" doc:"Environment variable holding the wallet password."`
	WalletPasswordFile *string       `json:"wallet_password_file" nonblank:"true" nocontrol:"true" doc:"File holding the wallet password."`
	// SSLServerDNMatch: go-ora always checks the server certificate against
	// the host name on TLS connections, which is what true means; false
	// cannot be honoured.
	SSLServerDNMatch   *bool    `json:"ssl_server_dn_match" doc:"Match the server certificate against the host name (only true or null in this build)."`
	SSLServerCertDN    *string  `json:"ssl_server_cert_dn" doc:"Expected server certificate DN (not supported by this build)."`
	DisableParallelDML bool     `json:"disable_parallel_dml" doc:"Run \"alter session disable parallel dml\" on each new connection."`
	TCPConnectTimeout  *float64 `json:"tcp_connect_timeout" xmin:"0" doc:"TCP connect timeout in seconds (> 0); null = the driver default."`
	RetryCount         *int     `json:"retry_count" min:"0" doc:"Connection attempts retried after a failure (null = 0)."`
	RetryDelay         *int     `json:"retry_delay" min:"0" doc:"Seconds between connection attempts (null = 0)."`
	HTTPSProxy         *string  `json:"https_proxy" doc:"HTTPS proxy host (not supported by this build)."`
	HTTPSProxyPort     *int     `json:"https_proxy_port" min:"1" max:"65535" doc:"HTTPS proxy port; requires https_proxy (not supported by this build)."`
	Mode               string   `json:"mode" enum:"insert,insert_ignore,merge,append" doc:"Write mode (docs/sql.md)."`
	// MergeUpdateColumns: nil = every non-key mapped column, [] = none.
	MergeUpdateColumns *[]string `json:"merge_update_columns" doc:"Columns a merge updates: null = every non-key mapped column, [] = none (redelivery is a no-op)."`
	Staging            Staging   `json:"staging" doc:"Staging-table write path."`
	PoolMin            int       `json:"pool_min" min:"1" doc:"Idle connections kept open."`
	PoolMax            int       `json:"pool_max" min:"1" doc:"Maximum open connections."`
	// PoolIncrement is validated and shown; database/sql opens connections
	// one at a time as they are needed, so it does not change behaviour.
	PoolIncrement int  `json:"pool_increment" min:"1" doc:"Connections opened together when the pool grows (database/sql opens them one at a time)."`
	AutoCreate    bool `json:"auto_create" doc:"Create missing tables (and the staging table) with the recommended DDL at start."`
	sqlconfig.Shared[sqlconfig.MergeRoute]
}

// Staging is the "staging" object (docs/oracle.md).
type Staging struct {
	Enabled       bool    `json:"enabled" doc:"Write through the staging table: insert all rows there, then one MERGE from it."`
	Table         *string `json:"table" doc:"Staging table (name or schema.name); required when enabled."`
	BatchIDColumn string  `json:"batch_id_column" doc:"Staging column holding the batch id."`
	Cleanup       string  `json:"cleanup" enum:"delete_on_success,keep" doc:"Delete a batch's staging rows in the same transaction, or keep them."`
}

// Staging cleanup policies.
const (
	CleanupDeleteOnSuccess = "delete_on_success"
	CleanupKeep            = "keep"
)

var _ fields.Validator = (*Config)(nil)

// Default returns the configuration with every default of docs/oracle.md.
func Default() Config {
	return Config{
		Type:               "oracle",
		DisableParallelDML: true,
		Mode:               string(sqlmodel.Merge),
		Staging:            Staging{BatchIDColumn: "NATS_SINKS_BATCH_ID", Cleanup: CleanupDeleteOnSuccess},
		PoolMin:            1,
		PoolMax:            4,
		PoolIncrement:      1,
		Shared:             sqlmodel.DefaultShared[sqlconfig.MergeRoute](sqlmodel.Oracle),
	}
}

// Decode validates one oracle "sink" object without I/O and returns its
// Config. Problems come back as one *sink.ConfigError with paths relative
// to the sink object. Secrets named by *_env and *_file keys are not read
// here (docs/configuration.md#how-a-file-is-loaded).
func Decode(raw json.RawMessage) (sink.Opener, error) {
	c := Default()
	if err := fields.DecodeSinkExact(raw, &c); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Config) options() sqlmodel.Options {
	return sqlmodel.Options{Mode: sqlmodel.Mode(c.Mode), UpdateColumns: c.MergeUpdateColumns, AutoCreate: c.AutoCreate}
}

// Validate checks c: the rules of the struct tags and, when they pass, the
// rules they cannot express: the dsn's form, the secret sources, the keys
// this build cannot honour, the staging object, the pool sizes, and the
// shared relational rules of docs/sql.md with Oracle's identifiers.
// Problems have paths relative to the sink object and come back as one
// *sink.ConfigError, or nil. Decode calls it on the decoded object, New
// before anything else, so a Config built in Go is checked like a loaded
// one.
func (c *Config) Validate() error { return fields.Validate(c, c.rules) }

func (c *Config) rules(p *fields.Problems) {
	add := func(path, msg string) { p.Add(path, msg) }
	if _, err := parseDSN(c.DSN); err != nil {
		add("dsn", err.Error())
	}
	for _, pr := range sqlmodel.SecretProblems("password", true, c.Password, c.PasswordEnv, c.PasswordFile) {
		add(pr.Path, pr.Message)
	}
	if c.ConfigDir != nil {
		add("config_dir", notSupported)
	}
	for _, pr := range sqlmodel.SecretProblems("wallet_password", false, c.WalletPassword, c.WalletPasswordEnv, c.WalletPasswordFile) {
		add(pr.Path, pr.Message)
	}
	if (c.WalletPassword != nil || c.WalletPasswordEnv != nil || c.WalletPasswordFile != nil) && c.WalletLocation == nil {
		add("wallet_password", "requires wallet_location")
	}
	if c.SSLServerDNMatch != nil && !*c.SSLServerDNMatch {
		// go-ora verifies the host name whenever it verifies at all; there
		// is no "chain only" mode, and dropping verification entirely is
		// not what false means.
		add("ssl_server_dn_match", notSupported)
	}
	if c.SSLServerCertDN != nil {
		add("ssl_server_cert_dn", notSupported)
	}
	if c.HTTPSProxy != nil {
		add("https_proxy", notSupported)
	}
	if c.HTTPSProxyPort != nil {
		if c.HTTPSProxy == nil {
			add("https_proxy_port", "requires https_proxy")
		}
		add("https_proxy_port", notSupported)
	}
	c.stagingProblems(add)
	if c.PoolMin > c.PoolMax {
		// Spec is silent; a minimum above the maximum is a typo every pool
		// implementation rejects (python-oracledb included).
		add("pool_min", fmt.Sprintf("must not exceed pool_max (got %d > %d)", c.PoolMin, c.PoolMax))
	}
	sqlmodel.Check(&c.Shared, sqlmodel.Oracle, c.options(), p)
}

// stagingProblems checks the staging object: enabled requires a table and
// mode merge or insert_ignore; the table and the batch column are Oracle
// identifiers, and the batch column must not clash with a mapped column.
func (c *Config) stagingProblems(add func(path, msg string)) {
	s := c.Staging
	d := sqlmodel.Oracle
	if s.Table != nil {
		if msg := d.CheckTable(*s.Table); msg != "" {
			add("staging.table", msg)
		} else if strings.EqualFold(*s.Table, c.Table) {
			add("staging.table", fmt.Sprintf("must differ from table %q", c.Table))
		}
	}
	if msg := d.CheckColumn(s.BatchIDColumn); msg != "" {
		add("staging.batch_id_column", msg)
	} else {
		for f := range sqlmodel.NumFields {
			col := sqlmodel.Column(&c.Columns, f)
			switch {
			case f == sqlmodel.Payload && c.PayloadColumn != nil:
				col = *c.PayloadColumn
			case f == sqlmodel.Headers && c.HeadersColumn != nil:
				col = *c.HeadersColumn
			}
			if strings.EqualFold(col, s.BatchIDColumn) {
				add("staging.batch_id_column", fmt.Sprintf("must differ from the mapped column of columns.%s (got %q)", f.Key(), s.BatchIDColumn))
				break
			}
		}
	}
	if s.Enabled {
		if s.Table == nil {
			add("staging.table", "required when staging.enabled is true")
		}
		if m := sqlmodel.Mode(c.Mode); m != sqlmodel.Merge && m != sqlmodel.InsertIgnore {
			add("staging.enabled", fmt.Sprintf("requires mode merge or insert_ignore (mode is %s)", c.Mode))
		}
	}
}

// secret resolves one secret source (value, environment variable or file)
// when the sink starts, never during validation. Errors are
// *sink.ConfigError (exit 2 in the CLI) and never carry the value. ok is
// false when no source is set.
func (c *Config) secret(key string, value *secret.Value, env, file *string, lookupEnv func(string) (string, bool)) (v string, ok bool, err error) {
	v, path, err := sqlmodel.ResolveSecret(key, value, env, file, lookupEnv)
	if err != nil || path == "" {
		return "", false, err
	}
	if strings.TrimSpace(v) == "" {
		return "", false, problem(path, "resolved value must not be empty")
	}
	return v, true, nil
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
