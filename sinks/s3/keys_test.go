package s3sink

import (
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/sink"
)

func TestKeyPart(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"ORDERS", "ORDERS"},
		{"O 1001/é", "O_1001_é"},
		{"stream-sequence:ORDERS:42", "stream-sequence_ORDERS_42"},
		{"a//b", "a__b"}, // one '_' per character, not per run
		{"..hidden.", "hidden"},
		{"-_x_-", "x"},
		{"", "value"},
		{"///", "value"},
		{"日本語123", "日本語123"},
		{"e\u0301", "e"},    // a combining mark is not a letter: e_ → e
		{"a\xffb", "a_b"},   // invalid UTF-8: one '_' per byte
		{"x y\tz", "x_y_z"}, // whitespace
		{"٣٤", "٣٤"},        // Arabic-Indic digits are numbers
		{"a.b-c_d", "a.b-c_d"},
	} {
		if got := keyPart(tt.in); got != tt.want {
			t.Errorf("keyPart(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestObjectKeys checks the examples of docs/formats.md#s3-objects and every strategy.
func TestObjectKeys(t *testing.T) {
	e := intake.Build(intake.Message{
		Subject: "orders.created",
		Reply:   "$JS.ACK.ORDERS.c.1.42.7.1780048800123456000.0",
		Data:    []byte("hello world"),
		Header:  map[string][]string{"Nats-Msg-Id": {"O 1001/é"}},
	}, nil, shapestest.Received)
	for _, tt := range []struct {
		strategy  string
		prefix    *string
		keyPrefix *string
		want      string
	}{
		{"idempotency_key", ptr("nats/orders"), nil, "nats/orders/idempotency-key/stream-sequence_ORDERS_42.json"},
		{"stream_sequence", ptr("nats/orders"), nil, "nats/orders/stream-sequence/ORDERS/42.json"},
		// k() changed the id: a hash of the raw id keeps it distinct.
		{"message_id", ptr("nats/orders"), nil, "nats/orders/message-id/O_1001_é-7cae18c3c4b3f2ae.json"},
		{"idempotency_key", nil, ptr("prod"), "prod:idempotency-key/stream-sequence_ORDERS_42.json"},
		{"payload_sha256", ptr("p"), ptr("k"), "p/k:payload-sha256/orders.created/b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9.json"},
	} {
		c := Default()
		c.KeyStrategy, c.Prefix, c.KeyPrefix = tt.strategy, tt.prefix, tt.keyPrefix
		got, err := c.objectKey(e)
		if err != nil || got != tt.want {
			t.Errorf("objectKey(%s, prefix %v, key_prefix %v) = %q, %v; want %q", tt.strategy, deref(tt.prefix), deref(tt.keyPrefix), got, err, tt.want)
		}
	}
}

func deref(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// TestKeyMaterialMissing checks the permanent errors of docs/formats.md#s3-objects and
// their DLQ error types.
func TestKeyMaterialMissing(t *testing.T) {
	noMeta := intake.Build(intake.Message{Subject: "a.b", Data: []byte("x")}, nil, shapestest.Received)
	headersOnly := intake.Build(intake.Message{Subject: "a.b", Header: map[string][]string{"Nats-Msg-Size": {"10"}}}, nil, shapestest.Received)
	for _, tt := range []struct {
		strategy  string
		e         *sink.Envelope
		errorType string
	}{
		{"stream_sequence", noMeta, sink.SerializationError},
		{"message_id", noMeta, sink.SerializationError},
		{"payload_sha256", headersOnly, sink.SerializationError},
		{"idempotency_key", headersOnly, sink.ValidationError}, // the core key's own error
	} {
		c := Default()
		c.KeyStrategy = tt.strategy
		_, err := c.objectKey(tt.e)
		r := sink.Failed(err)
		if r.Outcome != sink.Permanent || r.ErrorType != tt.errorType {
			t.Errorf("%s with missing material = %v %q (%v), want Permanent %s", tt.strategy, r.Outcome, r.ErrorType, err, tt.errorType)
		}
	}
	// The core key falls back to the payload hash when it can.
	c := Default()
	if k, err := c.objectKey(noMeta); err != nil || !strings.HasPrefix(k, "idempotency-key/payload-sha256_a.b_") {
		t.Errorf("core key without stream or id = %q, %v; want the payload-sha256 fallback", k, err)
	}
}

func TestSidecarKeys(t *testing.T) {
	for _, tt := range []struct {
		objSuffix, sideSuffix string
		messageID             string
		wantSidecar           string
		collides              bool
	}{
		{".json", ".metadata.json", "42", "message-id/42.metadata.json", false},
		// "42.metadata" would own the sidecar key of "42".
		{".json", ".metadata.json", "42.metadata", "message-id/42.metadata.metadata.json", true},
		{".json.gz", ".meta.json", "42", "message-id/42.meta.json", false},
		// Object suffix ends with the sidecar suffix: "42.data"'s sidecar
		// would be message "42"'s object.
		{".data.json", ".json", "42", "message-id/42.json", false},
		{".data.json", ".json", "42.data", "message-id/42.data.json", true},
	} {
		c := Default()
		c.KeyStrategy, c.ObjectSuffix, c.SidecarSuffix = "message_id", tt.objSuffix, tt.sideSuffix
		e := intake.Build(intake.Message{Subject: "a", Data: []byte("x"), Header: map[string][]string{"Nats-Msg-Id": {tt.messageID}}}, nil, shapestest.Received)
		key, err := c.objectKey(e)
		if err != nil {
			t.Fatal(err)
		}
		side := c.sidecarKey(key)
		if side != tt.wantSidecar {
			t.Errorf("sidecarKey(%q) = %q, want %q", key, side, tt.wantSidecar)
		}
		err = c.checkSidecarCollision(key, side)
		if got := err != nil; got != tt.collides {
			t.Errorf("%s/%s id %q: collision error %v, want collision %v", tt.objSuffix, tt.sideSuffix, tt.messageID, err, tt.collides)
		}
		if err != nil {
			if r := sink.Failed(err); r.Outcome != sink.Permanent || r.ErrorType != sink.SerializationError {
				t.Errorf("collision = %+v, want Permanent SerializationError", r)
			}
		}
	}
}
