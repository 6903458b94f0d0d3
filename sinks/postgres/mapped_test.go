package postgres

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sqlconfig"
)

func menv(seq uint64, body string, hdr map[string][]string) *sink.Envelope {
	reply := fmt.Sprintf("$JS.ACK.ORDERS.c.1.%d.%d.1780048800123456000.0", seq, seq)
	return intake.Build(intake.Message{Subject: "orders.new", Reply: reply, Data: []byte(body), Header: hdr}, nil, received)
}

// TestMappedConversions writes every mapped type's edge values to the real
// server, one message per value, and reads each back as PostgreSQL's text:
// values that must not convert fail their message alone with the reason,
// and the other rows commit.
func TestMappedConversions(t *testing.T) {
	dsn := natstest.Service(t, dsnEnv)
	c := baseConfig(t, dsn)
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
	c.IncludeColumns = []string{}
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
		{"i64", `7.5`, "not an integer", true},
		{"i64", `"7"`, "string not accepted for bigint (set lenient_strings)", true},
		{"i32", `2147483647`, "2147483647", false},
		{"i32", `-2147483649`, "out of range for integer", true},
		{"f", `9007199254740993`, "9.007199254740992e+15", false},
		{"f", `-0.0`, "-0", false},
		{"i64", `-0`, "0", false},
		{"f", `"NaN"`, "string not accepted for double (set lenient_strings)", true},
		{"n", `42.5`, "42.50", false},
		{"n", `1.005`, "more than 2 fraction digits for numeric(12,2)", true},
		{"n", `12345678901`, "out of range for numeric(12,2)", true},
		{"b", `true`, "true", false},
		{"b", `1`, "expected boolean (got number)", true},
		{"ts", `"2026-05-29T12:00:00.1234567+02:00"`, "2026-05-29 10:00:00.123456+00", false},
		{"ts", `"2026-05-29 10:00:00z"`, "2026-05-29 10:00:00+00", false},
		{"ts", `1780048800123`, "2026-05-29 10:00:00.123+00", false},
		{"ts_ns", `1780048800123456789`, "2026-05-29 10:00:00.123456+00", false},
		{"ts", `"2026-05-29T12:00:00"`, "timestamp has no UTC offset", true},
		{"ts", `"2026-02-30T00:00:00Z"`, "not a valid RFC 3339 timestamp", true},
		{"d", `"2026-05-29"`, "2026-05-29", false},
		{"d", `"2026-05-29T00:00:00Z"`, "not a valid date (YYYY-MM-DD)", true},
		{"j", `{"b":[1,2.50,{"c":null}],"a":"x"}`, `{"a": "x", "b": [1, 2.5, {"c": null}]}`, false},
		{"u", `"0E2A6C4E-1C6B-4E37-9D2B-1A5F0C3E9B7D"`, "0e2a6c4e-1c6b-4e37-9d2b-1a5f0c3e9b7d", false},
		{"u", `"{0e2a6c4e-1c6b-4e37-9d2b-1a5f0c3e9b7d}"`, "not a valid UUID", true},
		{"by", `"aGk="`, `\x6869`, false},
		{"by", `"aGk"`, "not a valid base64 string", true},
		{"tx", `42.50`, "42.5", false},
		{"tx", `"` + long + `"`, long, false},
		{"tx", `"a\u0000b"`, "contains U+0000", true},
		{"tx", `{"a":1}`, "expected string, number or boolean (got object)", true},
	}
	s := open(t, c)
	var batch []*sink.Envelope
	for i, tc := range cases {
		batch = append(batch, menv(uint64(i+1), `{"`+tc.col+`":`+tc.in+`}`, nil))
	}
	batch = append(batch, intake.Build(intake.Message{Subject: "orders.new", Reply: "$JS.ACK.ORDERS.c.1.99.99.1780048800123456000.0",
		Data: []byte("{\"tx\":\"\xff\"}")}, nil, received))
	res := s.WriteBatch(t.Context(), batch)
	conn := db(t, dsn)
	must(t, func() error { _, err := conn.Exec(t.Context(), "set timezone = 'UTC'"); return err }())
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
		var got string
		must(t, conn.QueryRow(t.Context(), fmt.Sprintf("select %q::text from %s where stream_sequence = $1", tc.col, c.Table), i+1).Scan(&got))
		if got != tc.want {
			t.Errorf("%s = %.40s: stored %.60q, want %.60q", tc.col, tc.in, got, tc.want)
		}
	}
	if r := res[len(res)-1]; r.Outcome != sink.Permanent || !strings.HasSuffix(r.Err.Error(), "payload is not a JSON object (got bytes)") {
		t.Errorf("invalid UTF-8 payload = %v %v", r.Outcome, r.Err)
	}
}

