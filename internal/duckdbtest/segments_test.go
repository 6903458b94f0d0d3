package duckdbtest

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sinks/segments"
)

func envelope(seq uint64) *sink.Envelope {
	return &sink.Envelope{
		Subject: fmt.Sprintf("orders.%d", seq%3), Stream: "ORDERS", StreamSequence: seq, Consumer: "lake",
		Data:       fmt.Appendf(nil, `{"n":%d,"note":"café \n line"}`, seq),
		Payload:    sink.PayloadPresence{Present: true, OriginalSize: 30},
		Pending:    -1,
		ReceivedAt: time.Date(2026, 5, 29, 10, 0, 0, 250000000, time.UTC).Add(time.Duration(seq) * time.Second),
		Labels:     []string{"a", "b"},
	}
}

// TestDuckDBReadsSegments writes 5,000 records (with 500 redelivered into
// later segments) in plain, gzip and zstd JSON Lines, and checks that
// DuckDB's DISTINCT ON query returns each record exactly once with the
// values the sink was given.
func TestDuckDBReadsSegments(t *testing.T) {
	const n = 5000
	for _, comp := range []string{"none", "gzip", "zstd"} {
		t.Run(comp, func(t *testing.T) {
			ctx := context.Background()
			c := segments.Default()
			c.Directory = filepath.Join(t.TempDir(), "lake")
			c.Partition = "src={stream}/dt={yyyy}-{mm}-{dd}/hour={hh}"
			c.Compression = &comp
			maxRecords := 700
			c.MaxRecords = &maxRecords
			s, err := segments.New(ctx, c, sink.Deps{})
			if err != nil {
				t.Fatal(err)
			}
			write := func(from, to uint64) {
				var batch []*sink.Envelope
				for seq := from; seq <= to; seq++ {
					batch = append(batch, envelope(seq))
				}
				for i, r := range s.WriteBatch(ctx, batch) {
					if r.Outcome != sink.Committed {
						t.Fatalf("result %d: %v %v", i, r.Outcome, r.Err)
					}
				}
			}
			for first := uint64(1); first <= n; first += 250 {
				write(first, first+249)
			}
			write(1001, 1500) // a redelivery: duplicates in later segments
			if err := s.Stop(ctx); err != nil {
				t.Fatal(err)
			}

			db, err := sql.Open("duckdb", "")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			glob := filepath.Join(c.Directory, "**", "*.jsonl*")
			var records int
			if err := db.QueryRow(fmt.Sprintf(`SELECT count(*) FROM read_json('%s', format = 'newline_delimited', union_by_name = true, maximum_depth = 1)`, glob)).Scan(&records); err != nil {
				t.Fatal(err)
			}
			if records != n+500 {
				t.Errorf("DuckDB counts %d records, want %d", records, n+500)
			}
			rows, err := db.Query(fmt.Sprintf(`
				SELECT stream_sequence::UBIGINT AS seq, stream, subject, to_json(payload)::VARCHAR, json_extract_string(labels::JSON, '$'), src, dt::VARCHAR, hour::VARCHAR
				FROM (SELECT DISTINCT ON (stream, stream_sequence) *
				      FROM read_json('%s', format = 'newline_delimited', union_by_name = true,
				                     maximum_depth = 1, hive_partitioning = true))
				ORDER BY stream, seq`, glob))
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var next uint64 = 1
			for rows.Next() {
				var seq uint64
				var stream, subject, payload, labels, src, dt, hour string
				if err := rows.Scan(&seq, &stream, &subject, &payload, &labels, &src, &dt, &hour); err != nil {
					t.Fatal(err)
				}
				want := envelope(seq)
				var p struct {
					N    uint64 `json:"n"`
					Note string `json:"note"`
				}
				if err := json.Unmarshal([]byte(payload), &p); err != nil {
					t.Fatalf("seq %d payload %q: %v", seq, payload, err)
				}
				at := want.ReceivedAt
				switch {
				case seq != next:
					t.Fatalf("DuckDB row sequence %d, want %d", seq, next)
				case stream != "ORDERS" || subject != want.Subject || p.N != seq || p.Note != "café \n line":
					t.Fatalf("seq %d: stream %q subject %q payload %q", seq, stream, subject, payload)
				case labels != "a;b":
					t.Fatalf("seq %d: labels %q, want a;b", seq, labels)
				case src != "ORDERS" || dt != at.Format("2006-01-02") || hour != at.Format("15"):
					t.Fatalf("seq %d: partition columns src=%s dt=%s hour=%s", seq, src, dt, hour)
				}
				next++
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if next-1 != n {
				t.Errorf("DuckDB DISTINCT ON returned %d rows, want %d", next-1, n)
			}
		})
	}
}

// TestDuckDBReadsParquetSegments writes 5,000 messages (and 500 redelivered
// after their segments committed) in held mode, then checks with DuckDB that
// the segments hold every record, with the documented column types and the
// values the sink was given.
func TestDuckDBReadsParquetSegments(t *testing.T) {
	const n = 5000
	ctx := context.Background()
	c := segments.Default()
	c.Directory = filepath.Join(t.TempDir(), "lake")
	c.Partition = "src={stream}/dt={yyyy}-{mm}-{dd}/hour={hh}"
	c.Format = "parquet"
	maxRecords, rowGroup := 700, 300
	c.MaxRecords, c.RowGroupRecords = &maxRecords, &rowGroup
	s, err := segments.New(ctx, c, sink.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	var holds []sink.Hold
	write := func(from, to uint64) {
		var batch []*sink.Envelope
		for seq := from; seq <= to; seq++ {
			batch = append(batch, envelope(seq))
		}
		for i, r := range s.WriteBatch(ctx, batch) {
			if r.Outcome != sink.Held {
				t.Fatalf("result %d: %v %v, want held", i, r.Outcome, r.Err)
			}
			holds = append(holds, r.Hold)
		}
	}
	for first := uint64(1); first <= n; first += 250 {
		write(first, first+249)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	write(1001, 1500) // a redelivery after commit: duplicates in later segments
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for i, h := range holds {
		<-h.Done()
		if h.Outcome() != sink.Committed {
			t.Fatalf("hold %d: %v %v, want committed", i, h.Outcome(), h.Err())
		}
	}
	rep, err := segments.Verify(c.Directory, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Records != n+500 || rep.Distinct != n || rep.Unreadable != 0 || rep.Open != 0 {
		t.Errorf("segments.Verify = %+v, want %d records, %d distinct", rep, n+500, n)
	}

	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	glob := filepath.Join(c.Directory, "**", "*.parquet")
	src := fmt.Sprintf(`read_parquet('%s', union_by_name = true, hive_partitioning = true)`, glob)
	var records, distinct int
	if err := db.QueryRow(`SELECT count(*), count(DISTINCT (stream_name, stream_sequence)) FROM `+src).Scan(&records, &distinct); err != nil {
		t.Fatal(err)
	}
	if records != n+500 || distinct != n {
		t.Errorf("DuckDB counts %d records, %d distinct keys; want %d, %d", records, distinct, n+500, n)
	}

	types := map[string]string{}
	rows, err := db.Query(fmt.Sprintf(`DESCRIBE SELECT * FROM read_parquet('%s')`, glob))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name, typ string
		var null, key, def, extra sql.NullString
		if err := rows.Scan(&name, &typ, &null, &key, &def, &extra); err != nil {
			t.Fatal(err)
		}
		types[name] = typ
	}
	rows.Close()
	for col, want := range map[string]string{
		"stream_name": "VARCHAR", "stream_sequence": "BIGINT", "labels": "VARCHAR[]", "message_id": "VARCHAR",
		"received_at": "TIMESTAMP WITH TIME ZONE", "published_at": "TIMESTAMP WITH TIME ZONE",
		"payload": "VARCHAR", "headers_json": "VARCHAR", "metadata_json": "VARCHAR",
	} {
		if types[col] != want {
			t.Errorf("DuckDB type of %s = %q, want %q (all: %v)", col, types[col], want, types)
		}
	}

	rows, err = db.Query(`
		SELECT stream_sequence, stream_name, subject, payload, list_aggregate(labels, 'string_agg', ';'),
		       epoch_ns(received_at), published_at IS NULL, idempotency_key, payload_format,
		       json_extract_string(metadata_json, '$.jetstream.stream'), src, dt::VARCHAR
		FROM (SELECT DISTINCT ON (stream_name, stream_sequence) * FROM ` + src + `
		      ORDER BY stream_name, stream_sequence, stored_at)
		ORDER BY stream_sequence`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var next int64 = 1
	for rows.Next() {
		var seq, receivedNS int64
		var stream, subject, payload, labels, key, format, dt string
		var metaStream, part sql.NullString
		var noPublished bool
		if err := rows.Scan(&seq, &stream, &subject, &payload, &labels, &receivedNS, &noPublished, &key, &format, &metaStream, &part, &dt); err != nil {
			t.Fatal(err)
		}
		want := envelope(uint64(seq))
		var p struct {
			N    int64  `json:"n"`
			Note string `json:"note"`
		}
		if err := json.Unmarshal([]byte(payload), &p); err != nil {
			t.Fatalf("seq %d payload %q: %v", seq, payload, err)
		}
		switch {
		case seq != next:
			t.Fatalf("DuckDB row sequence %d, want %d", seq, next)
		case stream != "ORDERS" || subject != want.Subject || p.N != seq || p.Note != "café \n line" || format != "json":
			t.Fatalf("seq %d: stream %q subject %q payload %q format %q", seq, stream, subject, payload, format)
		case labels != "a;b":
			t.Fatalf("seq %d: labels %q, want a;b", seq, labels)
		case receivedNS != want.ReceivedAt.UnixNano():
			t.Fatalf("seq %d: received_at %d ns, want %d", seq, receivedNS, want.ReceivedAt.UnixNano())
		case !noPublished:
			t.Fatalf("seq %d: published_at set, want null without a JetStream timestamp", seq)
		case key != fmt.Sprintf("stream-sequence:ORDERS:%d", seq):
			t.Fatalf("seq %d: idempotency_key %q", seq, key)
		case metaStream.String != "ORDERS" || part.String != "ORDERS" || dt != want.ReceivedAt.Format("2006-01-02"):
			t.Fatalf("seq %d: metadata stream %v, partition src=%v dt=%s", seq, metaStream, part, dt)
		}
		next++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if next-1 != n {
		t.Errorf("DuckDB DISTINCT ON returned %d rows, want %d", next-1, n)
	}
}

// TestDuckDBReadsMappedColumns writes 20,000 Parquet rows with one mapped
// column of each supported type; every 1,000th message carries a value
// that does not convert and is rejected (Permanent ValidationError: the
// runner dead-letters it). DuckDB sees the declared types and, for every
// other message, the values the payload held.
func TestDuckDBReadsMappedColumns(t *testing.T) {
	const n = 20000
	ctx := context.Background()
	op, err := segments.Decode(json.RawMessage(`{"type":"segments","directory":"d","format":"parquet","partition":"",
	  "mapping":[
	    {"column":"name","path":"/name","type":"text"},
	    {"column":"qty","path":"/qty","type":"bigint","required":true},
	    {"column":"price","path":"/price","type":"double"},
	    {"column":"ok","path":"/ok","type":"boolean"},
	    {"column":"at","path":"/at","type":"timestamp","epoch_unit":"ms"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c := op.(segments.Config)
	c.Directory = filepath.Join(t.TempDir(), "lake")
	s, err := segments.New(ctx, c, sink.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 5, 29, 10, 0, 0, 0, time.UTC)
	bad := 0
	var holds []sink.Hold
	for first := uint64(1); first <= n; first += 500 {
		var batch []*sink.Envelope
		for seq := first; seq < first+500; seq++ {
			e := envelope(seq)
			qty := fmt.Sprint(seq)
			if seq%1000 == 0 {
				qty = `"many"`
			}
			e.Data = fmt.Appendf(nil, `{"name":"n%d","qty":%s,"price":%d.5,"ok":%t,"at":%d}`,
				seq, qty, seq, seq%2 == 0, base.Add(time.Duration(seq)*time.Millisecond).UnixMilli())
			batch = append(batch, e)
		}
		for i, r := range s.WriteBatch(ctx, batch) {
			seq := batch[i].StreamSequence
			switch {
			case seq%1000 == 0:
				if r.Outcome != sink.Permanent || r.ErrorType != sink.ValidationError {
					t.Fatalf("seq %d (qty \"many\"): %v %s %v, want Permanent ValidationError", seq, r.Outcome, r.ErrorType, r.Err)
				}
				bad++
			case r.Outcome != sink.Held:
				t.Fatalf("seq %d: %v %v, want held", seq, r.Outcome, r.Err)
			default:
				holds = append(holds, r.Hold)
			}
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for i, h := range holds {
		<-h.Done()
		if h.Outcome() != sink.Committed {
			t.Fatalf("hold %d: %v %v, want committed", i, h.Outcome(), h.Err())
		}
	}

	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	src := fmt.Sprintf(`read_parquet('%s')`, filepath.Join(c.Directory, "*.parquet"))
	types := map[string]string{}
	rows, err := db.Query(`DESCRIBE SELECT * FROM ` + src)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name, typ string
		var null, key, def, extra sql.NullString
		if err := rows.Scan(&name, &typ, &null, &key, &def, &extra); err != nil {
			t.Fatal(err)
		}
		types[name] = typ
	}
	rows.Close()
	for col, want := range map[string]string{
		"stream_name": "VARCHAR", "stream_sequence": "BIGINT", "labels": "VARCHAR[]",
		"name": "VARCHAR", "qty": "BIGINT", "price": "DOUBLE", "ok": "BOOLEAN", "at": "TIMESTAMP WITH TIME ZONE",
	} {
		if types[col] != want {
			t.Errorf("DuckDB type of %s = %q, want %q (all: %v)", col, types[col], want, types)
		}
	}
	rows, err = db.Query(`SELECT stream_sequence, name, qty, price, ok, epoch_ns("at") FROM ` + src + ` ORDER BY stream_sequence`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := 0
	for rows.Next() {
		var seq, qty, atNS int64
		var name string
		var price float64
		var ok bool
		if err := rows.Scan(&seq, &name, &qty, &price, &ok, &atNS); err != nil {
			t.Fatal(err)
		}
		wantAt := base.Add(time.Duration(seq) * time.Millisecond).UnixNano()
		if seq%1000 == 0 || name != fmt.Sprintf("n%d", seq) || qty != seq || price != float64(seq)+0.5 || ok != (seq%2 == 0) || atNS != wantAt {
			t.Fatalf("seq %d: name %q qty %d price %v ok %v at %d ns; want n%d, %d, %d.5, %v, %d",
				seq, name, qty, price, ok, atNS, seq, seq, seq, seq%2 == 0, wantAt)
		}
		got++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if got != n-bad || bad != n/1000 {
		t.Errorf("DuckDB read %d rows with %d rejected, want %d and %d", got, bad, n-n/1000, n/1000)
	}
}
