package postgres

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
	"github.com/nats-sinks/nats-sink/sink"
)

// problems decodes js and returns its problems as "path: message" lines.
func problems(t *testing.T, js string) []string {
	t.Helper()
	_, err := Decode([]byte(js))
	var got []string
	if ce, ok := err.(*sink.ConfigError); ok {
		for _, p := range ce.Problems {
			got = append(got, p.Path+": "+p.Message)
		}
	} else if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return got
}

const minimal = `"type":"postgres","database":"d","user":"u","password":"p"`

func TestDecode(t *testing.T) {
	for _, tt := range []struct {
		name string
		js   string
		want []string
	}{
		{"minimal", `{` + minimal + `}`, nil},
		{"required keys", `{"type":"postgres"}`, []string{"database: required", "user: required"}},
		{"no password source: trust, peer or client certificates", `{"type":"postgres","database":"d","user":"u"}`, nil},
		{"unix socket directory", `{"type":"postgres","database":"d","user":"u","host":"/var/run/postgresql"}`, nil},
		{"relative socket directory", `{"type":"postgres","database":"d","user":"u","host":"run/postgresql"}`,
			[]string{`host: must be a host name, an IP address or an absolute Unix socket directory (got "run/postgresql")`}},
		{"only one password source", `{"type":"postgres","database":"d","user":"u","password":"p","password_env":"PG_PW"}`,
			[]string{"password: set only one of password, password_env, password_file"}},
		{"password file is a source", `{"type":"postgres","database":"d","user":"u","password_file":"/run/secrets/pg"}`, nil},
		{"ssl_cert needs ssl_key", `{` + minimal + `,"ssl_cert":"c.pem"}`, []string{"ssl_key: required when ssl_cert is set"}},
		{"merge is not a postgres mode", `{` + minimal + `,"mode":"merge"}`, []string{`mode: must be one of insert, insert_ignore, upsert (got "merge")`}},
		{"update columns only with upsert", `{` + minimal + `,"mode":"insert","upsert_update_columns":[]}`,
			[]string{"upsert_update_columns: only allowed with mode upsert (mode is insert)"}},
		{"oracle key name is unknown", `{` + minimal + `,"merge_update_columns":[]}`, []string{"merge_update_columns: unknown key"}},
		{"staging is an object with enabled", `{` + minimal + `,"staging":{"enabled":true}}`, nil},
		{"staging rejects unknown keys", `{` + minimal + `,"staging":{"table":"x"}}`, []string{"staging.table: unknown key"}},
		{"table injection", `{` + minimal + `,"table":"t; drop table x"}`, []string{
			`table: must be a valid postgres table name (name or schema.name, each part matching ^[A-Za-z_][A-Za-z0-9_]{0,62}$) (got "t; drop table x")`}},
		{"quoted identifier injection", `{` + minimal + `,"table":"a\".b"}`, []string{
			`table: must be a valid postgres table name (name or schema.name, each part matching ^[A-Za-z_][A-Za-z0-9_]{0,62}$) (got "a\".b")`}},
		{"column injection", `{` + minimal + `,"columns":{"payload":"p\" text); drop table x; --"}}`, []string{
			`columns.payload: must be a valid postgres column name matching ^[A-Za-z_][A-Za-z0-9_]{0,62}$ (got "p\" text); drop table x; --")`}},
		{"route table injection", `{` + minimal + `,"table_routes":[{"subject":"a.>","table":"x y"}]}`, []string{
			`table_routes[0].table: must be a valid postgres table name (name or schema.name, each part matching ^[A-Za-z_][A-Za-z0-9_]{0,62}$) (got "x y")`}},
		{"three-part table", `{` + minimal + `,"table":"a.b.c"}`, []string{
			`table: must be a valid postgres table name (name or schema.name, each part matching ^[A-Za-z_][A-Za-z0-9_]{0,62}$) (got "a.b.c")`}},
		{"key columns must be mapped", `{` + minimal + `,"idempotency":{"columns":["X"]}}`, []string{`idempotency.columns[0]: "X" is not a mapped column`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := problems(t, tt.js)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Decode(%s) problems (-want +got):\n%s", tt.js, diff)
			}
		})
	}
}

