package clickhouse

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/sink"
)

// envelope builds a JetStream envelope with a JSON body.
func envelope(subject string, seq uint64, body string) *sink.Envelope {
	reply := "$JS.ACK.TYPES.c.1." + itoa(seq) + "." + itoa(seq) + ".1780048800123456000.0"
	return intake.Build(intake.Message{Subject: subject, Reply: reply, Data: []byte(body)}, nil, time.Now())
}

func itoa(n uint64) string { return strings.TrimSpace(strings.Repeat(" ", 0) + uintString(n)) }

func uintString(n uint64) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

const typesMapping = `"layout":"mapped","auto_create":true,"idempotency":{"strategy":"mapping","columns":["k"]},"mapping":[
	{"column":"k","path":"/k","type":"bigint","required":true},
	{"column":"t","path":"/t","type":"text"},
	{"column":"i","path":"/i","type":"integer"},
	{"column":"b","path":"/b","type":"bigint"},
	{"column":"d","path":"/d","type":"double"},
	{"column":"n","path":"/n","type":"numeric(12,2)"},
	{"column":"n38","path":"/n38","type":"numeric(38,10)"},
	{"column":"bo","path":"/bo","type":"boolean"},
	{"column":"ts","path":"/ts","type":"timestamp"},
	{"column":"tse","path":"/tse","type":"timestamp","epoch_unit":"ms"},
	{"column":"dt","path":"/dt","type":"date"},
	{"column":"j","path":"/j","type":"json"},
	{"column":"u","path":"/u","type":"uuid"},
	{"column":"by","path":"/by","type":"bytes"},
	{"column":"h","path":"$header:X-Tenant","type":"text","default":"none"}]`

