package record

import (
	"bytes"
	"testing"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/sink"
)

// checkAppendFileRecord fails unless AppendFileRecord writes exactly what
// jsonx.Append writes for FileRecord over NormalisePayload's payload, or
// fails as NormalisePayload does leaving the prefix alone, for every mode,
// with and without metadata.
func checkAppendFileRecord(t *testing.T, e *sink.Envelope) {
	t.Helper()
	for _, mode := range payloadModes {
		p, wantErr := NormalisePayload(e, mode)
		for _, meta := range []bool{true, false} {
			got, err := AppendFileRecord([]byte("prefix"), e, mode, meta, shapestest.Stored)
			if wantErr != nil {
				if !sameFailure(err, wantErr) {
					t.Fatalf("AppendFileRecord(%.60q, %q) error = %#v, NormalisePayload error = %#v", e.Data, mode, err, wantErr)
				}
				if string(got) != "prefix" {
					t.Fatalf("AppendFileRecord(%.60q, %q) failed and returned %.60q, want the prefix alone", e.Data, mode, got)
				}
				continue
			}
			if err != nil {
				t.Fatalf("AppendFileRecord(%.60q, %q) error %v, NormalisePayload none", e.Data, mode, err)
			}
			want := jsonx.Append([]byte("prefix"), FileRecord(e, p, meta, shapestest.Stored), jsonx.UTF8)
			if !bytes.Equal(got, want) {
				t.Fatalf("AppendFileRecord(%.60q, %q, metadata %v) =\n%.400s\nwant\n%.400s", e.Data, mode, meta, got, want)
			}
		}
	}
}

func TestAppendFileRecordMatchesFileRecord(t *testing.T) {
	withHeaders := shapestest.Envelope("ORDERS", 9)
	withHeaders.Headers = sink.Headers{"Nats-Msg-Id": "m-9", "X-Tenant": "é", "Nats-Expected-Stream": "ORDERS"}
	envelopes := []*sink.Envelope{shapestest.Golden(), shapestest.Envelope("ORDERS", 7), withHeaders}
	for _, data := range appendPayloadData {
		envelopes = append(envelopes, &sink.Envelope{Subject: "orders.x", Stream: "S", StreamSequence: 3, Data: []byte(data)})
		envelopes = append(envelopes, &sink.Envelope{Subject: "orders.x", Data: []byte(data),
			Payload: sink.PayloadPresence{Omitted: true, OmittedReason: "headers_only", OriginalSize: 2048}})
	}
	for _, e := range envelopes {
		checkAppendFileRecord(t, e)
	}
}

// TestAppendFileRecordGolden: the streaming form writes the documented
// compact file record byte for byte.
func TestAppendFileRecordGolden(t *testing.T) {
	got, err := AppendFileRecord(nil, shapestest.Golden(), JSONOrEnvelope, true, shapestest.Stored)
	if err != nil {
		t.Fatal(err)
	}
	if want := readGolden(t, "file_record_compact.json"); !bytes.Equal(append(got, '\n'), want) {
		t.Errorf("AppendFileRecord =\n%s\nwant\n%s", got, want)
	}
}

// BenchmarkFileRecord is one file record with metadata for a 256-byte JSON
// payload: the tree (NormalisePayload, FileRecord, jsonx.Append) against
// AppendFileRecord, in the same run.
func BenchmarkFileRecord(b *testing.B) {
	e := shapestest.Golden()
	e.Data = []byte(`{"order_id":"O-1001","customer":"C-77","amount":42.50,` +
		`"currency":"EUR","items":[{"sku":"A-1","qty":2,"price":10.25},{"sku":"B-7","qty":1,"price":22.0}],` +
		`"note":"café au lait","tags":["express","gift"],"created":"2026-05-29T09:59:59.5Z","ok":true}`)
	buf := make([]byte, 0, 4096)
	b.Run("tree", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p, err := NormalisePayload(e, JSONOrEnvelope)
			if err != nil {
				b.Fatal(err)
			}
			buf = jsonx.Append(buf[:0], FileRecord(e, p, true, shapestest.Stored), jsonx.UTF8)
		}
	})
	b.Run("stream", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var err error
			if buf, err = AppendFileRecord(buf[:0], e, JSONOrEnvelope, true, shapestest.Stored); err != nil {
				b.Fatal(err)
			}
		}
	})
}
