package custody

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/sink"
)

var c1 = Settings{Algorithm: "sha256", KeyID: "custody-policy-v1", HashPayload: true, HashMetadata: true,
	IncludePreviousHash: true, PreviousHashHeader: DefaultPreviousHashHeader, MaxHashInputBytes: 16777216}

const (
	c1Record   = `{"algorithm":"sha256","key_id":"custody-policy-v1","message_id":"O-1001","metadata_hash":"40eb16d3a566ab7a77fa72292f90b5b5bfc2a415dcf50890db93a514849d4b70","payload_hash":"d018a277a861424442b917293e4e0e731f71fde8a590514c811e6cff5f767b3f","previous_record_hash":null,"schema":"nats_sinks.custody.v1","schema_version":1,"stream":"ORDERS","stream_sequence":42,"subject":"orders.created"}`
	c1Metadata = `{"freshness":{"event_age_at_receive_seconds":0.75,"event_age_at_store_seconds":0.75,"message_created_at_header_malformed":false,"message_created_at_missing":false,"message_created_at_source":"nats_time_stamp","source_clock_skew_seconds":0.0},"headers":{"Nats-Msg-Id":"O-1001","Nats-Sinks-Labels":"billing; eu ;billing","Nats-Sinks-Priority":"high","Nats-Time-Stamp":"2026-05-29T09:59:59.5Z","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},"jetstream":{"consumer":"orders-file","consumer_sequence":7,"domain":null,"pending":3,"redelivered":false,"stream":"ORDERS","stream_sequence":42,"timestamp":"2026-05-29T10:00:00.123456+00:00","timestamp_epoch_ns":1780048800123456000},"message_id":"O-1001","message_metadata":{"classification":null,"labels":["billing","eu"],"priority":"high"},"metadata_version":1,"mission_metadata":null,"nats":{"reserved_headers":{"Nats-Msg-Id":"O-1001","Nats-Sinks-Labels":"billing; eu ;billing","Nats-Sinks-Priority":"high","Nats-Time-Stamp":"2026-05-29T09:59:59.5Z","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},"reserved_headers_present":["Nats-Msg-Id","Nats-Sinks-Labels","Nats-Sinks-Priority","Nats-Time-Stamp","traceparent"]},"payload":{"delivered_size_bytes":51,"nats_msg_size_header":null,"nats_msg_size_header_malformed":false,"omitted":false,"omitted_reason":null,"original_size_bytes":51,"present":true},"reply":"$JS.ACK.ORDERS.orders-file.1.42.7.1780048800123456000.3","security_labels":null,"subject":"orders.created","timestamps":{"jetstream_timestamp_epoch_ns":1780048800123456000,"message_created_at_epoch_ns":1780048799500000000,"message_created_at_header_malformed":false,"message_created_at_source":"nats_time_stamp","nats_time_stamp":"2026-05-29T09:59:59.5Z","received_at":"2026-05-29T10:00:00.250000+00:00","received_at_epoch_ns":1780048800250000000}}`
	c1Doc      = `{"algorithm":"sha256","hash_input_format":"canonical-json","hash_metadata":true,"hash_payload":true,"key_id":"custody-policy-v1","metadata_hash":"40eb16d3a566ab7a77fa72292f90b5b5bfc2a415dcf50890db93a514849d4b70","payload_hash":"d018a277a861424442b917293e4e0e731f71fde8a590514c811e6cff5f767b3f","previous_record_hash":null,"privacy":"hashes_are_not_encryption","record_hash":"d71be09e71acac0d7c6e72c2cd303c9f975b42fdd07e028dba511133a5107ee2","schema":"nats_sinks.custody.v1","schema_version":1}`
)

