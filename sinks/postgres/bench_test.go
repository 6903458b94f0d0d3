package postgres

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sqlconfig"
)

// BenchmarkWriteBatch writes fresh batches of 256-byte JSON payloads into
// the server and reports msgs/s (upsert mode, the default).
func BenchmarkWriteBatch(b *testing.B) {
	dsn := natstest.Service(b, dsnEnv)
	for _, size := range []int{1, 1000} {
		for _, staging := range []bool{false, true} {
			b.Run(fmt.Sprintf("batch=%d/staging=%v", size, staging), func(b *testing.B) {
				c := baseConfig(b, dsn)
				c.Staging.Enabled = staging
				s := open(b, c)
				pad := strings.Repeat("x", 256-len(`{"n":0000000000,"pad":""}`))
				seq := uint64(0)
				batch := func() []*sink.Envelope {
					out := make([]*sink.Envelope, size)
					for i := range out {
						seq++
						out[i] = env("bench.x", "B", seq, "", fmt.Sprintf(`{"n":%010d,"pad":"%s"}`, seq, pad))
					}
					return out
				}
				b.ResetTimer()
				for b.Loop() {
					b.StopTimer()
					in := batch()
					b.StartTimer()
					for i, r := range s.WriteBatch(b.Context(), in) {
						if r.Outcome != sink.Committed {
							b.Fatalf("message %d: %v (%v)", i, r.Outcome, r.Err)
						}
					}
				}
				b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "msgs/s")
			})
		}
	}
}

// BenchmarkServerInsert is the server's own cost per row, without NATS or
// the sink: rows built by the model (256-byte JSON payloads) are copied
// into a temporary text table outside the timer, then one timed statement
// inserts them into the auto-created table with the sink's upsert clause,
// casting the JSON texts to jsonb. It compares the texts in canonical key
// order with the texts in jsonb's order, which the sink sends to jsonb
// columns. µs/row is wall time of the statement in one backend, i.e. its
// CPU on an idle server.
func BenchmarkServerInsert(b *testing.B) {
	dsn := natstest.Service(b, dsnEnv)
	const rows = 20000
	for _, order := range []jsonx.KeyOrder{jsonx.CanonicalOrder, jsonx.JSONBOrder} {
		name := map[jsonx.KeyOrder]string{jsonx.CanonicalOrder: "canonical", jsonx.JSONBOrder: "jsonb"}[order]
		b.Run("order="+name, func(b *testing.B) {
			c := baseConfig(b, dsn)
			s := open(b, c)
			t := s.model.Tables[0]
			conn := db(b, dsn)
			stage := "bench_stage_" + name
			// As the sink's own sessions do when the server has lz4.
			if s.lz4.Load() {
				_, err := conn.Exec(b.Context(), "set default_toast_compression = lz4")
				must(b, err)
			}
			_, err := conn.Exec(b.Context(), "create temp table "+stage+" (like "+c.Table+" including defaults)")
			must(b, err)
			// The temporary table holds text where the target has jsonb.
			for _, f := range []sqlmodel.Field{sqlmodel.Payload, sqlmodel.Headers, sqlmodel.Metadata, sqlmodel.MissionMetadata, sqlmodel.SecurityLabels} {
				_, err := conn.Exec(b.Context(), "alter table "+stage+" alter column "+s.model.Column(f)+" type text")
				must(b, err)
			}
			pad := strings.Repeat("x", 256-len(`{"n":1000000000,"pad":""}`))
			seq := uint64(0)
			fill := func() {
				built := make([]*sqlmodel.Row, rows)
				for i := range built {
					seq++
					e := env("bench.x", "B", seq, "", fmt.Sprintf(`{"n":%010d,"pad":"%s"}`, 1000000000+seq, pad))
					r, err := s.model.BuildRowOrdered(e, stored, func(*sqlmodel.Table, sqlmodel.Field) jsonx.KeyOrder { return order })
					must(b, err)
					built[i] = r
				}
				_, err := conn.Exec(b.Context(), "truncate "+stage)
				must(b, err)
				copySQL := "copy " + stage + " (" + sqlmodel.Postgres.QuoteAll(s.model.AllColumns()) + ") from stdin (format binary)"
				_, err = conn.PgConn().CopyFrom(b.Context(), bytes.NewReader(encodeCopy(built)), copySQL)
				must(b, err)
			}
			jsonb := map[string]bool{}
			for _, f := range []sqlmodel.Field{sqlmodel.Payload, sqlmodel.Headers, sqlmodel.Metadata, sqlmodel.MissionMetadata, sqlmodel.SecurityLabels} {
				jsonb[s.model.Column(f)] = true
			}
			insert := insertSQL(s.model, t, stage, jsonb)
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				fill()
				b.StartTimer()
				_, err := conn.Exec(b.Context(), insert)
				must(b, err)
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N*rows)*1e6, "µs/row")
		})
	}
}

