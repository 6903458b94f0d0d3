package sqlite

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
	"github.com/nats-sinks/nats-sink/sink"
)

func TestDecode(t *testing.T) {
	for _, tt := range []struct {
		name string
		js   string
		want []string
	}{
		{"defaults", `{"type":"sqlite"}`, nil},
		{"weak synchronous rejected", `{"type":"sqlite","synchronous":"normal"}`, []string{`synchronous: must be one of full, extra (got "normal")`}},
		{"busy timeout range", `{"type":"sqlite","busy_timeout_ms":600001}`, []string{`busy_timeout_ms: must be between 0 and 600000 (got 600001)`}},
		{"merge is not a sqlite mode", `{"type":"sqlite","mode":"merge"}`, []string{`mode: must be one of insert, insert_ignore, upsert (got "merge")`}},
		{"oracle key name is unknown", `{"type":"sqlite","merge_update_columns":[]}`, []string{`merge_update_columns: unknown key`}},
		{"shared rules run", `{"type":"sqlite","table":"t; drop table x","idempotency":{"columns":["X"]}}`, []string{
			`table: must be a valid sqlite table name (name or schema.name, each part matching ^[A-Za-z_][A-Za-z0-9_]{0,62}$) (got "t; drop table x")`,
			`idempotency.columns[0]: "X" is not a mapped column`,
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.js))
			var got []string
			if ce, ok := err.(*sink.ConfigError); ok {
				for _, p := range ce.Problems {
					got = append(got, p.Path+": "+p.Message)
				}
			} else if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeRoutes(t *testing.T) {
	o, err := Decode([]byte(`{"type":"sqlite","upsert_update_columns":["PAYLOAD_JSON"],"table_routes":[
		{"subject":"a.>","table":"a"},
		{"subject":"b.>","table":"b","upsert_update_columns":null},
		{"subject":"c.>","table":"c","idempotency":{"strategy":"message_id"},"upsert_update_columns":[]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c := o.(Config)
	m, err := sqlmodel.Compile(&c.Shared, sqlmodel.SQLite, c.options())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, tb := range m.Tables {
		got[tb.Name] = append(m.ColumnNames(tb.Key), "|")
		got[tb.Name] = append(got[tb.Name], m.ColumnNames(tb.Update)...)
	}
	want := map[string][]string{
		"nats_sink_events": {"stream_name", "stream_sequence", "|", "payload_json"},
		"a":                {"stream_name", "stream_sequence", "|", "payload_json"}, // inherits the sink's list
		"b": {"stream_name", "stream_sequence", "|", "subject", "message_id", "priority", "classification", "labels",
			"message_created_at_epoch_ns", "jetstream_timestamp_epoch_ns", "received_at_epoch_ns", "stored_at_epoch_ns",
			"payload_json", "headers_json", "metadata_json", "mission_metadata_json", "security_labels_json"}, // explicit null = all
		"c": {"message_id", "|"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("keys | updates (-want +got):\n%s", diff)
	}
	if s := insertSQL(m, m.Tables[3], false); s != `insert into "c" ("stream_name", "stream_sequence", "subject", "message_id", "priority", "classification", "labels", "message_created_at_epoch_ns", "jetstream_timestamp_epoch_ns", "received_at_epoch_ns", "stored_at_epoch_ns", "payload_json", "headers_json", "metadata_json", "mission_metadata_json", "security_labels_json") values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) on conflict ("message_id") do nothing` {
		t.Errorf("insertSQL(c) = %s", s)
	}
	if s := insertSQL(m, m.Tables[0], false); !strings.HasSuffix(s, `) on conflict ("stream_name", "stream_sequence") do update set "payload_json" = excluded."payload_json"`) {
		t.Errorf("insertSQL(default) = %s", s)
	}
}
