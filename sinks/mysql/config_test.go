package mysql

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
)

func problems(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	ce, ok := errors.AsType[*sink.ConfigError](err)
	if !ok {
		t.Fatalf("error %v is not a *sink.ConfigError", err)
	}
	var out []string
	for _, p := range ce.Problems {
		out = append(out, p.Path+": "+p.Message)
	}
	return out
}

func TestDecode(t *testing.T) {
	const base = `"type":"mysql","database":"d","user":"u","password":"pw"`
	for _, tt := range []struct {
		name string
		js   string
		want []string
	}{
		{"minimal", `{` + base + `}`, nil},
		{"required keys", `{"type":"mysql","password":"pw"}`, []string{"database: required", "user: required"}},
		{"no password source", `{"type":"mysql","database":"d","user":"u"}`, []string{"user: requires one of password, password_env, password_file"}},
		{"two password sources", `{` + base + `,"password_env":"DB_PW"}`, []string{"password: set only one of password, password_env, password_file"}},
		{"password rules", `{"type":"mysql","database":"d","user":"u","password":" "}`, []string{"password: must not be empty"}},
		{"password control characters are not echoed", `{"type":"mysql","database":"d","user":"u","password":"a\u0001b"}`, []string{"password: must not contain control characters"}},
		{"password_env name", `{"type":"mysql","database":"d","user":"u","password_env":"db_pw"}`, []string{`password_env: must match ^[A-Z_][A-Z0-9_]{0,127}$ (got "db_pw")`}},
		{"host trimmed and non-empty", `{` + base + `,"host":"  "}`, []string{"host: must not be empty"}},
		{"host controls", `{` + base + `,"host":"a\nb"}`, []string{"host: must not contain control characters"}},
		{"port range", `{` + base + `,"port":65536}`, []string{"port: must be between 1 and 65535 (got 65536)"}},
		{"connection timeout positive", `{` + base + `,"connection_timeout":0}`, []string{"connection_timeout: must be greater than 0 (got 0)"}},
		{"cert needs key", `{` + base + `,"ssl_cert":"c.pem"}`, []string{"ssl_cert: requires ssl_key"}},
		{"key needs cert", `{` + base + `,"ssl_key":"k.pem"}`, []string{"ssl_key: requires ssl_cert"}},
		{"ssl file padding", `{` + base + `,"ssl_ca":" ca.pem"}`, []string{"ssl_ca: must not have surrounding whitespace"}},
		{"ssl_disabled with files", `{` + base + `,"ssl_disabled":true,"ssl_ca":"ca.pem"}`, []string{"ssl_disabled: must not be true when ssl_ca, ssl_cert or ssl_key is set"}},
		{"pool size range", `{` + base + `,"pool_size":33}`, []string{"pool_size: must be between 1 and 32 (got 33)"}},
		{"pool name pattern", `{` + base + `,"pool_name":"1x"}`, []string{`pool_name: must match ^[A-Za-z][A-Za-z0-9_.:-]{0,127}$ (got "1x")`}},
		{"merge is not a mysql mode", `{` + base + `,"mode":"merge"}`, []string{`mode: must be one of insert, insert_ignore, upsert, append (got "merge")`}},
		{"oracle key name is unknown", `{` + base + `,"merge_update_columns":[]}`, []string{`merge_update_columns: unknown key`}},
		{"update columns only with upsert", `{` + base + `,"mode":"insert","upsert_update_columns":[]}`, []string{"upsert_update_columns: only allowed with mode upsert (mode is insert)"}},
		{"table injection", `{` + base + `,"table":"t; drop table x"}`, []string{
			"table: must be a valid mysql table name (name or schema.name, each part matching ^[A-Za-z_][A-Za-z0-9_$]{0,63}$) (got \"t; drop table x\")"}},
		{"back-tick in table", "{" + base + ",\"table\":\"a`b\"}", []string{
			"table: must be a valid mysql table name (name or schema.name, each part matching ^[A-Za-z_][A-Za-z0-9_$]{0,63}$) (got \"a`b\")"}},
		{"column injection", "{" + base + ",\"columns\":{\"payload\":\"P`, `X\"}}", []string{
			"columns.payload: must be a valid mysql column name matching ^[A-Za-z_][A-Za-z0-9_$]{0,63}$ (got \"P`, `X\")"}},
		{"legacy alias injection", `{` + base + `,"payload_column":"p)--"}`, []string{
			`payload_column: must be a valid mysql column name matching ^[A-Za-z_][A-Za-z0-9_$]{0,63}$ (got "p)--")`}},
		{"route table injection", `{` + base + `,"table_routes":[{"subject":"a.>","table":"x.y.z"}]}`, []string{
			`table_routes[0].table: must be a valid mysql table name (name or schema.name, each part matching ^[A-Za-z_][A-Za-z0-9_$]{0,63}$) (got "x.y.z")`}},
		{"key column must be mapped", `{` + base + `,"idempotency":{"columns":["ID; drop"]}}`, []string{`idempotency.columns[0]: "ID; drop" is not a mapped column`}},
		{"schema-qualified table and routes", `{` + base + `,"table":"ops.EVENTS","table_routes":[{"subject":"a.>","table":"audit"}]}`, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.js))
			if diff := cmp.Diff(tt.want, problems(t, err)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeDefaults(t *testing.T) {
	o, err := Decode([]byte(`{"type":"mysql","database":"d","user":"u","password_env":"DB_PW"}`))
	if err != nil {
		t.Fatal(err)
	}
	c := o.(Config)
	got := []any{c.Host, c.Port, c.ConnectionTimeout, c.SSLVerifyIdentity, c.SSLDisabled, c.Mode, c.PoolSize, c.AutoCreate, c.Table, c.UpsertUpdateColumns == nil}
	want := []any{"127.0.0.1", 3306, 10.0, true, false, "upsert", 4, false, "NATS_SINK_EVENTS", true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

func TestPassword(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "pw")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	blankFile := filepath.Join(dir, "blank")
	os.WriteFile(blankFile, []byte("  \n"), 0o600)
	str := func(s string) *string { return &s }
	secret := secret.Value("direct")
	env := map[string]string{"DB_PW": "from-env", "BLANK": " ", "CTRL": "a\x00b"}
	for _, tt := range []struct {
		name    string
		set     func(c *Config)
		want    string
		problem string
	}{
		{"value", func(c *Config) { c.Password = &secret }, "direct", ""},
		{"env", func(c *Config) { c.PasswordEnv = str("DB_PW") }, "from-env", ""},
		{"env unset", func(c *Config) { c.PasswordEnv = str("NOPE") }, "", "password_env: environment variable NOPE is not set"},
		{"env blank", func(c *Config) { c.PasswordEnv = str("BLANK") }, "", "password_env: resolved password must not be empty"},
		{"env controls", func(c *Config) { c.PasswordEnv = str("CTRL") }, "", "password_env: resolved password must not contain control characters"},
		{"file without trailing newline", func(c *Config) { c.PasswordFile = &file }, "from-file", ""},
		{"file blank", func(c *Config) { c.PasswordFile = &blankFile }, "", "password_file: resolved password must not be empty"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.set(&c)
			got, err := c.password(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
			var probs []string
			if tt.problem != "" {
				probs = []string{tt.problem}
			}
			if diff := cmp.Diff(probs, problems(t, err)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if got != tt.want {
				t.Errorf("password() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	c := Default() // database, user and password missing
	_, err := New(t.Context(), c, sink.Deps{})
	// As for a loaded configuration, the key rules come first; the rules
	// between keys (a password source) once those pass.
	want := []string{"database: must not be empty", "user: must not be empty"}
	if diff := cmp.Diff(want, problems(t, err)); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	c.Database, c.User = "db", "u"
	_, err = New(t.Context(), c, sink.Deps{})
	want = []string{"user: requires one of password, password_env, password_file"}
	if diff := cmp.Diff(want, problems(t, err)); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

func TestDriverConfig(t *testing.T) {
	base := func() Config {
		c := Default()
		c.Host, c.Port, c.Database, c.User = "db.example", 3307, "events", "writer"
		return c
	}
	name := "ingest:eu-1"
	for _, tt := range []struct {
		name string
		set  func(c *Config)
		// want: timeout, connection attributes, TLS (nil, "preferred",
		// "verify"), fallback to plaintext
		timeout  time.Duration
		attrs    string
		tls      string
		fallback bool
	}{
		{"defaults: TLS preferred, unverified", func(*Config) {}, 10 * time.Second, "", "preferred", true},
		{"timeout rounded up", func(c *Config) { c.ConnectionTimeout = 1.2 }, 2 * time.Second, "", "preferred", true},
		{"timeout at least one second", func(c *Config) { c.ConnectionTimeout = 0.01 }, time.Second, "", "preferred", true},
		{"pool name is program_name", func(c *Config) { c.PoolName = &name }, 10 * time.Second, "program_name:ingest:eu-1", "preferred", true},
		{"ssl disabled", func(c *Config) { c.SSLDisabled = true }, 10 * time.Second, "", "none", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			tt.set(&c)
			dc, err := driverConfig(c, "pw")
			if err != nil {
				t.Fatal(err)
			}
			kind := "none"
			if dc.TLS != nil {
				kind = "verify"
				if dc.TLS.InsecureSkipVerify && dc.TLS.VerifyPeerCertificate == nil {
					kind = "preferred"
				}
			}
			got := []any{dc.Addr, dc.DBName, dc.User, dc.Passwd, dc.Timeout, dc.ConnectionAttributes, kind, dc.AllowFallbackToPlaintext, dc.InterpolateParams, dc.ClientFoundRows}
			// InterpolateParams false: values are bound server-side.
			want := []any{"db.example:3307", "events", "writer", "pw", tt.timeout, tt.attrs, tt.tls, tt.fallback, false, false}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("driver config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTLSFiles(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.pem")
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	os.WriteFile(garbage, []byte("not a certificate"), 0o600)
	for _, tt := range []struct {
		name    string
		set     func(c *Config)
		problem string
	}{
		{"unreadable CA", func(c *Config) { c.SSLCA = &missing }, "ssl_ca"},
		{"CA without PEM", func(c *Config) { c.SSLCA = &garbage }, "ssl_ca"},
		{"unreadable client pair", func(c *Config) { c.SSLCert, c.SSLKey = &missing, &missing }, "ssl_cert"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.set(&c)
			_, _, err := tlsConfig(c)
			ce, ok := errors.AsType[*sink.ConfigError](err)
			if !ok || ce.Problems[0].Path != tt.problem {
				t.Errorf("tlsConfig = %v, want a configuration problem at %s", err, tt.problem)
			}
		})
	}
	// A CA that parses: the chain is verified, the host name only with
	// ssl_verify_identity.
	ca := writeTestCA(t)
	c := Default()
	c.Host = "db.internal"
	c.SSLCA = &ca
	cfg, fallback, err := tlsConfig(c)
	if err != nil || fallback || cfg.InsecureSkipVerify || cfg.ServerName != "db.internal" || cfg.RootCAs == nil {
		t.Errorf("verify identity: cfg %+v, fallback %v, err %v", cfg, fallback, err)
	}
	c.SSLVerifyIdentity = false
	cfg, _, err = tlsConfig(c)
	if err != nil || cfg.VerifyPeerCertificate == nil || cfg.MinVersion != tls.VersionTLS12 {
		t.Errorf("chain only: cfg %+v, err %v", cfg, err)
	}
}

// writeTestCA writes a self-signed CA certificate (PEM) and returns its path.
func writeTestCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestEffectiveAndSchema(t *testing.T) {
	o, err := Decode([]byte(`{"type":"mysql","database":"d","user":"u","password":"s3cret-value"}`))
	if err != nil {
		t.Fatal(err)
	}
	eff := fields.Effective(o)
	if got := eff["password"]; got != "********" {
		t.Errorf("effective password = %v, want the mask", got)
	}
	if got := fmt.Sprintf("%v %+v", o, o); strings.Contains(got, "s3cret-value") {
		t.Errorf("formatted config leaks the password: %s", got)
	}
	def := Default()
	schema := fields.Schema(&def)
	props, _ := schema["properties"].(map[string]any)
	for _, k := range []string{"host", "port", "database", "user", "password", "password_env", "password_file", "connection_timeout",
		"ssl_ca", "ssl_cert", "ssl_key", "ssl_verify_identity", "ssl_disabled", "mode", "upsert_update_columns", "pool_name", "pool_size",
		"auto_create", "table", "table_routes", "payload_mode", "payload_column", "headers_column", "columns", "idempotency"} {
		if _, ok := props[k]; !ok {
			t.Errorf("schema lacks property %q", k)
		}
	}
}

// TestWarnings: TLS that does not verify the server (no ssl_ca, or no host
// name check) and disabled TLS are accepted but warned about for a server
// reached over the network; loopback is quiet, as is the verifying profile.
func TestWarnings(t *testing.T) {
	const base = `"type":"mysql","database":"d","user":"u","password":"pw"`
	for _, tt := range []struct {
		name, js, want string // want "" = no warning
	}{
		{"default TLS is unverified", `"host":"db.example.com"`, "ssl_ca: not set: TLS is used when the server offers it but the server certificate is never verified"},
		{"client certificate without ssl_ca", `"host":"db.example.com","ssl_cert":"c.pem","ssl_key":"k.pem"`, "ssl_ca: not set"},
		{"no host name check", `"host":"db.example.com","ssl_ca":"ca.pem","ssl_verify_identity":false`, "ssl_verify_identity: false accepts a certificate the CA issued to any host"},
		{"disabled", `"host":"10.1.2.3","ssl_disabled":true`, "ssl_disabled: sends the credentials and rows to 10.1.2.3 unencrypted"},
		{"verified", `"host":"db.example.com","ssl_ca":"ca.pem"`, ""},
		{"loopback", `"host":"127.0.0.1"`, ""},
		{"localhost disabled", `"host":"localhost","ssl_disabled":true`, ""},
	} {
		o, err := Decode([]byte(`{` + base + `,` + tt.js + `}`))
		if err != nil {
			t.Fatal(err)
		}
		w, ok := o.(sink.Warner)
		if !ok {
			t.Fatal("mysql Config is not a sink.Warner")
		}
		var got string
		for _, p := range w.Warnings() {
			got += p.Path + ": " + p.Message
		}
		if (tt.want == "") != (got == "") || !strings.HasPrefix(got, tt.want) {
			t.Errorf("%s: Warnings = %q, want prefix %q", tt.name, got, tt.want)
		}
	}
}
