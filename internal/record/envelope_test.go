package record

import (
	"bytes"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/sink"
)

// TestGoldenMessageEnvelope checks the envelope of the docs/formats.md#file-records message with
// every optional member on, and extra members that sort before the first,
// between two, and after the last built-in member, against
// testdata/message_envelope_all.json. That file is the docs/formats.md#file-records compact file
// record (file_record_compact.json) with only these changes: schema,
// idempotency_key, ","-joined labels, custody in metadata, and the three
// extra members.
func TestGoldenMessageEnvelope(t *testing.T) {
	e := shapestest.Golden()
	p, err := NormalisePayload(e, JSONOrEnvelope)
	if err != nil {
		t.Fatal(err)
	}
	doc := MessageEnvelope(e, p, EnvelopeOptions{
		Schema:          "nats_sinks.test.message.v1",
		LabelSeparator:  ",",
		IdempotencyKey:  true,
		Key:             "stream-sequence:ORDERS:42",
		Metadata:        true,
		MetadataCustody: true,
		StoredAt:        shapestest.Stored,
		Custody:         true,
		MissionMetadata: true,
		SecurityLabels:  true,
		Extra: jsonx.Object{
			{Key: "a_first", Value: 1},
			{Key: "object_key", Value: "k/42.json"},
			{Key: "zz_last", Value: true},
		},
	})
	if !doc.Sorted() {
		t.Errorf("envelope is not in key order: %v", keys(doc))
	}
	got := append(jsonx.Marshal(doc, jsonx.UTF8), '\n')
	if want := readGolden(t, "message_envelope_all.json"); !bytes.Equal(got, want) {
		t.Errorf("envelope differs from the golden (-want +got):\n%s", cmp.Diff(string(want), string(got)))
	}
}

// TestMessageEnvelopeOptions builds the envelope under every combination of
// options and checks, against a reference written out member by member,
// that each option adds exactly its member with its value and that the
// document stays in key order.
func TestMessageEnvelopeOptions(t *testing.T) {
	full := shapestest.Golden()
	bare := &sink.Envelope{Subject: "s", Data: []byte("x"), Pending: -1, ReceivedAt: shapestest.Received}
	extra := jsonx.Object{
		{Key: "duplicate_policy", Value: "replace"},
		{Key: "headers", Value: map[string]string{}},
		{Key: "stored_at_epoch_ns", Value: 7},
	}
	const (
		idem = 1 << iota
		withKey
		meta
		metaCustody
		custody
		mission
		security
		noPayload
		withExtra
		all = 1<<iota - 1
	)
	for name, e := range map[string]*sink.Envelope{"full": full, "bare": bare} {
		p, err := NormalisePayload(e, JSONOrEnvelope)
		if err != nil {
			t.Fatal(err)
		}
		for set := 0; set <= all; set++ {
			on := func(bit int) bool { return set&bit != 0 }
			o := EnvelopeOptions{
				Schema:          "nats_sinks.x.v1",
				LabelSeparator:  "|",
				IdempotencyKey:  on(idem),
				Metadata:        on(meta),
				MetadataCustody: on(metaCustody),
				StoredAt:        shapestest.Stored,
				Custody:         on(custody),
				MissionMetadata: on(mission),
				SecurityLabels:  on(security),
				NoPayload:       on(noPayload),
			}
			if on(withKey) {
				o.Key = "message-id:k"
			}
			if on(withExtra) {
				o.Extra = extra
			}

			want := map[string]any{
				"classification":    nullable(e.Classification),
				"consumer":          nullable(e.Consumer),
				"consumer_sequence": nullableSeq(e.ConsumerSequence),
				"labels":            nil,
				"labels_list":       Labels(e),
				"message_id":        nullable(e.MessageID),
				"payload_info":      p.Info(),
				"priority":          nullable(e.Priority),
				"schema":            "nats_sinks.x.v1",
				"schema_version":    1,
				"stream":            nullable(e.Stream),
				"stream_sequence":   nullableSeq(e.StreamSequence),
				"subject":           e.Subject,
			}
			if len(e.Labels) > 0 {
				want["labels"] = "billing|eu"
			}
			if o.IdempotencyKey {
				want["idempotency_key"] = nullable(o.Key)
			}
			if o.Metadata {
				want["metadata"] = Metadata(e, shapestest.Stored, o.MetadataCustody)
			}
			for bit, key := range map[int]string{custody: "custody", mission: "mission_metadata", security: "security_labels"} {
				if on(bit) {
					want[key] = nil
				}
			}
			if !o.NoPayload {
				want["payload"] = p.Value
			}
			for _, m := range o.Extra {
				want[m.Key] = m.Value
			}

			doc := MessageEnvelope(e, p, o)
			if !doc.Sorted() {
				t.Errorf("%s envelope, options %+v: not in key order: %v", name, o, keys(doc))
			}
			got := map[string]string{}
			for _, m := range doc {
				got[m.Key] = string(jsonx.Marshal(m.Value, jsonx.UTF8))
			}
			wantJSON := map[string]string{}
			for k, v := range want {
				wantJSON[k] = string(jsonx.Marshal(v, jsonx.UTF8))
			}
			if diff := cmp.Diff(wantJSON, got); diff != "" {
				t.Errorf("%s envelope, options %+v: members mismatch (-want +got):\n%s", name, o, diff)
			}
			if len(got) != len(doc) {
				t.Errorf("%s envelope, options %+v: %d members for %d keys: %v", name, o, len(doc), len(got), keys(doc))
			}
		}
	}
}

// TestMessageEnvelopeIsFileRecord pins the one shape built here whose
// golden is normative (docs/formats.md#file-records) to the builder's file options.
func TestMessageEnvelopeIsFileRecord(t *testing.T) {
	e := shapestest.Golden()
	p, err := NormalisePayload(e, JSONOrEnvelope)
	if err != nil {
		t.Fatal(err)
	}
	doc := MessageEnvelope(e, p, EnvelopeOptions{Schema: FileSchema, LabelSeparator: ";", Metadata: true,
		StoredAt: shapestest.Stored, Custody: true, MissionMetadata: true, SecurityLabels: true})
	got := append(jsonx.Marshal(doc, jsonx.UTF8), '\n')
	if want := readGolden(t, "file_record_compact.json"); !bytes.Equal(got, want) {
		t.Errorf("file-record options differ from docs/formats.md#file-records (-want +got):\n%s", cmp.Diff(string(want), string(got)))
	}
}

func keys(o jsonx.Object) []string {
	ks := make([]string, len(o))
	for i, m := range o {
		ks[i] = m.Key
	}
	return slices.Clip(ks)
}

// nullable and nullableSeq restate the envelope's unknown-is-null rule for
// the reference documents of the tests.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullableSeq(n uint64) any {
	if n == 0 {
		return nil
	}
	return n
}
