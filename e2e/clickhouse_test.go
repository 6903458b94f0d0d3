package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/clickhousetest"
	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// clickhouseSink is the clickhouse sink on srv writing table (audit layout
// unless extra says otherwise), creating it at start.
func clickhouseSink(srv *clickhousetest.Server, table string, extra map[string]any) map[string]any {
	m := map[string]any{"type": "clickhouse", "url": srv.URL, "table": table, "auto_create": true}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// chScalar runs a query returning one value.
func chScalar(t *testing.T, srv *clickhousetest.Server, sql string) string {
	t.Helper()
	return strings.TrimSpace(srv.MustQuery(t, sql))
}

// chRows returns the table's row count, 0 while it does not exist yet (the
// sink creates it at start).
func chRows(srv *clickhousetest.Server, table string) int {
	return chProgress(srv, "count()", table)
}

// chMaxSequence returns the newest stream sequence stored in the table, 0
// while it does not exist yet or is empty.
func chMaxSequence(srv *clickhousetest.Server, table string) int {
	return chProgress(srv, "max(stream_sequence)", table)
}

// chProgress returns one integer aggregate over the table, 0 on any error:
// the progress waits poll before the sink has created the table.
func chProgress(srv *clickhousetest.Server, aggregate, table string) int {
	out, err := srv.Query("SELECT " + aggregate + " FROM `" + table + "`")
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(out))
	return n
}

// checkClickHouseAudit asserts that the table holds, after FINAL, exactly
// one row per stream sequence 1..n of stream, each with its own payload.
func checkClickHouseAudit(t *testing.T, srv *clickhousetest.Server, table, stream string, n int) {
	t.Helper()
	q := fmt.Sprintf("SELECT count(), uniqExact(stream_name, stream_sequence), min(stream_sequence), max(stream_sequence) FROM `%s` FINAL WHERE stream_name = '%s' FORMAT TSV", table, stream)
	want := fmt.Sprintf("%d\t%d\t1\t%d", n, n, n)
	if got := chScalar(t, srv, q); got != want {
		t.Errorf("count, distinct keys, min, max = %q, want %q", got, want)
	}
	// Every payload as published: {"n": seq, "pad": …}.
	q = fmt.Sprintf("SELECT count() FROM `%s` FINAL WHERE stream_name = '%s' AND visitParamExtractRaw(payload_json, 'n') != toString(stream_sequence)", table, stream)
	if bad := chScalar(t, srv, q); bad != "0" {
		t.Errorf("%s rows whose payload is not the message's own", bad)
	}
	raw := chScalar(t, srv, fmt.Sprintf("SELECT count() FROM `%s` WHERE stream_name = '%s'", table, stream))
	t.Logf("%s rows before FINAL for %d messages (redelivery duplicates the engine collapses)", raw, n)
}

// TestClickHouseCrash writes 20,000 messages through the binary and kills it
// with SIGKILL three times mid-run: after a restart every message is present
// once (FINAL), with its own payload, and all are acknowledged.
func TestClickHouseCrash(t *testing.T) {
	const n = 20000
	srv := clickhousetest.Run(t)
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "CHCRASH", Subjects: []string{"chcrash.>"}})
	natstest.PublishN(t, js, "chcrash.events", n, body)
	d := newRunDoc([]string{s.ClientURL()}, "CHCRASH", "ch-crash", "chcrash.>", clickhouseSink(srv, "events", nil))
	d.Delivery["batch_size"] = 500
	cfg := d.write(t)

	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("random seed %d", seed)
	ctx := context.Background()
	for round := range 3 {
		p := start(t, cfg)
		// Kill once rows are arriving, at a random moment after that.
		natstest.WaitFor(t, time.Minute, func() error {
			if got := chRows(srv, "events"); got <= round*n/5 {
				return fmt.Errorf("%d rows, waiting for more before kill %d", got, round+1)
			}
			return nil
		})
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		p.kill(t)
		floor, pending, err := ackState(ctx, js, "CHCRASH", "ch-crash")
		t.Logf("kill %d: %s rows stored; ack floor %d, ack pending %d (%v)", round+1,
			chScalar(t, srv, "SELECT count() FROM events"), floor, pending, err)
	}
	p := start(t, cfg)
	waitAllAcked(t, js, "CHCRASH", "ch-crash", n, 3*time.Minute)
	p.stop(t)
	checkClickHouseAudit(t, srv, "events", "CHCRASH", n)
}

