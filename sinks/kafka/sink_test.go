package kafkasink

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/telemetry"
)

// orderMessage is the message of docs/formats.md#file-records with trace headers, a
// custom header and a header that tries to spoof the sink's own.
func orderMessage() *sink.Envelope {
	e := env("orders.created", "ORDERS", 42, map[string][]string{
		"Nats-Msg-Id":        {"O-1001"},
		"Nats-Time-Stamp":    {"2026-05-29T09:59:59.5Z"},
		"X-Tenant":           {"acme"},
		"traceparent":        {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		"Tracestate":         {"vendor=1"},
		"baggage":            {"user=42"},
		"Nats-Sinks-Subject": {"spoofed.subject"},
	}, `{"order_id":"O-1001","amount":42.50,"note":"café"}`)
	e.Priority, e.Labels = "high", []string{"billing", "eu"}
	return e
}

// TestRecordOnTheWire produces one message and reads it back from the
// broker: topic, key, headers in order, timestamp and the envelope value.
func TestRecordOnTheWire(t *testing.T) {
	kc := cluster(t, []string{"orders"})
	c := testConfig(kc, "orders")
	s := open(t, c)
	e := orderMessage()
	if got := outcomes(s.WriteBatch(t.Context(), []*sink.Envelope{e})); !slices.Equal(got, []sink.Outcome{sink.Committed}) {
		t.Fatalf("WriteBatch = %v, want committed", got)
	}
	rs := consume(t, c.Brokers, "orders")
	if len(rs) != 1 {
		t.Fatalf("%d records in the topic, want 1", len(rs))
	}
	r := rs[0]
	if string(r.Key) != "stream-sequence:ORDERS:42" {
		t.Errorf("key = %q, want stream-sequence:ORDERS:42", r.Key)
	}
	var hs []string
	for _, h := range r.Headers {
		hs = append(hs, h.Key+"="+string(h.Value))
	}
	want := []string{
		"Nats-Msg-Id=O-1001", "Nats-Time-Stamp=2026-05-29T09:59:59.5Z", "X-Tenant=acme",
		"nats-sinks-subject=orders.created", "nats-sinks-stream=ORDERS", "nats-sinks-stream-sequence=42",
		"nats-sinks-idempotency-key=stream-sequence:ORDERS:42",
		"traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate=vendor=1", "baggage=user=42",
	}
	if diff := cmp.Diff(want, hs); diff != "" {
		t.Errorf("record headers (-want +got):\n%s", diff)
	}
	// record_timestamp jetstream: the creation time from Nats-Time-Stamp.
	if want := time.Date(2026, 5, 29, 9, 59, 59, 500e6, time.UTC); !r.Timestamp.Equal(want) {
		t.Errorf("timestamp = %v, want %v", r.Timestamp.UTC(), want)
	}
	// The value is canonical utf8 JSON: re-encoding the parsed document
	// gives the same bytes (sorted keys, no escaping of é).
	v, err := jsonx.ParseSorted(r.Value)
	if err != nil {
		t.Fatalf("value is not JSON: %v", err)
	}
	if re := jsonx.Marshal(v, jsonx.UTF8); string(re) != string(r.Value) {
		t.Errorf("value is not canonical JSON:\n got %s\nwant %s", r.Value, re)
	}
	doc, _ := jsonx.Parse(r.Value)
	m := doc.(map[string]any)
	for key, want := range map[string]string{
		"schema": `"nats_sinks.kafka.message.v1"`, "schema_version": "1", "idempotency_key": `"stream-sequence:ORDERS:42"`,
		"labels": `"billing;eu"`, "labels_list": `["billing","eu"]`, "priority": `"high"`, "classification": "null",
		"subject": `"orders.created"`, "stream": `"ORDERS"`, "stream_sequence": "42", "consumer": `"c"`,
		"consumer_sequence": "42", "message_id": `"O-1001"`, "custody": "null", "mission_metadata": "null",
		"security_labels": "null", "payload": `{"amount":42.5,"note":"café","order_id":"O-1001"}`,
	} {
		if got := string(jsonx.Marshal(m[key], jsonx.UTF8)); got != want {
			t.Errorf("value.%s = %s, want %s", key, got, want)
		}
	}
	meta, _ := m["metadata"].(map[string]any)
	if meta == nil || string(jsonx.Marshal(meta["metadata_version"], jsonx.UTF8)) != "1" {
		t.Errorf("value.metadata = %v, want the standard metadata document", m["metadata"])
	}
	if _, ok := m["payload_info"].(map[string]any); !ok {
		t.Errorf("value.payload_info missing")
	}
}

// TestRecordFormats checks the value of each record_format and that
// include_metadata and forward_headers remove what they govern.
func TestRecordFormats(t *testing.T) {
	for _, tt := range []struct {
		name    string
		modify  func(*Config)
		body    string
		value   string // "" = only check it is an envelope without metadata
		headers []string
	}{
		{"payload json", func(c *Config) { c.RecordFormat = "payload" }, `{"b":1,"a":2}`, `{"a":2,"b":1}`, nil},
		{"payload text", func(c *Config) { c.RecordFormat = "payload" }, `hello world`,
			`{"_nats_sinks":{"payload_encoding":"utf-8","payload_envelope_version":1,"payload_format":"text","sha256":"b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9","size_bytes":11},"payload":"hello world"}`, nil},
		{"raw", func(c *Config) { c.RecordFormat = "raw" }, "\xff\x00\x01", "\xff\x00\x01", nil},
		{"envelope without metadata or forwarded headers", func(c *Config) { c.IncludeMetadata = false; c.ForwardHeaders = false }, `{}`, "",
			[]string{"nats-sinks-subject", "nats-sinks-stream", "nats-sinks-stream-sequence", "nats-sinks-idempotency-key", "traceparent"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			c.Topic = "t"
			tt.modify(&c)
			e := env("a.b", "S", 7, map[string][]string{"X-A": {"1"}, "traceparent": {"tp"}}, tt.body)
			r, err := c.Record(e, fixedNow)
			if err != nil {
				t.Fatalf("Record: %v", err)
			}
			if tt.value != "" && string(r.Value) != tt.value {
				t.Errorf("value = %q, want %q", r.Value, tt.value)
			}
			if tt.value == "" {
				doc, _ := jsonx.Parse(r.Value)
				if _, has := doc.(map[string]any)["metadata"]; has {
					t.Errorf("envelope has metadata with include_metadata false")
				}
			}
			if tt.headers != nil {
				var got []string
				for _, h := range r.Headers {
					got = append(got, h.Key)
				}
				if diff := cmp.Diff(tt.headers, got); diff != "" {
					t.Errorf("header names (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestRecordTimestamp: jetstream takes Nats-Time-Stamp, else the JetStream
// time (µs, docs/formats.md#json-encoding); now leaves it to the producer's clock.
func TestRecordTimestamp(t *testing.T) {
	c := Default()
	c.Topic = "t"
	e := env("a.b", "S", 1, nil, "{}")
	r, err := c.Record(e, fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Unix(1780048800, 123456000).UTC(); !r.Timestamp.Equal(want) {
		t.Errorf("jetstream timestamp = %v, want %v", r.Timestamp, want)
	}
	c.RecordTimestamp = "now"
	if r, _ = c.Record(e, fixedNow); !r.Timestamp.IsZero() {
		t.Errorf("now: timestamp = %v, want zero (stamped by the producer)", r.Timestamp)
	}
}

// TestKeyStrategies checks the record key of each key_strategy and that
// missing material is a Permanent ValidationError.
func TestKeyStrategies(t *testing.T) {
	full := env("a.b", "S", 9, map[string][]string{"Nats-Msg-Id": {"m-1"}}, "hello world")
	bare := env("a.b", "", 0, nil, "hello world")
	headersOnly := env("a.b", "", 0, map[string][]string{"Nats-Msg-Size": {"10"}}, "")
	const sum = "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"
	for _, tt := range []struct {
		strategy string
		e        *sink.Envelope
		want     string // "" = ValidationError
	}{
		{"idempotency_key", full, "stream-sequence:S:9"},
		{"idempotency_key", bare, "payload-sha256:a.b:" + sum},
		{"idempotency_key", headersOnly, ""},
		{"stream_sequence", full, "stream-sequence:S:9"},
		{"stream_sequence", bare, ""},
		{"message_id", full, "message-id:m-1"},
		{"message_id", bare, ""},
		{"payload_sha256", full, "payload-sha256:a.b:" + sum},
		{"payload_sha256", headersOnly, ""},
	} {
		c := Default()
		c.Topic, c.KeyStrategy = "t", tt.strategy
		r, err := c.Record(tt.e, fixedNow)
		if tt.want == "" {
			res := sink.Failed(err)
			if res.Outcome != sink.Permanent || res.ErrorType != sink.ValidationError {
				t.Errorf("%s: result %v/%s (%v), want permanent ValidationError", tt.strategy, res.Outcome, res.ErrorType, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.strategy, err)
			continue
		}
		if string(r.Key) != tt.want {
			t.Errorf("%s: key %q, want %q", tt.strategy, r.Key, tt.want)
		}
	}
}

// TestTopicRoutes produces to three topics; the first matching route wins.
func TestTopicRoutes(t *testing.T) {
	kc := cluster(t, []string{"default", "eu", "orders"})
	c := testConfig(kc, "default")
	c.TopicRoutes = []TopicRoute{
		{Subject: "orders.eu.>", Topic: "eu"},
		{Subject: "orders.>", Topic: "orders"},
		{Subject: "orders.eu.created", Topic: "default"}, // shadowed by the first route
	}
	s := open(t, c)
	b := []*sink.Envelope{
		env("orders.eu.created", "S", 1, nil, "{}"),
		env("orders.us.created", "S", 2, nil, "{}"),
		env("audit.login", "S", 3, nil, "{}"),
	}
	if got := outcomes(s.WriteBatch(t.Context(), b)); !slices.Equal(got, repeat(sink.Committed, 3)) {
		t.Fatalf("WriteBatch = %v", got)
	}
	if err := s.Healthcheck(t.Context()); err != nil {
		t.Errorf("Healthcheck: %v", err)
	}
	for topic, want := range map[string][]string{
		"eu": {"stream-sequence:S:1"}, "orders": {"stream-sequence:S:2"}, "default": {"stream-sequence:S:3"},
	} {
		if got := keys(consume(t, c.Brokers, topic)); !slices.Equal(got, want) {
			t.Errorf("topic %s keys = %v, want %v", topic, got, want)
		}
	}
}

// TestFreshWritesHaveNoDuplicateRecords: the idempotent producer writes a
// first delivery exactly once — raw record count, not distinct keys. Same
// key → same partition, so a redelivery lands beside the first record.
func TestFreshWritesHaveNoDuplicateRecords(t *testing.T) {
	kc := cluster(t, []string{"events"})
	c := testConfig(kc, "events")
	s := open(t, c)
	b := batch("a.b", "S", 1, 200)
	if got := outcomes(s.WriteBatch(t.Context(), b)); !slices.Equal(got, repeat(sink.Committed, 200)) {
		t.Fatalf("WriteBatch = %v", got)
	}
	rs := consume(t, c.Brokers, "events")
	if len(rs) != 200 {
		t.Fatalf("%d records for 200 fresh messages, want 200", len(rs))
	}
	partition := map[string]int32{}
	for _, r := range rs {
		partition[string(r.Key)] = r.Partition
	}
	// Redeliver through a second sink (a restarted process).
	s2 := open(t, c)
	if got := outcomes(s2.WriteBatch(t.Context(), b[:50])); !slices.Equal(got, repeat(sink.Committed, 50)) {
		t.Fatalf("redelivery = %v", got)
	}
	rs = consume(t, c.Brokers, "events")
	if len(rs) != 250 {
		t.Fatalf("%d records after redelivering 50, want 250 (Kafka de-duplicates by key, not by record)", len(rs))
	}
	for _, r := range rs {
		if p := partition[string(r.Key)]; p != r.Partition {
			t.Errorf("key %s in partitions %d and %d, want one partition per key", r.Key, p, r.Partition)
		}
	}
}

// TestUnknownTopicIsDestination: without auto-creation, a missing topic
// fails every message as Destination, and the healthcheck names it.
func TestUnknownTopicIsDestination(t *testing.T) {
	kc := cluster(t, []string{"present"}, kfake.AllowAutoTopicCreation())
	c := testConfig(kc, "missing")
	s := open(t, c)
	for i, r := range s.WriteBatch(t.Context(), batch("a.b", "S", 1, 3)) {
		if r.Outcome != sink.Destination || !strings.Contains(r.Err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
			t.Errorf("message %d = %v (%v), want destination UNKNOWN_TOPIC_OR_PARTITION", i, r.Outcome, r.Err)
		}
	}
	if rs := consume(t, c.Brokers, "present"); len(rs) != 0 {
		t.Errorf("%d records in another topic", len(rs))
	}
	err := s.Healthcheck(t.Context())
	if sink.Failed(err).Outcome != sink.Destination || !strings.Contains(fmt.Sprint(err), "topic missing does not exist") {
		t.Errorf("Healthcheck = %v, want a destination error naming topic missing", err)
	}
	// A route to a missing topic is caught by the healthcheck too.
	c = testConfig(kc, "present")
	c.TopicRoutes = []TopicRoute{{Subject: "x.>", Topic: "present"}, {Subject: "y.>", Topic: "typo"}}
	err = open(t, c).Healthcheck(t.Context())
	if sink.Failed(err).Outcome != sink.Destination || !strings.Contains(fmt.Sprint(err), "topic typo does not exist") {
		t.Errorf("Healthcheck with a route to a missing topic = %v", err)
	}
}

// TestAuthorizationIsDestination: a topic authorization failure on produce
// is Destination for every message.
func TestAuthorizationIsDestination(t *testing.T) {
	kc := cluster(t, []string{"events"})
	kc.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.TopicAuthorizationFailed, Count: -1})
	s := open(t, testConfig(kc, "events"))
	for i, r := range s.WriteBatch(t.Context(), batch("a.b", "S", 1, 3)) {
		if r.Outcome != sink.Destination {
			t.Errorf("message %d = %v (%v), want destination", i, r.Outcome, r.Err)
		}
	}
}

// TestRecordTooLarge: a record over max_record_bytes is Permanent
// (SerializationError) before anything is sent; its batch neighbours are
// committed.
func TestRecordTooLarge(t *testing.T) {
	kc := cluster(t, []string{"events"})
	c := testConfig(kc, "events")
	c.MaxRecordBytes = 8192
	s := open(t, c)
	b := batch("a.b", "S", 1, 3)
	b[1] = env("a.b", "S", 2, nil, `"`+strings.Repeat("x", 8192)+`"`)
	rs := s.WriteBatch(t.Context(), b)
	if got := outcomes(rs); !slices.Equal(got, []sink.Outcome{sink.Committed, sink.Permanent, sink.Committed}) {
		t.Fatalf("WriteBatch = %v (%v)", got, rs[1].Err)
	}
	if rs[1].ErrorType != sink.SerializationError || !strings.Contains(rs[1].Err.Error(), "exceeds max_record_bytes (8192)") {
		t.Errorf("oversized result = %s: %v", rs[1].ErrorType, rs[1].Err)
	}
	if got := len(consume(t, c.Brokers, "events")); got != 2 {
		t.Errorf("%d records stored, want 2", got)
	}
}

// TestBrokerRejectionIsIsolated: the broker refuses a whole batch when one
// record in it is too large for the topic. Only that record is Permanent;
// the others, retried alone, are committed.
func TestBrokerRejectionIsIsolated(t *testing.T) {
	kc := cluster(t, nil, kfake.SeedTopics(1, "small"), kfake.BrokerConfigs(map[string]string{"message.max.bytes": "3000"}))
	c := testConfig(kc, "small")
	c.MaxRecordBytes = 100000 // above the topic's limit: the broker decides
	s := open(t, c)
	b := batch("a.b", "S", 1, 6)
	b[3] = env("a.b", "S", 4, nil, `"`+strings.Repeat("x", 4000)+`"`)
	rs := s.WriteBatch(t.Context(), b)
	want := []sink.Outcome{sink.Committed, sink.Committed, sink.Committed, sink.Permanent, sink.Committed, sink.Committed}
	if got := outcomes(rs); !slices.Equal(got, want) {
		t.Fatalf("WriteBatch = %v, want %v (%v)", got, want, rs)
	}
	if !strings.Contains(rs[3].Err.Error(), "MESSAGE_TOO_LARGE") {
		t.Errorf("rejected record error = %v", rs[3].Err)
	}
	got := keys(consume(t, c.Brokers, "small"))
	slices.Sort(got)
	if want := []string{"stream-sequence:S:1", "stream-sequence:S:2", "stream-sequence:S:3", "stream-sequence:S:5", "stream-sequence:S:6"}; !slices.Equal(got, want) {
		t.Errorf("stored keys = %v, want %v", got, want)
	}
}

// TestInvalidRecordOnceIsRetriedAlone: a batch refused once as invalid is
// produced again record by record; nothing is dead-lettered when the
// records are accepted alone.
func TestInvalidRecordOnceIsRetriedAlone(t *testing.T) {
	kc := cluster(t, nil, kfake.SeedTopics(1, "events"))
	kc.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.InvalidRecord, Count: 1})
	c := testConfig(kc, "events")
	s := open(t, c)
	if got := outcomes(s.WriteBatch(t.Context(), batch("a.b", "S", 1, 4))); !slices.Equal(got, repeat(sink.Committed, 4)) {
		t.Fatalf("WriteBatch = %v", got)
	}
	if got := len(consume(t, c.Brokers, "events")); got != 4 {
		t.Errorf("%d records, want 4", got)
	}
	// Refused every time, alone too: the record itself is invalid.
	kc.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.InvalidRecord, Count: -1})
	for i, r := range s.WriteBatch(t.Context(), batch("a.b", "S", 10, 2)) {
		if r.Outcome != sink.Permanent || r.ErrorType != sink.PermanentSinkError {
			t.Errorf("message %d = %v/%s (%v), want permanent", i, r.Outcome, r.ErrorType, r.Err)
		}
	}
}

// TestClusterDownThenRecovers closes the cluster: writes are Temporary
// (never Committed) while it is gone, and succeed once it is back on the
// same address with its data.
func TestClusterDownThenRecovers(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.DataDir(dir), kfake.SeedTopics(3, "events"))
	if err != nil {
		t.Fatal(err)
	}
	c := testConfig(kc, "events")
	c.ProduceTimeoutMS = 1000
	s := open(t, c)
	if got := outcomes(s.WriteBatch(t.Context(), batch("a.b", "S", 1, 10))); !slices.Equal(got, repeat(sink.Committed, 10)) {
		t.Fatalf("first write = %v", got)
	}
	kc.Close()
	for i, r := range s.WriteBatch(t.Context(), batch("a.b", "S", 11, 10)) {
		if r.Outcome != sink.Temporary {
			t.Errorf("message %d with the cluster down = %v (%v), want temporary", i, r.Outcome, r.Err)
		}
	}
	if err := s.Healthcheck(t.Context()); err == nil || sink.Failed(err).Outcome != sink.Temporary {
		t.Errorf("Healthcheck with the cluster down = %v, want a temporary error", err)
	}
	kc, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.DataDir(dir), kfake.SeedTopics(3, "events"))
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	t.Cleanup(kc.Close)
	// The runner redelivers the failed messages; the producer reconnects.
	var rs []sink.Result
	for try := 0; try < 10; try++ {
		rs = s.WriteBatch(t.Context(), batch("a.b", "S", 11, 10))
		if slices.Equal(outcomes(rs), repeat(sink.Committed, 10)) {
			break
		}
	}
	if got := outcomes(rs); !slices.Equal(got, repeat(sink.Committed, 10)) {
		t.Fatalf("write after the restart = %v (%v)", got, rs[0].Err)
	}
	got := map[string]bool{}
	for _, k := range keys(consume(t, c.Brokers, "events")) {
		got[k] = true
	}
	for seq := 1; seq <= 20; seq++ {
		if k := "stream-sequence:S:" + strconv.Itoa(seq); !got[k] {
			t.Errorf("key %s missing after the restart", k)
		}
	}
}

// TestStalledBrokerHoldsResults: while the broker holds produce requests
// unanswered, nothing is Committed; after produce_timeout_ms the write is
// Temporary, and once the broker answers again writes commit.
func TestStalledBrokerHoldsResults(t *testing.T) {
	kc := cluster(t, []string{"events"})
	gate := make(chan struct{})
	kc.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		select {
		case <-gate:
			kc.DropControl()
		default:
			kc.SleepControl(func() { <-gate })
		}
		return nil, nil, false // then handled normally
	})
	c := testConfig(kc, "events")
	c.ProduceTimeoutMS = 1000
	s := open(t, c)
	for i, r := range s.WriteBatch(t.Context(), batch("a.b", "S", 1, 5)) {
		if r.Outcome != sink.Temporary || !strings.Contains(r.Err.Error(), "produce_timeout_ms") {
			t.Errorf("message %d during the stall = %v (%v), want temporary", i, r.Outcome, r.Err)
		}
	}
	close(gate)
	var rs []sink.Result
	for try := 0; try < 10; try++ {
		if rs = s.WriteBatch(t.Context(), batch("a.b", "S", 1, 5)); slices.Equal(outcomes(rs), repeat(sink.Committed, 5)) {
			break
		}
	}
	if got := outcomes(rs); !slices.Equal(got, repeat(sink.Committed, 5)) {
		t.Fatalf("after the stall = %v", got)
	}
	// The held request was written when released: its records are
	// duplicates by key, as after any redelivery.
	distinct := map[string]bool{}
	for _, k := range keys(consume(t, c.Brokers, "events")) {
		distinct[k] = true
	}
	if len(distinct) != 5 {
		t.Errorf("%d distinct keys, want 5", len(distinct))
	}
}