// TestDecodeRanges checks the range and enum rules; the exact texts come
// from the shared decoder, so only the paths are compared.
func TestDecodeRanges(t *testing.T) {
	for _, tt := range []struct{ js, path string }{
		{`"port":0`, "port"},
		{`"port":65536`, "port"},
		{`"sslmode":"sometimes"`, "sslmode"},
		{`"connect_timeout_seconds":0`, "connect_timeout_seconds"},
		{`"connect_timeout_seconds":301`, "connect_timeout_seconds"},
		{`"statement_timeout_ms":-1`, "statement_timeout_ms"},
		{`"statement_timeout_ms":3600001`, "statement_timeout_ms"},
		{`"pool_size":0`, "pool_size"},
		{`"pool_size":65`, "pool_size"},
		{`"password_env":"lower"`, "password_env"},
		{`"host":" "`, "host"},
		{`"password":""`, "password"},
	} {
		js := `{` + minimal + `,` + tt.js + `}`
		if strings.Contains(tt.js, "password") {
			js = `{"type":"postgres","database":"d","user":"u",` + tt.js + `}`
		}
		got := problems(t, js)
		if len(got) != 1 || !strings.HasPrefix(got[0], tt.path+": ") {
			t.Errorf("Decode(%s) = %q, want one problem at %s", js, got, tt.path)
		}
	}
}

func TestDefaults(t *testing.T) {
	o, err := Decode([]byte(`{` + minimal + `}`))
	if err != nil {
		t.Fatal(err)
	}
	c := o.(Config)
	got := fmt.Sprintf("%s %d %s %d %d %s %s %d %v %v %s", c.Host, c.Port, c.SSLMode, c.ConnectTimeoutSeconds, c.StatementTimeoutMS,
		c.ApplicationName, c.Mode, c.PoolSize, c.AutoCreate, c.Staging.Enabled, c.Table)
	if want := "127.0.0.1 5432 prefer 10 30000 nats-sink upsert 4 false false nats_sink_events"; got != want {
		t.Errorf("defaults = %s, want %s", got, want)
	}
	if s := fmt.Sprint(c.Password); strings.Contains(s, "p") && !strings.Contains(s, "*") {
		t.Errorf("password prints as %q", s)
	}
}

