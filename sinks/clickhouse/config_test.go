package clickhouse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/mapping"
	"github.com/nats-sinks/nats-sink/sink"
)

func problems(t *testing.T, doc string) []sink.Problem {
	t.Helper()
	_, err := Decode(json.RawMessage(doc))
	if err == nil {
		return nil
	}
	var ce *sink.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("Decode(%s) error %T is not a *sink.ConfigError: %v", doc, err, err)
	}
	return ce.Problems
}

const base = `"type":"clickhouse","url":"http://127.0.0.1:8123"`

func TestDecodeDefaults(t *testing.T) {
	c := decode(t, "{"+base+"}")
	want := Default()
	want.URL = "http://127.0.0.1:8123"
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("Decode(minimal) mismatch (-want +got):\n%s", diff)
	}
	var p = c.compile(new(fields.Problems))
	if got := p.tables[0].createDDL("default", features{}, true); got != "CREATE TABLE IF NOT EXISTS `default`.`nats_sink_events` (`stream_name` String, `stream_sequence` UInt64, "+
		"`subject` String, `message_id` Nullable(String), `priority` Nullable(String), `classification` Nullable(String), "+
		"`labels` Nullable(String), `received_at` DateTime('UTC') MATERIALIZED now(), `message_created_at_epoch_ns` "+
		"Nullable(Int64), `jetstream_timestamp_epoch_ns` Nullable(Int64), `received_at_epoch_ns` Int64, `stored_at_epoch_ns` "+
		"Int64, `payload_json` String, `headers_json` String, `metadata_json` String, `mission_metadata_json` String, "+
		"`security_labels_json` String) ENGINE = ReplacingMergeTree(`stream_sequence`) ORDER BY (`stream_name`, `stream_sequence`)" {
		t.Errorf("audit DDL = %s", got)
	}
}

func TestMappedDDL(t *testing.T) {
	c := decode(t, `{`+base+`,"table":"orders","layout":"mapped","auto_create":true,
		"idempotency":{"strategy":"mapping","columns":["order_id"]},"include_columns":["subject"],"mapping":[
		{"column":"order_id","path":"/order/id","type":"bigint","required":true},
		{"column":"amount","path":"/order/amount","type":"numeric(12,2)"},
		{"column":"placed_at","path":"/placed_at","type":"timestamp","required":true},
		{"column":"tenant","path":"$header:X-Tenant","type":"text","default":"none"}]}`)
	m := c.compile(new(fields.Problems))
	for _, tt := range []struct {
		f    features
		want string
	}{
		{features{}, "CREATE TABLE IF NOT EXISTS `default`.`orders` (`order_id` Int64, `subject` String, `amount` Nullable(Decimal(12, 2)), " +
			"`placed_at` DateTime('UTC'), `tenant` Nullable(String), `stream_sequence` UInt64) ENGINE = ReplacingMergeTree(`stream_sequence`) ORDER BY (`order_id`)"},
		{features{dateTime64: true, token: true, nonReplicatedWindow: true}, "CREATE TABLE IF NOT EXISTS `default`.`orders` (`order_id` Int64, `subject` String, `amount` Nullable(Decimal(12, 2)), " +
			"`placed_at` DateTime64(9, 'UTC'), `tenant` Nullable(String), `stream_sequence` UInt64) ENGINE = ReplacingMergeTree(`stream_sequence`) ORDER BY (`order_id`) " +
			"SETTINGS non_replicated_deduplication_window = 1000"},
	} {
		if got := m.tables[0].createDDL("default", tt.f, false); got != tt.want {
			t.Errorf("DDL(%+v) =\n%s\nwant\n%s", tt.f, got, tt.want)
		}
	}
	c.VersionColumn = ptr("placed_at")
	m = c.compile(new(fields.Problems))
	if got := m.tables[0].createDDL("default", features{}, false); !strings.HasSuffix(got, "`tenant` Nullable(String)) ENGINE = ReplacingMergeTree(`placed_at`) ORDER BY (`order_id`)") {
		t.Errorf("DDL with version_column = %s", got)
	}
}

func ptr[T any](v T) *T { return &v }

