package mysql

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sqlconfig"
)

func menv(seq uint64, body string, hdr map[string][]string) *sink.Envelope {
	reply := fmt.Sprintf("$JS.ACK.ORDERS.c.1.%d.%d.1780048800123456000.0", seq, seq)
	return intake.Build(intake.Message{Subject: "orders.new", Reply: reply, Data: []byte(body), Header: hdr}, nil, received)
}

func scalar(t *testing.T, srv *server, q string, args ...any) string {
	t.Helper()
	var v *string
	if err := srv.admin.QueryRowContext(t.Context(), q, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if v == nil {
		return "<null>"
	}
	return *v
}

// TestMappedConversions writes every mapped type's edge values to the real
// server, one message per value, and reads each back as text: values that
// must not convert fail their message alone with the reason, and the other
// rows commit.
func TestMappedConversions(t *testing.T) {
	srv := testServer(t)
	c := srv.config(srv.table(t))
	c.Layout = sqlconfig.LayoutMapped
	item := func(col, typ, unit string) sqlconfig.MappingItem {
		return sqlconfig.MappingItem{Column: col, Path: "/" + col, Type: typ, EpochUnit: unit}
	}
	c.Mapping = []sqlconfig.MappingItem{
		item("i64", "bigint", "ms"), item("i32", "integer", "ms"), item("f", "double", "ms"),
		item("n", "numeric(12,2)", "ms"), item("b", "boolean", "ms"), item("ts", "timestamp", "ms"),
		item("ts_ns", "timestamp", "ns"), item("d", "date", "ms"), item("j", "json", "ms"),
		item("u", "uuid", "ms"), item("by", "bytes", "ms"), item("tx", "text", "ms"),
	}
	long := strings.Repeat("é", 100000)
	cases := []struct {
		col, in string
		want    string // text read back, or the failure's reason
		fail    bool
	}{
		{"i64", `9223372036854775807`, "9223372036854775807", false},
		{"i64", `-9223372036854775808`, "-9223372036854775808", false},
		{"i64", `9223372036854775808`, "out of range for bigint", true},
		{"i64", `9007199254740993.0`, "9007199254740993", false},
		{"i64", `7e2`, "700", false},
		{"i32", `2147483647`, "2147483647", false},
		{"i32", `-2147483649`, "out of range for integer", true},
		{"f", `9007199254740993`, "9.007199254740992e15", false}, // 2^53: the nearest double, in MariaDB's text
		{"f", `"NaN"`, "string not accepted for double (set lenient_strings)", true},
		{"n", `42.5`, "42.50", false},
		{"n", `1.005`, "more than 2 fraction digits for numeric(12,2)", true},
		{"b", `false`, "0", false},
		{"ts", `"2026-05-29T12:00:00.1234567+02:00"`, "2026-05-29 10:00:00.123456", false},
		{"ts", `1780048800123`, "2026-05-29 10:00:00.123000", false},
		{"ts_ns", `1780048800123456789`, "2026-05-29 10:00:00.123456", false},
		{"ts", `"0999-12-31T23:59:59Z"`, "out of range for timestamp", true},
		{"ts", `"2026-05-29T12:00:00"`, "timestamp has no UTC offset", true},
		{"d", `"2026-05-29"`, "2026-05-29", false},
		{"j", `{"b":[1,2.50,{"c":null}],"a":"é"}`, `{"a":"\u00e9","b":[1,2.5,{"c":null}]}`, false},
		{"u", `"0E2A6C4E-1C6B-4E37-9D2B-1A5F0C3E9B7D"`, "0e2a6c4e-1c6b-4e37-9d2b-1a5f0c3e9b7d", false},
		{"by", `"aGk="`, "hi", false},
		{"tx", `42.50`, "42.5", false},
		{"tx", `"` + long + `"`, long, false},
		{"tx", `{"a":1}`, "expected string, number or boolean (got object)", true},
	}
	s := open(t, c)
	var batch []*sink.Envelope
	for i, tc := range cases {
		batch = append(batch, menv(uint64(i+1), `{"`+tc.col+`":`+tc.in+`}`, nil))
	}
	res := s.WriteBatch(t.Context(), batch)
	for i, tc := range cases {
		r := res[i]
		if tc.fail {
			if r.Outcome != sink.Permanent || r.Shared || !strings.HasSuffix(r.Err.Error(), fmt.Sprintf("mapping column %q (path %q): %s", tc.col, "/"+tc.col, tc.want)) {
				t.Errorf("%s = %s: result %v %v, want unshared permanent %q", tc.col, tc.in, r.Outcome, r.Err, tc.want)
			}
			continue
		}
		if r.Outcome != sink.Committed {
			t.Errorf("%s = %.40s: result %v %v, want committed", tc.col, tc.in, r.Outcome, r.Err)
			continue
		}
		got := scalar(t, srv, fmt.Sprintf("select cast(`%s` as char) from `%s` where STREAM_SEQUENCE = ?", tc.col, c.Table), i+1)
		if got != tc.want {
			t.Errorf("%s = %.40s: stored %.60q, want %.60q", tc.col, tc.in, got, tc.want)
		}
	}
}

// TestMappedEvolve: upsert by a business key with version_column keeps the
// newest message; a delete by header removes the row, twice harmlessly; a
// restart with one more mapped column adds it with auto_evolve (and is a
// configuration error without); a found type that does not fit stops the
// start naming column, mapped type and found type.
func TestMappedEvolve(t *testing.T) {
	srv := testServer(t)
	c := srv.config(srv.table(t))
	c.Layout = sqlconfig.LayoutMapped
	c.Idempotency = sqlconfig.Idempotency{Strategy: "mapping", Columns: []string{"order_id"}}
	c.IncludeColumns = []string{"stream_sequence"}
	vc := "stream_sequence"
	c.VersionColumn = &vc
	header, equals := "Op", "delete"
	c.DeleteWhen = &sqlconfig.DeleteWhen{Header: &header, Equals: &equals}
	c.Mapping = []sqlconfig.MappingItem{
		{Column: "order_id", Path: "/id", Type: "bigint", Required: true, EpochUnit: "ms"},
		{Column: "amount", Path: "/amount", Type: "numeric(12,2)", EpochUnit: "ms"},
	}
	s := open(t, c)
	if err := s.Healthcheck(t.Context()); err != nil {
		t.Errorf("Healthcheck of a mapped table: %v", err)
	}
	res := s.WriteBatch(t.Context(), []*sink.Envelope{
		menv(2, `{"id":1,"amount":2}`, nil), menv(1, `{"id":1,"amount":1}`, nil), menv(3, `{"id":2,"amount":"x"}`, nil), menv(4, `{"id":3}`, nil)})
	var got []sink.Outcome
	for _, r := range res {
		got = append(got, r.Outcome)
	}
	if fmt.Sprint(got) != fmt.Sprint([]sink.Outcome{sink.Committed, sink.Duplicate, sink.Permanent, sink.Committed}) {
		t.Fatalf("outcomes = %v (%v)", got, res)
	}
	for range 2 {
		if r := s.WriteBatch(t.Context(), []*sink.Envelope{menv(5, `{"id":3}`, map[string][]string{"Op": {"delete"}})})[0]; r.Outcome != sink.Committed {
			t.Fatalf("delete = %+v", r)
		}
	}
	s.Stop(t.Context())

	c.Mapping = append(c.Mapping, sqlconfig.MappingItem{Column: "note", Path: "/note", Type: "text", EpochUnit: "ms"})
	c.AutoCreate = false
	_, err := New(t.Context(), c, sink.Deps{})
	if !errors.Is(err, sink.ErrConfig) || !strings.Contains(err.Error(), `mapping[2].column: column "note" is missing from table`) {
		t.Fatalf("New without auto_evolve = %v", err)
	}
	c.AutoEvolve = true
	s = open(t, c)
	if r := s.WriteBatch(t.Context(), []*sink.Envelope{menv(6, `{"id":4,"amount":1,"note":"hi"}`, nil)})[0]; r.Outcome != sink.Committed {
		t.Fatal(r)
	}
	rows := scalar(t, srv, "select group_concat(concat_ws('/', order_id, STREAM_SEQUENCE, amount, coalesce(note, '-')) order by order_id separator ' ') from `"+c.Table+"`")
	if want := "1/2/2.00/- 4/6/1.00/hi"; rows != want {
		t.Errorf("rows = %s, want %s", rows, want)
	}
	s.Stop(t.Context())

	c.Mapping[2].Type = "integer"
	_, err = New(t.Context(), c, sink.Deps{})
	if !errors.Is(err, sink.ErrConfig) || !strings.Contains(err.Error(), `mapping[2].type: column "note" of table "`+c.Table+`" has type longtext, not compatible with mapped type integer`) {
		t.Errorf("New with a mismatched type = %v", err)
	}
}

// TestMappedDatabaseRefusal: a value too long for the operator's varchar(5)
// column fails the statement as a Shared permanent result (strict mode,
// never truncated), which the runner bisects; alone, the others commit.
func TestMappedDatabaseRefusal(t *testing.T) {
	srv := testServer(t)
	c := srv.config(srv.table(t))
	c.AutoCreate = false
	if _, err := srv.admin.ExecContext(t.Context(), "create table `"+c.Table+"` (STREAM_NAME varchar(255) not null, STREAM_SEQUENCE bigint not null, code varchar(5), primary key (STREAM_NAME, STREAM_SEQUENCE))"); err != nil {
		t.Fatal(err)
	}
	c.Layout = sqlconfig.LayoutMapped
	c.Mapping = []sqlconfig.MappingItem{{Column: "code", Path: "/code", Type: "text", EpochUnit: "ms"}}
	s := open(t, c)
	batch := []*sink.Envelope{menv(1, `{"code":"ab"}`, nil), menv(2, `{"code":"abcdef"}`, nil), menv(3, `{"code":"cd"}`, nil)}
	for i, r := range s.WriteBatch(t.Context(), batch) {
		if r.Outcome != sink.Permanent || !r.Shared {
			t.Errorf("batch [%d] = %v shared %v, want Shared Permanent", i, r.Outcome, r.Shared)
		}
	}
	for i, want := range []sink.Outcome{sink.Committed, sink.Permanent, sink.Committed} {
		if r := s.WriteBatch(t.Context(), batch[i:i+1])[0]; r.Outcome != want {
			t.Errorf("alone [%d] = %v (%v), want %v", i, r.Outcome, r.Err, want)
		}
	}
}

// TestMappedEvolveTogether: four processes starting at once against a table
// lacking two mapped columns all start (1060 "duplicate column" is ignored,
// then the columns are checked again).
func TestMappedEvolveTogether(t *testing.T) {
	srv := testServer(t)
	c := srv.config(srv.table(t))
	c.AutoCreate, c.AutoEvolve = false, true
	if _, err := srv.admin.ExecContext(t.Context(), "create table `"+c.Table+"` (STREAM_NAME varchar(255) not null, STREAM_SEQUENCE bigint not null, a longtext, b bigint, primary key (STREAM_NAME, STREAM_SEQUENCE))"); err != nil {
		t.Fatal(err)
	}
	c.Layout = sqlconfig.LayoutMapped
	for _, col := range []string{"a", "b", "c", "d"} {
		typ := "text"
		if col == "b" || col == "d" {
			typ = "bigint"
		}
		c.Mapping = append(c.Mapping, sqlconfig.MappingItem{Column: col, Path: "/" + col, Type: typ, EpochUnit: "ms"})
	}
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			s, err := New(t.Context(), c, sink.Deps{})
			if err == nil {
				s.Stop(t.Context())
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Errorf("New: %v", err)
		}
	}
	cols := scalar(t, srv, "select group_concat(concat(column_name, ' ', column_type) order by ordinal_position separator ', ') from information_schema.columns where table_schema = database() and table_name = ?", c.Table)
	if want := "STREAM_NAME varchar(255), STREAM_SEQUENCE bigint(20), a longtext, b bigint(20), c longtext, d bigint(20)"; cols != want {
		t.Errorf("columns = %s, want %s", cols, want)
	}
}

