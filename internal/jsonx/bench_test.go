package jsonx_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
)

// benchRecord is a file-sink record without metadata, about 1 KB compact:
// the typical per-message document of the hot path.
func benchRecord() map[string]any {
	return map[string]any{
		"schema": "nats_sinks.file.message.v1", "schema_version": 1,
		"subject": "orders.created", "stream": "ORDERS", "stream_sequence": uint64(42),
		"consumer": "orders-file", "consumer_sequence": uint64(7), "message_id": "O-1001",
		"priority": "high", "classification": nil, "labels": "billing;eu",
		"labels_list":      []string{"billing", "eu"},
		"mission_metadata": nil, "security_labels": nil, "custody": nil,
		"headers": map[string]string{
			"Nats-Msg-Id": "O-1001", "Nats-Sinks-Labels": "billing; eu ;billing", "Nats-Sinks-Priority": "high",
			"Nats-Time-Stamp": "2026-05-29T09:59:59.5Z",
			"traceparent":     "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		},
		"payload": map[string]any{
			"order_id": "O-1001", "amount": 42.5, "note": "café", "currency": "EUR",
			"customer": map[string]any{"id": jsonx.Integer("981237"), "name": "Zoë Müller", "tier": "gold"},
			"items": []any{
				map[string]any{"sku": "SKU-1", "qty": jsonx.Integer("2"), "price": 10.25},
				map[string]any{"sku": "SKU-2", "qty": jsonx.Integer("1"), "price": 22.0},
			},
			"created_at": "2026-05-29T09:59:59.500000+00:00",
		},
		"payload_info": map[string]any{
			"original_format": "json", "wrapped": false, "size_bytes": 51,
			"sha256": "d2bfcbf1dd84f6651073184965b2f77e0cca35dfe3babdf2ac8d0867c51f279d",
		},
	}
}

// objectify turns every map in v into an Object in key order, as record
// builders write them.
func objectify(v any) any {
	switch x := v.(type) {
	case map[string]any:
		o := make(jsonx.Object, 0, len(x))
		for k, item := range x {
			o = append(o, jsonx.Member{Key: k, Value: objectify(item)})
		}
		slices.SortFunc(o, func(a, b jsonx.Member) int { return strings.Compare(a.Key, b.Key) })
		return o
	case []any:
		out := make([]any, len(x))
		for i, item := range x {
			out[i] = objectify(item)
		}
		return out
	}
	return v
}

func BenchmarkMarshal(b *testing.B) {
	for _, tt := range []struct {
		name string
		f    jsonx.Flavour
		v    any
	}{
		{"utf8", jsonx.UTF8, benchRecord()}, {"ascii", jsonx.ASCII, benchRecord()},
		{"object/utf8", jsonx.UTF8, objectify(benchRecord())},
	} {
		v := tt.v
		b.Run(tt.name, func(b *testing.B) {
			b.SetBytes(int64(len(jsonx.Marshal(v, tt.f))))
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				buf = jsonx.Append(buf[:0], v, tt.f)
			}
		})
	}
}

func BenchmarkMarshalPretty(b *testing.B) {
	v := benchRecord()
	b.SetBytes(int64(len(jsonx.MarshalPretty(v, jsonx.UTF8))))
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		buf = jsonx.AppendPretty(buf[:0], v, jsonx.UTF8)
	}
}

// benchPayload is a 256-byte JSON message body.
var benchPayload = []byte(`{"order_id":"O-1001","amount":42.50,"currency":"EUR","note":"café",` +
	`"customer":{"id":981237,"name":"Zoe Muller","tier":"gold"},"items":[{"sku":"SKU-1","qty":2,` +
	`"price":10.25},{"sku":"SKU-2","qty":1,"price":22.0}],"tags":["a","b"],"ok":true,"ref":"x-123456"}`)

func BenchmarkParse(b *testing.B) {
	if len(benchPayload) != 256 {
		b.Fatalf("payload is %d bytes, want 256", len(benchPayload))
	}
	for _, tt := range []struct {
		name  string
		parse func([]byte) (any, error)
	}{{"map", jsonx.Parse}, {"sorted", jsonx.ParseSorted}} {
		b.Run(tt.name, func(b *testing.B) {
			b.SetBytes(int64(len(benchPayload)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tt.parse(benchPayload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkParseMarshal is the payload path of a record: parse, re-encode.
func BenchmarkParseMarshal(b *testing.B) {
	for _, tt := range []struct {
		name  string
		parse func([]byte) (any, error)
	}{{"map", jsonx.Parse}, {"sorted", jsonx.ParseSorted}} {
		b.Run(tt.name, func(b *testing.B) {
			b.SetBytes(int64(len(benchPayload)))
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				v, err := tt.parse(benchPayload)
				if err != nil {
					b.Fatal(err)
				}
				buf = jsonx.Append(buf[:0], v, jsonx.UTF8)
			}
		})
	}
}
