package sqlmodel

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sqlconfig"
)

// testConfig is a dialect Config as a dialect package declares it: its own
// mode, update-columns key and auto_create, then the embedded shared keys.
type testConfig struct {
	Mode                string    `json:"mode"`
	UpsertUpdateColumns *[]string `json:"upsert_update_columns"`
	AutoCreate          bool      `json:"auto_create"`
	sqlconfig.Shared[sqlconfig.UpsertRoute]

	d Dialect
}

func (c *testConfig) opts() Options {
	return Options{Mode: Mode(c.Mode), UpdateColumns: c.UpsertUpdateColumns, AutoCreate: c.AutoCreate}
}

func (c *testConfig) Validate() error {
	return fields.Validate(c, func(p *fields.Problems) { Check(&c.Shared, c.d, c.opts(), p) })
}

func decode(t *testing.T, d Dialect, js string) (*testConfig, []string) {
	t.Helper()
	c := &testConfig{Mode: string(Upsert), Shared: DefaultShared[sqlconfig.UpsertRoute](d), d: d}
	err := fields.DecodeSinkExact([]byte(js), c)
	if err == nil {
		return c, nil
	}
	ce, ok := err.(*sink.ConfigError)
	if !ok {
		t.Fatalf("DecodeSink error %T: %v", err, err)
	}
	var out []string
	for _, p := range ce.Problems {
		out = append(out, p.Path+": "+p.Message)
	}
	return c, out
}

