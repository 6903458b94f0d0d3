package oracle

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
	"github.com/nats-sinks/nats-sink/sink"
)

// Literal fragments of the spec's statements (docs/oracle.md) for the default
// column mapping, written out here rather than derived from the code under
// test.
const (
	cols  = "STREAM_NAME, STREAM_SEQUENCE, SUBJECT, MESSAGE_ID, PRIORITY, CLASSIFICATION, LABELS, MESSAGE_CREATED_AT_EPOCH_NS, JETSTREAM_TIMESTAMP_EPOCH_NS, RECEIVED_AT_EPOCH_NS, STORED_AT_EPOCH_NS, PAYLOAD_JSON, HEADERS_JSON, METADATA_JSON, MISSION_METADATA_JSON, SECURITY_LABELS_JSON"
	binds = ":stream_name, :stream_sequence, :subject, :message_id, :priority, :classification, :labels, :message_created_at_epoch_ns, :jetstream_timestamp_epoch_ns, :received_at_epoch_ns, :stored_at_epoch_ns, :payload_json, :headers_json, :metadata_json, :mission_metadata_json, :security_labels_json"
	dual  = "(select :stream_name as STREAM_NAME, :stream_sequence as STREAM_SEQUENCE, :subject as SUBJECT, :message_id as MESSAGE_ID, :priority as PRIORITY, :classification as CLASSIFICATION, :labels as LABELS, :message_created_at_epoch_ns as MESSAGE_CREATED_AT_EPOCH_NS, :jetstream_timestamp_epoch_ns as JETSTREAM_TIMESTAMP_EPOCH_NS, :received_at_epoch_ns as RECEIVED_AT_EPOCH_NS, :stored_at_epoch_ns as STORED_AT_EPOCH_NS, :payload_json as PAYLOAD_JSON, :headers_json as HEADERS_JSON, :metadata_json as METADATA_JSON, :mission_metadata_json as MISSION_METADATA_JSON, :security_labels_json as SECURITY_LABELS_JSON from dual)"
	onPK  = "(target.STREAM_NAME = source.STREAM_NAME and target.STREAM_SEQUENCE = source.STREAM_SEQUENCE)"
	// setAll updates every non-key mapped column (merge_update_columns null).
	setAll   = " when matched then update set target.SUBJECT = source.SUBJECT, target.MESSAGE_ID = source.MESSAGE_ID, target.PRIORITY = source.PRIORITY, target.CLASSIFICATION = source.CLASSIFICATION, target.LABELS = source.LABELS, target.MESSAGE_CREATED_AT_EPOCH_NS = source.MESSAGE_CREATED_AT_EPOCH_NS, target.JETSTREAM_TIMESTAMP_EPOCH_NS = source.JETSTREAM_TIMESTAMP_EPOCH_NS, target.RECEIVED_AT_EPOCH_NS = source.RECEIVED_AT_EPOCH_NS, target.STORED_AT_EPOCH_NS = source.STORED_AT_EPOCH_NS, target.PAYLOAD_JSON = source.PAYLOAD_JSON, target.HEADERS_JSON = source.HEADERS_JSON, target.METADATA_JSON = source.METADATA_JSON, target.MISSION_METADATA_JSON = source.MISSION_METADATA_JSON, target.SECURITY_LABELS_JSON = source.SECURITY_LABELS_JSON"
	notMatch = " when not matched then insert (" + cols + ") values (source.STREAM_NAME, source.STREAM_SEQUENCE, source.SUBJECT, source.MESSAGE_ID, source.PRIORITY, source.CLASSIFICATION, source.LABELS, source.MESSAGE_CREATED_AT_EPOCH_NS, source.JETSTREAM_TIMESTAMP_EPOCH_NS, source.RECEIVED_AT_EPOCH_NS, source.STORED_AT_EPOCH_NS, source.PAYLOAD_JSON, source.HEADERS_JSON, source.METADATA_JSON, source.MISSION_METADATA_JSON, source.SECURITY_LABELS_JSON)"
)