// versionedConfig is a mapped upsert keyed by the payload's id, guarded by
// version_column stream_sequence, deleting on header Op: delete.
func versionedConfig(srv *server, table string) Config {
	c := srv.config(table)
	c.Layout = sqlconfig.LayoutMapped
	c.Idempotency = sqlconfig.Idempotency{Strategy: "mapping", Columns: []string{"id"}}
	c.IncludeColumns = []string{"stream_sequence"}
	vc := "stream_sequence"
	c.VersionColumn = &vc
	header, equals := "Op", "delete"
	c.DeleteWhen = &sqlconfig.DeleteWhen{Header: &header, Equals: &equals}
	c.Mapping = []sqlconfig.MappingItem{
		{Column: "id", Path: "/id", Type: "bigint", Required: true, EpochUnit: "ms"},
		{Column: "v", Path: "/v", Type: "text", EpochUnit: "ms"},
	}
	return c
}

func storedRows(t *testing.T, srv *server, table string) string {
	t.Helper()
	return scalar(t, srv, "select group_concat(concat_ws('/', id, STREAM_SEQUENCE, coalesce(v, '-')) order by id separator ' ') from `"+table+"`")
}

var del = map[string][]string{"Op": {"delete"}}

// TestMappedBatchShapes: batches of distinct keys, of repeated keys (one
// multi-row INSERT, applied row after row) and with deletes in the middle
// (the INSERTs around them, in order) give the rows and outcomes of
// applying each message in order with the version guard.
func TestMappedBatchShapes(t *testing.T) {
	srv := testServer(t)
	c := versionedConfig(srv, srv.table(t))
	s := open(t, c)
	check := func(name string, batch []*sink.Envelope, want []sink.Outcome, rows string) {
		t.Helper()
		res := s.WriteBatch(t.Context(), batch)
		if got := outcomes(res); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: outcomes = %v, want %v (%v)", name, got, want, res)
		}
		if got := storedRows(t, srv, c.Table); got != rows {
			t.Errorf("%s: rows = %s, want %s", name, got, rows)
		}
	}
	C, D := sink.Committed, sink.Duplicate
	check("distinct keys", []*sink.Envelope{
		menv(10, `{"id":1,"v":"a"}`, nil), menv(11, `{"id":2,"v":"b"}`, nil), menv(12, `{"id":3}`, nil)},
		[]sink.Outcome{C, C, C}, "1/10/a 2/11/b 3/12/-")
	check("repeated keys", []*sink.Envelope{
		menv(20, `{"id":1,"v":"c"}`, nil), menv(15, `{"id":1,"v":"old"}`, nil), menv(21, `{"id":1,"v":"d"}`, nil),
		menv(22, `{"id":4,"v":"e"}`, nil), menv(9, `{"id":2,"v":"older"}`, nil)},
		[]sink.Outcome{C, D, C, C, D}, "1/21/d 2/11/b 3/12/- 4/22/e")
	check("delete in the middle", []*sink.Envelope{
		menv(30, `{"id":2,"v":"f"}`, nil), menv(31, `{"id":2}`, del), menv(32, `{"id":3}`, del),
		menv(33, `{"id":3,"v":"g"}`, nil), menv(34, `{"id":5}`, del)},
		[]sink.Outcome{C, C, C, C, C}, "1/21/d 3/33/g 4/22/e")
	check("redelivery", []*sink.Envelope{menv(33, `{"id":3,"v":"g"}`, nil), menv(22, `{"id":4,"v":"e"}`, nil)},
		[]sink.Outcome{D, D}, "1/21/d 3/33/g 4/22/e")
	var many []*sink.Envelope
	var want []sink.Outcome
	for i := range 250 { // three INSERTs of up to chunkRows rows
		many = append(many, menv(uint64(100+i), fmt.Sprintf(`{"id":%d,"v":"m"}`, 10+i%120), nil))
		want = append(want, C)
	}
	many = append(many, menv(1, `{"id":1,"v":"stale"}`, nil))
	want = append(want, D)
	res := s.WriteBatch(t.Context(), many)
	if got := outcomes(res); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("250 rows: outcomes = %v", got)
	}
	if got := scalar(t, srv, "select concat(count(*), '/', max(STREAM_SEQUENCE)) from `"+c.Table+"` where id >= 10"); got != "120/349" {
		t.Errorf("250 rows over 120 keys: count/max = %s, want 120/349", got)
	}
}