// TestMappedEvolve creates a mapped table, then restarts with one more
// mapped column: without auto_evolve the start is a configuration error
// naming it, with auto_evolve it is added and rows before and after read
// back; a found type that does not fit stops the start naming column,
// mapped type and found type.
func TestMappedEvolve(t *testing.T) {
	dsn := natstest.Service(t, dsnEnv)
	c := baseConfig(t, dsn)
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
	if got := outcomes(res); fmt.Sprint(got) != fmt.Sprint([]sink.Outcome{sink.Committed, sink.Duplicate, sink.Permanent, sink.Committed}) {
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
	conn := db(t, dsn)
	rows, err := conn.Query(t.Context(), "select order_id, stream_sequence, amount::text, coalesce(note, '-') from "+c.Table+" order by order_id")
	must(t, err)
	var got []string
	for rows.Next() {
		var id, seq int64
		var amount *string
		var note string
		must(t, rows.Scan(&id, &seq, &amount, &note))
		a := "null"
		if amount != nil {
			a = *amount
		}
		got = append(got, fmt.Sprintf("%d/%d/%s/%s", id, seq, a, note))
	}
	if want := "[1/2/2.00/- 4/6/1.00/hi]"; fmt.Sprint(got) != want {
		t.Errorf("rows = %v, want %s", got, want)
	}
	s.Stop(t.Context())

	c.Mapping[2].Type = "integer"
	_, err = New(t.Context(), c, sink.Deps{})
	if !errors.Is(err, sink.ErrConfig) || !strings.Contains(err.Error(), `mapping[2].type: column "note" of table "`+c.Table+`" has type text, not compatible with mapped type integer`) {
		t.Errorf("New with a mismatched type = %v", err)
	}
}

// TestMappedDatabaseRefusal: a value the database refuses (too long for a
// varchar(5) column the operator declared) fails the whole statement as a
// Shared permanent result, which the runner bisects; alone, the other
// messages commit and the refused one stays permanent.
func TestMappedDatabaseRefusal(t *testing.T) {
	dsn := natstest.Service(t, dsnEnv)
	c := baseConfig(t, dsn)
	c.AutoCreate = false
	conn := db(t, dsn)
	if _, err := conn.Exec(t.Context(), "create table "+c.Table+" (stream_name text not null, stream_sequence bigint not null, code varchar(5), primary key (stream_name, stream_sequence))"); err != nil {
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

// TestMappedEvolveTogether: two processes starting at once against a table
// that lacks two mapped columns both start (the loser's "already exists"
// is ignored and the columns are checked again), and the table has every
// column once.
func TestMappedEvolveTogether(t *testing.T) {
	dsn := natstest.Service(t, dsnEnv)
	c := baseConfig(t, dsn)
	c.AutoCreate, c.AutoEvolve = false, true
	conn := db(t, dsn)
	if _, err := conn.Exec(t.Context(), "create table "+c.Table+" (stream_name text not null, stream_sequence bigint not null, a text, b bigint, primary key (stream_name, stream_sequence))"); err != nil {
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
	var cols string
	must(t, conn.QueryRow(t.Context(), "select string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' order by attnum) from pg_attribute where attrelid = $1::regclass and attnum > 0 and not attisdropped", c.Table).Scan(&cols))
	if want := "stream_name text, stream_sequence bigint, a text, b bigint, c text, d bigint"; cols != want {
		t.Errorf("columns = %s, want %s", cols, want)
	}
}

// versionedConfig is a mapped upsert keyed by the payload's id, guarded by
// version_column stream_sequence, deleting on header Op: delete.
func versionedConfig(t *testing.T, dsn string) Config {
	c := baseConfig(t, dsn)
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

// storedRows reads table's rows as "id/stream_sequence/v", ordered by id.
func storedRows(t *testing.T, dsn, table string) string {
	t.Helper()
	conn := db(t, dsn)
	rows, err := conn.Query(t.Context(), "select id, stream_sequence, coalesce(v, '-') from "+table+" order by id")
	must(t, err)
	var got []string
	for rows.Next() {
		var id, seq int64
		var v string
		must(t, rows.Scan(&id, &seq, &v))
		got = append(got, fmt.Sprintf("%d/%d/%s", id, seq, v))
	}
	must(t, rows.Err())
	return strings.Join(got, " ")
}

var del = map[string][]string{"Op": {"delete"}}

// TestMappedBatchShapes: a batch of distinct keys (one multi-row
// statement), one with repeated keys and one with a delete in the middle
// (one statement per row) give the rows and outcomes of applying each
// message in order with the version guard: an older version is Duplicate,
// the newest one wins, a delete removes what came before it in the batch
// and the writes after it re-create the row.
func TestMappedBatchShapes(t *testing.T) {
	dsn := natstest.Service(t, dsnEnv)
	c := versionedConfig(t, dsn)
	s := open(t, c)
	check := func(name string, batch []*sink.Envelope, want []sink.Outcome, rows string) {
		t.Helper()
		res := s.WriteBatch(t.Context(), batch)
		if got := outcomes(res); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: outcomes = %v, want %v (%v)", name, got, want, res)
		}
		if got := storedRows(t, dsn, c.Table); got != rows {
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
}

// TestMappedMultiDuplicates: in a batch of distinct keys, the rows the
// version guard leaves alone (an older or equal version) are Duplicate and
// the others Committed and stored; a redelivered batch is all Duplicate;
// insert_ignore reports the keys already present.
func TestMappedMultiDuplicates(t *testing.T) {
	dsn := natstest.Service(t, dsnEnv)
	c := versionedConfig(t, dsn)
	s := open(t, c)
	first := []*sink.Envelope{menv(10, `{"id":1,"v":"a"}`, nil), menv(10, `{"id":2,"v":"b"}`, nil), menv(10, `{"id":3,"v":"c"}`, nil)}
	if got := outcomes(s.WriteBatch(t.Context(), first)); fmt.Sprint(got) != "[committed committed committed]" {
		t.Fatalf("first batch = %v", got)
	}
	C, D := sink.Committed, sink.Duplicate
	for _, tc := range []struct {
		name  string
		batch []*sink.Envelope
		want  []sink.Outcome
		rows  string
	}{
		{"mixed", []*sink.Envelope{menv(5, `{"id":1,"v":"x"}`, nil), menv(20, `{"id":2,"v":"y"}`, nil),
			menv(10, `{"id":3,"v":"z"}`, nil), menv(21, `{"id":4,"v":"w"}`, nil)},
			[]sink.Outcome{D, C, D, C}, "1/10/a 2/20/y 3/10/c 4/21/w"},
		{"redelivery", first, []sink.Outcome{D, D, D}, "1/10/a 2/20/y 3/10/c 4/21/w"},
	} {
		if got := outcomes(s.WriteBatch(t.Context(), tc.batch)); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: outcomes = %v, want %v", tc.name, got, tc.want)
		}
		if got := storedRows(t, dsn, c.Table); got != tc.rows {
			t.Errorf("%s: rows = %s, want %s", tc.name, got, tc.rows)
		}
	}
	s.Stop(t.Context())

	c.VersionColumn = nil
	c.Mode = "insert_ignore"
	c.AutoCreate = false
	s = open(t, c)
	res := s.WriteBatch(t.Context(), []*sink.Envelope{menv(40, `{"id":4,"v":"q"}`, nil), menv(41, `{"id":5,"v":"r"}`, nil)})
	if got := outcomes(res); fmt.Sprint(got) != fmt.Sprint([]sink.Outcome{D, C}) {
		t.Errorf("insert_ignore: outcomes = %v (%v)", got, res)
	}
	if got, want := storedRows(t, dsn, c.Table), "1/10/a 2/20/y 3/10/c 4/21/w 5/41/r"; got != want {
		t.Errorf("insert_ignore: rows = %s, want %s", got, want)
	}
}

// TestMappedMultiKeyTypes: a composite key of every kind a key may have
// (text, timestamp, date, numeric, uuid) goes through the multi-row
// statement, and the rows it leaves alone are told apart from the rows it
// writes by their keys as the server renders them.
func TestMappedMultiKeyTypes(t *testing.T) {
	dsn := natstest.Service(t, dsnEnv)
	c := baseConfig(t, dsn)
	c.Layout = sqlconfig.LayoutMapped
	cols := []string{"k", "at", "d", "n", "u"}
	c.Idempotency = sqlconfig.Idempotency{Strategy: "mapping", Columns: cols}
	c.IncludeColumns = []string{"stream_sequence"}
	vc := "stream_sequence"
	c.VersionColumn = &vc
	for i, typ := range []string{"text", "timestamp", "date", "numeric(10,2)", "uuid"} {
		c.Mapping = append(c.Mapping, sqlconfig.MappingItem{Column: cols[i], Path: "/" + cols[i], Type: typ, Required: true, EpochUnit: "ms"})
	}
	s := open(t, c)
	row := func(seq uint64, k string) *sink.Envelope {
		return menv(seq, `{"k":"`+k+`","at":"2026-05-29T12:00:00.123456789+02:00","d":"0999-01-02","n":7.5,"u":"0E2A6C4E-1C6B-4E37-9D2B-1A5F0C3E9B7D"}`, nil)
	}
	if got := outcomes(s.WriteBatch(t.Context(), []*sink.Envelope{row(10, "a"), row(10, "b")})); fmt.Sprint(got) != "[committed committed]" {
		t.Fatalf("first batch = %v", got)
	}
	res := s.WriteBatch(t.Context(), []*sink.Envelope{row(5, "a"), row(11, "b"), row(12, "c")})
	if got, want := fmt.Sprint(outcomes(res)), fmt.Sprint([]sink.Outcome{sink.Duplicate, sink.Committed, sink.Committed}); got != want {
		t.Errorf("outcomes = %v, want %v (%v)", got, want, res)
	}
	var got string
	must(t, db(t, dsn).QueryRow(t.Context(), "select string_agg(k || '/' || stream_sequence, ' ' order by k) from "+c.Table).Scan(&got))
	if want := "a/10 b/11 c/12"; got != want {
		t.Errorf("rows = %s, want %s", got, want)
	}
}

// TestMappedMultiPoison: in a batch of distinct keys, a value that does
// not convert fails its message alone (unshared) and the others commit in
// the same call; a value the database refuses fails the whole statement
// Shared, and written one at a time only that message fails.
func TestMappedMultiPoison(t *testing.T) {
	dsn := natstest.Service(t, dsnEnv)
	c := versionedConfig(t, dsn)
	c.Mapping = append(c.Mapping, sqlconfig.MappingItem{Column: "amount", Path: "/amount", Type: "numeric(6,2)", EpochUnit: "ms"})
	s := open(t, c)
	res := s.WriteBatch(t.Context(), []*sink.Envelope{menv(1, `{"id":1,"amount":1}`, nil), menv(2, `{"id":2,"amount":"x"}`, nil), menv(3, `{"id":3,"amount":3}`, nil)})
	if res[1].Outcome != sink.Permanent || res[1].Shared || !strings.Contains(res[1].Err.Error(), `mapping column "amount" (path "/amount")`) {
		t.Errorf("poison = %+v, want unshared Permanent naming the column", res[1])
	}
	if res[0].Outcome != sink.Committed || res[2].Outcome != sink.Committed {
		t.Errorf("others = %v, %v", res[0].Outcome, res[2].Outcome)
	}
	if got, want := storedRows(t, dsn, c.Table), "1/1/- 3/3/-"; got != want {
		t.Errorf("rows = %s, want %s", got, want)
	}
	// The column is narrowed behind the sink's back: 50.00 no longer fits.
	must(t, func() error {
		_, err := db(t, dsn).Exec(t.Context(), "alter table "+c.Table+" alter column amount type numeric(3,2)")
		return err
	}())
	batch := []*sink.Envelope{menv(4, `{"id":4,"amount":1}`, nil), menv(5, `{"id":5,"amount":50}`, nil), menv(6, `{"id":6,"amount":2}`, nil)}
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
	if got, want := storedRows(t, dsn, c.Table), "1/1/- 3/3/- 4/4/- 6/6/-"; got != want {
		t.Errorf("rows = %s, want %s", got, want)
	}
}
