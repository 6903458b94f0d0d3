package intake

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/nats-sinks/nats-sink/metadata"
	"github.com/nats-sinks/nats-sink/sink"
)

func TestNormaliseHeaders(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   map[string][]string
		want sink.Headers
	}{
		{"nil gives empty map", nil, sink.Headers{}},
		{"duplicates keep the last value", map[string][]string{"A": {"1", "2", "3"}}, sink.Headers{"A": "3"}},
		{"names with no values are skipped", map[string][]string{"A": {}}, sink.Headers{}},
		{"names and values trimmed", map[string][]string{" \tX-Key\r\n": {"\v value \f"}}, sink.Headers{"X-Key": "value"}},
		{"interior value whitespace kept", map[string][]string{"K": {" a  b "}}, sink.Headers{"K": "a  b"}},
		{"non-ASCII whitespace is not trimmed", map[string][]string{"K": {"\u00a0v\u00a0"}}, sink.Headers{"K": "\u00a0v\u00a0"}},
		{"invalid names dropped", map[string][]string{
			"":        {"empty"},
			"   ":     {"blank"},
			"Ünï":     {"non-ascii"},
			"a b":     {"space"},
			"a\x01b":  {"control"},
			"a\x7fb":  {"del"},
			"ok-Name": {"kept"},
		}, sink.Headers{"ok-Name": "kept"}},
		{"names differing in case are separate", map[string][]string{"a": {"1"}, "A": {"2"}}, sink.Headers{"a": "1", "A": "2"}},
		{"trimmed collision: untrimmed spelling wins", map[string][]string{"K": {"exact"}, " K": {"padded"}, "K ": {"padded2"}},
			sink.Headers{"K": "exact"}},
		{"trimmed collision without exact: greatest raw wins", map[string][]string{" K": {"space"}, "\tK": {"tab"}},
			sink.Headers{"K": "space"}},
		{"e2 82 is one U+FFFD", map[string][]string{"K": {"a\xe2\x82b"}}, sink.Headers{"K": "a\ufffdb"}},
		{"ff is one U+FFFD", map[string][]string{"K": {"\xff"}}, sink.Headers{"K": "\ufffd"}},
		{"f0 9f 98 is one U+FFFD", map[string][]string{"K": {"\xf0\x9f\x98"}}, sink.Headers{"K": "\ufffd"}},
		{"each stray continuation byte is one U+FFFD", map[string][]string{"K": {"\x80\x80"}}, sink.Headers{"K": "\ufffd\ufffd"}},
		{"surrogate encoding ed a0 80 is three", map[string][]string{"K": {"\xed\xa0\x80"}}, sink.Headers{"K": "\ufffd\ufffd\ufffd"}},
		{"overlong e0 80 80 is three", map[string][]string{"K": {"\xe0\x80\x80"}}, sink.Headers{"K": "\ufffd\ufffd\ufffd"}},
		{"truncated then valid", map[string][]string{"K": {"\xf0\x9f\x98\xf0\x9f\x98\x80"}}, sink.Headers{"K": "\ufffd😀"}},
		{"f4 90 is two", map[string][]string{"K": {"\xf4\x90\x80\x80"}}, sink.Headers{"K": "\ufffd\ufffd\ufffd\ufffd"}},
		{"c0 and c1 never lead", map[string][]string{"K": {"\xc0\xaf"}}, sink.Headers{"K": "\ufffd\ufffd"}},
		{"valid multibyte kept", map[string][]string{"K": {"café €😀"}}, sink.Headers{"K": "café €😀"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := NormaliseHeaders(tt.in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("NormaliseHeaders(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestParseAckSubject(t *testing.T) {
	ts := time.Unix(0, 1780048800123456000).UTC()
	for _, tt := range []struct {
		name   string
		reply  string
		want   Ack
		wantOK bool
	}{
		{"v1", "$JS.ACK.ORDERS.orders-file.1.42.7.1780048800123456000.3",
			Ack{Stream: "ORDERS", Consumer: "orders-file", Delivered: 1, StreamSequence: 42, ConsumerSequence: 7, Timestamp: ts, Pending: 3}, true},
		{"v2 with random token", "$JS.ACK.hub.ACCHASH.ORDERS.c.2.42.7.1780048800123456000.0.abcdef",
			Ack{Domain: "hub", Stream: "ORDERS", Consumer: "c", Delivered: 2, StreamSequence: 42, ConsumerSequence: 7, Timestamp: ts, Pending: 0}, true},
		{"v2 domain underscore is none", "$JS.ACK._.ACC.S.c.1.5.6.1780048800123456000.9.r",
			Ack{Stream: "S", Consumer: "c", Delivered: 1, StreamSequence: 5, ConsumerSequence: 6, Timestamp: ts, Pending: 9}, true},
		{"v2 eleven tokens accepted like nats.go", "$JS.ACK._.ACC.S.c.1.5.6.1780048800123456000.9",
			Ack{Stream: "S", Consumer: "c", Delivered: 1, StreamSequence: 5, ConsumerSequence: 6, Timestamp: ts, Pending: 9}, true},
		{"v2 extra tokens ignored", "$JS.ACK._.ACC.S.c.1.5.6.1780048800123456000.9.r.more",
			Ack{Stream: "S", Consumer: "c", Delivered: 1, StreamSequence: 5, ConsumerSequence: 6, Timestamp: ts, Pending: 9}, true},
		{"invalid numbers are unknown", "$JS.ACK.S.c.x.-1.+2.1e9.-3",
			Ack{Stream: "S", Consumer: "c", Pending: -1}, true},
		{"overflow is unknown", "$JS.ACK.S.c.18446744073709551616.18446744073709551615.1.9223372036854775808.9223372036854775808",
			Ack{Stream: "S", Consumer: "c", StreamSequence: 18446744073709551615, ConsumerSequence: 1, Pending: -1}, true},
		{"empty tokens are unknown", "$JS.ACK.S.c.....",
			Ack{Stream: "S", Consumer: "c", Pending: -1}, true},
		{"ten tokens rejected", "$JS.ACK.b.S.c.1.5.6.7.8", Ack{Pending: -1}, false},
		{"eight tokens rejected", "$JS.ACK.S.c.1.5.6.7", Ack{Pending: -1}, false},
		{"not an ack subject", "_INBOX.abc.def.1.2.3.4.5.6", Ack{Pending: -1}, false},
		{"empty", "", Ack{Pending: -1}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseAckSubject(tt.reply)
			if ok != tt.wantOK {
				t.Errorf("ParseAckSubject(%q) ok = %v, want %v", tt.reply, ok, tt.wantOK)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseAckSubject(%q) mismatch (-want +got):\n%s", tt.reply, diff)
			}
		})
	}
}

// TestPresence covers every row of docs/headers-only.md.
func TestPresence(t *testing.T) {
	for _, tt := range []struct {
		name string
		h    sink.Headers
		n    int
		want sink.PayloadPresence
	}{
		{"header absent", nil, 51, sink.PayloadPresence{Present: true, OriginalSize: 51}},
		{"header absent, empty body", nil, 0, sink.PayloadPresence{Present: true, OriginalSize: 0}},
		{"valid header, empty body: headers-only", sink.Headers{"Nats-Msg-Size": "2048"}, 0,
			sink.PayloadPresence{Omitted: true, OmittedReason: "headers_only", OriginalSize: 2048, SizeHeader: "2048", HasSizeHeader: true}},
		{"case-insensitive, signed, whitespace", sink.Headers{"nats-msg-size": "\u00a0+12 "}, 0,
			sink.PayloadPresence{Omitted: true, OmittedReason: "headers_only", OriginalSize: 12, SizeHeader: "\u00a0+12 ", HasSizeHeader: true}},
		{"minus zero is valid", sink.Headers{"Nats-Msg-Size": "-0"}, 0,
			sink.PayloadPresence{Omitted: true, OmittedReason: "headers_only", OriginalSize: 0, SizeHeader: "-0", HasSizeHeader: true}},
		{"valid header, body delivered", sink.Headers{"Nats-Msg-Size": "10"}, 4,
			sink.PayloadPresence{Present: true, OriginalSize: 10, SizeHeader: "10", HasSizeHeader: true}},
		{"not an integer (Q7)", sink.Headers{"Nats-Msg-Size": "12kb"}, 0,
			sink.PayloadPresence{Present: true, OriginalSize: -1, SizeHeader: "12kb", HasSizeHeader: true, SizeHeaderMalformed: true}},
		{"negative (Q7)", sink.Headers{"Nats-Msg-Size": "-5"}, 3,
			sink.PayloadPresence{Present: true, OriginalSize: -1, SizeHeader: "-5", HasSizeHeader: true, SizeHeaderMalformed: true}},
		{"empty value", sink.Headers{"Nats-Msg-Size": ""}, 0,
			sink.PayloadPresence{Present: true, OriginalSize: -1, HasSizeHeader: true, SizeHeaderMalformed: true}},
		{"float", sink.Headers{"Nats-Msg-Size": "1.0"}, 0,
			sink.PayloadPresence{Present: true, OriginalSize: -1, SizeHeader: "1.0", HasSizeHeader: true, SizeHeaderMalformed: true}},
		{"beyond int64", sink.Headers{"Nats-Msg-Size": "9223372036854775808"}, 0,
			sink.PayloadPresence{Present: true, OriginalSize: -1, SizeHeader: "9223372036854775808", HasSizeHeader: true, SizeHeaderMalformed: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Presence(tt.h, tt.n)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Presence(%q, %d) mismatch (-want +got):\n%s", tt.h, tt.n, diff)
			}
		})
	}
}

func TestBuild(t *testing.T) {
	now := time.Date(2026, 5, 29, 12, 0, 0, 250123999, time.FixedZone("x", 2*3600))
	body := []byte(`{"order_id":"O-1001","amount":42.50,"note":"café"}`)
	got := Build(Message{
		Subject: "orders.created",
		Reply:   "$JS.ACK.ORDERS.orders-file.1.42.7.1780048800123456000.3",
		Data:    body,
		Header: map[string][]string{
			"Nats-Msg-Id":         {"O-1001"},
			"Nats-Sinks-Priority": {"high"},
			"Nats-Sinks-Labels":   {"billing; eu ;billing"},
			"Nats-Time-Stamp":     {"2026-05-29T09:59:59.5Z"},
		},
	}, nil, now)
	want := &sink.Envelope{
		Subject: "orders.created",
		Data:    body,
		Headers: sink.Headers{
			"Nats-Msg-Id":         "O-1001",
			"Nats-Sinks-Priority": "high",
			"Nats-Sinks-Labels":   "billing; eu ;billing",
			"Nats-Time-Stamp":     "2026-05-29T09:59:59.5Z",
		},
		Stream: "ORDERS", Consumer: "orders-file",
		StreamSequence: 42, ConsumerSequence: 7, Pending: 3,
		Timestamp:     time.Unix(0, 1780048800123456000).UTC(),
		DeliveryCount: 1,
		MessageID:     "O-1001",
		Priority:      "high",
		Labels:        []string{"billing", "eu"},
		Reply:         "$JS.ACK.ORDERS.orders-file.1.42.7.1780048800123456000.3",
		Payload:       sink.PayloadPresence{Present: true, OriginalSize: 51},
		ReceivedAt:    time.Date(2026, 5, 29, 10, 0, 0, 250123000, time.UTC),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Build mismatch (-want +got):\n%s", diff)
	}
}

func TestBuildNoJetStream(t *testing.T) {
	got := Build(Message{Subject: "audit.login", Reply: "_INBOX.x", Header: map[string][]string{"Nats-Msg-Size": {"2048"}}},
		&metadata.Resolver{Classification: metadata.Field{Default: "internal"}}, time.Unix(0, 0))
	want := &sink.Envelope{
		Subject:        "audit.login",
		Headers:        sink.Headers{"Nats-Msg-Size": "2048"},
		Pending:        -1,
		Classification: "internal",
		Labels:         []string{},
		Reply:          "_INBOX.x",
		Payload: sink.PayloadPresence{Omitted: true, OmittedReason: "headers_only", OriginalSize: 2048,
			SizeHeader: "2048", HasSizeHeader: true},
		ReceivedAt: time.Unix(0, 0).UTC(),
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Build mismatch (-want +got):\n%s", diff)
	}
	if r, known := got.Redelivered(); known {
		t.Errorf("Redelivered() = %v, known; want unknown", r)
	}
}

func TestMessageID(t *testing.T) {
	for _, tt := range []struct {
		name string
		h    sink.Headers
		want string
	}{
		{"none", sink.Headers{}, ""},
		{"Nats-Msg-Id first", sink.Headers{"message-id": "c", "Nats-Message-Id": "b", "Nats-Msg-Id": "a"}, "a"},
		{"empty values skipped", sink.Headers{"Nats-Msg-Id": "", "Nats-Message-Id": "b"}, "b"},
		{"case-insensitive", sink.Headers{"MESSAGE-ID": "c"}, "c"},
		{"exact spelling preferred", sink.Headers{"nats-msg-id": "low", "Nats-Msg-Id": "exact", "NATS-MSG-ID": "up"}, "exact"},
		{"else byte-wise smallest name", sink.Headers{"nats-msg-id": "low", "NATS-MSG-ID": "up"}, "up"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := messageID(tt.h); got != tt.want {
				t.Errorf("messageID(%q) = %q, want %q", tt.h, got, tt.want)
			}
		})
	}
}