// TestTypesRoundTrip writes every mapped type with the conversion edges to
// the real server and reads each value back as the server stores it.
// Values the server would silently wrap or zero never reach it: they are
// per-message ValidationErrors.
func TestTypesRoundTrip(t *testing.T) {
	srv := server.Get(t)
	rec := newRecorder(t, srv.URL)
	table := uniqueTable("types")
	s := open(t, decode(t, sinkJSON(rec.srv.URL, table, typesMapping)))
	lsb := "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+P0BBQkNERUZHSElKS0xNTk9QUVJTVFVWV1hZWltcXV5fYGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6e3x9fn+AgYKDhIWGh4iJiouMjY6PkJGSk5SVlpeYmZqbnJ2en6ChoqOkpaanqKmqq6ytrq+wsbKztLW2t7i5uru8vb6/wMHCw8TFxsfIycrLzM3Oz9DR0tPU1dbX2Nna29zd3t/g4eLj5OXm5+jp6uvs7e7v8PHy8/T19vf4+fr7/P3+/w=="
	good := []struct {
		body string
		want map[string]any
	}{
		{`{"k":1,"t":"héllo \"q\" \u0000 ☃","i":-2147483648,"b":9223372036854775807,"d":-0.0,"n":42.5,
			"n38":1234567890123456789012345678.0123456789,"bo":true,"ts":"2026-05-29T12:11:12.987654321+02:00",
			"tse":1780049472999,"dt":"2105-12-31","j":{"b":[1,2.50,"é"],"a":null},"u":"0189A3B4-C5D6-7E8F-9A0B-1C2D3E4F5A6B","by":"` + lsb + `"}`,
			map[string]any{"k": "1", "t": "héllo \"q\" \x00 ☃", "i": "-2147483648", "b": "9223372036854775807", "d": "-0",
				"n": json.Number("42.50"), "n38": json.Number("1234567890123456789012345678.0123456789"), "bo": "1",
				"ts": "1780049472", "tse": "1780049472", "dt": "49672", "j": `{"a":null,"b":[1,2.5,"\u00e9"]}`,
				"u": "0189a3b4-c5d6-7e8f-9a0b-1c2d3e4f5a6b", "by": lsb, "h": "none"}},
		{`{"k":9007199254740993.0,"i":2147483647,"b":-9223372036854775808,"d":1e308,"n":-9999999999.99,
			"n38":-0.0000000001,"bo":false,"ts":"1970-01-01T00:00:00Z","tse":0,"dt":"1970-01-01","j":"text","u":"00000000-0000-0000-0000-000000000000","by":""}`,
			map[string]any{"k": "9007199254740993", "t": nil, "i": "2147483647", "b": "-9223372036854775808", "d": "1e308",
				"n": json.Number("-9999999999.99"), "n38": json.Number("-0.0000000001"), "bo": "0", "ts": "0", "tse": "0",
				"dt": "0", "j": `"text"`, "u": "00000000-0000-0000-0000-000000000000", "by": "", "h": "none"}},
		{`{"k":3,"t":null,"i":null,"b":null,"d":null,"n":null,"n38":null,"bo":null,"ts":null,"tse":null,"dt":null,"j":null,"u":null,"by":null}`,
			map[string]any{"k": "3", "t": nil, "i": nil, "b": nil, "d": nil, "n": nil, "n38": nil, "bo": nil, "ts": nil,
				"tse": nil, "dt": nil, "j": nil, "u": nil, "by": nil, "h": "none"}},
		{`{"k":4,"ts":"2105-12-31T23:59:59Z","d":9007199254740993}`,
			map[string]any{"k": "4", "t": nil, "i": nil, "b": nil, "d": "9007199254740992", "n": nil, "n38": nil, "bo": nil,
				"ts": "4291747199", "tse": nil, "dt": nil, "j": nil, "u": nil, "by": nil, "h": "acme"}},
	}
	bad := []struct{ body, reason string }{
		{`{"k":100,"b":99999999999999999999}`, `mapping column "b" (path "/b"): out of range for bigint`},
		{`{"k":101,"i":2147483648}`, `mapping column "i" (path "/i"): out of range for integer`},
		{`{"k":102,"dt":"2106-01-01"}`, `mapping column "dt" (path "/dt"): out of range for ClickHouse Date`},
		{`{"k":103,"dt":"2026-02-30"}`, `mapping column "dt" (path "/dt"): not a valid date (YYYY-MM-DD)`},
		{`{"k":104,"ts":"1969-12-31T23:59:59Z"}`, `mapping column "ts" (path "/ts"): out of range for ClickHouse DateTime`},
		{`{"k":105,"ts":"2106-01-01T00:00:00Z"}`, `mapping column "ts" (path "/ts"): out of range for ClickHouse DateTime`},
		{`{"k":106,"n":1.005}`, `mapping column "n" (path "/n"): more than 2 fraction digits for numeric(12,2)`},
		{`{"k":107,"bo":1}`, `mapping column "bo" (path "/bo"): expected boolean (got number)`},
		{`{"k":108,"u":"not-a-uuid"}`, `mapping column "u" (path "/u"): not a valid UUID`},
		{`{"k":1.5}`, `mapping column "k" (path "/k"): not an integer`},
		{`{"t":"no key"}`, `mapping column "k" (path "/k"): required value is missing`},
	}
	var batch []*sink.Envelope
	for i, g := range good {
		e := envelope("types.good", uint64(i+1), g.body)
		if i == 3 {
			e.Headers = sink.Headers{"X-Tenant": "acme"}
		}
		batch = append(batch, e)
	}
	for i, b := range bad {
		batch = append(batch, envelope("types.bad", uint64(100+i), b.body))
	}
	results := s.WriteBatch(context.Background(), batch)
	for i := range good {
		if results[i].Outcome != sink.Committed {
			t.Errorf("good row %d: %v %v", i, results[i].Outcome, results[i].Err)
		}
	}
	for j, b := range bad {
		r := results[len(good)+j]
		if r.Outcome != sink.Permanent || r.ErrorType != sink.ValidationError || r.Shared {
			t.Errorf("bad row %d: %v/%s shared=%v, want unshared Permanent ValidationError", j, r.Outcome, r.ErrorType, r.Shared)
			continue
		}
		if !strings.HasSuffix(r.Err.Error(), b.reason) || !strings.HasPrefix(r.Err.Error(), "clickhouse row for subject types.bad (stream seq ") {
			t.Errorf("bad row %d: error %q, want the row prefix and %q", j, r.Err, b.reason)
		}
	}
	for _, body := range rec.insertBodies() {
		if strings.Contains(body, `"k":1`+"0") || strings.Contains(body, "99999999999999999999") || strings.Contains(body, "2106-01-01") {
			t.Errorf("a rejected value reached the server: %s", body)
		}
	}
	// Decimals are read as JSON numbers (18.16's toString garbles wide
	// Decimal128 values), times as epoch seconds and dates as day numbers
	// (18.16 renders the epoch as 0000-00-00).
	sel := "toString(k) AS k"
	for _, c := range []string{"t", "i", "b", "d", "n", "n38", "bo", "ts", "tse", "dt", "j", "u", "by", "h"} {
		expr := "toString(`" + c + "`)"
		switch c {
		case "n", "n38":
			expr = "`" + c + "`"
		case "ts", "tse":
			expr = "toString(toUInt32(`" + c + "`))"
		case "dt":
			expr = "toString(toUInt16(`" + c + "`))"
		}
		sel += ", " + expr + " AS `" + c + "`"
	}
	got := rows(t, srv, "SELECT "+sel+" FROM `"+table+"` FINAL ORDER BY k")
	var want []map[string]any
	for _, g := range good {
		want = append(want, g.want)
	}
	// Sort the expectations as the query does (by k as a number).
	want[1], want[2], want[3] = want[2], want[3], want[1]
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("read back mismatch (-want +got):\n%s", diff)
	}
}
