package runner

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/sink"
)

// recordSink stores file-sink records (docs/formats.md#file-records) in memory, keyed by
// the file stem of its filename strategy, as the file sink names its files:
// stream_sequence everywhere, payload_sha256 for subjects under
// orders.hashed.
type recordSink struct {
	mu    sync.Mutex
	files map[string][]byte
}

func (s *recordSink) Type() string               { return "file-like" }
func (s *recordSink) Stop(context.Context) error { return nil }

func (s *recordSink) WriteBatch(ctx context.Context, b []*sink.Envelope) []sink.Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.files == nil {
		s.files = map[string][]byte{}
	}
	out := make([]sink.Result, len(b))
	for i, e := range b {
		strategy := record.StrategyStreamSequence
		if e.Subject == "orders.hashed" {
			strategy = record.StrategyPayloadSHA256
		}
		stem, err := record.FileStem(strategy, e)
		if err != nil {
			out[i] = sink.Failed(err)
			continue
		}
		p, err := record.NormalisePayload(e, record.JSONOrEnvelope)
		if err != nil {
			out[i] = sink.Failed(err)
			continue
		}
		if _, ok := s.files[stem]; ok {
			out[i] = sink.Result{Outcome: sink.Duplicate}
			continue
		}
		s.files[stem] = jsonx.Marshal(record.FileRecord(e, p, true, time.Now()), jsonx.UTF8)
		out[i] = sink.Ok
	}
	return out
}

func (s *recordSink) get(stem string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.files[stem]
}

// TestHeadersOnlyEndToEnd runs a real headers_only consumer: records carry
// the payload-presence block and the empty-body marker, the payload-hash
// file name is refused for an omitted body and the message dead-lettered
// with payload_unavailable_reason instead of a payload, nothing is
// encrypted, and every message is acknowledged once durable.
func TestHeadersOnlyEndToEnd(t *testing.T) {
	e := newEnv(t, true)
	c := e.consumer(ConsumerSpec{HeadersOnly: new(true)})
	if !e.info(c).Config.HeadersOnly {
		t.Fatal("consumer was not created headers_only")
	}
	bodies := map[string][]byte{
		"orders.created": []byte(`{"order_id":"O-1","secret":"card"}`),
		"orders.hashed":  make([]byte, 2048),
	}
	natstest.Publish(t, e.js, "orders.created", bodies["orders.created"], nats.Header{"Nats-Msg-Id": {"O-1"}})
	natstest.Publish(t, e.js, "orders.hashed", bodies["orders.hashed"], nil)
	natstest.Publish(t, e.js, "orders.created", []byte("x"), nil)

	var encrypted atomic.Int64
	rs := &recordSink{}
	m := newMetrics(t)
	start(t, &Runner{Consumer: c, JetStream: e.js, Conn: e.nc, Sink: rs, Metrics: m, DeadLetter: dlqOptions(),
		Encrypt: func(*sink.Envelope) error { encrypted.Add(1); return nil }})
	e.waitAcked(c, 3)

	if got := encrypted.Load(); got != 0 {
		t.Errorf("Encrypt called %d times, want 0 (omitted payloads are never encrypted)", got)
	}
	for _, tt := range []struct {
		stem string
		size int
	}{
		{"ORDERS-00000000000000000001", len(bodies["orders.created"])},
		{"ORDERS-00000000000000000003", 1},
	} {
		raw := rs.get(tt.stem)
		if raw == nil {
			t.Errorf("no record %s", tt.stem)
			continue
		}
		var rec struct {
			Payload  any `json:"payload"`
			Metadata struct {
				Payload map[string]any `json:"payload"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(raw, &rec); err != nil {
			t.Fatal(err)
		}
		wantPayload := map[string]any{
			"present": false, "omitted": true, "omitted_reason": "headers_only",
			"original_size_bytes": float64(tt.size), "delivered_size_bytes": 0.0,
			"nats_msg_size_header": strconv.Itoa(tt.size), "nats_msg_size_header_malformed": false,
		}
		if diff := cmp.Diff(wantPayload, rec.Metadata.Payload); diff != "" {
			t.Errorf("%s metadata.payload mismatch (-want +got):\n%s", tt.stem, diff)
		}
		marker := map[string]any{"_nats_sinks": map[string]any{"payload_encoding": "utf-8", "payload_envelope_version": 1.0,
			"payload_format": "text", "sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "size_bytes": 0.0}, "payload": ""}
		if diff := cmp.Diff(marker, rec.Payload); diff != "" {
			t.Errorf("%s payload is not the empty-body marker (-want +got):\n%s", tt.stem, diff)
		}
	}

	dead := e.dlqMessages()
	if len(dead) != 1 {
		t.Fatalf("DLQ holds %d messages, want 1 (the payload_sha256 one)", len(dead))
	}
	var body map[string]any
	if err := json.Unmarshal(dead[0].Data, &body); err != nil {
		t.Fatal(err)
	}
	if _, ok := body["payload_base64"]; ok {
		t.Errorf("DLQ body has payload_base64 for an omitted payload")
	}
	want := map[string]any{
		"stream_sequence": 2.0, "error_type": "PermanentSinkError",
		"payload_unavailable_reason": "headers_only", "idempotency_key": "stream-sequence:ORDERS:2",
	}
	for k, v := range want {
		if body[k] != v {
			t.Errorf("DLQ body %s = %v, want %v", k, body[k], v)
		}
	}
	if p, _ := body["payload"].(map[string]any); p["omitted"] != true || p["original_size_bytes"] != 2048.0 {
		t.Errorf("DLQ body payload = %v, want omitted with original_size_bytes 2048", body["payload"])
	}
	if a, d := m.MessagesAcked.Value(), m.MessagesDLQ.Value(); a != 3 || d != 1 {
		t.Errorf("acked, dead-lettered = %d, %d, want 3, 1", a, d)
	}
}
