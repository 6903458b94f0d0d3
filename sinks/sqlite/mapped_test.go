package sqlite

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sqlconfig"
	"github.com/nats-sinks/nats-sink/telemetry"
)

// mappedConfig decodes a mapped-layout sink object (path filled in).
func mappedConfig(t *testing.T, path, extra string) Config {
	t.Helper()
	js := `{"type":"sqlite","path":` + strings.ReplaceAll(jsonString(path), `\`, `\\`) + `,"table":"orders","layout":"mapped",
	  "idempotency":{"strategy":"mapping","columns":["order_id"]},"include_columns":["stream_sequence"],
	  "version_column":"stream_sequence","delete_when":{"header":"Op","equals":"delete"},"mapping":[
	  {"column":"order_id","path":"/order/id","type":"bigint","required":true},
	  {"column":"amount","path":"/order/amount","type":"numeric(12,2)"},
	  {"column":"placed_at","path":"/placed_at","type":"timestamp"},
	  {"column":"tenant","path":"$header:X-Tenant","type":"text","default":"none"}` + extra + `]}`
	o, err := Decode(json.RawMessage(js))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return o.(Config)
}

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }

func menv(seq uint64, body string, hdr map[string][]string) *sink.Envelope {
	reply := "$JS.ACK.ORDERS.c.1." + strconv.FormatUint(seq, 10) + "." + strconv.FormatUint(seq, 10) + ".1780048800123456000.0"
	return intake.Build(intake.Message{Subject: "orders.new", Reply: reply, Data: []byte(body), Header: hdr}, nil, received)
}

func readOrders(t *testing.T, path, cols string) [][]any {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("select " + cols + " from orders order by order_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := len(strings.Split(cols, ","))
	var out [][]any
	for rows.Next() {
		v := make([]any, n)
		p := make([]any, n)
		for i := range v {
			p[i] = &v[i]
		}
		if err := rows.Scan(p...); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// TestMapped: typed columns from the payload and headers; a value that does
// not convert fails its message alone (naming column, path and reason)
// while the rest of the batch commits; the newest message by stream
// sequence wins per key whatever the order; a delete removes the key's row
// and deleting it again succeeds.
func TestMapped(t *testing.T) {
	c := mappedConfig(t, config(t).Path, "")
	m, err := telemetry.NewMetrics(nil, "nats_sinks")
	if err != nil {
		t.Fatal(err)
	}
	s := openWith(t, c, sink.Deps{Metrics: m.ForSinks()})
	if err := s.Healthcheck(t.Context()); err != nil {
		t.Errorf("Healthcheck of a mapped table: %v", err)
	}
	tenant := map[string][]string{"X-Tenant": {"acme"}}
	batch := []*sink.Envelope{
		menv(1, `{"order":{"id":1,"amount":42.5},"placed_at":"2026-05-29T12:00:00.1234567+02:00"}`, tenant),
		menv(2, `{"order":{"id":2,"amount":"x"}}`, nil),
		menv(4, `{"order":{"id":3,"amount":1}}`, nil),
		menv(3, `{"order":{"id":3,"amount":2}}`, nil), // older: must not overwrite seq 4
		menv(5, `{"order":{"id":4,"amount":1.005}}`, nil),
		menv(6, `[1]`, nil),
	}
	res := s.WriteBatch(t.Context(), batch)
	want := []sink.Outcome{sink.Committed, sink.Permanent, sink.Committed, sink.Duplicate, sink.Permanent, sink.Permanent}
	if got := outcomes(res); !cmp.Equal(got, want) {
		t.Fatalf("outcomes = %v, want %v (%v)", got, want, res)
	}
	for i, msg := range map[int]string{
		1: `mapping column "amount" (path "/order/amount"): string not accepted for numeric(12,2) (set lenient_strings)`,
		4: `mapping column "amount" (path "/order/amount"): more than 2 fraction digits for numeric(12,2)`,
		5: `payload is not a JSON object (got array)`,
	} {
		if res[i].Shared || !strings.HasSuffix(res[i].Err.Error(), msg) {
			t.Errorf("result[%d] = %v (shared %v), want an unshared permanent error ending %q", i, res[i].Err, res[i].Shared, msg)
		}
	}
	got := readOrders(t, s.Path(), "order_id, stream_sequence, amount, placed_at, tenant")
	wantRows := [][]any{
		{int64(1), int64(1), "42.50", "2026-05-29T10:00:00.123456Z", "acme"},
		{int64(3), int64(4), "1.00", nil, "none"},
	}
	if diff := cmp.Diff(wantRows, got); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	del := map[string][]string{"Op": {"delete"}}
	for range 2 {
		res = s.WriteBatch(t.Context(), []*sink.Envelope{menv(7, `{"order":{"id":1}}`, del)})
		if res[0].Outcome != sink.Committed {
			t.Fatalf("delete = %+v", res[0])
		}
	}
	if got := readOrders(t, s.Path(), "order_id"); !cmp.Equal(got, [][]any{{int64(3)}}) {
		t.Errorf("rows after delete = %v", got)
	}
	if got := s.deletes.(*telemetry.Counter).Value(); got != 2 {
		t.Errorf("sqlite_deletes_total = %d, want 2", got)
	}
	if got := s.dups.(*telemetry.Counter).Value(); got != 1 {
		t.Errorf("sqlite_duplicates_total = %d, want 1 (the older message of key 3)", got)
	}
}

// TestMappedEvolve: a restart with one more mapped column adds it (rows
// from before read back with NULL there); a column whose found type does
// not fit its mapped type stops the start with a configuration error
// naming the column, the mapped type and the found type.
func TestMappedEvolve(t *testing.T) {
	path := config(t).Path
	s := open(t, mappedConfig(t, path, ""))
	if r := s.WriteBatch(t.Context(), []*sink.Envelope{menv(1, `{"order":{"id":1,"amount":1}}`, nil)})[0]; r.Outcome != sink.Committed {
		t.Fatal(r)
	}
	s.Stop(t.Context())

	extra := `,{"column":"note","path":"/note","type":"text"}`
	c := mappedConfig(t, path, extra)
	c.AutoCreate = false
	_, err := New(t.Context(), c, sink.Deps{})
	if !errors.Is(err, sink.ErrConfig) || !strings.Contains(err.Error(), `mapping[4].column: column "note" is missing from table "orders" (set auto_evolve: true to add it)`) {
		t.Fatalf("New without auto_evolve = %v", err)
	}
	c.AutoEvolve = true
	s = open(t, c)
	if r := s.WriteBatch(t.Context(), []*sink.Envelope{menv(2, `{"order":{"id":2,"amount":1},"note":"hi"}`, nil)})[0]; r.Outcome != sink.Committed {
		t.Fatal(r)
	}
	if got := readOrders(t, path, "order_id, note"); !cmp.Equal(got, [][]any{{int64(1), nil}, {int64(2), "hi"}}) {
		t.Errorf("rows = %v", got)
	}
	s.Stop(t.Context())

	bad := mappedConfig(t, path, `,{"column":"note","path":"/note","type":"bigint"}`)
	_, err = New(t.Context(), bad, sink.Deps{})
	if !errors.Is(err, sink.ErrConfig) || !strings.Contains(err.Error(), `mapping[4].type: column "note" of table "orders" has type text, not compatible with mapped type bigint`) {
		t.Errorf("New with a mismatched type = %v", err)
	}
}

// TestMappedConversions writes every mapped type's edge values, one message
// per value, and reads each back as stored: SQLite keeps numerics, times
// and dates as text (exact decimals; lexical order is time order),
// booleans as 0/1, bytes as blobs.
func TestMappedConversions(t *testing.T) {
	type item = sqlconfig.MappingItem
	c := config(t)
	c.Layout = sqlconfig.LayoutMapped
	for _, it := range []item{
		{Column: "i64", Type: "bigint"}, {Column: "i32", Type: "integer"}, {Column: "f", Type: "double"},
		{Column: "n", Type: "numeric(12,2)"}, {Column: "b", Type: "boolean"}, {Column: "ts", Type: "timestamp"},
		{Column: "ts_s", Type: "timestamp", EpochUnit: "s"}, {Column: "d", Type: "date"}, {Column: "j", Type: "json"},
		{Column: "u", Type: "uuid"}, {Column: "by", Type: "bytes"}, {Column: "tx", Type: "text"},
	} {
		it.Path = "/" + it.Column
		if it.EpochUnit == "" {
			it.EpochUnit = "ms"
		}
		c.Mapping = append(c.Mapping, it)
	}
	long := strings.Repeat("é", 100000)
	cases := []struct {
		col, in string
		want    any // value read back, or the failure's reason (fail)
		fail    bool
	}{
		{"i64", `9223372036854775807`, int64(9223372036854775807), false},
		{"i64", `-9223372036854775808`, int64(-9223372036854775808), false},
		{"i64", `-9223372036854775809`, "out of range for bigint", true},
		{"i64", `9007199254740993.0`, int64(9007199254740993), false},
		{"i32", `-2147483648`, int64(-2147483648), false},
		{"i32", `2147483648`, "out of range for integer", true},
		{"f", `9007199254740993`, float64(9007199254740992), false},
		{"n", `-0.10`, "-0.10", false},
		{"n", `99999999999.99`, "out of range for numeric(12,2)", true},
		{"b", `true`, int64(1), false},
		{"b", `"true"`, "string not accepted for boolean (set lenient_strings)", true},
		{"ts", `"2026-05-29t12:00:00.000001Z"`, "2026-05-29T12:00:00.000001Z", false},
		{"ts", `"2026-05-29T00:30:00-01:30"`, "2026-05-29T02:00:00.000000Z", false},
		{"ts", `-1`, "1969-12-31T23:59:59.999000Z", false},
		{"ts_s", `1780048800.5`, "2026-05-29T10:00:00.500000Z", false},
		{"ts", `"2026-05-29T23:59:60Z"`, "not a valid RFC 3339 timestamp", true},
		{"d", `"2024-02-29"`, "2024-02-29", false},
		{"d", `"2026-02-30"`, "not a valid date (YYYY-MM-DD)", true},
		{"j", `[{"z":1,"a":"\u00e9"}]`, `[{"a":"\u00e9","z":1}]`, false},
		{"u", `"urn:uuid:0e2a6c4e-1c6b-4e37-9d2b-1a5f0c3e9b7d"`, "not a valid UUID", true},
		{"by", `"aGk="`, []byte("hi"), false},
		{"tx", `"` + long + `"`, long, false},
		{"tx", `true`, "true", false},
		{"tx", `"a\u0000b"`, "a\x00b", false},
	}
	s := open(t, c)
	var batch []*sink.Envelope
	for i, tc := range cases {
		batch = append(batch, menv(uint64(i+1), `{"`+tc.col+`":`+tc.in+`}`, nil))
	}
	batch = append(batch, menv(1000, `{"by":""}`, nil)) // "" is no bytes, not NULL
	res := s.WriteBatch(t.Context(), batch)
	db, err := sql.Open("sqlite", "file:"+s.Path()+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i, tc := range cases {
		r := res[i]
		if tc.fail {
			want := fmt.Sprintf("mapping column %q (path %q): %s", tc.col, "/"+tc.col, tc.want)
			if r.Outcome != sink.Permanent || r.Shared || !strings.HasSuffix(r.Err.Error(), want) {
				t.Errorf("%s = %s: result %v %v, want unshared permanent %q", tc.col, tc.in, r.Outcome, r.Err, want)
			}
			continue
		}
		if r.Outcome != sink.Committed {
			t.Errorf("%s = %.40s: result %v %v, want committed", tc.col, tc.in, r.Outcome, r.Err)
			continue
		}
		var got any
		if err := db.QueryRow(fmt.Sprintf("select %q from nats_sink_events where stream_sequence = ?", tc.col), i+1).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if !cmp.Equal(got, tc.want) {
			t.Errorf("%s = %.40s: stored %.60v (%T), want %.60v (%T)", tc.col, tc.in, got, got, tc.want, tc.want)
		}
	}
	var empty string
	if err := db.QueryRow(`select typeof("by") || length("by") from nats_sink_events where stream_sequence = 1000`).Scan(&empty); err != nil || empty != "blob0" {
		t.Errorf("empty base64 stored as %q (%v), want an empty blob", empty, err)
	}
}
