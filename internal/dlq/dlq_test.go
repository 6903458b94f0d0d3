package dlq

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/sink"
)

var failedAt = time.Date(2026, 5, 29, 10, 0, 1, 234567890, time.UTC)

func headersOnlyEnvelope() *sink.Envelope {
	return intake.Build(intake.Message{
		Subject: "audit.login",
		Header:  map[string][]string{"Nats-Msg-Size": {"2048"}},
	}, nil, time.Date(2026, 5, 29, 10, 0, 0, 0, time.UTC))
}

func golden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGoldenBodies(t *testing.T) {
	for _, tt := range []struct {
		file string
		e    *sink.Envelope
		f    Failure
		o    Options
	}{
		{"dlq_file_fail.json", shapestest.Golden(),
			Failure{ErrorType: sink.PermanentSinkError, Error: "file sink destination already exists: ORDERS-00000000000000000042.json"},
			Options{IncludePayload: true, IncludeHeaders: true, IncludeError: true, Consumer: "orders-file"}},
		{"dlq_headers_only.json", headersOnlyEnvelope(),
			Failure{ErrorType: sink.ValidationError, Error: "payload-sha256 idempotency fallback is unavailable because the original payload bytes were omitted"},
			Options{IncludePayload: true, Consumer: "audit"}},
	} {
		t.Run(tt.file, func(t *testing.T) {
			got := Build(tt.e, tt.f, tt.o, failedAt).Body
			if want := golden(t, tt.file); !bytes.Equal(got, want) {
				t.Errorf("DLQ body differs from docs/formats.md#dlq-body (-want +got):\n%s", cmp.Diff(string(want), string(got)))
			}
		})
	}
}

func TestHeaders(t *testing.T) {
	redelivered := shapestest.Golden()
	redelivered.DeliveryCount = 4
	redelivered.Headers = sink.Headers{"TraceParent": "tp", "tracestate": "ts", "BAGGAGE": "k=v", "other": "x"}

	for _, tt := range []struct {
		name      string
		e         *sink.Envelope
		f         Failure
		o         Options
		want      map[string][]string
		wantMsgID string
	}{
		{"golden message", shapestest.Golden(),
			Failure{ErrorType: sink.PermanentSinkError, Error: "file sink destination already exists: ORDERS-00000000000000000042.json"},
			Options{IncludeError: true, Consumer: "orders-file"},
			map[string][]string{
				"Nats-Sinks-Error-Type":       {"PermanentSinkError"},
				"Nats-Sinks-Original-Subject": {"orders.created"},
				"Nats-Msg-Id":                 {"nats-sinks-dlq:orders-file:stream-sequence:ORDERS:42"},
				"x-dead-letter-reason":        {"PermanentSinkError: file sink destination already exists: ORDERS-00000000000000000042.json"},
				"x-original-subject":          {"orders.created"},
				"x-original-stream":           {"ORDERS"},
				"x-failed-at":                 {"2026-05-29T10:00:01.234Z"},
				"x-delivery-count":            {"1"},
				"traceparent":                 {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
			}, "nats-sinks-dlq:orders-file:stream-sequence:ORDERS:42"},
		{"include_error false: reason is the type; trace headers in any case", redelivered,
			Failure{ErrorType: sink.SerializationError, Error: "secret detail"}, Options{Consumer: "c"},
			map[string][]string{
				"Nats-Sinks-Error-Type":       {"SerializationError"},
				"Nats-Sinks-Original-Subject": {"orders.created"},
				"Nats-Msg-Id":                 {"nats-sinks-dlq:c:stream-sequence:ORDERS:42"},
				"x-dead-letter-reason":        {"SerializationError"},
				"x-original-subject":          {"orders.created"},
				"x-original-stream":           {"ORDERS"},
				"x-failed-at":                 {"2026-05-29T10:00:01.234Z"},
				"x-delivery-count":            {"4"},
				"traceparent":                 {"tp"},
				"tracestate":                  {"ts"},
				"baggage":                     {"k=v"},
			}, "nats-sinks-dlq:c:stream-sequence:ORDERS:42"},
		{"no core key, stream or delivery count: omitted", headersOnlyEnvelope(),
			Failure{ErrorType: sink.ValidationError, Error: "x"}, Options{IncludeError: true, Consumer: "c"},
			map[string][]string{
				"Nats-Sinks-Error-Type":       {"ValidationError"},
				"Nats-Sinks-Original-Subject": {"audit.login"},
				"x-dead-letter-reason":        {"ValidationError: x"},
				"x-original-subject":          {"audit.login"},
				"x-failed-at":                 {"2026-05-29T10:00:01.234Z"},
			}, ""},
		{"empty error text: reason is the type alone", headersOnlyEnvelope(),
			Failure{ErrorType: sink.MaxDeliveriesExceeded, Error: ""}, Options{IncludeError: true},
			map[string][]string{
				"Nats-Sinks-Error-Type":       {"MaxDeliveriesExceeded"},
				"Nats-Sinks-Original-Subject": {"audit.login"},
				"x-dead-letter-reason":        {"MaxDeliveriesExceeded"},
				"x-original-subject":          {"audit.login"},
				"x-failed-at":                 {"2026-05-29T10:00:01.234Z"},
			}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := Build(tt.e, tt.f, tt.o, failedAt)
			if diff := cmp.Diff(tt.want, m.Header); diff != "" {
				t.Errorf("headers mismatch (-want +got):\n%s", diff)
			}
			if m.MsgID != tt.wantMsgID {
				t.Errorf("MsgID = %q, want %q", m.MsgID, tt.wantMsgID)
			}
		})
	}
}