// TestClickHouseMappedBusinessKey: 5,000 messages over 1,000 business keys
// (mapped layout, key from the payload, version = stream sequence), one
// SIGKILL mid-run: one row per key after FINAL, each the key's newest
// message.
func TestClickHouseMappedBusinessKey(t *testing.T) {
	const n, keys = 5000, 1000
	srv := clickhousetest.Run(t)
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "CHKEY", Subjects: []string{"chkey.>"}})
	natstest.PublishN(t, js, "chkey.events", n, func(i int) []byte {
		return fmt.Appendf(nil, `{"order":{"id":%d},"amount":%d.25,"n":%d}`, i%keys, i, i+1)
	})
	var mapping []map[string]any
	json.Unmarshal([]byte(`[{"column":"order_id","path":"/order/id","type":"bigint","required":true},
		{"column":"amount","path":"/amount","type":"numeric(12,2)"},
		{"column":"n","path":"/n","type":"bigint"}]`), &mapping)
	sinkCfg := clickhouseSink(srv, "orders", map[string]any{"layout": "mapped", "mapping": mapping,
		"idempotency": map[string]any{"strategy": "mapping", "columns": []string{"order_id"}}})
	d := newRunDoc([]string{s.ClientURL()}, "CHKEY", "ch-key", "chkey.>", sinkCfg)
	cfg := d.write(t)
	p := start(t, cfg)
	// Progress is the newest stream sequence stored, not the row count:
	// background merges collapse a key's rows (CI once saw the count held
	// at 1,000, one row per key, for the whole minute), while the newest
	// version survives every merge.
	natstest.WaitFor(t, time.Minute, func() error {
		if got := chMaxSequence(srv, "orders"); got < n/3 {
			return fmt.Errorf("newest stored stream sequence %d, waiting for %d before the kill", got, n/3)
		}
		return nil
	})
	p.kill(t)
	p = start(t, cfg)
	waitAllAcked(t, js, "CHKEY", "ch-key", n, 3*time.Minute)
	p.stop(t)
	// The newest message of key k is the last i with i % keys == k:
	// i = n - keys + k, so n = i + 1 and stream_sequence = n.
	q := fmt.Sprintf("SELECT count(), countIf(n = stream_sequence AND n = %d - %d + order_id + 1 AND toString(amount) = concat(toString(n - 1), '.25')) FROM orders FINAL FORMAT TSV", n, keys)
	if got, want := chScalar(t, srv, q), fmt.Sprintf("%d\t%d", keys, keys); got != want {
		t.Errorf("rows, rows holding the key's newest message = %q, want %q", got, want)
	}
}

