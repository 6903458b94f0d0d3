package s3sink

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/sink"
)

// message builds a message of stream S (sequence seq) on subject with
// message id id ("" = none) and body; stream false leaves out the JetStream
// metadata, so that the core key falls back to the message id.
func message(subject string, seq uint64, id, body string, stream bool) *sink.Envelope {
	m := intake.Message{Subject: subject, Data: []byte(body), Header: map[string][]string{}}
	if stream {
		m.Reply = fmt.Sprintf("$JS.ACK.S.c.1.%d.%d.1780048800123456000.0", seq, seq)
	}
	if id != "" {
		m.Header["Nats-Msg-Id"] = []string{id}
	}
	return intake.Build(m, nil, shapestest.Received)
}

// TestSanitisedKeysStayDistinct: values that k() maps to one key part used
// to share one object, and every message after the first was acknowledged
// as a duplicate without being stored. Each must get its own object, and
// a value that needed no change keeps the nats-sinks key.
func TestSanitisedKeysStayDistinct(t *testing.T) {
	for _, tt := range []struct {
		name     string
		strategy string
		batch    []*sink.Envelope
		plain    string // the key of the value that needed no change
	}{
		{"message ids", "message_id", []*sink.Envelope{
			message("t", 1, "order/1", "{}", true), message("t", 2, "order_1", "{}", true),
			message("t", 3, "order 1", "{}", true), message("t", 4, "order#1", "{}", true),
		}, "message-id/order_1.json"},
		{"payload_sha256 subjects", "payload_sha256", []*sink.Envelope{
			message("a.x", 1, "", "{}", true), message("a.x-", 2, "", "{}", true),
			message("a.x_", 3, "", "{}", true), message("a.x:", 4, "", "{}", true),
		}, "payload-sha256/a.x/44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a.json"},
		{"core keys from message ids", "idempotency_key", []*sink.Envelope{
			message("t", 0, "o:1", "{}", false), message("t", 0, "o_1", "{}", false), message("t", 0, "o_1.", "{}", false),
		}, "idempotency-key/message-id_o_1.json"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := newStore(t)
			c := st.config()
			c.KeyStrategy = tt.strategy
			s, _ := open(t, c)
			rs := s.WriteBatch(t.Context(), tt.batch)
			for i, r := range rs {
				if r.Outcome != sink.Committed {
					t.Errorf("message %d: %v %v, want Committed", i, r.Outcome, r.Err)
				}
			}
			keys := st.keys(t)
			if len(keys) != len(tt.batch) {
				t.Fatalf("%d objects for %d messages: %v", len(keys), len(tt.batch), keys)
			}
			found := false
			for _, k := range keys {
				found = found || k == tt.plain
			}
			if !found {
				t.Errorf("keys %v lack %s (a value that needed no change keeps its key)", keys, tt.plain)
			}
			rs = s.WriteBatch(t.Context(), tt.batch)
			for i, r := range rs {
				if r.Outcome != sink.Duplicate {
					t.Errorf("redelivery of message %d: %v %v, want Duplicate", i, r.Outcome, r.Err)
				}
			}
		})
	}
}

// TestExistingObjectOfAnotherMessage: an object already at a message's key
// that belongs to another message (written before keys were made distinct,
// or by a hash collision) is not a duplicate: the message is a permanent
// failure (dead-lettered) and the object is left alone. The stored identity
// is read from the object's metadata, from an envelope body when there is
// no metadata, and a payload body counts as the message's only when it
// holds the same bytes.
func TestExistingObjectOfAnotherMessage(t *testing.T) {
	for _, tt := range []struct {
		metadataMode, objectFormat string
		otherBody                  string // the other message's body
	}{
		{"object_metadata", "envelope", "{}"},
		{"sidecar", "envelope", "{}"},
		{"none", "envelope", "{}"},
		{"none", "payload", `{"other":1}`},
		{"object_metadata", "payload", "{}"},
	} {
		t.Run(tt.metadataMode+"/"+tt.objectFormat, func(t *testing.T) {
			st := newStore(t)
			c := st.config()
			c.KeyStrategy, c.MetadataMode, c.ObjectFormat = "message_id", tt.metadataMode, tt.objectFormat
			s, _ := open(t, c)
			mine := message("t", 1, "order_1", "{}", true)
			other := message("t", 2, "order-2", tt.otherBody, true)
			if rs := s.WriteBatch(t.Context(), []*sink.Envelope{other}); rs[0].Outcome != sink.Committed {
				t.Fatalf("other: %+v", rs[0])
			}
			// Move the other message's object (metadata and all) to my key.
			body, meta := st.object(t, "message-id/order-2.json")
			if _, err := st.backend.PutObject(testBucket, "message-id/order_1.json", userMetaHeaders(meta), bytes.NewReader(body), int64(len(body)), nil); err != nil {
				t.Fatal(err)
			}
			rs := s.WriteBatch(t.Context(), []*sink.Envelope{mine})
			if rs[0].Outcome != sink.Permanent || rs[0].ErrorType != sink.PermanentSinkError {
				t.Fatalf("write over another message's object = %v %q (%v), want Permanent PermanentSinkError", rs[0].Outcome, rs[0].ErrorType, rs[0].Err)
			}
			after, _ := st.object(t, "message-id/order_1.json")
			if !bytes.Equal(body, after) {
				t.Error("the other message's object changed")
			}
			// The message's own redelivery, at its own key, is a duplicate.
			rs = s.WriteBatch(t.Context(), []*sink.Envelope{other})
			if diff := cmp.Diff([]res{{Outcome: sink.Duplicate}}, summarize(rs)); diff != "" {
				t.Errorf("redelivery (-want +got):\n%s", diff)
			}
		})
	}
}

// userMetaHeaders returns the x-amz-meta-* entries of stored headers as
// gofakes3 stores them.
func userMetaHeaders(h map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range userMeta(h) {
		out["X-Amz-Meta-"+k] = v
	}
	return out
}
