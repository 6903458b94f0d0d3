package custody

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/sink"
)

// treeRecordInput is record_hash's input built as a tree and encoded by
// jsonx.Marshal: how Compute built it before AppendRecordInput, kept as
// the reference the direct writer must match byte for byte.
func treeRecordInput(c *sink.Custody, subject, messageID, stream string, seq uint64) []byte {
	var s any
	if seq != 0 {
		s = jsonx.Integer(fmt.Sprint(seq))
	}
	return jsonx.Marshal(jsonx.Object{
		{Key: "algorithm", Value: c.Algorithm},
		{Key: "key_id", Value: orNull(c.KeyID)},
		{Key: "message_id", Value: orNull(messageID)},
		{Key: "metadata_hash", Value: orNull(c.MetadataHash)},
		{Key: "payload_hash", Value: orNull(c.PayloadHash)},
		{Key: "previous_record_hash", Value: orNull(c.PreviousRecordHash)},
		{Key: "schema", Value: Schema},
		{Key: "schema_version", Value: 1},
		{Key: "stream", Value: orNull(stream)},
		{Key: "stream_sequence", Value: s},
		{Key: "subject", Value: subject},
	}, jsonx.UTF8)
}

// treeCompute is Compute as it was: every input a tree encoded by
// jsonx.Marshal, each hash through hash.Hash. The reference for
// TestFastInputs.
func treeCompute(s *Settings, e *sink.Envelope) (*sink.Custody, error) {
	c := &sink.Custody{Algorithm: s.Algorithm, KeyID: s.KeyID, HashPayload: s.HashPayload, HashMetadata: s.HashMetadata}
	if s.IncludePreviousHash {
		prev, err := PreviousHash(e, s.PreviousHashHeader)
		if err != nil {
			return nil, invalid(err)
		}
		c.PreviousRecordHash = prev
	}
	if s.HashPayload {
		p, err := record.NormalisePayload(e, record.JSONOrEnvelope)
		if err != nil {
			return nil, invalid(fmt.Errorf("custody payload: %w", err))
		}
		in := jsonx.Marshal(p.Value, jsonx.UTF8)
		if s.over(in) {
			return nil, invalid(tooLarge("payload"))
		}
		c.PayloadHash = s.sum(in)
	}
	if s.HashMetadata {
		in := jsonx.Marshal(MetadataInput(e), jsonx.UTF8)
		if s.over(in) {
			return nil, invalid(tooLarge("metadata"))
		}
		c.MetadataHash = s.sum(in)
	}
	in := treeRecordInput(c, e.Subject, e.MessageID, e.Stream, e.StreamSequence)
	if s.over(in) {
		return nil, invalid(tooLarge("record"))
	}
	c.RecordHash = s.sum(in)
	return c, nil
}

// fastInputEnvelopes covers what changes the shape or the bytes of the
// three inputs: JSON, text, binary, BOM and headers-only payloads, no
// JetStream metadata, no or malformed creation time, more than 16
// headers, invalid UTF-8 in subject, headers and message id, control and
// non-ASCII characters, times outside the int64 nanosecond range, and the
// chain-link header.
func fastInputEnvelopes() map[string]*sink.Envelope {
	out := map[string]*sink.Envelope{"golden": shapestest.Golden()}
	for i := uint64(1); i <= 3; i++ {
		out[fmt.Sprintf("numbered %d", i)] = shapestest.Envelope("ORDERS", i)
	}
	build := func(name string, m intake.Message, at time.Time) {
		out[name] = intake.Build(m, nil, at)
	}
	g := shapestest.GoldenMessage
	withData := func(d string) intake.Message { m := g(); m.Data = []byte(d); return m }
	build("text payload", withData("hello world"), shapestest.Received)
	build("binary payload", withData("\xff\xfe\x00binary"), shapestest.Received)
	build("bom payload", withData("\ufeff{\"a\":1}"), shapestest.Received)
	build("duplicate keys", withData(`{"b":1,"a":2,"b":3}`), shapestest.Received)
	build("numbers", withData(`[1e-05,1E400,-0,0.1,123456789012345678901234567890,1.0]`), shapestest.Received)
	build("escapes", withData("{\"k\":\"\\u00e9\\ud83d\\ude00\\n\\u0007\",\"é\":\"\x7f\"}"), shapestest.Received)
	build("empty payload", withData(""), shapestest.Received)
	m := g()
	m.Data = nil
	m.Header["Nats-Msg-Size"] = []string{"2048"}
	out["headers-only"] = intake.Build(m, nil, shapestest.Received)
	out["headers-only"].Payload.Omitted = true
	m = g()
	m.Reply = ""
	build("no jetstream", m, shapestest.Received)
	m = g()
	delete(m.Header, "Nats-Time-Stamp")
	build("no creation time", m, shapestest.Received)
	m = g()
	m.Header["Nats-Time-Stamp"] = []string{"yesterday"}
	build("malformed creation time", m, shapestest.Received)
	m = g()
	for i := range 20 {
		m.Header[fmt.Sprintf("X-H%02d", i)] = []string{fmt.Sprintf("v%d", i)}
	}
	build("twenty headers", m, shapestest.Received)
	m = g()
	m.Subject = "orders.\xffbad.é"
	m.Header["Nats-Msg-Id"] = []string{"id-\xc3"}
	m.Header["X-Ctl"] = []string{"a\u0001b\u2028c"}
	build("invalid utf-8", m, shapestest.Received)
	m = g()
	m.Header[DefaultPreviousHashHeader] = []string{"D71BE09E71ACAC0D7C6E72C2CD303C9F975B42FDD07E028DBA511133A5107EE2"}
	build("chain link", m, shapestest.Received)
	m = g()
	m.Header["Nats-Time-Stamp"] = []string{"1500-01-01T00:00:00Z"}
	build("created before 1677", m, time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC))
	build("received 1970", g(), time.Unix(0, 0).UTC())
	return out
}