func TestBodyOptions(t *testing.T) {
	e := shapestest.Golden()
	f := Failure{ErrorType: sink.PermanentSinkError, Error: "boom"}
	for _, tt := range []struct {
		name        string
		o           Options
		has, hasNot []string
	}{
		{"nothing optional", Options{}, nil, []string{`"error"`, `"error_type"`, `"headers"`, `"payload_base64"`, `"payload_unavailable_reason"`}},
		{"error only", Options{IncludeError: true}, []string{`"error":"boom"`, `"error_type":"PermanentSinkError"`}, []string{`"headers"`, `"payload_base64"`}},
		{"payload only", Options{IncludePayload: true}, []string{`"payload_base64":"`}, []string{`"error"`, `"headers"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := string(Build(e, f, tt.o, failedAt).Body)
			for _, s := range tt.has {
				if !strings.Contains(body, s) {
					t.Errorf("body lacks %s: %s", s, body)
				}
			}
			for _, s := range tt.hasNot {
				if strings.Contains(body, s) {
					t.Errorf("body has %s: %s", s, body)
				}
			}
		})
	}
}

func TestBodyIsASCII(t *testing.T) {
	e := shapestest.Golden()
	e.Headers = sink.Headers{"X": "café 😀"}
	body := Build(e, Failure{ErrorType: sink.PermanentSinkError, Error: "é"}, Options{IncludeHeaders: true, IncludeError: true}, failedAt).Body
	for i, c := range body {
		if c >= 0x80 {
			t.Fatalf("body byte %d is %#x; want ascii flavour: %s", i, c, body)
		}
	}
	if !bytes.Contains(body, []byte(`"X":"caf\u00e9 \ud83d\ude00"`)) {
		t.Errorf("body does not escape non-ASCII headers: %s", body)
	}
}

func TestReason(t *testing.T) {
	long := strings.Repeat("a", 511) + "é" // 'é' would end at byte 513
	for _, tt := range []struct {
		name, in, want string
	}{
		{"plain", "ValidationError: x", "ValidationError: x"},
		{"controls become spaces", "a\r\nb\tc\x00d\x7fe\u0085f", "a  b c d e f"},
		{"invalid UTF-8 becomes U+FFFD", "a\xffb", "a\ufffdb"},
		{"cut on a character boundary", long, strings.Repeat("a", 511)},
		{"exactly 512 kept", strings.Repeat("b", 510) + "é", strings.Repeat("b", 510) + "é"},
		{"long ASCII cut at 512", strings.Repeat("c", 600), strings.Repeat("c", 512)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Reason(tt.in)
			if got != tt.want {
				t.Errorf("Reason(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if len(got) > 512 || !utf8.ValidString(got) {
				t.Errorf("Reason(%q) is %d bytes, valid UTF-8 %v", tt.in, len(got), utf8.ValidString(got))
			}
		})
	}
}

// TestBodyIsSorted checks that the body is built in canonical key order for
// every combination of optional members, so the encoder never sorts it.
func TestBodyIsSorted(t *testing.T) {
	f := Failure{ErrorType: sink.PermanentSinkError, Error: "boom"}
	for _, e := range []*sink.Envelope{shapestest.Golden(), headersOnlyEnvelope(), {Subject: "s", Pending: -1}} {
		key, err := record.CoreKey(e)
		for _, o := range []Options{
			{},
			{IncludePayload: true, IncludeHeaders: true, IncludeError: true},
			{IncludePayload: true},
			{IncludeError: true},
			{IncludeHeaders: true},
		} {
			b := buildBody(e, f, o, key, err == nil)
			if !b.Sorted() {
				keys := make([]string, len(b))
				for i, m := range b {
					keys[i] = m.Key
				}
				t.Errorf("body keys for %+v are not in order: %q", o, keys)
			}
			if p, _ := b.Get("payload"); !p.(jsonx.Object).Sorted() {
				t.Errorf("payload object is not in key order")
			}
		}
	}
}