func TestVectorC1(t *testing.T) {
	e := shapestest.Golden()
	p, err := record.NormalisePayload(e, record.JSONOrEnvelope)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(jsonx.Marshal(p.Value, jsonx.UTF8)); got != `{"amount":42.5,"note":"café","order_id":"O-1001"}` {
		t.Errorf("payload input = %s", got)
	}
	if got := jsonx.Marshal(MetadataInput(e), jsonx.UTF8); string(got) != c1Metadata || len(got) != 1849 {
		t.Errorf("metadata input (%d bytes) =\n%s\nwant\n%s", len(got), got, c1Metadata)
	}
	c, err := c1.Compute(e)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(RecordInput(c, e.Subject, e.MessageID, e.Stream, e.StreamSequence)); got != c1Record {
		t.Errorf("record input =\n%s\nwant\n%s", got, c1Record)
	}
	if got := string(jsonx.Marshal(record.Custody(c), jsonx.UTF8)); got != c1Doc {
		t.Errorf("document =\n%s\nwant\n%s", got, c1Doc)
	}
	// The file record is the golden one with its custody null replaced.
	golden, err := os.ReadFile("../record/testdata/file_record_compact.json")
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Replace(golden, []byte(`"custody":null`), []byte(`"custody":`+c1Doc), 1)
	e.Custody = c
	got := append(jsonx.Marshal(record.FileRecord(e, p, true, shapestest.Stored), jsonx.UTF8), '\n')
	if !bytes.Equal(got, want) {
		t.Errorf("file record =\n%s\nwant\n%s", got, want)
	}
	// Verification from the stored bytes alone.
	if r := VerifyFileRecord(got); r.Err != nil || len(r.Mismatches) != 0 || r.RecordHash != c.RecordHash {
		t.Errorf("VerifyFileRecord(C1) = %+v", r)
	}
}

func TestVectorC2(t *testing.T) {
	e := intake.Build(intake.Message{
		Subject: "orders.created",
		Reply:   "$JS.ACK.ORDERS.orders-file.1.43.8.1780048801000000000.2",
		Data:    []byte("hello world"),
		Header: map[string][]string{
			"Nats-Msg-Id":             {"O-1002"},
			DefaultPreviousHashHeader: {strings.ToUpper("d71be09e71acac0d7c6e72c2cd303c9f975b42fdd07e028dba511133a5107ee2")},
		},
	}, nil, time.Date(2026, 5, 29, 10, 0, 1, 500000000, time.UTC))
	c, err := c1.Compute(e)
	if err != nil {
		t.Fatal(err)
	}
	want := sink.Custody{Algorithm: "sha256", KeyID: "custody-policy-v1", HashPayload: true, HashMetadata: true,
		PayloadHash:        "828477978f0c4b4661ba061d2cbe87a31ea1c1f2200cdca4665035b6264d2363",
		MetadataHash:       "937491110caac0337e82adda257582ec6aec311bc614dbec27cddac73dd5e5a6",
		PreviousRecordHash: "d71be09e71acac0d7c6e72c2cd303c9f975b42fdd07e028dba511133a5107ee2",
		RecordHash:         "ec9b4ff89a7118e29d01785de16d6b65368c760bfd42697bf19893eec94c1f15"}
	if *c != want {
		t.Errorf("C2 = %+v\nwant %+v", *c, want)
	}
}

