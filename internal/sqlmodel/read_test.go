package sqlmodel

import (
	"testing"

	"github.com/nats-sinks/nats-sink/sqlconfig"
)

func TestReadQuery(t *testing.T) {
	for _, tt := range []struct {
		d     Dialect
		table string
		limit int
		want  string
	}{
		{SQLite, "", 0, `SELECT "stream_name", "stream_sequence", "payload_json", "metadata_json" FROM "nats_sink_events" ORDER BY "stream_name", "stream_sequence"`},
		{Postgres, "Audit.Events", 5, `SELECT "stream_name", "stream_sequence", "payload_json"::text, "metadata_json"::text FROM "audit"."events" ORDER BY "stream_name", "stream_sequence" LIMIT 5`},
		{MySQL, "", 2, "SELECT `STREAM_NAME`, `STREAM_SEQUENCE`, `PAYLOAD_JSON`, `METADATA_JSON` FROM `NATS_SINK_EVENTS` ORDER BY `STREAM_NAME`, `STREAM_SEQUENCE` LIMIT 2"},
		{Oracle, "events", 3, `SELECT STREAM_NAME, STREAM_SEQUENCE, PAYLOAD_JSON, METADATA_JSON FROM EVENTS ORDER BY STREAM_NAME, STREAM_SEQUENCE FETCH FIRST 3 ROWS ONLY`},
	} {
		s := DefaultShared[sqlconfig.UpsertRoute](tt.d)
		m, err := Compile(&s, tt.d, Options{Mode: tt.d.Modes()[0]})
		if err != nil {
			t.Fatalf("%s: Compile: %v", tt.d, err)
		}
		name, err := m.ReadTable(tt.table)
		if err != nil {
			t.Fatalf("%s: ReadTable(%q): %v", tt.d, tt.table, err)
		}
		if got := m.ReadQuery(name, tt.limit); got != tt.want {
			t.Errorf("%s: ReadQuery(%q, %d) =\n%s\nwant\n%s", tt.d, name, tt.limit, got, tt.want)
		}
	}
}

func TestReadTableRejectsBadName(t *testing.T) {
	s := DefaultShared[sqlconfig.UpsertRoute](SQLite)
	m, err := Compile(&s, SQLite, Options{Mode: Insert})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.ReadTable("x;drop table y"); err == nil {
		t.Error(`ReadTable("x;drop table y") succeeded, want an error`)
	}
}