// BenchmarkMappedWrite writes fresh batches of 1000 small mapped rows (a
// bigint key, a ~230-byte text, the subject, the receive time and the
// stream sequence as version column, upsert) through WriteBatch, and
// compares the write paths of a group: one statement per row pipelined
// (path=rows) and the multi-row unnest statement (path=multi). µs/row is
// wall time, server included.
func BenchmarkMappedWrite(b *testing.B) {
	dsn := natstest.Service(b, dsnEnv)
	for _, path := range []string{"rows", "multi"} {
		b.Run("path="+path, func(b *testing.B) {
			c := benchMappedConfig(b, dsn)
			s := open(b, c)
			mp := s.model.Tables[0].Mapped
			switch path {
			case "rows":
				mp.Multi = ""
			}
			pad := strings.Repeat("x", 256-len(`{"i":0000000000,"pad":""}`))
			seq := uint64(0)
			const size = 1000
			server := backendTicks(b, s)
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				in := make([]*sink.Envelope, size)
				for i := range in {
					seq++
					in[i] = env("bench.x", "B", seq, "", fmt.Sprintf(`{"i":%d,"pad":"%s"}`, 1000000000+seq, pad))
				}
				b.StartTimer()
				for i, r := range s.WriteBatch(b.Context(), in) {
					if r.Outcome != sink.Committed {
						b.Fatalf("message %d: %v (%v)", i, r.Outcome, r.Err)
					}
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N*size)*1e6, "µs/row")
			b.ReportMetric(float64(backendTicks(b, s)-server)*1e4/float64(b.N*size), "server-µs/row")
		})
	}
}

// backendTicks sums the CPU time (utime + stime, in clock ticks of 10 ms)
// of the server processes behind the sink's idle pooled connections, read
// from /proc: the server runs on this machine in the benchmark setup.
func backendTicks(b *testing.B, s *Sink) int64 {
	var sum int64
	for _, c := range s.pool.AcquireAllIdle(b.Context()) {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.Conn().PgConn().PID()))
		c.Release()
		if err != nil {
			b.Skipf("server CPU not readable: %v", err)
		}
		f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+2:]))
		u, _ := strconv.ParseInt(f[11], 10, 64)
		k, _ := strconv.ParseInt(f[12], 10, 64)
		sum += u + k
	}
	return sum
}

// benchMappedConfig is the mapped layout of the bench configuration in
// docs/performance.md#sql-mapped-layout-issue-16.
func benchMappedConfig(b *testing.B, dsn string) Config {
	c := baseConfig(b, dsn)
	c.Layout = sqlconfig.LayoutMapped
	c.Idempotency = sqlconfig.Idempotency{Strategy: "mapping", Columns: []string{"i"}}
	c.IncludeColumns = []string{"stream_sequence"}
	vc := "stream_sequence"
	c.VersionColumn = &vc
	c.Mapping = []sqlconfig.MappingItem{
		{Column: "i", Path: "/i", Type: "bigint", Required: true, EpochUnit: "ms"},
		{Column: "pad", Path: "/pad", Type: "text", EpochUnit: "ms"},
		{Column: "subj", Path: "$subject", Type: "text", EpochUnit: "ms"},
		{Column: "at", Path: "$received_at", Type: "timestamp", EpochUnit: "ms"},
	}
	return c
}
