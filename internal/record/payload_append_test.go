package record

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/sink"
)

var payloadModes = []PayloadMode{JSONOrEnvelope, "", JSONOnly, TextEnvelope, BytesEnvelope, "yaml"}

// checkAppendPayload fails unless AppendPayload writes what AppendOrdered
// writes for NormalisePayload's value, or fails with the same error (type,
// text and error type) leaving the prefix alone, for every mode, flavour
// and key order.
func checkAppendPayload(t *testing.T, e *sink.Envelope) {
	t.Helper()
	for _, mode := range payloadModes {
		p, wantErr := NormalisePayload(e, mode)
		for _, f := range []jsonx.Flavour{jsonx.UTF8, jsonx.ASCII} {
			for _, o := range []jsonx.KeyOrder{jsonx.CanonicalOrder, jsonx.JSONBOrder} {
				got, err := AppendPayload([]byte("prefix"), e, mode, f, o)
				if wantErr != nil {
					if !sameFailure(err, wantErr) {
						t.Fatalf("AppendPayload(%.60q, %q, %d, %d) error = %#v, NormalisePayload error = %#v", e.Data, mode, f, o, err, wantErr)
					}
					if string(got) != "prefix" {
						t.Fatalf("AppendPayload(%.60q, %q, %d, %d) failed and returned %.60q, want the prefix alone", e.Data, mode, f, o, got)
					}
					continue
				}
				if err != nil {
					t.Fatalf("AppendPayload(%.60q, %q, %d, %d) error %v, NormalisePayload none", e.Data, mode, f, o, err)
				}
				if want := jsonx.AppendOrdered([]byte("prefix"), p.Value, f, o); !bytes.Equal(got, want) {
					t.Fatalf("AppendPayload(%.60q, %q, %d, %d) =\n%.300s\nwant\n%.300s", e.Data, mode, f, o, got, want)
				}
			}
		}
	}
}

// sameFailure reports whether two errors have the same type, text and
// sink error type.
func sameFailure(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return fmt.Sprintf("%T", a) == fmt.Sprintf("%T", b) && a.Error() == b.Error() &&
		sink.Failed(a).ErrorType == sink.Failed(b).ErrorType
}

// appendPayloadData are the payloads of the AppendPayload tests: JSON in
// and out of key order, scalars, text, invalid UTF-8, a byte-order mark,
// and the documents the parser rejects although they are valid UTF-8.
var appendPayloadData = []string{
	`{"order_id":"O-1001","amount":42.50,"note":"café"}`, `{"b":1,"a":[1.50,2]}`, `{"z":{"yy":[{"b":"\u00e9\n","a":-0}]},"é":1,"ab":2}`,
	`123456789012345678901234567890`, `"x"`, `[1]`, `{}`, " \n{ \"a\" : [ ] }\t", `null`, `-0.0`,
	"", "hello world", "hello\nworld", "  ", "\xff\x00\x01", "\xff", "\xfe", "{\"a\":\"\xff\"}", "\xef\xbb\xbf{}", "\ufeff",
	`{"a":1,"a":2}`, `{"a":NaN}`, `1e400`, `"\ud800"`, `{"a":1`, `[1,]`, `{} {}`,
	strings.Repeat("[", 1000) + strings.Repeat("]", 1000), "[" + strings.Repeat("[", 1000) + "]",
}

func TestAppendPayloadMatchesNormalisePayload(t *testing.T) {
	envelopes := []*sink.Envelope{shapestest.Golden(), shapestest.Envelope("ORDERS", 7)}
	for _, data := range appendPayloadData {
		envelopes = append(envelopes, &sink.Envelope{Subject: "orders.x", Data: []byte(data)})
		omitted := &sink.Envelope{Subject: "orders.x", Data: []byte(data),
			Payload: sink.PayloadPresence{Omitted: true, OmittedReason: "headers_only", OriginalSize: 2048}}
		envelopes = append(envelopes, omitted)
	}
	for _, e := range envelopes {
		checkAppendPayload(t, e)
	}
}

// FuzzAppendPayload also checks the file record's streaming form
// (AppendFileRecord), which encodes the payload the same way.
func FuzzAppendPayload(f *testing.F) {
	for _, data := range appendPayloadData {
		f.Add([]byte(data), false)
	}
	f.Add([]byte(nil), true)
	f.Add([]byte(`{"a":1}`), true)
	f.Fuzz(func(t *testing.T, data []byte, omitted bool) {
		e := &sink.Envelope{Subject: "s", Data: data}
		if omitted {
			e.Payload = sink.PayloadPresence{Omitted: true, OmittedReason: "headers_only"}
		}
		checkAppendPayload(t, e)
		checkAppendFileRecord(t, e)
	})
}

// BenchmarkAppendPayload is the payload column of a SQL row (ASCII,
// canonical order) for a 256-byte JSON payload: before, NormalisePayload
// and the encoder; after, AppendPayload.
func BenchmarkAppendPayload(b *testing.B) {
	e := &sink.Envelope{Subject: "orders.created", Data: []byte(`{"order_id":"O-1001","customer":"C-77","amount":42.50,` +
		`"currency":"EUR","items":[{"sku":"A-1","qty":2,"price":10.25},{"sku":"B-7","qty":1,"price":22.0}],` +
		`"note":"café au lait","tags":["express","gift"],"created":"2026-05-29T09:59:59.5Z","ok":true}`)}
	buf := make([]byte, 0, 4096)
	b.Run("tree", func(b *testing.B) {
		b.SetBytes(int64(len(e.Data)))
		b.ReportAllocs()
		for b.Loop() {
			p, err := NormalisePayload(e, JSONOrEnvelope)
			if err != nil {
				b.Fatal(err)
			}
			buf = jsonx.AppendOrdered(buf[:0], p.Value, jsonx.ASCII, jsonx.CanonicalOrder)
		}
	})
	b.Run("stream", func(b *testing.B) {
		b.SetBytes(int64(len(e.Data)))
		b.ReportAllocs()
		for b.Loop() {
			var err error
			if buf, err = AppendPayload(buf[:0], e, JSONOrEnvelope, jsonx.ASCII, jsonx.CanonicalOrder); err != nil {
				b.Fatal(err)
			}
		}
	})
}
