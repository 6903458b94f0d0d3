package record

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/sink"
)

func TestMetadataTimestamps(t *testing.T) {
	received := time.Date(2026, 5, 29, 10, 0, 0, 250000000, time.UTC)
	stored := time.Date(2026, 5, 29, 10, 0, 0, 300000000, time.UTC)
	js := time.Unix(0, 1780048800123456789)
	for _, tt := range []struct {
		name       string
		header     sink.Headers
		js         time.Time
		timestamps map[string]any
		freshness  map[string]any
	}{
		{"from Nats-Time-Stamp, later than receipt: skew", sink.Headers{"nats-time-stamp": "2026-05-29T12:00:01+02:00"}, js,
			map[string]any{
				"message_created_at_epoch_ns":         int64(1780048801000000000),
				"message_created_at_source":           "nats_time_stamp",
				"message_created_at_header_malformed": false,
				"nats_time_stamp":                     "2026-05-29T12:00:01+02:00",
				"jetstream_timestamp_epoch_ns":        int64(1780048800123457000),
				"received_at":                         "2026-05-29T10:00:00.250000+00:00",
				"received_at_epoch_ns":                int64(1780048800250000000),
				"stored_at":                           "2026-05-29T10:00:00.300000+00:00",
				"stored_at_epoch_ns":                  int64(1780048800300000000),
			},
			map[string]any{
				"event_age_at_receive_seconds":        0.0,
				"event_age_at_store_seconds":          0.0,
				"source_clock_skew_seconds":           0.75,
				"message_created_at_source":           "nats_time_stamp",
				"message_created_at_missing":          false,
				"message_created_at_header_malformed": false,
			}},
		{"malformed header falls back to JetStream", sink.Headers{"Nats-Time-Stamp": "20260529T100000Z"}, js,
			map[string]any{
				"message_created_at_epoch_ns":         int64(1780048800123457000),
				"message_created_at_source":           "jetstream_timestamp",
				"message_created_at_header_malformed": true,
				"nats_time_stamp":                     "20260529T100000Z",
				"jetstream_timestamp_epoch_ns":        int64(1780048800123457000),
				"received_at":                         "2026-05-29T10:00:00.250000+00:00",
				"received_at_epoch_ns":                int64(1780048800250000000),
				"stored_at":                           "2026-05-29T10:00:00.300000+00:00",
				"stored_at_epoch_ns":                  int64(1780048800300000000),
			},
			map[string]any{
				"event_age_at_receive_seconds":        0.126543,
				"event_age_at_store_seconds":          0.176543,
				"source_clock_skew_seconds":           0.0,
				"message_created_at_source":           "jetstream_timestamp",
				"message_created_at_missing":          false,
				"message_created_at_header_malformed": true,
			}},
		{"malformed header and no JetStream: missing", sink.Headers{"Nats-Time-Stamp": "yesterday"}, time.Time{},
			map[string]any{
				"message_created_at_epoch_ns":         nil,
				"message_created_at_source":           "missing",
				"message_created_at_header_malformed": true,
				"nats_time_stamp":                     "yesterday",
				"jetstream_timestamp_epoch_ns":        nil,
				"received_at":                         "2026-05-29T10:00:00.250000+00:00",
				"received_at_epoch_ns":                int64(1780048800250000000),
				"stored_at":                           "2026-05-29T10:00:00.300000+00:00",
				"stored_at_epoch_ns":                  int64(1780048800300000000),
			},
			map[string]any{
				"event_age_at_receive_seconds":        nil,
				"event_age_at_store_seconds":          nil,
				"source_clock_skew_seconds":           nil,
				"message_created_at_source":           "missing",
				"message_created_at_missing":          true,
				"message_created_at_header_malformed": true,
			}},
		{"far-off header: exact big epoch", sink.Headers{"Nats-Time-Stamp": "9999-12-31"}, time.Time{},
			map[string]any{
				"message_created_at_epoch_ns":         bigInt("253402214400000000000"),
				"message_created_at_source":           "nats_time_stamp",
				"message_created_at_header_malformed": false,
				"nats_time_stamp":                     "9999-12-31",
				"jetstream_timestamp_epoch_ns":        nil,
				"received_at":                         "2026-05-29T10:00:00.250000+00:00",
				"received_at_epoch_ns":                int64(1780048800250000000),
				"stored_at":                           "2026-05-29T10:00:00.300000+00:00",
				"stored_at_epoch_ns":                  int64(1780048800300000000),
			},
			map[string]any{
				"event_age_at_receive_seconds":        0.0,
				"event_age_at_store_seconds":          0.0,
				"source_clock_skew_seconds":           bigSeconds("251622165599750000000"),
				"message_created_at_source":           "nats_time_stamp",
				"message_created_at_missing":          false,
				"message_created_at_header_malformed": false,
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := &sink.Envelope{Subject: "s", Headers: tt.header, Timestamp: tt.js, ReceivedAt: received, Pending: -1}
			doc := Metadata(e, stored.Add(999), false)
			if diff := cmp.Diff(tt.timestamps, member(t, doc, "timestamps")); diff != "" {
				t.Errorf("timestamps mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.freshness, member(t, doc, "freshness")); diff != "" {
				t.Errorf("freshness mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMetadataJetStreamUnknown(t *testing.T) {
	e := &sink.Envelope{Subject: "s", Pending: -1}
	want := map[string]any{
		"stream": nil, "consumer": nil, "domain": nil, "stream_sequence": nil, "consumer_sequence": nil,
		"redelivered": nil, "pending": nil, "timestamp": nil, "timestamp_epoch_ns": nil,
	}
	doc := Metadata(e, time.Unix(0, 0), false)
	if diff := cmp.Diff(want, member(t, doc, "jetstream")); diff != "" {
		t.Errorf("jetstream mismatch (-want +got):\n%s", diff)
	}
	for _, k := range []string{"reply", "message_id", "mission_metadata", "security_labels"} {
		if v, ok := doc.Get(k); !ok || v != nil {
			t.Errorf("%s = %v, %v; want null", k, v, ok)
		}
	}
	if diff := cmp.Diff(map[string]string{}, member(t, doc, "headers")); diff != "" {
		t.Errorf("headers of an envelope without headers (-want +got):\n%s", diff)
	}
	mm := map[string]any{"priority": nil, "classification": nil, "labels": []string{}}
	if diff := cmp.Diff(mm, member(t, doc, "message_metadata")); diff != "" {
		t.Errorf("message_metadata mismatch (-want +got):\n%s", diff)
	}
}

func TestMetadataJetStreamKnown(t *testing.T) {
	e := &sink.Envelope{Subject: "s", Stream: "S", Consumer: "C", Domain: "hub", StreamSequence: 5, ConsumerSequence: 9,
		Pending: 0, DeliveryCount: 2, Timestamp: time.Unix(0, 1780048800999999600)}
	want := map[string]any{
		"stream": "S", "consumer": "C", "domain": "hub", "stream_sequence": uint64(5), "consumer_sequence": uint64(9),
		"redelivered": true, "pending": int64(0), "timestamp": "2026-05-29T10:00:01+00:00", "timestamp_epoch_ns": int64(1780048801000000000),
	}
	if diff := cmp.Diff(want, member(t, Metadata(e, time.Unix(0, 0), false), "jetstream")); diff != "" {
		t.Errorf("jetstream mismatch (-want +got):\n%s", diff)
	}
}

func TestReservedHeaders(t *testing.T) {
	h := sink.Headers{
		"nats-msg-id":          "lower",
		"NATS-MSG-ID":          "upper",
		"Nats-Msg-Size":        "12",
		"TraceParent":          "tp",
		"accept-encoding":      "gzip",
		"Nats-Sinks-Labels":    "a",
		"nats-custom":          "c",
		"X-Other":              "x",
		"Nats":                 "no dash",
		"Nats-Expected-Stream": "S",
	}
	want := map[string]any{
		"reserved_headers": map[string]any{
			"Nats-Msg-Id":          "upper", // byte-wise smallest of the case variants
			"nats-msg-id":          "lower", // own spelling: not an exact key yet
			"NATS-MSG-ID":          "upper",
			"Nats-Msg-Size":        "12",
			"traceparent":          "tp",
			"Accept-Encoding":      "gzip",
			"Nats-Sinks-Labels":    "a",
			"nats-custom":          "c",
			"Nats-Expected-Stream": "S",
		},
		"reserved_headers_present": []string{"Accept-Encoding", "NATS-MSG-ID", "Nats-Expected-Stream", "Nats-Msg-Id",
			"Nats-Msg-Size", "Nats-Sinks-Labels", "nats-custom", "nats-msg-id", "traceparent"},
	}
	if diff := cmp.Diff(want, asMap(reserved(h))); diff != "" {
		t.Errorf("reserved mismatch (-want +got):\n%s", diff)
	}
}

func TestPayloadObject(t *testing.T) {
	for _, tt := range []struct {
		name string
		e    sink.Envelope
		want map[string]any
	}{
		{"plain", sink.Envelope{Data: []byte("abc"), Payload: sink.PayloadPresence{Present: true, OriginalSize: 3}},
			map[string]any{"present": true, "omitted": false, "omitted_reason": nil, "original_size_bytes": int64(3),
				"delivered_size_bytes": int64(3), "nats_msg_size_header": nil, "nats_msg_size_header_malformed": false}},
		{"malformed size header (Q7)", sink.Envelope{Data: []byte("abc"), Payload: sink.PayloadPresence{Present: true, OriginalSize: -1,
			SizeHeader: "x", HasSizeHeader: true, SizeHeaderMalformed: true}},
			map[string]any{"present": true, "omitted": false, "omitted_reason": nil, "original_size_bytes": nil,
				"delivered_size_bytes": int64(3), "nats_msg_size_header": "x", "nats_msg_size_header_malformed": true}},
		{"headers-only", sink.Envelope{Payload: sink.PayloadPresence{Omitted: true, OmittedReason: "headers_only", OriginalSize: 2048,
			SizeHeader: "2048", HasSizeHeader: true}},
			map[string]any{"present": false, "omitted": true, "omitted_reason": "headers_only", "original_size_bytes": int64(2048),
				"delivered_size_bytes": int64(0), "nats_msg_size_header": "2048", "nats_msg_size_header_malformed": false}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, asMap(PayloadObject(&tt.e))); diff != "" {
				t.Errorf("PayloadObject mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestJoinLabels(t *testing.T) {
	if got := JoinLabels(nil, ";"); got != nil {
		t.Errorf("JoinLabels(nil) = %v, want nil", got)
	}
	if got := JoinLabels([]string{"a", "b"}, ","); got != "a,b" {
		t.Errorf("JoinLabels = %v, want a,b", got)
	}
}

// member returns o's member key, with every Object in it turned into a map
// so that expectations can be written as map literals; key order is checked
// separately by TestBuiltObjectsAreSorted.
func member(t *testing.T, o jsonx.Object, key string) any {
	t.Helper()
	v, ok := o.Get(key)
	if !ok {
		t.Fatalf("document has no %q member", key)
	}
	return asMap(v)
}

// asMap returns v with every jsonx.Object replaced by a map[string]any and
// every pointer (which builders use to avoid boxing) by its value.
func asMap(v any) any {
	switch x := v.(type) {
	case *string:
		return *x
	case *int64:
		return *x
	case *uint64:
		return *x
	case *float64:
		return *x
	case jsonx.Object:
		m := make(map[string]any, len(x))
		for _, mem := range x {
			m[mem.Key] = asMap(mem.Value)
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, item := range x {
			out[i] = asMap(item)
		}
		return out
	}
	return v
}

// reserved is the "nats" object of h.
func reserved(h sink.Headers) jsonx.Object {
	var o [2]jsonx.Member
	return fillReserved(&o, h)
}