// TestFastInputs: Compute's direct writers produce the bytes the tree
// encodings produce, so every document is the one it was: the metadata
// input, the record input, the payload input, and the documents under
// every setting.
func TestFastInputs(t *testing.T) {
	settings := map[string]Settings{"c1": c1}
	s := c1
	s.Algorithm, s.KeyID = "sha512", ""
	settings["sha512 no key id"] = s
	s = c1
	s.HashMetadata = false
	settings["payload only"] = s
	s = c1
	s.HashPayload = false
	settings["metadata only"] = s
	for name, e := range fastInputEnvelopes() {
		t.Run(name, func(t *testing.T) {
			want := jsonx.Marshal(MetadataInput(e), jsonx.UTF8)
			if got := AppendMetadataInput([]byte("prefix"), e); !bytes.Equal(got, append([]byte("prefix"), want...)) {
				t.Errorf("AppendMetadataInput =\n%s\nwant\nprefix%s", got, want)
			}
			p, err := record.NormalisePayload(e, record.JSONOrEnvelope)
			if err != nil {
				t.Fatal(err)
			}
			wantP := jsonx.Marshal(p.Value, jsonx.UTF8)
			if got, err := record.AppendPayload(nil, e, record.JSONOrEnvelope, jsonx.UTF8, jsonx.CanonicalOrder); err != nil || !bytes.Equal(got, wantP) {
				t.Errorf("payload input = %s, %v; want %s", got, err, wantP)
			}
			for sname, s := range settings {
				want, werr := treeCompute(&s, e)
				got, gerr := s.Compute(e)
				if fmt.Sprint(gerr) != fmt.Sprint(werr) {
					t.Fatalf("%s: Compute error = %v, want %v", sname, gerr, werr)
				}
				if werr != nil {
					continue
				}
				if *got != *want {
					t.Errorf("%s: Compute =\n%+v\nwant\n%+v", sname, *got, *want)
				}
				for _, seq := range []uint64{0, e.StreamSequence, 1<<64 - 1} {
					for _, stream := range []string{"", e.Stream, "S\xff\"\\"} {
						r := AppendRecordInput(nil, got, e.Subject, e.MessageID, stream, seq)
						if w := treeRecordInput(got, e.Subject, e.MessageID, stream, seq); !bytes.Equal(r, w) {
							t.Errorf("record input =\n%s\nwant\n%s", r, w)
						}
					}
				}
			}
		})
	}
}

// TestFastInputLimits: the size limits apply to the bytes the direct
// writers produce, with the same error per input as before.
func TestFastInputLimits(t *testing.T) {
	e := shapestest.Golden()
	for _, max := range []int{10, 60, 400, 1000, 1849, 1850, 4000} {
		s := c1
		s.MaxHashInputBytes = max
		_, werr := treeCompute(&s, e)
		_, gerr := s.Compute(e)
		if fmt.Sprint(gerr) != fmt.Sprint(werr) {
			t.Errorf("max %d: error = %v, want %v", max, gerr, werr)
		}
	}
}

// FuzzFastInputs compares the direct writers with the tree encodings on
// arbitrary payloads, subjects and header values.
func FuzzFastInputs(f *testing.F) {
	f.Add([]byte(`{"a":1}`), "orders.created", "O-1", "v")
	f.Add([]byte("\xff"), "x.\xff", "", "\u2028")
	f.Fuzz(func(t *testing.T, data []byte, subj, id, hv string) {
		m := shapestest.GoldenMessage()
		m.Data, m.Subject = data, subj
		m.Header["Nats-Msg-Id"] = []string{id}
		m.Header["X-Value"] = []string{hv}
		e := intake.Build(m, nil, shapestest.Received)
		want, werr := treeCompute(&c1, e)
		got, gerr := c1.Compute(e)
		if fmt.Sprint(gerr) != fmt.Sprint(werr) {
			t.Fatalf("error = %v, want %v", gerr, werr)
		}
		if werr == nil && *got != *want {
			t.Fatalf("Compute =\n%+v\nwant\n%+v", *got, *want)
		}
	})
}