// TestSASL authenticates with PLAIN and SCRAM against a SASL cluster; a
// wrong password is Destination without waiting for produce_timeout_ms,
// and a missing password variable is a configuration error at start.
func TestSASL(t *testing.T) {
	kc := cluster(t, []string{"events"}, kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "plainuser", "plainpw"),
		kfake.Superuser("SCRAM-SHA-256", "scram256", "pw256"),
		kfake.Superuser("SCRAM-SHA-512", "scram512", "pw512"))
	for _, tt := range []struct{ mech, user, pw string }{
		{"plain", "plainuser", "plainpw"}, {"scram-sha-256", "scram256", "pw256"}, {"scram-sha-512", "scram512", "pw512"},
	} {
		c := testConfig(kc, "events")
		c.SASL = SASL{Mechanism: tt.mech, Username: ptr(tt.user), PasswordEnv: ptr("KAFKA_PW")}
		pw := tt.pw
		s := openWith(t, c, sink.Deps{Env: func(name string) (string, bool) { return pw, name == "KAFKA_PW" }})
		if got := outcomes(s.WriteBatch(t.Context(), batch("a.b", tt.mech, 1, 2))); !slices.Equal(got, repeat(sink.Committed, 2)) {
			t.Errorf("%s: WriteBatch = %v", tt.mech, got)
		}
		if err := s.Healthcheck(t.Context()); err != nil {
			t.Errorf("%s: Healthcheck: %v", tt.mech, err)
		}
	}

	// A real broker answers a wrong password with SASL_AUTHENTICATION_FAILED
	// (kfake just closes the connection); answer like one.
	kc.ControlKey(int16(kmsg.SASLAuthenticate), func(req kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		r := req.(*kmsg.SASLAuthenticateRequest)
		if string(r.SASLAuthBytes) == "\x00plainuser\x00plainpw" {
			return nil, nil, false
		}
		resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		return resp, nil, true
	})
	c := testConfig(kc, "events")
	c.ProduceTimeoutMS = 600000 // the failure must not wait for this
	c.SASL = SASL{Mechanism: "plain", Username: ptr("plainuser"), PasswordFile: ptr(filepath.Join(t.TempDir(), "pw"))}
	if err := os.WriteFile(*c.SASL.PasswordFile, []byte("wrong\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := open(t, c)
	for i, r := range s.WriteBatch(t.Context(), batch("a.b", "W", 1, 2)) {
		if r.Outcome != sink.Destination || !strings.Contains(r.Err.Error(), "SASL_AUTHENTICATION_FAILED") {
			t.Errorf("wrong password, message %d = %v (%v), want destination", i, r.Outcome, r.Err)
		}
		if strings.Contains(r.Err.Error(), "wrong") {
			t.Errorf("error text contains the password: %v", r.Err)
		}
	}
	if err := s.Healthcheck(t.Context()); sink.Failed(err).Outcome != sink.Destination {
		t.Errorf("Healthcheck with a wrong password = %v, want destination", err)
	}

	c.SASL = SASL{Mechanism: "plain", Username: ptr("plainuser"), PasswordEnv: ptr("UNSET_PW")}
	unset := sink.Deps{Env: func(string) (string, bool) { return "", false }}
	if _, err := New(t.Context(), c, unset); !errors.Is(err, sink.ErrConfig) || err.Error() != "sasl.password_env: environment variable UNSET_PW is not set" {
		t.Errorf("New with an unset password variable = %v, want a configuration error", err)
	}
}

// TestTLS connects over TLS with a private CA from ca_file; without it the
// broker's certificate is untrusted, which is Destination.
func TestTLS(t *testing.T) {
	caFile, serverCfg := testCA(t)
	kc := cluster(t, []string{"events"}, kfake.TLS(serverCfg))
	c := testConfig(kc, "events")
	c.TLS = TLS{Enabled: true, CAFile: &caFile}
	s := open(t, c)
	if got := outcomes(s.WriteBatch(t.Context(), batch("a.b", "S", 1, 2))); !slices.Equal(got, repeat(sink.Committed, 2)) {
		t.Fatalf("WriteBatch over TLS = %v", got)
	}

	c.TLS = TLS{Enabled: true} // system roots only
	c.ProduceTimeoutMS = 600000
	s = open(t, c)
	for i, r := range s.WriteBatch(t.Context(), batch("a.b", "S", 3, 2)) {
		if r.Outcome != sink.Destination {
			t.Errorf("untrusted certificate, message %d = %v (%v), want destination", i, r.Outcome, r.Err)
		}
	}

	c.TLS = TLS{Enabled: true, CAFile: ptr(filepath.Join(t.TempDir(), "absent.pem"))}
	if _, err := New(t.Context(), c, sink.Deps{}); err == nil || !strings.Contains(err.Error(), "tls.ca_file") {
		t.Errorf("New with a missing CA file = %v, want a configuration error naming tls.ca_file", err)
	}
}

// TestCompressionCodecs writes with every codec and reads the values back.
func TestCompressionCodecs(t *testing.T) {
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		kc := cluster(t, []string{"events"})
		c := testConfig(kc, "events")
		c.Compression, c.RecordFormat = codec, "raw"
		s := open(t, c)
		b := batch("a.b", "S", 1, 20)
		if got := outcomes(s.WriteBatch(t.Context(), b)); !slices.Equal(got, repeat(sink.Committed, 20)) {
			t.Fatalf("%s: WriteBatch = %v", codec, got)
		}
		rs := consume(t, c.Brokers, "events")
		if len(rs) != 20 {
			t.Fatalf("%s: %d records, want 20", codec, len(rs))
		}
		for _, r := range rs {
			if want := fmt.Sprintf(`{"seq":%d}`, storedOf(t, string(r.Key)).Sequence); string(r.Value) != want {
				t.Errorf("%s: value %q, want %q", codec, r.Value, want)
			}
		}
	}
}

