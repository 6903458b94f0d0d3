package record

import (
	"testing"
	"time"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
)

// BenchmarkFilePipeline is the per-message CPU cost of the file sink before
// I/O: envelope, payload normalisation, file record, encoding, for a
// 256-byte JSON payload.
func BenchmarkFilePipeline(b *testing.B) {
	m := shapestest.GoldenMessage()
	m.Data = []byte(`{"order_id":"O-1001","customer":"C-77","amount":42.50,"currency":"EUR","items":[{"sku":"A-1","qty":2,"price":10.25},{"sku":"B-7","qty":1,"price":22.0}],"note":"café au lait","tags":["express","gift"],"created":"2026-05-29T09:59:59.5Z","ok":true}`)
	for len(m.Data) < 256 {
		m.Data = append(m.Data[:len(m.Data)-1], ` `...)
		m.Data = append(m.Data, '}')
	}
	b.SetBytes(int64(len(m.Data)))
	b.ReportAllocs()
	buf := make([]byte, 0, 4096)
	for b.Loop() {
		e := intake.Build(m, nil, shapestest.Received)
		p, err := NormalisePayload(e, JSONOrEnvelope)
		if err != nil {
			b.Fatal(err)
		}
		buf = jsonx.Append(buf[:0], FileRecord(e, p, true, shapestest.Stored), jsonx.UTF8)
		buf = append(buf, '\n')
	}
}

func BenchmarkMetadata(b *testing.B) {
	e := shapestest.Golden()
	b.ReportAllocs()
	for b.Loop() {
		Metadata(e, shapestest.Stored, false)
	}
}

func BenchmarkAgeSeconds(b *testing.B) {
	later, earlier := shapestest.Stored, shapestest.Received.Add(-time.Hour)
	for b.Loop() {
		AgeSeconds(later, earlier)
	}
}

// BenchmarkAppendMetadata is the SQL sinks' metadata column (ascii, with
// custody) for the golden envelope: the tree path (Metadata, then the
// encoder) against the streaming writer, in both key orders, into a reused
// buffer.
func BenchmarkAppendMetadata(b *testing.B) {
	e := shapestest.Golden()
	buf := make([]byte, 0, 4096)
	for _, o := range []struct {
		name  string
		order jsonx.KeyOrder
	}{{"canonical", jsonx.CanonicalOrder}, {"jsonb", jsonx.JSONBOrder}} {
		b.Run("tree/"+o.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				buf = jsonx.AppendOrdered(buf[:0], Metadata(e, shapestest.Stored, true), jsonx.ASCII, o.order)
			}
		})
		b.Run("stream/"+o.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				buf = AppendMetadata(buf[:0], e, shapestest.Stored, true, jsonx.ASCII, o.order)
			}
		})
	}
}