func TestVectorC3(t *testing.T) {
	s := Settings{Algorithm: "sha512", HashPayload: true, IncludePreviousHash: true, PreviousHashHeader: DefaultPreviousHashHeader, MaxHashInputBytes: 16777216}
	e := intake.Build(intake.Message{Subject: "audit.login", Header: map[string][]string{"Nats-Msg-Size": {"2048"}}}, nil, shapestest.Received)
	c, err := s.Compute(e)
	if err != nil {
		t.Fatal(err)
	}
	const doc = `{"algorithm":"sha512","hash_input_format":"canonical-json","hash_metadata":false,"hash_payload":true,"key_id":null,"metadata_hash":null,"payload_hash":"4435ebba84352c3a45feff66eb8173eb93584660e43f8d50036b7696007e04b333ebe04284e86e58ccc0406eceb6a177d0439ddfd28571c29d0c04fbfd7fb502","previous_record_hash":null,"privacy":"hashes_are_not_encryption","record_hash":"7a954bec066d8c29b679b19ed8844013afb18ab340808a472d3fee3646bd04c8f3bb9351a845334391fe23a92281905e63c10b0e0cd07ac90843cd65457eaf8c","schema":"nats_sinks.custody.v1","schema_version":1}`
	if got := string(jsonx.Marshal(record.Custody(c), jsonx.UTF8)); got != doc {
		t.Errorf("C3 document =\n%s\nwant\n%s", got, doc)
	}
	const rec = `{"algorithm":"sha512","key_id":null,"message_id":null,"metadata_hash":null,"payload_hash":"4435ebba84352c3a45feff66eb8173eb93584660e43f8d50036b7696007e04b333ebe04284e86e58ccc0406eceb6a177d0439ddfd28571c29d0c04fbfd7fb502","previous_record_hash":null,"schema":"nats_sinks.custody.v1","schema_version":1,"stream":null,"stream_sequence":null,"subject":"audit.login"}`
	if got := string(RecordInput(c, e.Subject, e.MessageID, e.Stream, e.StreamSequence)); got != rec {
		t.Errorf("C3 record input =\n%s\nwant\n%s", got, rec)
	}
}

func TestFailures(t *testing.T) {
	bad := intake.Build(intake.Message{Subject: "a", Data: []byte("x"), Header: map[string][]string{DefaultPreviousHashHeader: {"abc"}}}, nil, shapestest.Received)
	_, err := c1.Compute(bad)
	if r := sink.Failed(err); r.Outcome != sink.Permanent || r.ErrorType != sink.ValidationError || err.Error() != ErrPreviousHash.Error() {
		t.Errorf("Compute(malformed previous hash) = %v (%+v)", err, r)
	}
	off := c1
	off.IncludePreviousHash = false
	if c, err := off.Compute(bad); err != nil || c.PreviousRecordHash != "" {
		t.Errorf("Compute(include_previous_hash false) = %+v, %v", c, err)
	}
	small := c1
	small.MaxHashInputBytes = 1024
	big := intake.Build(intake.Message{Subject: "a", Data: bytes.Repeat([]byte("x"), 2000)}, nil, shapestest.Received)
	if _, err := small.Compute(big); err == nil || err.Error() != "custody payload hash input exceeds custody max_hash_input_bytes" {
		t.Errorf("Compute(oversized) = %v", err)
	}
}

func TestVerifyDetectsEdits(t *testing.T) {
	e := shapestest.Golden()
	c, err := c1.Compute(e)
	if err != nil {
		t.Fatal(err)
	}
	e.Custody = c
	p, _ := record.NormalisePayload(e, record.JSONOrEnvelope)
	stored := jsonx.Marshal(record.FileRecord(e, p, true, shapestest.Stored), jsonx.UTF8)
	for _, tt := range []struct{ old, new, want string }{
		{`"amount":42.5`, `"amount":42.6`, "payload_hash"},
		{`"pending":3`, `"pending":4`, "metadata_hash"},
		{`"stored_at":"2026-05-29T10:00:00.300000+00:00"`, `"stored_at":"2026-05-29T10:00:09.300000+00:00"`, ""},
		{`"key_id":"custody-policy-v1"`, `"key_id":"other"`, "record_hash"},
	} {
		edited := bytes.Replace(stored, []byte(tt.old), []byte(tt.new), 1)
		if bytes.Equal(edited, stored) {
			t.Fatalf("%q not in the record", tt.old)
		}
		v := VerifyFileRecord(edited)
		got := strings.Join(v.Mismatches, ",")
		if v.Err != nil || got != tt.want {
			t.Errorf("edit %s → %s: mismatches %q (err %v), want %q", tt.old, tt.new, got, v.Err, tt.want)
		}
	}
}