// base is a valid sink object; tests add keys to it.
const base = `"type":"oracle","dsn":"db.example:1521/FREEPDB1","user":"app","password":"pw"`

// decode decodes a sink object made of base plus extra keys.
func decode(t *testing.T, extra string) Config {
	t.Helper()
	if extra != "" {
		extra = "," + extra
	}
	return decodeDoc(t, base+extra)
}

// decodeDoc decodes the sink object {keys}.
func decodeDoc(t *testing.T, keys string) Config {
	t.Helper()
	doc := "{" + keys
	o, err := Decode(json.RawMessage(doc + "}"))
	if err != nil {
		t.Fatalf("Decode(%s): %v", doc, err)
	}
	return o.(Config)
}

// testSink compiles the configuration into a Sink without a database, with
// its metrics on metrics (nil: none).
func testSink(t *testing.T, c Config, metrics ...sink.Metrics) *Sink {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	m, err := sqlmodel.Compile(&c.Shared, sqlmodel.Oracle, c.options())
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	var ms sink.Metrics
	if len(metrics) > 0 {
		ms = metrics[0]
	}
	s, err := newSink(m, c, nil, ms)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStatements(t *testing.T) {
	for _, tt := range []struct {
		name   string
		extra  string
		table  int // index into Model.Tables
		want   plan
		wantTb string
	}{
		{"insert", `"mode":"insert"`, 0, plan{write: "insert into NATS_SINK_EVENTS (" + cols + ") values (" + binds + ")"}, "NATS_SINK_EVENTS"},
		{"append adds the hint", `"mode":"append"`, 0, plan{write: "insert /*+ append */ into NATS_SINK_EVENTS (" + cols + ") values (" + binds + ")"}, "NATS_SINK_EVENTS"},
		{"insert_ignore", `"mode":"insert_ignore"`, 0, plan{write: "merge into NATS_SINK_EVENTS target using " + dual + " source on " + onPK + notMatch}, "NATS_SINK_EVENTS"},
		{"merge, update columns absent (null)", ``, 0, plan{write: "merge into NATS_SINK_EVENTS target using " + dual + " source on " + onPK + setAll + notMatch}, "NATS_SINK_EVENTS"},
		{"merge, update columns explicit null", `"merge_update_columns":null`, 0, plan{write: "merge into NATS_SINK_EVENTS target using " + dual + " source on " + onPK + setAll + notMatch}, "NATS_SINK_EVENTS"},
		{"merge, no update columns", `"merge_update_columns":[]`, 0, plan{write: "merge into NATS_SINK_EVENTS target using " + dual + " source on " + onPK + notMatch}, "NATS_SINK_EVENTS"},
		{"merge, listed update columns in listed order, case folded", `"merge_update_columns":["stored_at_epoch_ns","PAYLOAD_JSON"]`, 0,
			plan{write: "merge into NATS_SINK_EVENTS target using " + dual + " source on " + onPK +
				" when matched then update set target.STORED_AT_EPOCH_NS = source.STORED_AT_EPOCH_NS, target.PAYLOAD_JSON = source.PAYLOAD_JSON" + notMatch}, "NATS_SINK_EVENTS"},
		{"schema-qualified table is upper-cased", `"table":"app.events","mode":"insert"`, 0, plan{write: "insert into APP.EVENTS (" + cols + ") values (" + binds + ")"}, "APP.EVENTS"},
		{"route with its own update columns", `"table_routes":[{"subject":"audit.>","table":"audit_events","merge_update_columns":[]}]`, 1,
			plan{write: "merge into AUDIT_EVENTS target using " + dual + " source on " + onPK + notMatch}, "AUDIT_EVENTS"},
		{"route inheriting the sink's update columns", `"merge_update_columns":["PAYLOAD_JSON"],"table_routes":[{"subject":"audit.>","table":"audit_events"}]`, 1,
			plan{write: "merge into AUDIT_EVENTS target using " + dual + " source on " + onPK + " when matched then update set target.PAYLOAD_JSON = source.PAYLOAD_JSON" + notMatch}, "AUDIT_EVENTS"},
		{"staging, delete_on_success", `"staging":{"enabled":true,"table":"stage_events"}`, 0, plan{
			stageInsert: "insert into STAGE_EVENTS (NATS_SINKS_BATCH_ID, " + cols + ") values (:nats_sinks_batch_id, " + binds + ")",
			stageMerge:  "merge into NATS_SINK_EVENTS target using (select " + cols + " from STAGE_EVENTS where NATS_SINKS_BATCH_ID = :nats_sinks_batch_id) source on " + onPK + setAll + notMatch,
			stageDelete: "delete from STAGE_EVENTS where NATS_SINKS_BATCH_ID = :nats_sinks_batch_id",
		}, "NATS_SINK_EVENTS"},
		{"staging, keep, insert_ignore, custom batch column", `"mode":"insert_ignore","staging":{"enabled":true,"table":"s.stage","batch_id_column":"bid","cleanup":"keep"}`, 0, plan{
			stageInsert: "insert into S.STAGE (BID, " + cols + ") values (:nats_sinks_batch_id, " + binds + ")",
			stageMerge:  "merge into NATS_SINK_EVENTS target using (select " + cols + " from S.STAGE where BID = :nats_sinks_batch_id) source on " + onPK + notMatch,
		}, "NATS_SINK_EVENTS"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := testSink(t, decode(t, tt.extra))
			tb := s.model.Tables[tt.table]
			if tb.Name != tt.wantTb {
				t.Errorf("table = %q, want %q", tb.Name, tt.wantTb)
			}
			if diff := cmp.Diff(tt.want, s.plans[tb], cmp.AllowUnexported(plan{})); diff != "" {
				t.Errorf("plan mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCustomColumns(t *testing.T) {
	// Renamed columns, the legacy payload_column alias, and a message_id
	// key (the default key columns switch to MESSAGE_ID).
	c := decode(t, `"mode":"insert_ignore","columns":{"subject":"subj","metadata":"meta_doc"},"payload_column":"body","idempotency":{"strategy":"message_id"}`)
	s := testSink(t, c)
	custom := func(s string) string {
		for _, r := range [][2]string{{"SUBJECT", "SUBJ"}, {"PAYLOAD_JSON", "BODY"}, {"METADATA_JSON", "META_DOC"}} {
			s = regexp.MustCompile(`\b`+r[0]+`\b`).ReplaceAllString(s, r[1])
		}
		return s
	}
	want := "merge into NATS_SINK_EVENTS target using " + custom(dual) + " source on (target.MESSAGE_ID = source.MESSAGE_ID)" + custom(notMatch)
	if got := s.plans[s.model.Tables[0]].write; got != want {
		t.Errorf("statement:\n got %s\nwant %s", got, want)
	}
	// Bind names never change with the column names.
	if !strings.Contains(want, ":subject as SUBJ") || !strings.Contains(want, ":payload_json as BODY") {
		t.Fatalf("test expectation lost its bind names: %s", want)
	}
}

// Oracle DDL of docs/formats.md#sql-tables, verbatim.
const wantDDL = `create table NATS_SINK_EVENTS (
    stream_name       varchar2(255) not null,
    stream_sequence   number not null,
    subject           clob not null,
    message_id        varchar2(512),
    priority          clob,
    classification    clob,
    labels            clob,
    received_at       timestamp default systimestamp not null,
    message_created_at_epoch_ns number(19),
    jetstream_timestamp_epoch_ns number(19),
    received_at_epoch_ns number(19) not null,
    stored_at_epoch_ns number(19) not null,
    payload_json      json,
    headers_json      json,
    metadata_json     json,
    mission_metadata_json json,
    security_labels_json json,
    constraint NATS_SINK_EVENTS_pk
        primary key (stream_name, stream_sequence)
)`

func TestDDL(t *testing.T) {
	s := testSink(t, decode(t, `"auto_create":true`))
	if got := ddl(s.model, s.model.Tables[0]); got != wantDDL {
		t.Errorf("DDL:\n%s\nwant:\n%s", got, wantDDL)
	}

	// Staging: the batch column first, the same columns, no primary key.
	stage := strings.Replace(wantDDL, "create table NATS_SINK_EVENTS (\n", "create table STAGE_EVENTS (\n    nats_sinks_batch_id varchar2(64) not null,\n", 1)
	stage = strings.Replace(stage, ",\n    constraint NATS_SINK_EVENTS_pk\n        primary key (stream_name, stream_sequence)\n)", "\n)", 1)
	if got := s.model.StagingDDL("STAGE_EVENTS", "NATS_SINKS_BATCH_ID"); got != stage {
		t.Errorf("staging DDL:\n%s\nwant:\n%s", got, stage)
	}

	// A key other than the primary key gets a unique constraint, so that
	// concurrent writers of one key collide instead of both inserting.
	s = testSink(t, decode(t, `"table":"app.events","idempotency":{"strategy":"message_id"}`))
	got := ddl(s.model, s.model.Tables[0])
	wantTail := "    constraint EVENTS_pk\n        primary key (stream_name, stream_sequence),\n    constraint EVENTS_idem\n        unique (message_id)\n)"
	if !strings.HasPrefix(got, "create table APP.EVENTS (\n") || !strings.HasSuffix(got, wantTail) {
		t.Errorf("DDL with message_id key:\n%s\nwant it to end with:\n%s", got, wantTail)
	}
	if n := idemConstraint(strings.Repeat("A", 128)); len(n) != 128 || !strings.HasSuffix(n, "_idem") {
		t.Errorf("idemConstraint(128×A) = %q (%d chars), want 128 chars ending _idem", n, len(n))
	}
}

func TestGoldenBinds(t *testing.T) {
	s := testSink(t, decode(t, ""))
	r, err := s.model.BuildRow(shapestest.Golden(), shapestest.Stored)
	if err != nil {
		t.Fatal(err)
	}
	// The metadata bind is the golden file record's metadata (docs/http.md) plus
	// "custody": null, as ascii JSON (docs/formats.md#metadata-document, docs/kafka.md).
	b, err := os.ReadFile(filepath.Join("..", "..", "internal", "record", "testdata", "file_record_compact.json"))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := jsonx.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	md := rec.(map[string]any)["metadata"].(map[string]any)
	md["custody"] = nil
	want := []namedArg{
		{"stream_name", []any{"ORDERS"}},
		{"stream_sequence", []any{int64(42)}},
		{"subject", []any{"orders.created"}},
		{"message_id", []any{"O-1001"}},
		{"priority", []any{"high"}},
		{"classification", []any{nil}},
		{"labels", []any{"billing;eu"}},
		{"message_created_at_epoch_ns", []any{int64(1780048799500000000)}},
		{"jetstream_timestamp_epoch_ns", []any{int64(1780048800123456000)}},
		{"received_at_epoch_ns", []any{int64(1780048800250000000)}},
		{"stored_at_epoch_ns", []any{int64(1780048800300000000)}},
		{"payload_json", []any{`{"amount":42.5,"note":"caf\u00e9","order_id":"O-1001"}`}},
		{"headers_json", []any{`{"Nats-Msg-Id":"O-1001","Nats-Sinks-Labels":"billing; eu ;billing","Nats-Sinks-Priority":"high","Nats-Time-Stamp":"2026-05-29T09:59:59.5Z","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`}},
		{"metadata_json", []any{string(jsonx.Marshal(md, jsonx.ASCII))}},
		{"mission_metadata_json", []any{"null"}},
		{"security_labels_json", []any{"null"}},
	}
	if diff := cmp.Diff(want, rowBinds([]*sqlmodel.Row{r})); diff != "" {
		t.Errorf("binds (-want +got):\n%s", diff)
	}
	// Every bind name appears in the statement exactly once.
	stmt := s.plans[s.model.Tables[0]].write
	for _, a := range want {
		if n := strings.Count(stmt, ":"+a.Name+" "); n != 1 {
			t.Errorf("bind :%s appears %d times in %s", a.Name, n, stmt)
		}
	}
}