// TestMetrics counts acknowledged records and observes produce latency.
func TestMetrics(t *testing.T) {
	kc := cluster(t, []string{"events"})
	m, err := telemetry.NewMetrics(nil, "nats_sinks")
	if err != nil {
		t.Fatal(err)
	}
	s := openWith(t, testConfig(kc, "events"), sink.Deps{Metrics: m.ForSinks()})
	b := batch("a.b", "S", 1, 7)
	b = append(b, env("a.b", "", 0, map[string][]string{"Nats-Msg-Size": {"1"}}, "")) // no key: not produced
	s.WriteBatch(t.Context(), b)
	if got := s.records.(*telemetry.Counter).Value(); got != 7 {
		t.Errorf("kafka_records_total = %d, want 7", got)
	}
	if got := s.produceSeconds.(*telemetry.Histogram).Summary().Count; got != 7 {
		t.Errorf("kafka_produce_seconds count = %v, want 7", got)
	}
}

// TestStopIsIdempotent: Stop may be called again, and after a write.
func TestStopIsIdempotent(t *testing.T) {
	kc := cluster(t, []string{"events"})
	s, err := New(t.Context(), testConfig(kc, "events"), sink.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	s.WriteBatch(t.Context(), batch("a.b", "S", 1, 1))
	for range 2 {
		if err := s.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}
}

// TestRecordSizeBound checks framedSize against the producer's own limit:
// a record exactly at max_record_bytes by our bound is accepted by a
// producer whose batch limit is max_record_bytes.
func TestRecordSizeBound(t *testing.T) {
	kc := cluster(t, []string{"events"})
	c := testConfig(kc, "events")
	c.MaxRecordBytes, c.RecordFormat = 4096, "raw"
	s := open(t, c)
	e := env("a.b", "S", 1, map[string][]string{"X-A": {"v"}}, "")
	r, err := c.Record(e, fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	e.Data = []byte(strings.Repeat("x", c.MaxRecordBytes-framedSize(r)))
	if r, _ := c.Record(e, fixedNow); r == nil || framedSize(r) != c.MaxRecordBytes {
		t.Fatalf("test record is not at the limit")
	}
	if got := outcomes(s.WriteBatch(t.Context(), []*sink.Envelope{e})); !slices.Equal(got, []sink.Outcome{sink.Committed}) {
		t.Errorf("record at the limit = %v, want committed", got)
	}
	e.Data = append(e.Data, 'x')
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{e})
	if rs[0].Outcome != sink.Permanent {
		t.Errorf("record one byte over the limit = %v (%v), want permanent", rs[0].Outcome, rs[0].Err)
	}
}

// testCA writes a CA certificate to a file and returns its path and a
// server TLS configuration for 127.0.0.1 signed by it.
func testCA(t *testing.T) (string, *tls.Config) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "broker"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER}, PrivateKey: key}}}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
