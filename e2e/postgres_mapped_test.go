package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// TestPostgresMappedBusinessKey: 20,000 messages over 2,000 business keys
// into the mapped layout (key from the payload, upsert guarded by
// version_column stream_sequence, four batches in flight), three SIGKILLs
// mid-run: afterwards exactly one row per key, holding the key's newest
// message; the one poison message (an amount that is not a number) is
// dead-lettered naming column, path and reason, and everything else is
// stored. Then a stream of deletes (header Op: delete, each sent twice)
// removes its keys' rows.
func TestPostgresMappedBusinessKey(t *testing.T) {
	const n, keys, poison = 20000, 2000, 4321
	dsn := natstest.Service(t, postgresDSNEnv)
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "PGMAP", Subjects: []string{"pgmap.>"}})
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "PGMAP_DLQ", Subjects: []string{"dlq.pgmap"}})
	natstest.PublishN(t, js, "pgmap.events", n, func(i int) []byte {
		if i == poison {
			return fmt.Appendf(nil, `{"order":{"id":%d},"amount":"x","n":%d}`, i%keys, i+1)
		}
		return fmt.Appendf(nil, `{"order":{"id":%d},"amount":%d.25,"n":%d,"at":"2026-05-29T12:00:00+02:00"}`, i%keys, i, i+1)
	})
	table := pgTable(t, dsn)
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	var mapping []map[string]any
	json.Unmarshal([]byte(`[{"column":"order_id","path":"/order/id","type":"bigint","required":true},
		{"column":"amount","path":"/amount","type":"numeric(12,2)"},
		{"column":"n","path":"/n","type":"bigint"},
		{"column":"placed_at","path":"/at","type":"timestamp"},
		{"column":"tenant","path":"$header:X-Tenant","type":"text","default":"none"}]`), &mapping)
	d := newRunDoc([]string{s.ClientURL()}, "PGMAP", "pgmap", "pgmap.>", map[string]any{
		"type": "postgres", "host": cc.Host, "port": cc.Port, "database": cc.Database, "user": cc.User,
		"sslmode": "disable", "connect_timeout_seconds": 2, "table": table, "auto_create": true,
		"layout": "mapped", "mapping": mapping, "include_columns": []string{"stream_sequence"},
		"version_column": "stream_sequence", "idempotency": map[string]any{"strategy": "mapping", "columns": []string{"order_id"}},
		"delete_when": map[string]any{"header": "Op", "equals": "delete"},
	})
	d.Delivery["max_in_flight_batches"] = 4
	d.Delivery["batch_size"] = 250
	cfg := d.write(t)
	replaceInFile(t, cfg, `"delivery":`, `"dead_letter": {"enabled": true, "subject": "dlq.pgmap"}, "delivery":`)

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	// Progress is judged by the highest stored sequence: the row count
	// stops at the number of keys.
	for round, progress := range []int{3000, 8000, 13000} {
		p := start(t, cfg)
		natstest.WaitFor(t, 2*time.Minute, func() error {
			var top int
			if err := conn.QueryRow(ctx, "select coalesce(max(stream_sequence), 0) from "+table).Scan(&top); err != nil || top < progress {
				return fmt.Errorf("highest stored sequence %d (%v), waiting for %d", top, err, progress)
			}
			return nil
		})
		p.kill(t)
		floor, pending, err := ackState(ctx, js, "PGMAP", "pgmap")
		t.Logf("round %d: killed; ack floor %d, ack pending %d (%v)", round, floor, pending, err)
		if floor >= n {
			t.Fatalf("round %d: the run finished before the kill", round)
		}
	}
	p := start(t, cfg)
	waitAllAcked(t, js, "PGMAP", "pgmap", n, 3*time.Minute)
	p.stop(t)

	// The newest message of key k is the last i with i % keys == k:
	// i = n - keys + k, carrying n = i + 1 = its stream sequence.
	var rows, newest int
	err = conn.QueryRow(ctx, `select count(*), count(*) filter (where n = stream_sequence and n = $1::bigint - $2::bigint + order_id + 1
		and amount::text = (n - 1)::text || '.25' and tenant = 'none' and placed_at = '2026-05-29T10:00:00Z')
		from `+table, n, keys).Scan(&rows, &newest)
	if err != nil {
		t.Fatal(err)
	}
	if rows != keys || newest != keys {
		t.Errorf("rows %d, rows holding the key's newest message %d; want %d, %d", rows, newest, keys, keys)
	}
	// A delete stream: every tenth key deleted by a message carrying only
	// the key and the header, each delete published twice.
	p = start(t, cfg)
	for k := 0; k < keys; k += 10 {
		for range 2 {
			m := nats.NewMsg("pgmap.events")
			m.Header.Set("Op", "delete")
			m.Data = fmt.Appendf(nil, `{"order":{"id":%d}}`, k)
			if _, err := js.PublishMsg(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitAllAcked(t, js, "PGMAP", "pgmap", n+2*keys/10, 2*time.Minute)
	p.stop(t)
	var left, deleted int
	if err := conn.QueryRow(ctx, `select count(*), count(*) filter (where order_id % 10 = 0) from `+table).Scan(&left, &deleted); err != nil {
		t.Fatal(err)
	}
	if left != keys-keys/10 || deleted != 0 {
		t.Errorf("after the deletes: %d rows, %d of deleted keys; want %d, 0", left, deleted, keys-keys/10)
	}

	dlq, err := js.Stream(ctx, "PGMAP_DLQ")
	if err != nil {
		t.Fatal(err)
	}
	info, _ := dlq.Info(ctx)
	if info.State.Msgs != 1 {
		t.Fatalf("%d DLQ messages, want 1", info.State.Msgs)
	}
	m, err := dlq.GetLastMsgForSubject(ctx, "dlq.pgmap")
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Seq   int    `json:"stream_sequence"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &rec); err != nil {
		t.Fatal(err)
	}
	if want := `mapping column "amount" (path "/amount"): string not accepted for numeric(12,2) (set lenient_strings)`; rec.Seq != poison+1 || !strings.Contains(rec.Error, want) {
		t.Errorf("DLQ record: stream sequence %d, error %q; want %d and %q", rec.Seq, rec.Error, poison+1, want)
	}
}
