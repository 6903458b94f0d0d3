package sqlmodel

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMappedRules: every load-time rule of the mapped layout reports its
// problem at the key's JSON path.
func TestMappedRules(t *testing.T) {
	const m = `"layout":"mapped","mapping":[{"column":"order_id","path":"/order/id","type":"bigint","required":true},{"column":"amount","path":"/amount","type":"numeric(12,2)"}]`
	const key = `"idempotency":{"strategy":"mapping","columns":["order_id"]}`
	for _, tt := range []struct {
		name string
		js   string
		want []string
	}{
		{"valid", `{` + m + `,` + key + `}`, nil},
		{"stream_sequence key by default", `{` + m + `}`, nil},
		{"layout enum", `{"layout":"wide"}`, []string{`layout: must be one of audit, mapped (got "wide")`}},
		{"mapping required", `{"layout":"mapped"}`, []string{"mapping: must not be empty with layout mapped"}},
		{"mapped keys need the layout", `{"mapping":[{"column":"a","path":"/a","type":"text"}],"include_columns":["subject"],"lenient_strings":true,"auto_evolve":true,"version_column":"a","delete_when":{"empty_payload":true},"table_routes":[{"subject":"a.>","table":"t","mapping":[]}]}`,
			[]string{"table_routes[0].mapping: only allowed with layout mapped", "mapping: only allowed with layout mapped", "include_columns: only allowed with layout mapped", "lenient_strings: only allowed with layout mapped",
				"auto_evolve: only allowed with layout mapped", "version_column: only allowed with layout mapped", "delete_when: only allowed with layout mapped"}},
		{"strategy mapping needs the layout", `{"idempotency":{"strategy":"mapping","columns":["x"]}}`, []string{"idempotency.strategy: mapping is only allowed with layout mapped"}},
		{"payload mode", `{` + m + `,"payload_mode":"text_envelope"}`, []string{`payload_mode: must be json_or_envelope or json_only with layout mapped (got "text_envelope")`}},
		{"duplicate mapping column", `{"layout":"mapped","mapping":[{"column":"amount","path":"/a","type":"text"},{"column":"AMOUNT","path":"/b","type":"text"}]}`,
			[]string{`mapping[1].column: duplicate column "AMOUNT" (also used by mapping[0].column)`}},
		{"mapping column clashes with an included column", `{"layout":"mapped","include_columns":["subject"],"mapping":[{"column":"subject","path":"/a","type":"text"}]}`,
			[]string{`mapping[0].column: duplicate column "subject" (also used by include_columns[0])`}},
		{"bad path", `{"layout":"mapped","mapping":[{"column":"a","path":"order.id","type":"text"}]}`,
			[]string{`mapping[0].path: must be "" or a JSON Pointer starting with "/", or one of $subject, $header:<Name>, $priority, $classification, $labels, $stream_sequence, $received_at (got "order.id")`}},
		{"bad type", `{"layout":"mapped","mapping":[{"column":"a","path":"/a","type":"int64"}]}`,
			[]string{`mapping[0].type: must be one of text, bigint, integer, double, numeric(p,s), boolean, timestamp, date, json, uuid, bytes (got "int64")`}},
		{"numeric bounds", `{"layout":"mapped","mapping":[{"column":"a","path":"/a","type":"numeric(40,2)"}]}`,
			[]string{`mapping[0].type: numeric needs 1 <= p <= 38 and 0 <= s <= min(p, 30) (got numeric(40,2))`}},
		{"default converts", `{"layout":"mapped","mapping":[{"column":"a","path":"/a","type":"bigint","default":1.5}]}`,
			[]string{`mapping[0].default: cannot convert to bigint: not an integer`}},
		{"exact default", `{"layout":"mapped","mapping":[{"column":"a","path":"/a","type":"bigint","default":9007199254740993.0}]}`, nil},
		{"key not a mapping column", `{` + m + `,"idempotency":{"strategy":"mapping","columns":["nope"]}}`, []string{`idempotency.columns[0]: "nope" is not a mapping column`}},
		{"key must be required", `{` + m + `,"idempotency":{"strategy":"mapping","columns":["amount"]}}`,
			[]string{`idempotency.columns[0]: mapping column "amount" used as a key must have required: true`}},
		{"strategy mapping needs columns", `{` + m + `,"idempotency":{"strategy":"mapping"}}`,
			[]string{"idempotency.columns: must list at least one mapping column with strategy mapping"}},
		{"include unknown", `{` + m + `,"include_columns":["nope"]}`, []string{`include_columns[0]: "nope" is not an audit column (name it as in columns)`}},
		{"version column rule", `{` + m + `,` + key + `,"version_column":"amount"}`,
			[]string{`version_column: must name a never-null row column of type bigint, integer or timestamp (got "amount")`}},
		{"version column included", `{` + m + `,` + key + `,"include_columns":["stream_sequence"],"version_column":"stream_sequence"}`, nil},
		{"version column needs upsert", `{` + m + `,` + key + `,"mode":"insert","include_columns":["stream_sequence"],"version_column":"stream_sequence"}`,
			[]string{"version_column: only allowed with mode upsert (mode is insert)"}},
		{"delete needs a business key", `{` + m + `,"delete_when":{"header":"Op","equals":"d"}}`,
			[]string{"delete_when: needs idempotency strategy message_id, payload_field or mapping; stream_sequence keys name each message's own row, so a delete would never match"}},
		{"empty payload carries no key", `{` + m + `,` + key + `,"delete_when":{"empty_payload":true}}`,
			[]string{"delete_when.empty_payload: an empty payload carries no key; use strategy message_id or key paths from $subject or $header:<Name>"}},
		{"empty payload with a header key", `{"layout":"mapped","mapping":[{"column":"k","path":"$header:Order-Id","type":"text","required":true}],"idempotency":{"strategy":"mapping","columns":["k"]},"delete_when":{"empty_payload":true}}`, nil},
		{"delete header rules", `{` + m + `,` + key + `,"delete_when":{"header":"a b","equals":""}}`,
			[]string{`delete_when.header: must be a header name of 1 to 128 token characters (got "a b")`, "delete_when.equals: must be 1 to 2048 characters without control characters"}},
		{"route replaces the mapping", `{` + m + `,` + key + `,"table_routes":[{"subject":"b.>","table":"other","mapping":[{"column":"x","path":"/x","type":"txt"}]}]}`,
			[]string{`table_routes[0].mapping: inherited key column "order_id" (idempotency.columns[0]) is not a mapping column of this route`,
				`table_routes[0].mapping[0].type: must be one of text, bigint, integer, double, numeric(p,s), boolean, timestamp, date, json, uuid, bytes (got "txt")`}},
		{"routes to one table share the shape", `{` + m + `,` + key + `,"table_routes":[{"subject":"b.>","table":"nats_sink_events","include_columns":["subject"]}]}`,
			[]string{`table_routes[0].table: routes to table "nats_sink_events" must use the same idempotency strategy, key columns, payload field and update columns as the sink's table`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, got := decode(t, Postgres, tt.js)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}