func TestDecodeProblems(t *testing.T) {
	mappedOK := `"layout":"mapped","mapping":[{"column":"a","path":"/a","type":"text"}]`
	for _, tt := range []struct {
		name string
		doc  string
		want []sink.Problem
	}{
		{"url credentials", `{"type":"clickhouse","url":"https://u:p@ch.example:8443"}`,
			[]sink.Problem{{Path: "url", Message: "must not include credentials; use sink.user and sink.password_env"}}},
		{"url query", `{"type":"clickhouse","url":"https://ch.example/?database=x"}`,
			[]sink.Problem{{Path: "url", Message: "must not contain a query"}}},
		{"plain http remote", `{"type":"clickhouse","url":"http://ch.example:8123"}`,
			[]sink.Problem{{Path: "url", Message: `http is allowed only for localhost, 127.0.0.1 or ::1 unless allow_plaintext_http (got host "ch.example")`}}},
		{"plain http allowed", `{"type":"clickhouse","url":"http://ch.example:8123","allow_plaintext_http":true}`, nil},
		{"allowed hosts", `{"type":"clickhouse","url":"https://ch.example","endpoint_allowed_hosts":["other.example"]}`,
			[]sink.Problem{{Path: "url", Message: `host "ch.example" is not in endpoint_allowed_hosts`}}},
		{"tls without https", `{` + base + `,"tls":{"insecure_skip_verify":true}}`,
			[]sink.Problem{{Path: "tls", Message: "requires an https url"}}},
		{"cert without key", `{"type":"clickhouse","url":"https://ch.example","tls":{"cert_file":"c.pem"}}`,
			[]sink.Problem{{Path: "tls", Message: "cert_file and key_file must be set together"}}},
		{"two passwords", `{` + base + `,"password":"x","password_env":"CH_PW"}`,
			[]sink.Problem{{Path: "password", Message: "set only one of password, password_env, password_file"}}},
		{"database", `{` + base + `,"database":"my-db"}`,
			[]sink.Problem{{Path: "database", Message: `must match ^[A-Za-z_][A-Za-z0-9_]{0,127}$ (got "my-db")`}}},
		{"rejected keys", `{` + base + `,"mode":"upsert","delete_when":{"empty_payload":true}}`,
			[]sink.Problem{{Path: "mode", Message: "not supported by the clickhouse sink"}, {Path: "delete_when", Message: "not supported by the clickhouse sink"}}},
		{"layout", `{` + base + `,"layout":"wide"}`,
			[]sink.Problem{{Path: "layout", Message: `must be one of audit, mapped (got "wide")`}}},
		{"empty mapping", `{` + base + `,"layout":"mapped"}`,
			[]sink.Problem{{Path: "mapping", Message: "must not be empty with layout mapped"}}},
		{"mapped keys in audit", `{` + base + `,"mapping":[{"column":"a","path":"/a","type":"text"}],"include_columns":["subject"],"version_column":"x"}`,
			[]sink.Problem{{Path: "mapping", Message: "only allowed with layout mapped"}, {Path: "include_columns", Message: "only allowed with layout mapped"},
				{Path: "version_column", Message: "only allowed with layout mapped"}}},
		{"payload mode", `{` + base + `,` + mappedOK + `,"payload_mode":"text_envelope"}`,
			[]sink.Problem{{Path: "payload_mode", Message: `must be json_or_envelope or json_only with layout mapped (got "text_envelope")`}}},
		{"mapping item problems", `{` + base + `,"layout":"mapped","mapping":[{"column":"amount","path":"/a","type":"text"},
			{"column":"b","path":"order.id","type":"text"},{"column":"AMOUNT","path":"/c","type":"text"},
			{"column":"d","path":"/d","type":"int64"},{"column":"e","path":"/e","type":"numeric(40,2)"},
			{"column":"f","path":"/f","type":"bigint","default":1.5}]}`,
			[]sink.Problem{
				{Path: "mapping[1].path", Message: `must be "" or a JSON Pointer starting with "/", or one of $subject, $header:<Name>, $priority, $classification, $labels, $stream_sequence, $received_at (got "order.id")`},
				{Path: "mapping[2].column", Message: `duplicate column "AMOUNT" (also used by mapping[0].column)`},
				{Path: "mapping[3].type", Message: `must be one of text, bigint, integer, double, numeric(p,s), boolean, timestamp, date, json, uuid, bytes (got "int64")`},
				{Path: "mapping[4].type", Message: "numeric needs 1 <= p <= 38 and 0 <= s <= min(p, 30) (got numeric(40,2))"},
				{Path: "mapping[5].default", Message: "cannot convert to bigint: not an integer"},
			}},
		{"exact default", `{` + base + `,"layout":"mapped","mapping":[{"column":"n","path":"/n","type":"numeric(20,1)","default":9007199254740993.0}]}`, nil},
		{"key not a mapping column", `{` + base + `,` + mappedOK + `,"idempotency":{"strategy":"mapping","columns":["order_id"]}}`,
			[]sink.Problem{{Path: "idempotency.columns[0]", Message: `"order_id" is not a mapping column`}}},
		{"key not required", `{` + base + `,"layout":"mapped","idempotency":{"strategy":"mapping","columns":["order_id"]},
			"mapping":[{"column":"order_id","path":"/id","type":"bigint"}]}`,
			[]sink.Problem{{Path: "idempotency.columns[0]", Message: `mapping column "order_id" used as a key must have required: true`}}},
		{"mapping strategy in audit", `{` + base + `,"idempotency":{"strategy":"mapping","columns":["stream_name"]}}`,
			[]sink.Problem{{Path: "idempotency.strategy", Message: "mapping is only allowed with layout mapped"}}},
		{"version column", `{` + base + `,"layout":"mapped","mapping":[{"column":"status","path":"/s","type":"text","required":true}],"version_column":"status"}`,
			[]sink.Problem{{Path: "version_column", Message: `must name a never-null row column of type bigint, integer or timestamp (got "status")`}}},
		{"version column ok", `{` + base + `,"layout":"mapped","mapping":[{"column":"v","path":"/v","type":"bigint","required":true}],"version_column":"v"}`, nil},
		{"mapping clashes with the added version column", `{` + base + `,"layout":"mapped","idempotency":{"strategy":"message_id"},"mapping":[{"column":"stream_sequence","path":"/s","type":"text"}]}`,
			[]sink.Problem{{Path: "mapping[0].column", Message: `"stream_sequence" is the stream-sequence column the row adds as its version; rename it or set version_column`}}},
		{"mapping clashes with a key column", `{` + base + `,"layout":"mapped","mapping":[{"column":"Stream_Name","path":"/s","type":"text"}]}`,
			[]sink.Problem{{Path: "mapping[0].column", Message: `duplicate column "Stream_Name" (also used by idempotency.columns[0])`}}},
		{"include unknown", `{` + base + `,` + mappedOK + `,"include_columns":["payload","subject"]}`,
			[]sink.Problem{{Path: "include_columns[0]", Message: `"payload" is not an audit column (named as in columns)`}}},
		{"include duplicate", `{` + base + `,` + mappedOK + `,"include_columns":["subject","subject"]}`,
			[]sink.Problem{{Path: "include_columns[1]", Message: `duplicate value "subject"`}}},
		{"route shapes", `{` + base + `,"table_routes":[{"subject":"a.>","table":"t1"},{"subject":"b.>","table":"t1","idempotency":{"strategy":"message_id"}}]}`,
			[]sink.Problem{{Path: "table_routes[1].table", Message: `routes to table "t1" must use the same row shape (idempotency, key, included and mapping columns with types, version_column) as table_routes[0].table`}}},
		{"payload field", `{` + base + `,"idempotency":{"strategy":"payload_field"}}`,
			[]sink.Problem{{Path: "idempotency.payload_field", Message: "required for strategy payload_field"}}},
		{"received_at with auto_create", `{` + base + `,"auto_create":true,"columns":{"subject":"received_at"}}`,
			[]sink.Problem{{Path: "columns.subject", Message: `must not be "received_at": auto_create adds that column itself`}}},
		{"limits", `{` + base + `,"request_timeout_ms":10,"max_rows_per_insert":0,"max_request_bytes":10,"compression":"zstd","insert_quorum":1}`,
			[]sink.Problem{
				{Path: "request_timeout_ms", Message: "must be between 1000 and 600000 (got 10)"},
				{Path: "max_rows_per_insert", Message: "must be between 1 and 10000 (got 0)"},
				{Path: "max_request_bytes", Message: "must be between 65536 and 1073741824 (got 10)"},
				{Path: "compression", Message: `must be one of none, gzip (got "zstd")`},
				{Path: "insert_quorum", Message: "must be between 2 and 16 (got 1)"},
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, problems(t, tt.doc)); diff != "" {
				t.Errorf("problems mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestValidateHandBuilt checks that a Config built in Go gets the checks
// Decode applies, through Validate and Open.
func TestValidateHandBuilt(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(*Config)
		want []sink.Problem
	}{
		{"tag rule", func(c *Config) { c.URL, c.Table = "http://127.0.0.1", "bad table" },
			[]sink.Problem{{Path: "table", Message: `must match ^[A-Za-z_][A-Za-z0-9_]{0,127}$ (got "bad table")`}}},
		{"cross-key rule", func(c *Config) { c.URL = "ftp://x" },
			[]sink.Problem{{Path: "url", Message: `must use http or https (got scheme "ftp")`}}},
		{"mapping", func(c *Config) {
			c.URL, c.Layout = "http://127.0.0.1", "mapped"
			c.Mapping = []mapping.Item{{Column: "n", Path: "/n", Type: "numeric(5,2)", Default: jsonx.Number("1.234"), EpochUnit: "ms"}}
		}, []sink.Problem{{Path: "mapping[0].default", Message: "cannot convert to numeric(5,2): more than 2 fraction digits for numeric(5,2)"}}},
	} {
		c := Default()
		tt.edit(&c)
		err := c.Validate()
		var ce *sink.ConfigError
		if !errors.As(err, &ce) {
			t.Fatalf("%s: Validate() = %v, want a *sink.ConfigError", tt.name, err)
		}
		if diff := cmp.Diff(tt.want, ce.Problems); diff != "" {
			t.Errorf("%s: problems mismatch (-want +got):\n%s", tt.name, diff)
		}
		if _, err := c.Open(context.Background(), sink.Deps{}); !errors.As(err, &ce) {
			t.Errorf("%s: Open = %v, want the same configuration error", tt.name, err)
		}
	}
}

func TestSecretNeverPrints(t *testing.T) {
	c := decode(t, `{`+base+`,"password":"hunter2"}`)
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%+v %#v", c, c)} {
		if strings.Contains(s, "hunter2") {
			t.Errorf("password printed: %s", s)
		}
	}
}

// TestPayloadReads lists the settings that read the payload, which the
// loader refuses on encrypted subjects: pointer paths of the sink's and
// the routes' mappings and a payload_field key; never special sources or
// the audit layout.
func TestPayloadReads(t *testing.T) {
	for _, tt := range []struct {
		name, doc string
		want      []string
	}{
		{"audit layout reads nothing here", `{` + base + `}`, nil},
		{"pointers and routes", `{` + base + `,"layout":"mapped","mapping":[
			{"column":"tenant","path":"$header:X-Tenant","type":"text"},
			{"column":"whole","path":"","type":"json"},
			{"column":"subj","path":"$subject","type":"text"},
			{"column":"amount","path":"/amount","type":"double"}],
			"table_routes":[{"subject":"a.>","table":"a","mapping":[{"column":"s","path":"$subject","type":"text"}]},
				{"subject":"b.>","table":"b","idempotency":{"strategy":"payload_field","payload_field":"id"},
				 "mapping":[{"column":"id","path":"/id","type":"text"}]}]}`,
			[]string{"mapping[1].path", "mapping[3].path", "table_routes[1].idempotency.payload_field", "table_routes[1].mapping[0].path"}},
		{"special sources only", `{` + base + `,"layout":"mapped","mapping":[
			{"column":"subj","path":"$subject","type":"text"},{"column":"seq2","path":"$received_at","type":"timestamp"}]}`, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := decode(t, tt.doc).PayloadReads()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PayloadReads() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
