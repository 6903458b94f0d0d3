package clickhouse

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-sinks/nats-sink/sink"
)

const benchMapping = `"layout":"mapped","auto_create":true,"mapping":[
	{"column":"i","path":"/i","type":"bigint","required":true},
	{"column":"subject","path":"$subject","type":"text"},
	{"column":"received","path":"$received_at","type":"timestamp"}]`

func benchBatch(n int) []*sink.Envelope {
	batch := make([]*sink.Envelope, n)
	for i := range batch {
		batch[i] = envelope("bench.m", uint64(i+1), fmt.Sprintf(`{"i":%d,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`, i))
	}
	return batch
}

// BenchmarkAppendRow is the sink's own CPU per row, without the server:
// small mapped rows and audit rows of a 256-byte payload.
func BenchmarkAppendRow(b *testing.B) {
	for _, tt := range []struct{ name, extra string }{{"mapped", benchMapping}, {"audit", `"auto_create":true`}} {
		b.Run(tt.name, func(b *testing.B) {
			srv := server.Get(b)
			s := open(b, decode(b, sinkJSON(srv.URL, uniqueTable("bench"), tt.extra)))
			batch := benchBatch(1000)
			t := s.model.tables[0]
			now := time.Now()
			var buf []byte
			b.ResetTimer()
			for i := range b.N {
				var err error
				buf, err = s.appendRow(buf[:0], t, batch[i%len(batch)], now)
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(buf)), "bytes/row")
		})
	}
}

// BenchmarkWriteBatch writes batches of 5,000 small mapped rows to the
// private server (its CPU shares the machine).
func BenchmarkWriteBatch(b *testing.B) {
	srv := server.Get(b)
	s := open(b, decode(b, sinkJSON(srv.URL, uniqueTable("bench"), benchMapping)))
	batch := benchBatch(5000)
	b.ResetTimer()
	for range b.N {
		for _, r := range s.WriteBatch(context.Background(), batch) {
			if r.Outcome != sink.Committed {
				b.Fatal(r.Err)
			}
		}
	}
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "rows/s")
}
