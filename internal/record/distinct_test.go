package record

import (
	"testing"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/sink"
)

func TestSafeDistinct(t *testing.T) {
	h := func(v string) string { return sha256Hex([]byte(v))[:16] }
	for _, tt := range []struct{ in, want string }{
		{"orders.created", "orders.created"}, // unchanged: nats-sinks' name
		{"a.x-", "a.x-" + h("a.x-")},
		{"a.é", "a-" + h("a.é")},
		{"order/1", "order_1-" + h("order/1")},
		{"", "subject-" + h("")}, // Safe's own hashed fallback
		{"../..", "subject-" + h("../..")},
	} {
		if got := SafeDistinct(tt.in, "subject"); got != tt.want {
			t.Errorf("SafeDistinct(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	seen := map[string]string{}
	for _, v := range []string{"a.x", "a.x-", "a.x_", "a.é", "a.ü", "a x", "a/x", "a_x"} {
		got := SafeDistinct(v, "subject")
		if prev, dup := seen[got]; dup {
			t.Errorf("SafeDistinct(%q) = SafeDistinct(%q) = %q", v, prev, got)
		}
		seen[got] = v
	}
}

// TestStoredIdentity: the identity read back from a stored record is the
// one Identity computes for the message it was written from.
func TestStoredIdentity(t *testing.T) {
	e := &sink.Envelope{Subject: "orders.created", Stream: "ORDERS", StreamSequence: 42, MessageID: "O-1001",
		Data: []byte(`{"a":1}`), Payload: sink.PayloadPresence{Present: true}, Headers: sink.Headers{}}
	p, err := NormalisePayload(e, JSONOrEnvelope)
	if err != nil {
		t.Fatal(err)
	}
	doc := jsonx.Marshal(FileRecord(e, p, false, e.ReceivedAt), jsonx.UTF8)
	st, ok := ParseStored(doc)
	if !ok {
		t.Fatalf("ParseStored(%s) failed", doc)
	}
	for _, strategy := range []string{StrategyStreamSequence, StrategyMessageID, StrategyPayloadSHA256, "idempotency_key"} {
		want, err := Identity(strategy, e)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := st.Identity(strategy); !ok || got != want {
			t.Errorf("stored identity (%s) = %q, %v; want %q", strategy, got, ok, want)
		}
	}
	noID, _ := ParseStored([]byte(`{"subject":"a","stream":null,"stream_sequence":null,"message_id":null}`))
	if got, ok := noID.Identity(StrategyMessageID); ok {
		t.Errorf("identity of a record without a message id = %q, want none", got)
	}
	if _, ok := ParseStored([]byte("not json")); ok {
		t.Error("ParseStored accepted text")
	}
}
