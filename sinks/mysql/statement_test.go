package mysql

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
	"github.com/nats-sinks/nats-sink/sink"
)

const allCols = "`STREAM_NAME`, `STREAM_SEQUENCE`, `SUBJECT`, `MESSAGE_ID`, `PRIORITY`, `CLASSIFICATION`, `LABELS`, " +
	"`MESSAGE_CREATED_AT_EPOCH_NS`, `JETSTREAM_TIMESTAMP_EPOCH_NS`, `RECEIVED_AT_EPOCH_NS`, `STORED_AT_EPOCH_NS`, " +
	"`PAYLOAD_JSON`, `HEADERS_JSON`, `METADATA_JSON`, `MISSION_METADATA_JSON`, `SECURITY_LABELS_JSON`"

const row16 = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"

// model decodes a sink object (database, user and password added) and
// compiles its model.
func model(t *testing.T, js string) *sqlmodel.Model {
	t.Helper()
	o, err := Decode([]byte(`{"type":"mysql","database":"d","user":"u","password":"pw",` + js + `}`))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	c := o.(Config)
	m, err := sqlmodel.Compile(&c.Shared, sqlmodel.MySQL, c.options())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestStatementText(t *testing.T) {
	for _, tt := range []struct {
		name string
		js   string
		rows int
		want []string // one per table
	}{
		{"insert", `"mode":"insert"`, 1, []string{"insert into `NATS_SINK_EVENTS` (" + allCols + ") values " + row16}},
		{"append is a plain insert", `"mode":"append"`, 2, []string{"insert into `NATS_SINK_EVENTS` (" + allCols + ") values " + row16 + ", " + row16}},
		{"insert_ignore", `"mode":"insert_ignore"`, 1, []string{"insert ignore into `NATS_SINK_EVENTS` (" + allCols + ") values " + row16}},
		{"upsert, update columns null = every non-key column", `"mode":"upsert"`, 1, []string{"insert into `NATS_SINK_EVENTS` (" + allCols + ") values " + row16 +
			" on duplicate key update `SUBJECT` = values(`SUBJECT`), `MESSAGE_ID` = values(`MESSAGE_ID`), `PRIORITY` = values(`PRIORITY`), " +
			"`CLASSIFICATION` = values(`CLASSIFICATION`), `LABELS` = values(`LABELS`), `MESSAGE_CREATED_AT_EPOCH_NS` = values(`MESSAGE_CREATED_AT_EPOCH_NS`), " +
			"`JETSTREAM_TIMESTAMP_EPOCH_NS` = values(`JETSTREAM_TIMESTAMP_EPOCH_NS`), `RECEIVED_AT_EPOCH_NS` = values(`RECEIVED_AT_EPOCH_NS`), " +
			"`STORED_AT_EPOCH_NS` = values(`STORED_AT_EPOCH_NS`), `PAYLOAD_JSON` = values(`PAYLOAD_JSON`), `HEADERS_JSON` = values(`HEADERS_JSON`), " +
			"`METADATA_JSON` = values(`METADATA_JSON`), `MISSION_METADATA_JSON` = values(`MISSION_METADATA_JSON`), `SECURITY_LABELS_JSON` = values(`SECURITY_LABELS_JSON`)"}},
		{"upsert, update columns []: key self-assignment", `"mode":"upsert","upsert_update_columns":[]`, 1, []string{
			"insert into `NATS_SINK_EVENTS` (" + allCols + ") values " + row16 + " on duplicate key update `STREAM_NAME` = `STREAM_NAME`"}},
		{"upsert, update column list (case-insensitive match, listed order)", `"mode":"upsert","upsert_update_columns":["stored_at_epoch_ns","payload_json"]`, 1, []string{
			"insert into `NATS_SINK_EVENTS` (" + allCols + ") values " + row16 + " on duplicate key update `STORED_AT_EPOCH_NS` = values(`STORED_AT_EPOCH_NS`), `PAYLOAD_JSON` = values(`PAYLOAD_JSON`)"}},
		{"custom columns, case preserved, schema-qualified table",
			`"mode":"upsert","table":"ops.Events","upsert_update_columns":["Body"],"payload_column":"Body","columns":{"stream_name":"Stream","stream_sequence":"Seq"},"idempotency":{"columns":["stream","SEQ"]}`, 1,
			[]string{"insert into `ops`.`Events` (`Stream`, `Seq`, `SUBJECT`, `MESSAGE_ID`, `PRIORITY`, `CLASSIFICATION`, `LABELS`, " +
				"`MESSAGE_CREATED_AT_EPOCH_NS`, `JETSTREAM_TIMESTAMP_EPOCH_NS`, `RECEIVED_AT_EPOCH_NS`, `STORED_AT_EPOCH_NS`, " +
				"`Body`, `HEADERS_JSON`, `METADATA_JSON`, `MISSION_METADATA_JSON`, `SECURITY_LABELS_JSON`) values " + row16 +
				" on duplicate key update `Body` = values(`Body`)"}},
		{"routes: one statement per table with its own update columns",
			`"mode":"upsert","upsert_update_columns":["PAYLOAD_JSON"],"table_routes":[{"subject":"audit.>","table":"AUDIT","upsert_update_columns":[],"idempotency":{"strategy":"message_id"}}]`, 1,
			[]string{
				"insert into `NATS_SINK_EVENTS` (" + allCols + ") values " + row16 + " on duplicate key update `PAYLOAD_JSON` = values(`PAYLOAD_JSON`)",
				"insert into `AUDIT` (" + allCols + ") values " + row16 + " on duplicate key update `MESSAGE_ID` = `MESSAGE_ID`",
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := model(t, tt.js)
			var got []string
			for _, tb := range m.Tables {
				got = append(got, newStatement(m, tb).text(tt.rows))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("SQL (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDDL(t *testing.T) {
	golden, err := os.ReadFile("../../internal/sqlmodel/testdata/ddl_mysql.sql")
	if err != nil {
		t.Fatal(err)
	}
	spec := strings.TrimSpace(string(golden))
	withIdem := func(table, constraint, cols string) string {
		s := strings.Replace(spec, "`NATS_SINK_EVENTS` (", "`"+table+"` (", 1)
		s = strings.Replace(s, "constraint `NATS_SINK_EVENTS_pk`", "constraint `"+strings.TrimSuffix(constraint, "_idem")+"_pk`", 1)
		return strings.TrimSuffix(s, "\n)") + ",\n    constraint `" + constraint + "` unique (" + cols + ")\n)"
	}
	long := strings.Repeat("L", 62) // L…L_idem exceeds 64 characters
	for _, tt := range []struct{ name, js, want string }{
		{"default table: the docs/formats.md#sql-tables text", `"mode":"upsert"`, spec},
		{"key in another order is still the primary key", `"idempotency":{"columns":["STREAM_SEQUENCE","STREAM_NAME"]}`, spec},
		{"insert without key columns", `"mode":"insert","idempotency":{"columns":[]}`, spec},
		{"message_id key adds _idem", `"idempotency":{"strategy":"message_id"}`, withIdem("NATS_SINK_EVENTS", "NATS_SINK_EVENTS_idem", "`MESSAGE_ID`")},
		{"payload_field key adds _idem", `"idempotency":{"strategy":"payload_field","payload_field":"order.id"}`, withIdem("NATS_SINK_EVENTS", "NATS_SINK_EVENTS_idem", "`MESSAGE_ID`")},
		{"custom key columns", `"idempotency":{"columns":["SUBJECT","STREAM_SEQUENCE"]}`, withIdem("NATS_SINK_EVENTS", "NATS_SINK_EVENTS_idem", "`SUBJECT`, `STREAM_SEQUENCE`")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := model(t, tt.js)
			if diff := cmp.Diff(tt.want, ddl(m, m.Tables[0])); diff != "" {
				t.Errorf("DDL (-want +got):\n%s", diff)
			}
		})
	}
	m := model(t, `"table":"s.`+long+`","idempotency":{"strategy":"message_id"}`)
	got := ddl(m, m.Tables[0])
	name := idemConstraint(long)
	if len(name) != 64 || !strings.HasPrefix(name, long[:50]+"_") || !strings.HasSuffix(name, "_idem") {
		t.Errorf("idemConstraint(62 chars) = %q (%d chars)", name, len(name))
	}
	if !strings.Contains(got, "create table if not exists `s`.`"+long+"` (") || !strings.Contains(got, "constraint `"+name+"` unique (`MESSAGE_ID`)") {
		t.Errorf("long-name DDL:\n%s", got)
	}
}

func TestEffective(t *testing.T) {
	rows := func(n int) []*sqlmodel.Row {
		out := make([]*sqlmodel.Row, n)
		for i := range out {
			out[i] = &sqlmodel.Row{}
		}
		return out
	}
	up := statement{mode: sqlmodel.Upsert, update: 3, storedAtUpdated: true}
	upNoStored := statement{mode: sqlmodel.Upsert, update: 1}
	for _, tt := range []struct {
		name     string
		st       statement
		n        int
		affected int64
		fresh    int64
		dup      bool
		unknown  bool
	}{
		{"insert", statement{mode: sqlmodel.Insert}, 3, 3, 3, false, false},
		{"insert_ignore all new", statement{mode: sqlmodel.InsertIgnore}, 3, 3, 3, false, false},
		{"insert_ignore all present", statement{mode: sqlmodel.InsertIgnore}, 3, 0, 0, true, false},
		{"insert_ignore some present: counted, not attributed", statement{mode: sqlmodel.InsertIgnore}, 3, 1, 1, false, false},
		{"upsert [] all present", statement{mode: sqlmodel.Upsert}, 2, 0, 0, true, false},
		{"upsert all new", up, 3, 3, 3, false, false},
		{"upsert all refreshed", up, 3, 6, 0, true, false},
		{"upsert mixed", up, 3, 4, 2, false, true},
		{"upsert without stored_at: all unchanged", upNoStored, 2, 0, 0, true, false},
		{"upsert without stored_at: all updated", upNoStored, 2, 4, 0, true, false},
		{"upsert without stored_at: ambiguous", upNoStored, 2, 2, 2, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rs := rows(tt.n)
			fresh, unknown := tt.st.effective(rs, tt.affected)
			var dups []bool
			for _, r := range rs {
				dups = append(dups, r.Duplicate)
			}
			want := make([]bool, tt.n)
			for i := range want {
				want[i] = tt.dup
			}
			if fresh != tt.fresh || unknown != tt.unknown || !cmp.Equal(dups, want) {
				t.Errorf("effective(%d rows, %d affected) = %d, %v, duplicates %v; want %d, %v, %v", tt.n, tt.affected, fresh, unknown, dups, tt.fresh, tt.unknown, want)
			}
		})
	}
}

func TestChunks(t *testing.T) {
	row := func(size int) *sqlmodel.Row {
		r := &sqlmodel.Row{}
		r.Values[sqlmodel.Payload] = strings.Repeat("x", size)
		return r
	}
	rows := func(n, size int) []*sqlmodel.Row {
		var out []*sqlmodel.Row
		for range n {
			out = append(out, row(size))
		}
		return out
	}
	// Rows of which four fit the byte budget, but not five.
	quarter := maxExecuteBytes/4 - rowSize(row(0))
	for _, tt := range []struct {
		name string
		rows []*sqlmodel.Row
		want []int
	}{
		{"empty", nil, nil},
		{"fewer than a chunk", rows(7, 10), []int{7}},
		{"full chunks, then the tail", rows(2*chunkRows+chunkRows/2, 10), []int{chunkRows, chunkRows, chunkRows / 2}},
		{"the byte budget cuts a chunk", rows(10, quarter), []int{4, 4, 2}},
		{"an oversized row goes alone", []*sqlmodel.Row{row(10), row(maxExecuteBytes), row(10), row(10)}, []int{1, 1, 2}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []int
			total := 0
			for _, c := range chunks(tt.rows) {
				got = append(got, len(c))
				size := 0
				for _, r := range c {
					size += rowSize(r)
				}
				if len(c) > 1 && size > maxExecuteBytes {
					t.Errorf("chunk of %d rows is %d bytes, over the %d budget", len(c), size, maxExecuteBytes)
				}
				total += len(c)
			}
			if !cmp.Equal(got, tt.want) {
				t.Errorf("chunk sizes = %v, want %v", got, tt.want)
			}
			if total != len(tt.rows) {
				t.Errorf("chunks hold %d rows, want %d", total, len(tt.rows))
			}
		})
	}
	// The protocol's limit of 65,535 placeholders per statement.
	if n := chunkRows * int(sqlmodel.NumFields); n > 65535 {
		t.Errorf("a full chunk has %d placeholders, over 65,535", n)
	}
}

func TestClassify(t *testing.T) {
	for _, tt := range []struct {
		code uint16
		mode sqlmodel.Mode
		want sink.Outcome
	}{
		{1062, sqlmodel.Insert, sink.Permanent},
		{1062, sqlmodel.Append, sink.Permanent},
		{1062, sqlmodel.Upsert, sink.Permanent},
		{1062, sqlmodel.InsertIgnore, sink.Temporary},
		{1048, sqlmodel.Upsert, sink.Permanent},
		{1366, sqlmodel.Upsert, sink.Permanent},
		{1406, sqlmodel.Upsert, sink.Permanent},
		{3140, sqlmodel.Upsert, sink.Permanent},
		{3819, sqlmodel.Upsert, sink.Permanent},
		{4025, sqlmodel.Upsert, sink.Permanent},
		{1153, sqlmodel.Upsert, sink.Permanent},
		{1045, sqlmodel.Upsert, sink.Destination},
		{1049, sqlmodel.Upsert, sink.Destination},
		{1054, sqlmodel.Upsert, sink.Destination},
		{1064, sqlmodel.Upsert, sink.Destination},
		{1142, sqlmodel.Upsert, sink.Destination},
		{1146, sqlmodel.Upsert, sink.Destination},
		{1044, sqlmodel.Upsert, sink.Destination},
		{1143, sqlmodel.Upsert, sink.Destination},
		{1698, sqlmodel.Upsert, sink.Destination},
		{3118, sqlmodel.Upsert, sink.Destination},
		{4151, sqlmodel.Upsert, sink.Destination},
		{2003, sqlmodel.Upsert, sink.Temporary},
		{2006, sqlmodel.Upsert, sink.Temporary},
		{2013, sqlmodel.Upsert, sink.Temporary},
		{1205, sqlmodel.Upsert, sink.Temporary},
		{1213, sqlmodel.Upsert, sink.Temporary},
		{1290, sqlmodel.Upsert, sink.Temporary},
	} {
		t.Run(fmt.Sprintf("%d %s", tt.code, tt.mode), func(t *testing.T) {
			s := &Sink{model: &sqlmodel.Model{Mode: tt.mode}, m: sqlmodel.NewDBMetrics(nil, sqlmodel.MySQL, "", "")}
			err := fmt.Errorf("mysql write to T: %w", &mysql.MySQLError{Number: tt.code, Message: "x"})
			if got := sink.Failed(s.classify(err)).Outcome; got != tt.want {
				t.Errorf("classify(%d) in %s = %v, want %v", tt.code, tt.mode, got, tt.want)
			}
		})
	}
	s := &Sink{model: &sqlmodel.Model{Mode: sqlmodel.Upsert}, m: sqlmodel.NewDBMetrics(nil, sqlmodel.MySQL, "", "")}
	for _, tt := range []struct {
		name string
		err  error
		want sink.Outcome
	}{
		{"driver refuses an oversized statement", fmt.Errorf("x: %w", mysql.ErrPktTooLarge), sink.Permanent},
		{"broken connection", mysql.ErrInvalidConn, sink.Temporary},
		{"network", errors.New("dial tcp 127.0.0.1:1: connection refused"), sink.Temporary},
		{"already classified warning stays", sink.AsPermanent(&mysql.MySQLError{Number: 1265}), sink.Permanent},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := sink.Failed(s.classify(tt.err)).Outcome; got != tt.want {
				t.Errorf("classify(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestSanitize(t *testing.T) {
	for _, tt := range []struct {
		in   mysql.MySQLError
		want string
	}{
		{mysql.MySQLError{Number: 1062, Message: "Duplicate entry 'ORDERS-42' for key 'PRIMARY'"}, "Error 1062: Duplicate entry '…' for key 'PRIMARY'"},
		{mysql.MySQLError{Number: 1062, Message: "Duplicate entry 'it's-secret' for key 'T_idem'"}, "Error 1062: Duplicate entry '…' for key 'T_idem'"},
		{mysql.MySQLError{Number: 1366, Message: `Incorrect string value: '\xF0\x9F\x98' for column ` + "`d`.`t`.`c`" + ` at row 1`}, "Error 1366: Incorrect string value: '…' for column `d`.`t`.`c` at row 1"},
		{mysql.MySQLError{Number: 1292, Message: "Truncated value 'abc"}, "Error 1292: (message withheld: it may quote message content)"},
		{mysql.MySQLError{Number: 1406, Message: "Data too long for column 'MESSAGE_ID' at row 2"}, "Error 1406: Data too long for column 'MESSAGE_ID' at row 2"},
	} {
		err := sanitize(&tt.in)
		if got := err.Error(); got != tt.want {
			t.Errorf("sanitize(%q) = %q, want %q", tt.in.Message, got, tt.want)
		}
		if me, ok := errors.AsType[*mysql.MySQLError](err); !ok || me.Number != tt.in.Number {
			t.Errorf("sanitize(%d) lost the error number: %v", tt.in.Number, err)
		}
	}
}