// TestMappedMultiPoison: a value that does not convert fails its message
// alone and the rest commit in the same call; a value the database refuses
// fails the whole INSERT Shared, and alone only that message fails.
func TestMappedMultiPoison(t *testing.T) {
	srv := testServer(t)
	c := versionedConfig(srv, srv.table(t))
	c.Mapping = append(c.Mapping, sqlconfig.MappingItem{Column: "amount", Path: "/amount", Type: "numeric(6,2)", EpochUnit: "ms"})
	s := open(t, c)
	res := s.WriteBatch(t.Context(), []*sink.Envelope{menv(1, `{"id":1,"amount":1}`, nil), menv(2, `{"id":2,"amount":"x"}`, nil), menv(3, `{"id":3,"amount":3}`, nil)})
	if res[1].Outcome != sink.Permanent || res[1].Shared || !strings.Contains(res[1].Err.Error(), `mapping column "amount" (path "/amount")`) {
		t.Errorf("poison = %+v, want unshared Permanent naming the column", res[1])
	}
	if res[0].Outcome != sink.Committed || res[2].Outcome != sink.Committed {
		t.Errorf("others = %v, %v", res[0].Outcome, res[2].Outcome)
	}
	if _, err := srv.admin.ExecContext(t.Context(), "alter table `"+c.Table+"` modify amount decimal(3,2)"); err != nil {
		t.Fatal(err)
	}
	batch := []*sink.Envelope{menv(4, `{"id":4,"amount":1}`, nil), menv(5, `{"id":5,"amount":50}`, nil), menv(6, `{"id":6,"amount":2}`, nil)}
	for i, r := range s.WriteBatch(t.Context(), batch) {
		if r.Outcome != sink.Permanent || !r.Shared {
			t.Errorf("batch [%d] = %v shared %v (%v), want Shared Permanent", i, r.Outcome, r.Shared, r.Err)
		}
	}
	for i, want := range []sink.Outcome{sink.Committed, sink.Permanent, sink.Committed} {
		if r := s.WriteBatch(t.Context(), batch[i:i+1])[0]; r.Outcome != want {
			t.Errorf("alone [%d] = %v (%v), want %v", i, r.Outcome, r.Err, want)
		}
	}
	if got, want := storedRows(t, srv, c.Table), "1/1/- 3/3/- 4/4/- 6/6/-"; got != want {
		t.Errorf("rows = %s, want %s", got, want)
	}
}
