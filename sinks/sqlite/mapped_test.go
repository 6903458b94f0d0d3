package sqlite

import (
	"database/sql"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/sink"
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
	s := open(t, c)
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