// TestClickHouseRejectedRowDLQ: a FixedString(2) column and one 3-character
// value among 100 messages: that message is dead-lettered with the server's
// code in its error, the other 99 are stored and everything is acknowledged.
func TestClickHouseRejectedRowDLQ(t *testing.T) {
	const n = 100
	srv := clickhousetest.Run(t)
	srv.MustQuery(t, "CREATE TABLE codes (`k` Int64, `code` FixedString(2), `stream_sequence` UInt64) ENGINE = ReplacingMergeTree(`stream_sequence`) ORDER BY (`k`)")
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "CHDLQ", Subjects: []string{"chdlq.>"}})
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "CHDLQ_DLQ", Subjects: []string{"dlq.chdlq"}})
	natstest.PublishN(t, js, "chdlq.events", n, func(i int) []byte {
		code := "ab"
		if i == 41 {
			code = "abc"
		}
		return fmt.Appendf(nil, `{"k":%d,"code":%q}`, i, code)
	})
	var mapping []map[string]any
	json.Unmarshal([]byte(`[{"column":"k","path":"/k","type":"bigint","required":true},{"column":"code","path":"/code","type":"text","required":true}]`), &mapping)
	// Count the INSERTs on their way to the server: bisection needs at
	// most 2n−1 of them.
	target, _ := url.Parse(srv.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var inserts atomic.Int64
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Query().Get("query"), "INSERT") {
			inserts.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	sinkCfg := map[string]any{"type": "clickhouse", "url": front.URL, "table": "codes", "layout": "mapped", "mapping": mapping,
		"idempotency": map[string]any{"strategy": "mapping", "columns": []string{"k"}}}
	d := newRunDoc([]string{s.ClientURL()}, "CHDLQ", "ch-dlq", "chdlq.>", sinkCfg)
	d.Delivery["batch_size"] = 100
	d.Delivery["max_in_flight_batches"] = 1
	path := d.write(t)
	replaceInFile(t, path, `"delivery": {`, `"dead_letter": {"enabled": true, "subject": "dlq.chdlq"},
  "delivery": {`)
	p := start(t, path)
	waitAllAcked(t, js, "CHDLQ", "ch-dlq", n, 2*time.Minute)
	p.stop(t)
	if got := inserts.Load(); got > 2*n-1 {
		t.Errorf("%d INSERT requests for %d messages, more than 2n-1", got, n)
	}
	t.Logf("%d INSERT requests isolated the refused row among %d", inserts.Load(), n)
	if got := chScalar(t, srv, "SELECT count(), countIf(k = 41) FROM codes FINAL FORMAT TSV"); got != "99\t0" {
		t.Errorf("rows, rows of the refused message = %q, want 99, 0", got)
	}
	ctx := context.Background()
	dlq, err := js.Stream(ctx, "CHDLQ_DLQ")
	if err != nil {
		t.Fatal(err)
	}
	info, _ := dlq.Info(ctx)
	if info.State.Msgs != 1 {
		t.Fatalf("%d DLQ messages, want 1", info.State.Msgs)
	}
	m, err := dlq.GetLastMsgForSubject(ctx, "dlq.chdlq")
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
	if rec.Seq != 42 || !strings.Contains(rec.Error, "code 131") || strings.Contains(rec.Error, "abc") {
		t.Errorf("DLQ record: stream sequence %d, error %q; want 42 and the code, without the value", rec.Seq, rec.Error)
	}
}

// TestClickHouseServerDown stops the server (SIGSTOP) mid-run: while it does
// not answer nothing is acknowledged; then it is killed and restarted on its
// data, and every message is present once and acknowledged.
func TestClickHouseServerDown(t *testing.T) {
	const n = 5000
	srv := clickhousetest.Run(t)
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "CHDOWN", Subjects: []string{"chdown.>"}})
	sinkCfg := clickhouseSink(srv, "events", map[string]any{"request_timeout_ms": 2000})
	d := newRunDoc([]string{s.ClientURL()}, "CHDOWN", "ch-down", "chdown.>", sinkCfg)
	cfg := d.write(t)
	p := start(t, cfg)
	waitFetching(t, js, "CHDOWN", "ch-down")
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	natstest.PublishN(t, js, "chdown.events", n, body)
	natstest.WaitFor(t, 30*time.Second, func() error {
		if _, pending, err := ackState(context.Background(), js, "CHDOWN", "ch-down"); err != nil || pending == 0 {
			return fmt.Errorf("nothing delivered yet (%v)", err)
		}
		return nil
	})
	// Look for longer than request_timeout_ms: the INSERTs time out, are
	// NAKed and retried, and still nothing may be acknowledged.
	holdsNoAcks(t, js, "CHDOWN", "ch-down", 40, "the ClickHouse server is stopped")
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	holdsNoAcks(t, js, "CHDOWN", "ch-down", 20, "the ClickHouse server is down")
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	waitAllAcked(t, js, "CHDOWN", "ch-down", n, 3*time.Minute)
	p.stop(t)
	checkClickHouseAudit(t, srv, "events", "CHDOWN", n)
}
