package oracle

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
)

func TestDefaults(t *testing.T) {
	c := decode(t, "")
	want := Default()
	want.DSN, want.User = "db.example:1521/FREEPDB1", "app"
	pw := secret.Value("pw")
	want.Password = &pw
	if diff := cmp.Diff(want, c, cmp.AllowUnexported(Config{})); diff != "" {
		t.Errorf("decoded defaults (-want +got):\n%s", diff)
	}
	for _, tt := range []struct {
		name      string
		got, want any
	}{
		{"mode", c.Mode, "merge"},
		{"table", c.Table, "NATS_SINK_EVENTS"},
		{"disable_parallel_dml", c.DisableParallelDML, true},
		{"staging", c.Staging, Staging{BatchIDColumn: "NATS_SINKS_BATCH_ID", Cleanup: "delete_on_success"}},
		{"pools", [3]int{c.PoolMin, c.PoolMax, c.PoolIncrement}, [3]int{1, 4, 1}},
		{"auto_create", c.AutoCreate, false},
	} {
		if !cmp.Equal(tt.got, tt.want) {
			t.Errorf("default %s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	const ok = `"type":"oracle","dsn":"h/s","user":"u","password":"p"`
	oracleTable := func(got string) string {
		return `must be a valid oracle table name (name or schema.name, each part matching ^[A-Za-z][A-Za-z0-9_$#]{0,127}$) (got "` + got + `")`
	}
	for _, tt := range []struct {
		name string
		doc  string
		want []prob
	}{
		{"required keys", `"type":"oracle"`, []prob{{"dsn", "required"}, {"user", "required"}}},
		{"no password source", `"type":"oracle","dsn":"h/s","user":"u"`, []prob{{"password", "one of password, password_env, password_file is required"}}},
		{"two password sources and an alias", `"type":"oracle","dsn":"mydb","user":"u","password":"p","password_env":"X"`, []prob{
			{"dsn", `looks like a net service alias; aliases need config_dir, which is not supported by this build (use host[:port]/service or a connect descriptor)`},
			{"password", "set only one of password, password_env, password_file"},
		}},
		{"keys go-ora cannot honour", ok + `,"config_dir":"/etc/oracle","ssl_server_dn_match":false,"ssl_server_cert_dn":"CN=db","https_proxy":"proxy.example","https_proxy_port":8080`, []prob{
			{"config_dir", "not supported by this build"},
			{"ssl_server_dn_match", "not supported by this build"},
			{"ssl_server_cert_dn", "not supported by this build"},
			{"https_proxy", "not supported by this build"},
			{"https_proxy_port", "not supported by this build"},
		}},
		{"proxy port alone", ok + `,"https_proxy_port":8080`, []prob{
			{"https_proxy_port", "requires https_proxy"},
			{"https_proxy_port", "not supported by this build"},
		}},
		{"wallet password rules", ok + `,"wallet_password":"w","wallet_password_env":"WPW"`, []prob{
			{"wallet_password", "set only one of wallet_password, wallet_password_env, wallet_password_file"},
			{"wallet_password", "requires wallet_location"},
		}},
		{"numeric ranges", ok + `,"tcp_connect_timeout":0,"retry_count":-1,"retry_delay":-2,"https_proxy_port":70000,"pool_increment":0`, []prob{
			{"tcp_connect_timeout", "must be greater than 0 (got 0)"},
			{"retry_count", "must be at least 0 (got -1)"},
			{"retry_delay", "must be at least 0 (got -2)"},
			{"https_proxy_port", "must be between 1 and 65535 (got 70000)"},
			{"pool_increment", "must be at least 1 (got 0)"},
		}},
		{"pool_min above pool_max", ok + `,"pool_min":5,"pool_max":2`, []prob{{"pool_min", "must not exceed pool_max (got 5 > 2)"}}},
		{"staging enabled without table, with insert mode", ok + `,"mode":"insert","staging":{"enabled":true}`, []prob{
			{"staging.enabled", "requires mode merge or insert_ignore (mode is insert)"},
			{"staging.table", "required when staging.enabled is true"},
		}},
		{"staging append mode", ok + `,"mode":"append","staging":{"enabled":true,"table":"stage"}`, []prob{
			{"staging.enabled", "requires mode merge or insert_ignore (mode is append)"},
		}},
		{"staging batch column clashes with a mapped column", ok + `,"staging":{"table":"stage","batch_id_column":"stream_name"}`, []prob{
			{"staging.batch_id_column", `must differ from the mapped column of columns.stream_name (got "stream_name")`},
		}},
		{"staging table equal to the table", ok + `,"staging":{"table":"nats_sink_events"}`, []prob{
			{"staging.table", `must differ from table "NATS_SINK_EVENTS"`},
		}},
		{"staging cleanup", ok + `,"staging":{"cleanup":"truncate"}`, []prob{
			{"staging.cleanup", `must be one of delete_on_success, keep (got "truncate")`},
		}},
		{"identifier injection", ok + `,"table":"x; drop table y","staging":{"table":"a.b.c","batch_id_column":"b id"},"columns":{"payload":"p\"x"},"table_routes":[{"subject":"a","table":"t--"}]`, []prob{
			{"staging.table", oracleTable("a.b.c")},
			{"staging.batch_id_column", `must be a valid oracle column name matching ^[A-Za-z][A-Za-z0-9_$#]{0,127}$ (got "b id")`},
			{"table", oracleTable("x; drop table y")},
			{"table_routes[0].table", oracleTable("t--")},
			{"columns.payload", `must be a valid oracle column name matching ^[A-Za-z][A-Za-z0-9_$#]{0,127}$ (got "p\"x")`},
		}},
		{"key column injection", ok + `,"idempotency":{"columns":["STREAM_NAME) or (1=1"]}`, []prob{
			{"idempotency.columns[0]", `"STREAM_NAME) or (1=1" is not a mapped column`},
		}},
		{"update column injection", ok + `,"merge_update_columns":["PAYLOAD_JSON = 1, x"]`, []prob{
			{"merge_update_columns[0]", `"PAYLOAD_JSON = 1, x" is not a mapped column`},
		}},
		{"upsert is not an oracle mode", ok + `,"mode":"upsert"`, []prob{{"mode", `must be one of insert, insert_ignore, merge, append (got "upsert")`}}},
		{"update columns outside merge", ok + `,"mode":"insert","merge_update_columns":["PAYLOAD_JSON"]`, []prob{{"merge_update_columns", "only allowed with mode merge (mode is insert)"}}},
		{"update column that is a key", ok + `,"merge_update_columns":["STREAM_SEQUENCE"]`, []prob{{"merge_update_columns[0]", `"STREAM_SEQUENCE" is a key column`}}},
		{"bad port", `"type":"oracle","dsn":"host:99999/svc","user":"u","password":"p"`, []prob{{"dsn", "port must be between 1 and 65535 (got 99999)"}}},
		{"descriptor without service", `"type":"oracle","dsn":"(DESCRIPTION=(ADDRESS=(HOST=h)))","user":"u","password":"p"`, []prob{{"dsn", "connect descriptor names no SERVICE_NAME or SID"}}},
		{"descriptor without address", `"type":"oracle","dsn":"(DESCRIPTION=(CONNECT_DATA=(SERVICE_NAME=x)))","user":"u","password":"p"`, []prob{{"dsn", "connect descriptor names no (ADDRESS=(HOST=…)(PORT=…))"}}},
		{"Easy Connect Plus parameters", `"type":"oracle","dsn":"h:1521/s?transport_connect_timeout=3","user":"u","password":"p"`, []prob{
			{"dsn", `must be an Easy Connect string ([tcps://]host[:port]/service[:server][/instance]) or a connect descriptor`},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(json.RawMessage("{" + tt.doc + "}"))
			ce, ok := errors.AsType[*sink.ConfigError](err)
			if !ok {
				t.Fatalf("Decode error = %v, want *sink.ConfigError", err)
			}
			if diff := cmp.Diff(tt.want, probs(ce)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDSNNeverEchoed: a dsn that is not valid may be a user/password@host
// connect string; no problem message, from Decode or from New, repeats it
// or the password in it.
func TestDSNNeverEchoed(t *testing.T) {
	for _, dsn := range []string{"bob/pw-s3cret@db:1521/x", "bob/pw-s3cret@tnsalias", "oracle://bob:pw-s3cret@db/x", "pw-s3cret"} {
		_, err := Decode(json.RawMessage(`{"type":"oracle","dsn":"` + dsn + `","user":"u","password_env":"PW"}`))
		if err == nil {
			t.Errorf("Decode(dsn %q) succeeded, want a problem", dsn)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Decode(dsn %q) = %q: the problem echoes the dsn", dsn, err)
		}
		c := Default()
		pw := "PW"
		c.DSN, c.User, c.PasswordEnv = dsn, "u", &pw
		_, err = New(t.Context(), c, sink.Deps{})
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("New(dsn %q) = %v: want a problem that does not echo the dsn", dsn, err)
		}
	}
}

func TestDecodeAccepts(t *testing.T) {
	const minimal = `"type":"oracle","user":"u",`
	for _, doc := range []string{
		minimal + `"password":"p","dsn":"(DESCRIPTION=(ADDRESS=(PROTOCOL=tcps)(HOST=db.example)(PORT=2484))(CONNECT_DATA=(SERVICE_NAME=svc.example)))","tcp_connect_timeout":2.5,"retry_count":3,"retry_delay":1,"ssl_server_dn_match":true,"wallet_location":"/w","wallet_password_env":"WPW"`,
		base + `,"mode":"insert_ignore","staging":{"enabled":true,"table":"app.stage","cleanup":"keep"}`,
		minimal + `"dsn":"h/s","password":null,"password_file":"/run/secrets/pw","ssl_server_dn_match":null,"config_dir":null,"https_proxy":null`,
		base + `,"merge_update_columns":[],"table_routes":[{"subject":"a.>","table":"A_EVENTS","merge_update_columns":null}]`,
	} {
		t.Run(doc, func(t *testing.T) {
			decodeDoc(t, doc)
		})
	}
}

func TestParseDSN(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"db.example/FREEPDB1", "(DESCRIPTION=(ADDRESS=(PROTOCOL=tcp)(HOST=db.example)(PORT=1521))(CONNECT_DATA=(SERVICE_NAME=FREEPDB1)))"},
		{"//db.example:1522/svc.example", "(DESCRIPTION=(ADDRESS=(PROTOCOL=tcp)(HOST=db.example)(PORT=1522))(CONNECT_DATA=(SERVICE_NAME=svc.example)))"},
		{"tcps://db.example:2484/svc:dedicated/inst1", "(DESCRIPTION=(ADDRESS=(PROTOCOL=tcps)(HOST=db.example)(PORT=2484))(CONNECT_DATA=(SERVICE_NAME=svc)(SERVER=DEDICATED)(INSTANCE_NAME=inst1)))"},
		{" (DESCRIPTION=(ADDRESS=(PROTOCOL=tcp)(HOST=h)(PORT=1))(CONNECT_DATA=(SID=ORCL))) ", "(DESCRIPTION=(ADDRESS=(PROTOCOL=tcp)(HOST=h)(PORT=1))(CONNECT_DATA=(SID=ORCL)))"},
	} {
		got, err := parseDSN(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("parseDSN(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestDriverURL(t *testing.T) {
	// Passwords with URL syntax survive, and the wallet options reach
	// go-ora under the spaced names it matches.
	got := driverURL("app", "p@ss:w/rd?", "(DESCRIPTION=x)", "/w", "wp&1")
	want := "oracle://app:p%40ss%3Aw%2Frd%3F@:0/?WALLET=%2Fw&WALLET+PASSWORD=wp%261&connStr=%28DESCRIPTION%3Dx%29"
	if got != want {
		t.Errorf("driverURL = %s\nwant        %s", got, want)
	}
}

func TestSecrets(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "pw")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(name string) (string, bool) {
		v, ok := map[string]string{"PW": "from-env", "BLANK": "  "}[name]
		return v, ok
	}
	for _, tt := range []struct {
		name    string
		extra   string
		want    string
		problem prob
	}{
		{"value", `"password":"pw"`, "pw", prob{}},
		{"env", `"password_env":"PW"`, "from-env", prob{}},
		{"file", `"password_file":"` + file + `"`, "from-file", prob{}},
		{"env unset", `"password_env":"NOPE"`, "", prob{Path: "password_env", Message: "environment variable NOPE is not set"}},
		{"env blank", `"password_env":"BLANK"`, "", prob{Path: "password_env", Message: "resolved value must not be empty"}},
		{"file missing", `"password_file":"` + filepath.Join(dir, "none") + `"`, "", prob{Path: "password_file", Message: "cannot read secret file: open " + filepath.Join(dir, "none") + ": no such file or directory"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := decodeDoc(t, `"type":"oracle","dsn":"h/s","user":"u",`+tt.extra)
			got, _, err := c.secret("password", c.Password, c.PasswordEnv, c.PasswordFile, env)
			if tt.problem.Path == "" {
				if err != nil || got != tt.want {
					t.Errorf("secret = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			ce, ok := errors.AsType[*sink.ConfigError](err)
			if !ok {
				t.Fatalf("secret error = %v, want *sink.ConfigError", err)
			}
			if diff := cmp.Diff([]prob{tt.problem}, probs(ce)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewRejectsHandBuiltConfig(t *testing.T) {
	// A library user's Config gets the same rules as a decoded one, and
	// New fails before any I/O.
	c := Default()
	c.DSN, c.User = "h/s", "u"
	c.HTTPSProxy = new("proxy")
	c.Staging.Enabled = true
	_, err := New(context.Background(), c, sink.Deps{})
	ce, ok := errors.AsType[*sink.ConfigError](err)
	if !ok {
		t.Fatalf("New error = %v, want *sink.ConfigError", err)
	}
	want := []prob{
		{"password", "one of password, password_env, password_file is required"},
		{"https_proxy", "not supported by this build"},
		{"staging.table", "required when staging.enabled is true"},
	}
	if diff := cmp.Diff(want, probs(ce)); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// prob is a sink.Problem that the tables can write without field names.
type prob struct{ Path, Message string }

func probs(ce *sink.ConfigError) []prob {
	out := make([]prob, len(ce.Problems))
	for i, p := range ce.Problems {
		out[i] = prob(p)
	}
	return out
}

func TestSchemaAndEffective(t *testing.T) {
	// The CLI's schema and show-effective-config walk the Config: every
	// key must appear, and the password must be masked.
	c := decode(t, `"wallet_location":"/w","wallet_password":"secret-w"`)
	eff := fields.Effective(c)
	if eff["password"] != "********" || eff["wallet_password"] != "********" {
		t.Errorf("effective secrets = %v, %v; want masked", eff["password"], eff["wallet_password"])
	}
	props, _ := fields.Schema(Default())["properties"].(map[string]any)
	for _, k := range []string{"dsn", "user", "password", "password_env", "password_file", "config_dir", "wallet_location",
		"wallet_password", "wallet_password_env", "wallet_password_file", "ssl_server_dn_match", "ssl_server_cert_dn",
		"disable_parallel_dml", "tcp_connect_timeout", "retry_count", "retry_delay", "https_proxy", "https_proxy_port",
		"mode", "merge_update_columns", "staging", "pool_min", "pool_max", "pool_increment", "auto_create",
		"table", "table_routes", "payload_mode", "payload_column", "headers_column", "columns", "idempotency"} {
		if _, ok := props[k]; !ok {
			t.Errorf("schema has no property %q", k)
		}
	}
}