// model decodes js and compiles its model.
func model(t *testing.T, js string) *sqlmodel.Model {
	t.Helper()
	o, err := Decode([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	c := o.(Config)
	m, err := sqlmodel.Compile(&c.Shared, sqlmodel.Postgres, c.options())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

const cols = `("stream_name", "stream_sequence", "subject", "message_id", "priority", "classification", "labels", "message_created_at_epoch_ns", "jetstream_timestamp_epoch_ns", "received_at_epoch_ns", "stored_at_epoch_ns", "payload_json", "headers_json", "metadata_json", "mission_metadata_json", "security_labels_json")`

const unnestSelect = ` select "stream_name", "stream_sequence", "subject", "message_id", "priority", "classification", "labels", "message_created_at_epoch_ns", "jetstream_timestamp_epoch_ns", "received_at_epoch_ns", "stored_at_epoch_ns", "payload_json"::json, "headers_json"::json, "metadata_json"::json, "mission_metadata_json"::json, "security_labels_json"::json from unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::text[], $13::text[], $14::text[], $15::text[], $16::text[]) as u ` + cols

func TestInsertSQL(t *testing.T) {
	head := `insert into "nats_sink_events" ` + cols + unnestSelect
	allUpdates := ` do update set "subject" = excluded."subject", "message_id" = excluded."message_id", "priority" = excluded."priority", "classification" = excluded."classification", "labels" = excluded."labels", "message_created_at_epoch_ns" = excluded."message_created_at_epoch_ns", "jetstream_timestamp_epoch_ns" = excluded."jetstream_timestamp_epoch_ns", "received_at_epoch_ns" = excluded."received_at_epoch_ns", "stored_at_epoch_ns" = excluded."stored_at_epoch_ns", "payload_json" = excluded."payload_json", "headers_json" = excluded."headers_json", "metadata_json" = excluded."metadata_json", "mission_metadata_json" = excluded."mission_metadata_json", "security_labels_json" = excluded."security_labels_json"`
	for _, tt := range []struct {
		name  string
		js    string
		table int
		stage string
		want  string
	}{
		{"insert", `{` + minimal + `,"mode":"insert"}`, 0, "", head},
		{"insert_ignore returns the inserted keys", `{` + minimal + `,"mode":"insert_ignore"}`, 0, "",
			head + ` on conflict do nothing returning "stream_name", "stream_sequence"`},
		{"upsert, update columns null = every non-key column", `{` + minimal + `}`, 0, "",
			head + ` on conflict ("stream_name", "stream_sequence")` + allUpdates},
		{"upsert, update columns []", `{` + minimal + `,"upsert_update_columns":[]}`, 0, "",
			head + ` on conflict ("stream_name", "stream_sequence") do nothing returning "stream_name", "stream_sequence"`},
		{"upsert, update column list in listed order, case-insensitive", `{` + minimal + `,"upsert_update_columns":["stored_at_epoch_ns","PAYLOAD_JSON"]}`, 0, "",
			head + ` on conflict ("stream_name", "stream_sequence") do update set "stored_at_epoch_ns" = excluded."stored_at_epoch_ns", "payload_json" = excluded."payload_json"`},
		{"route with message_id key and custom columns", `{` + minimal + `,"columns":{"payload":"Body","message_id":"MsgId"},
			"table_routes":[{"subject":"a.>","table":"Audit.Events","idempotency":{"strategy":"message_id","columns":["MsgId"]},"upsert_update_columns":["body"]}]}`, 1, "",
			strings.NewReplacer(`"message_id"`, `"msgid"`, `"payload_json"`, `"body"`).Replace(`insert into "audit"."events" `+cols+unnestSelect) +
				` on conflict ("msgid") do update set "body" = excluded."body"`},
		{"staging: insert … select from the connection's COPY table, same casts", `{` + minimal + `,"mode":"insert_ignore","staging":{"enabled":true}}`, 0, "nats_sink_stage_0",
			`insert into "nats_sink_events" ` + cols + unnestSelect[:strings.Index(unnestSelect, " from ")] + ` from "nats_sink_stage_0" on conflict do nothing returning "stream_name", "stream_sequence"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := model(t, tt.js)
			if got := insertSQL(m, m.Tables[tt.table], sourceSQL(m, tt.stage), nil); got != tt.want {
				t.Errorf("insertSQL =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// TestInsertSQLJSONBCasts checks that values for jsonb columns are cast to
// jsonb directly and the others keep the json cast (canonical text kept).
func TestInsertSQLJSONBCasts(t *testing.T) {
	m := model(t, `{`+minimal+`,"mode":"insert"}`)
	got := insertSQL(m, m.Tables[0], sourceSQL(m, ""), map[string]bool{"payload_json": true, "metadata_json": true})
	want := `insert into "nats_sink_events" ` + cols + strings.NewReplacer(`"payload_json"::json`, `"payload_json"::jsonb`, `"metadata_json"::json`, `"metadata_json"::jsonb`).Replace(unnestSelect)
	if got != want {
		t.Errorf("insertSQL =\n%s\nwant\n%s", got, want)
	}
}

func TestDDL(t *testing.T) {
	m := model(t, `{`+minimal+`,"auto_create":true,"table_routes":[{"subject":"a.>","table":"s.ev","idempotency":{"strategy":"message_id"}}]}`)
	want := `create table if not exists "nats_sink_events" (
    "stream_name"                  varchar(255) not null,
    "stream_sequence"              bigint not null,
    "subject"                      text not null,
    "message_id"                   varchar(512),
    "priority"                     text,
    "classification"               text,
    "labels"                       text,
    "received_at"                  timestamptz not null default now(),
    "message_created_at_epoch_ns"  bigint,
    "jetstream_timestamp_epoch_ns" bigint,
    "received_at_epoch_ns"         bigint not null,
    "stored_at_epoch_ns"           bigint not null,
    "payload_json"                 jsonb,
    "headers_json"                 jsonb,
    "metadata_json"                jsonb,
    "mission_metadata_json"        jsonb,
    "security_labels_json"         jsonb,
    constraint "nats_sink_events_pk" primary key ("stream_name", "stream_sequence")
)`
	if got := m.DDL(m.Tables[0]); got != want {
		t.Errorf("DDL(default) =\n%s\nwant\n%s", got, want)
	}
	got := m.DDL(m.Tables[1])
	if !strings.HasPrefix(got, `create table if not exists "s"."ev" (`) ||
		!strings.HasSuffix(got, `    constraint "ev_pk" primary key ("stream_name", "stream_sequence"),
    constraint "ev_idem" unique ("message_id")
)`) {
		t.Errorf("DDL(route with message_id key) =\n%s", got)
	}
}

func TestClassify(t *testing.T) {
	for _, tt := range []struct {
		code string
		mode sqlmodel.Mode
		want sink.Outcome
	}{
		{"23505", sqlmodel.Insert, sink.Permanent},
		{"23505", sqlmodel.Upsert, sink.Permanent},
		{"23505", sqlmodel.InsertIgnore, sink.Temporary}, // writer race, docs/migrating.md Q11
		{"22001", sqlmodel.Upsert, sink.Permanent},       // value too long
		{"22P05", sqlmodel.Upsert, sink.Permanent},       // \u0000 in jsonb
		{"22P02", sqlmodel.Upsert, sink.Permanent},
		{"23502", sqlmodel.Upsert, sink.Permanent},
		{"23514", sqlmodel.Upsert, sink.Permanent},
		{"28P01", sqlmodel.Upsert, sink.Destination},
		{"28000", sqlmodel.Upsert, sink.Destination},
		{"3D000", sqlmodel.Upsert, sink.Destination},
		{"3F000", sqlmodel.Upsert, sink.Destination},
		{"42501", sqlmodel.Upsert, sink.Destination},
		{"42P01", sqlmodel.Upsert, sink.Destination},
		{"42703", sqlmodel.Upsert, sink.Destination},
		{"42601", sqlmodel.Upsert, sink.Destination},
		{"08006", sqlmodel.Upsert, sink.Temporary},
		{"40001", sqlmodel.Upsert, sink.Temporary},
		{"40P01", sqlmodel.Upsert, sink.Temporary},
		{"53100", sqlmodel.Upsert, sink.Temporary},
		{"57014", sqlmodel.Upsert, sink.Temporary},
		{"57P01", sqlmodel.Upsert, sink.Temporary},
		{"23503", sqlmodel.Upsert, sink.Temporary}, // not listed: "others"
		{"XX000", sqlmodel.Upsert, sink.Temporary},
	} {
		err := fmt.Errorf("write (stream seq 1): %w", &pgconn.PgError{Code: tt.code, Message: "m"})
		res := sink.Failed(classify(tt.mode, err))
		if res.Outcome != tt.want {
			t.Errorf("classify(%s, %s) = %v, want %v", tt.mode, tt.code, res.Outcome, tt.want)
		}
		if res.Outcome == sink.Permanent && res.ErrorType != sink.PermanentSinkError {
			t.Errorf("classify(%s, %s) error type = %q", tt.mode, tt.code, res.ErrorType)
		}
	}
	plain := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	if got := sink.Failed(classify(sqlmodel.Upsert, plain)).Outcome; got != sink.Temporary {
		t.Errorf("classify(no SQLSTATE) = %v, want temporary", got)
	}
}

// TestWarnings: sslmode prefer, allow and disable are accepted but warned
// about for a server reached over the network; loopback and Unix sockets
// are quiet, as are the verifying modes.
func TestWarnings(t *testing.T) {
	for _, tt := range []struct {
		host, mode string
		want       string // "" = no warning
	}{
		{"db.example.com", "prefer", "sslmode: prefer falls back to an unencrypted connection"},
		{"10.0.0.5", "allow", "sslmode: allow falls back to an unencrypted connection"},
		{"db.example.com", "disable", "sslmode: disable sends the credentials and rows to db.example.com unencrypted"},
		{"db.example.com", "require", ""},
		{"db.example.com", "verify-full", ""},
		{"127.0.0.1", "prefer", ""},
		{"::1", "disable", ""},
		{"localhost", "prefer", ""},
		{"/var/run/postgresql", "prefer", ""},
	} {
		o, err := Decode(json.RawMessage(`{` + minimal + `,"host":"` + tt.host + `","sslmode":"` + tt.mode + `"}`))
		if err != nil {
			t.Fatal(err)
		}
		w, ok := o.(sink.Warner)
		if !ok {
			t.Fatal("postgres Config is not a sink.Warner")
		}
		var got string
		for _, p := range w.Warnings() {
			got += p.Path + ": " + p.Message
		}
		if (tt.want == "") != (got == "") || !strings.HasPrefix(got, tt.want) {
			t.Errorf("Warnings(host %s, sslmode %s) = %q, want prefix %q", tt.host, tt.mode, got, tt.want)
		}
	}
}