func TestConfigRules(t *testing.T) {
	for _, tt := range []struct {
		name string
		d    Dialect
		js   string
		want []string
	}{
		{"defaults are valid", SQLite, `{}`, nil},
		{"bad mode", SQLite, `{"mode":"merge"}`, []string{`mode: must be one of insert, insert_ignore, upsert (got "merge")`}},
		{"bad payload_mode", SQLite, `{"payload_mode":"xml"}`, []string{`payload_mode: must be one of json_or_envelope, json_only, text_envelope, bytes_envelope (got "xml")`}},
		{"duplicate columns ignoring case", Postgres, `{"columns":{"headers":"payload_json"}}`,
			[]string{`columns.headers: duplicate column "payload_json" (also used by columns.payload)`}},
		{"legacy alias overrides and is checked", Postgres, `{"payload_column":"SUBJECT"}`,
			[]string{`payload_column: duplicate column "SUBJECT" (also used by columns.subject)`}},
		{"legacy alias accepted", Postgres, `{"payload_column":"body","headers_column":"hdrs"}`, nil},
		{"invalid column", MySQL, `{"columns":{"labels":"a-b"}}`,
			[]string{`columns.labels: must be a valid mysql column name matching ^[A-Za-z_][A-Za-z0-9_$]{0,63}$ (got "a-b")`}},
		{"received_at reserved with auto_create", SQLite, `{"auto_create":true,"columns":{"labels":"RECEIVED_AT"}}`,
			[]string{`columns.labels: must not be "RECEIVED_AT": auto_create adds that column itself`}},
		{"strategy enum", SQLite, `{"idempotency":{"strategy":"sha"}}`,
			[]string{`idempotency.strategy: must be one of stream_sequence, message_id, payload_field, mapping (got "sha")`}},
		{"unknown key column", SQLite, `{"idempotency":{"columns":["STREAM_NAME","nope"]}}`,
			[]string{`idempotency.columns[1]: "nope" is not a mapped column`}},
		{"duplicate key column", SQLite, `{"idempotency":{"columns":["STREAM_NAME","stream_name"]}}`,
			[]string{`idempotency.columns[1]: duplicate column "stream_name"`}},
		{"empty key columns with upsert", SQLite, `{"idempotency":{"columns":[]}}`,
			[]string{`idempotency.columns: must not be empty with mode upsert`}},
		{"empty key columns with insert", SQLite, `{"mode":"insert","idempotency":{"columns":[]}}`, nil},
		{"payload_field required", SQLite, `{"idempotency":{"strategy":"payload_field"}}`,
			[]string{`idempotency.payload_field: required for strategy payload_field`}},
		{"payload_field empty segment", SQLite, `{"idempotency":{"strategy":"payload_field","payload_field":"a..b"}}`,
			[]string{`idempotency.payload_field: must be a dotted path without empty segments (got "a..b")`}},
		{"payload_field blank", SQLite, `{"idempotency":{"strategy":"payload_field","payload_field":"  "}}`,
			[]string{`idempotency.payload_field: must not be empty`}},
		{"payload_field newline", SQLite, `{"idempotency":{"strategy":"payload_field","payload_field":"a\nb"}}`,
			[]string{`idempotency.payload_field: must not contain NUL, CR or LF`}},
		{"update columns: unknown, key, duplicate", SQLite, `{"upsert_update_columns":["nope","stream_name","subject","SUBJECT"]}`,
			[]string{
				`upsert_update_columns[0]: "nope" is not a mapped column`,
				`upsert_update_columns[1]: "stream_name" is a key column`,
				`upsert_update_columns[3]: duplicate column "SUBJECT"`,
			}},
		{"update columns outside upsert", SQLite, `{"mode":"insert_ignore","upsert_update_columns":[]}`,
			[]string{`upsert_update_columns: only allowed with mode upsert (mode is insert_ignore)`}},
		{"route subject and table", SQLite, `{"table_routes":[{"subject":"a..b","table":"x y"}]}`,
			[]string{
				`table_routes[0].subject: must not contain empty tokens`,
				`table_routes[0].table: must be a valid sqlite table name (name or schema.name, each part matching ^[A-Za-z_][A-Za-z0-9_]{0,62}$) (got "x y")`,
			}},
		{"route required keys", SQLite, `{"table_routes":[{}]}`,
			[]string{`table_routes[0].subject: required`, `table_routes[0].table: required`}},
		{"route own idempotency checked", SQLite, `{"table_routes":[{"subject":"a","table":"t","idempotency":{"columns":["x"]}}]}`,
			[]string{`table_routes[0].idempotency.columns[0]: "x" is not a mapped column`}},
		{"routes to one table must agree", SQLite, `{"table_routes":[
			{"subject":"a","table":"t"},
			{"subject":"b","table":"T","idempotency":{"strategy":"message_id"}}]}`,
			[]string{`table_routes[1].table: routes to table "T" must use the same idempotency strategy, key columns, payload field and update columns as table_routes[0]`}},
		{"route to the sink's table must agree", SQLite, `{"table_routes":[{"subject":"a","table":"nats_sink_events","upsert_update_columns":[]}]}`,
			[]string{`table_routes[0].table: routes to table "nats_sink_events" must use the same idempotency strategy, key columns, payload field and update columns as the sink's table`}},
		{"routes agreeing are fine", SQLite, `{"table_routes":[{"subject":"a","table":"t"},{"subject":"b","table":"t"}]}`, nil},
		{"oracle identifiers", Oracle, `{"mode":"merge","table":"_x"}`,
			[]string{`table: must be a valid oracle table name (name or schema.name, each part matching ^[A-Za-z][A-Za-z0-9_$#]{0,127}$) (got "_x")`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, got := decode(t, tt.d, tt.js)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIdentifierInjection(t *testing.T) {
	long := strings.Repeat("a", 64)
	for _, d := range []Dialect{SQLite, Postgres, MySQL, Oracle} {
		for _, name := range []string{
			"t; drop table x", `t"x`, "t`x", "t'x", "tä", "t\x00", "", "a.b.c", "a.", ".a", "t x", "t-x", long + long + long,
		} {
			if d.CheckTable(name) == "" {
				t.Errorf("%v.CheckTable(%q) accepted", d, name)
			}
			if d.CheckColumn(name) == "" {
				t.Errorf("%v.CheckColumn(%q) accepted", d, name)
			}
		}
		if msg := d.CheckTable("app.Events_1"); msg != "" {
			t.Errorf("%v.CheckTable(app.Events_1) = %s", d, msg)
		}
		if msg := d.CheckColumn("a.b"); msg == "" {
			t.Errorf("%v.CheckColumn(a.b) accepted", d)
		}
	}
	for _, tt := range []struct {
		d   Dialect
		max int
	}{{Postgres, 63}, {SQLite, 63}, {MySQL, 64}, {Oracle, 128}} {
		if msg := tt.d.CheckColumn("A" + strings.Repeat("b", tt.max-1)); msg != "" {
			t.Errorf("%v: %d characters rejected: %s", tt.d, tt.max, msg)
		}
		if tt.d.CheckColumn("A"+strings.Repeat("b", tt.max)) == "" {
			t.Errorf("%v: %d characters accepted", tt.d, tt.max+1)
		}
	}
}

func TestQuoteAndFold(t *testing.T) {
	for _, tt := range []struct {
		d          Dialect
		in, folded string
		quoted     string
	}{
		{SQLite, "Main.Events", "main.events", `"main"."events"`},
		{Postgres, "NATS_SINK_EVENTS", "nats_sink_events", `"nats_sink_events"`},
		{MySQL, "Db.Events", "Db.Events", "`Db`.`Events`"},
		{Oracle, "app.events", "APP.EVENTS", "APP.EVENTS"},
	} {
		f := tt.d.Fold(tt.in)
		if f != tt.folded || tt.d.Quote(f) != tt.quoted {
			t.Errorf("%v: Fold(%q) = %q, Quote = %q; want %q, %q", tt.d, tt.in, f, tt.d.Quote(f), tt.folded, tt.quoted)
		}
	}
}

func compile(t *testing.T, d Dialect, js string) *Model {
	t.Helper()
	c, probs := decode(t, d, js)
	if probs != nil {
		t.Fatalf("problems: %v", probs)
	}
	m, err := Compile(&c.Shared, d, c.opts())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestUpdateColumnResolution(t *testing.T) {
	for _, tt := range []struct {
		name string
		js   string
		want []string
	}{
		{"null: every non-key column", `{}`, []string{"subject", "message_id", "priority", "classification", "labels",
			"message_created_at_epoch_ns", "jetstream_timestamp_epoch_ns", "received_at_epoch_ns", "stored_at_epoch_ns",
			"payload_json", "headers_json", "metadata_json", "mission_metadata_json", "security_labels_json"}},
		{"empty: none", `{"upsert_update_columns":[]}`, []string{}},
		{"list in listed order, matched ignoring case", `{"upsert_update_columns":["STORED_AT_EPOCH_NS","payload_json"]}`, []string{"stored_at_epoch_ns", "payload_json"}},
		{"message_id key excludes it", `{"idempotency":{"strategy":"message_id"}}`, []string{"stream_name", "stream_sequence", "subject", "priority", "classification", "labels",
			"message_created_at_epoch_ns", "jetstream_timestamp_epoch_ns", "received_at_epoch_ns", "stored_at_epoch_ns",
			"payload_json", "headers_json", "metadata_json", "mission_metadata_json", "security_labels_json"}},
		{"insert mode: none", `{"mode":"insert"}`, []string{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := compile(t, Postgres, tt.js)
			if diff := cmp.Diff(tt.want, m.ColumnNames(m.Tables[0].Update)); diff != "" {
				t.Errorf("update columns (-want +got):\n%s", diff)
			}
		})
	}
}

func TestKeyColumnsDerivedDefault(t *testing.T) {
	for _, tt := range []struct {
		js   string
		want []string
	}{
		{`{}`, []string{"stream_name", "stream_sequence"}},
		{`{"idempotency":{"strategy":"message_id"}}`, []string{"message_id"}},
		{`{"idempotency":{"strategy":"payload_field","payload_field":"order.id"}}`, []string{"message_id"}},
		{`{"idempotency":{"strategy":"message_id","columns":["SUBJECT","MESSAGE_ID"]}}`, []string{"subject", "message_id"}},
	} {
		m := compile(t, SQLite, tt.js)
		if diff := cmp.Diff(tt.want, m.ColumnNames(m.Tables[0].Key)); diff != "" {
			t.Errorf("%s: key (-want +got):\n%s", tt.js, diff)
		}
	}
}

func TestRouting(t *testing.T) {
	m := compile(t, SQLite, `{"table":"main.Events","table_routes":[
		{"subject":"audit.>","table":"audit"},
		{"subject":"orders.*","table":"orders","idempotency":{"strategy":"message_id"}},
		{"subject":"orders.special","table":"never"},
		{"subject":"x.y","table":"AUDIT"}]}`)
	for _, tt := range []struct{ subject, table string }{
		{"audit.login", "audit"},
		{"audit.a.b", "audit"},
		{"orders.special", "orders"}, // first match wins
		{"orders", "main.events"},
		{"x.y", "audit"},
		{"other", "main.events"},
	} {
		if got := m.Resolve(tt.subject).Name; got != tt.table {
			t.Errorf("Resolve(%q) = %q, want %q", tt.subject, got, tt.table)
		}
	}
	var names []string
	for _, tb := range m.Tables {
		names = append(names, tb.Name)
	}
	if diff := cmp.Diff([]string{"main.events", "audit", "orders", "never"}, names); diff != "" {
		t.Errorf("tables (-want +got):\n%s", diff)
	}
	if m.Resolve("x.y") != m.Resolve("audit.x") {
		t.Error("routes to one table resolve to different *Table values")
	}
}

func TestRouteInheritanceReportsOnce(t *testing.T) {
	for _, tt := range []struct {
		name string
		js   string
		want []string
	}{
		{"bad sink-level update columns reported once", `{"upsert_update_columns":["nope"],"table_routes":[
			{"subject":"a","table":"t","idempotency":{"strategy":"message_id"}}]}`,
			[]string{`upsert_update_columns[0]: "nope" is not a mapped column`}},
		{"bad sink-level idempotency reported once", `{"idempotency":{"columns":["nope"]},"table_routes":[
			{"subject":"a","table":"t","upsert_update_columns":[]}]}`,
			[]string{`idempotency.columns[0]: "nope" is not a mapped column`}},
		{"inherited update column clashing with the route key", `{"upsert_update_columns":["MESSAGE_ID"],"table_routes":[
			{"subject":"a","table":"t","idempotency":{"strategy":"message_id"}}]}`,
			[]string{`table_routes[0]: inherited upsert_update_columns[0] "MESSAGE_ID" is one of this route's key columns`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, got := decode(t, SQLite, tt.js)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDefaultColumnsMatchFields: sqlconfig's default mapping is the one the
// model's fields declare (docs/formats.md#sql-tables).
func TestDefaultColumnsMatchFields(t *testing.T) {
	c := sqlconfig.DefaultColumns()
	for f := range NumFields {
		if got := Column(&c, f); got != f.DefaultColumn() {
			t.Errorf("DefaultColumns maps %s to %q, want %q", f, got, f.DefaultColumn())
		}
	}
}
