package oracle

import (
	"database/sql"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/mapping"
)

const mappedKeys = `"table":"orders","layout":"mapped","idempotency":{"strategy":"mapping","columns":["order_id"]},
  "include_columns":["stream_sequence"],"version_column":"stream_sequence","delete_when":{"header":"Op","equals":"delete"},
  "mapping":[{"column":"order_id","path":"/order/id","type":"bigint","required":true},
  {"column":"amount","path":"/order/amount","type":"numeric(12,2)"},
  {"column":"placed_at","path":"/placed_at","type":"timestamp"},
  {"column":"day","path":"/day","type":"date"},
  {"column":"paid","path":"/paid","type":"boolean"},
  {"column":"tenant","path":"$header:X-Tenant","type":"text","default":"none"}]`

// TestMappedStatements checks the mapped layout's Oracle statements by
// their text (no server here): the DDL with the types of docs/sql.md, the
// merge whose update only applies to an older row, the delete by key, the
// auto_evolve statement, and the binds of one message (numbers as exact
// decimal text for a number column, timestamps in UTC with nanoseconds,
// booleans as 1/0, dates as midnight).
func TestMappedStatements(t *testing.T) {
	s := testSink(t, decode(t, mappedKeys))
	tb := s.model.Tables[0]
	if got, want := s.model.DDL(tb), `create table ORDERS (
    ORDER_ID number(19) not null,
    STREAM_SEQUENCE number not null,
    AMOUNT number(12,2),
    PLACED_AT timestamp(9) with time zone,
    DAY date,
    PAID number(1),
    TENANT clob,
    constraint ORDERS_pk primary key (ORDER_ID)
)`; got != want {
		t.Errorf("DDL:\n%s\nwant:\n%s", got, want)
	}
	found := map[string]string{"order_id": "number(19,0)", "stream_sequence": "number", "amount": "number(12,2)",
		"placed_at": "timestamp(9) with time zone", "day": "date", "paid": "number(1,0)"}
	missing, err := s.model.CheckColumns(tb, found, true)
	if err != nil || len(missing) != 1 || missing[0].Name != "TENANT" {
		t.Fatalf("CheckColumns = %v, %v; want TENANT missing", missing, err)
	}
	if got, want := s.model.AddColumnSQL(tb, missing[0]), "alter table ORDERS add (TENANT clob)"; got != want {
		t.Errorf("AddColumnSQL = %q, want %q", got, want)
	}
	found["tenant"] = "clob"
	s.model.Prepare(tb, found)
	wantMerge := "merge into ORDERS t using (select :1 ORDER_ID, :2 STREAM_SEQUENCE, :3 AMOUNT, :4 PLACED_AT, :5 DAY, :6 PAID, :7 TENANT from dual) s" +
		" on (t.ORDER_ID = s.ORDER_ID) when matched then update set t.AMOUNT = s.AMOUNT, t.PLACED_AT = s.PLACED_AT, t.DAY = s.DAY, t.PAID = s.PAID, t.TENANT = s.TENANT, t.STREAM_SEQUENCE = s.STREAM_SEQUENCE" +
		" where t.STREAM_SEQUENCE is null or s.STREAM_SEQUENCE > t.STREAM_SEQUENCE" +
		" when not matched then insert (ORDER_ID, STREAM_SEQUENCE, AMOUNT, PLACED_AT, DAY, PAID, TENANT) values (s.ORDER_ID, s.STREAM_SEQUENCE, s.AMOUNT, s.PLACED_AT, s.DAY, s.PAID, s.TENANT)"
	if diff := cmp.Diff(wantMerge, tb.Mapped.Insert); diff != "" {
		t.Errorf("merge (-want +got):\n%s", diff)
	}
	if got, want := tb.Mapped.Delete, "delete from ORDERS where ORDER_ID = :1"; got != want {
		t.Errorf("delete = %q, want %q", got, want)
	}

	e := intake.Build(intake.Message{Subject: "orders.new", Reply: "$JS.ACK.ORDERS.c.1.7.7.1780048800123456000.0",
		Data: []byte(`{"order":{"id":9007199254740993.0,"amount":42.5},"placed_at":"2026-05-29T12:00:00.123456789+02:00","day":"2026-05-29","paid":true}`)}, nil, time.Now())
	r, err := s.model.BuildRow(e, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := []any{int64(9007199254740993), int64(7), "42.50", time.Date(2026, 5, 29, 10, 0, 0, 123456789, time.UTC),
		time.Date(2026, 5, 29, 0, 0, 0, 0, time.UTC), int64(1), "none"}
	if diff := cmp.Diff(want, r.M); diff != "" {
		t.Errorf("binds (-want +got):\n%s", diff)
	}
	del := intake.Build(intake.Message{Subject: "orders.new", Reply: "$JS.ACK.ORDERS.c.1.8.8.1780048800123456000.0",
		Data: []byte(`{"order":{"id":5}}`), Header: map[string][]string{"Op": {"delete"}}}, nil, time.Now())
	if r, err := s.model.BuildRow(del, time.Now()); err != nil || !r.Delete || !cmp.Equal(r.M, []any{int64(5)}) {
		t.Errorf("delete row = %+v, %v", r, err)
	}

	// Accepted and rejected found types of docs/sql.md's table.
	for _, tc := range []struct {
		typ   mapping.Type
		found string
		ok    bool
	}{
		{mapping.Type{Kind: mapping.BigInt}, "number(38,0)", true},
		{mapping.Type{Kind: mapping.BigInt}, "number(18,0)", false},
		{mapping.Type{Kind: mapping.Integer}, "number", true},
		{mapping.Type{Kind: mapping.Numeric, Precision: 12, Scale: 2}, "number(14,2)", true},
		{mapping.Type{Kind: mapping.Numeric, Precision: 12, Scale: 2}, "number(12,3)", false},
		{mapping.Type{Kind: mapping.UUID}, "varchar2(36)", true},
		{mapping.Type{Kind: mapping.UUID}, "varchar2(32)", false},
		{mapping.Type{Kind: mapping.JSON}, "blob", true},
		{mapping.Type{Kind: mapping.Text}, "number(10,0)", false},
	} {
		if got := s.model.Dialect.Accepts(tc.typ, tc.found); got != tc.ok {
			t.Errorf("Accepts(%s, %s) = %v, want %v", tc.typ, tc.found, got, tc.ok)
		}
	}
	if got := oracleType("NUMBER", sql.NullInt64{Int64: 19, Valid: true}, sql.NullInt64{Valid: true}, sql.NullInt64{}); got != "number(19,0)" {
		t.Errorf("oracleType = %q", got)
	}
}
