package natssink

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/sink"
)

// TestGoldenEnvelope checks the envelope body of the docs/http.md message against
// testdata/envelope_golden.json. That file was derived from the normative
// file-record golden (internal/record/testdata/file_record_compact.json) by
// changing only what docs/formats.md#http-body and docs/library.md#the-sink-boundary change: schema, the
// idempotency_key member, ","-joined labels, and the ascii flavour.
func TestGoldenEnvelope(t *testing.T) {
	e := shapestest.Golden()
	c := Default()
	c.SubjectPrefix = ptr("copy")
	c.BodyFormat = "envelope"
	m, err := c.Message(e, fixedNow)
	if err != nil {
		t.Fatalf("Message: %v", err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "envelope_golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.Data, want) {
		t.Errorf("envelope body differs from the golden (-want +got):\n%s", cmp.Diff(string(want), string(m.Data)))
	}
	if m.Subject != "copy.orders.created" {
		t.Errorf("subject = %q, want copy.orders.created", m.Subject)
	}
}

func TestMessageRawAndHeaders(t *testing.T) {
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	golden := shapestest.Golden()
	mixed := env("orders.created", "ORDERS", 9, map[string][]string{
		"X-Tenant":     {"t1"},
		"nats-rollup":  {"all"},
		"NATS-TTL":     {"1s"},
		"Nats-Msg-Id":  {"m-1"},
		"TraceParent":  {traceparent},
		"tracestate":   {"k=v"},
		"Content-Type": {"application/json"},
	}, "hi")
	noStream := env("orders.created", "", 0, map[string][]string{"Nats-Msg-Id": {"m-2"}, "baggage": {"b=1"}}, "x")
	for _, tt := range []struct {
		name    string
		e       *sink.Envelope
		forward bool
		expect  *string
		want    nats.Header
	}{
		{"docs/http.md message, forward_headers", golden, true, nil, nats.Header{
			"Nats-Msg-Id":                  {"stream-sequence:ORDERS:42"},
			"Nats-Sinks-Original-Subject":  {"orders.created"},
			"Nats-Sinks-Original-Stream":   {"ORDERS"},
			"Nats-Sinks-Original-Sequence": {"42"},
			"traceparent":                  {traceparent},
		}},
		{"Nats- names dropped in any case, trace headers canonical", mixed, true, ptr("COPY"), nats.Header{
			"X-Tenant":                     {"t1"},
			"Content-Type":                 {"application/json"},
			"Nats-Msg-Id":                  {"stream-sequence:ORDERS:9"},
			"Nats-Sinks-Original-Subject":  {"orders.created"},
			"Nats-Sinks-Original-Stream":   {"ORDERS"},
			"Nats-Sinks-Original-Sequence": {"9"},
			"traceparent":                  {traceparent},
			"tracestate":                   {"k=v"},
			"Nats-Expected-Stream":         {"COPY"},
		}},
		{"forward_headers false keeps trace headers", mixed, false, nil, nats.Header{
			"Nats-Msg-Id":                  {"stream-sequence:ORDERS:9"},
			"Nats-Sinks-Original-Subject":  {"orders.created"},
			"Nats-Sinks-Original-Stream":   {"ORDERS"},
			"Nats-Sinks-Original-Sequence": {"9"},
			"traceparent":                  {traceparent},
			"tracestate":                   {"k=v"},
		}},
		{"unknown stream and sequence omitted, message-id key", noStream, true, nil, nats.Header{
			"Nats-Msg-Id":                 {"message-id:m-2"},
			"Nats-Sinks-Original-Subject": {"orders.created"},
			"baggage":                     {"b=1"},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			c.Subject = ptr("copy.all")
			c.ForwardHeaders = tt.forward
			c.ExpectedStream = tt.expect
			m, err := c.Message(tt.e, fixedNow)
			if err != nil {
				t.Fatalf("Message: %v", err)
			}
			if diff := cmp.Diff(tt.want, m.Header); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
			if !bytes.Equal(m.Data, tt.e.Data) {
				t.Errorf("raw body = %q, want the delivered bytes %q", m.Data, tt.e.Data)
			}
			if m.Subject != "copy.all" {
				t.Errorf("subject = %q, want copy.all", m.Subject)
			}
		})
	}
}

func TestMessagePermanent(t *testing.T) {
	headersOnly := env("audit.login", "", 0, map[string][]string{"Nats-Msg-Size": {"2048"}}, "")
	for _, tt := range []struct {
		name      string
		e         *sink.Envelope
		format    string
		mode      record.PayloadMode
		wantType  string
		wantError string
	}{
		{"no idempotency key", headersOnly, "raw", record.JSONOrEnvelope, sink.ValidationError,
			record.ErrNoCoreKey.Error()},
		{"json_only, text payload", env("a.b", "S", 1, nil, "not json"), "envelope", record.JSONOnly, sink.SerializationError,
			"message payload for subject 'a.b' is not valid JSON"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			c.Subject = ptr("copy")
			c.BodyFormat, c.PayloadMode = tt.format, string(tt.mode)
			_, err := c.Message(tt.e, fixedNow)
			r := sink.Failed(err)
			if r.Outcome != sink.Permanent || r.ErrorType != tt.wantType || err.Error() != tt.wantError {
				t.Errorf("Message error = %v classified %v/%s, want permanent %s %q", err, r.Outcome, r.ErrorType, tt.wantType, tt.wantError)
			}
		})
	}
}
