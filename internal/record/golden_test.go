package record

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/sink"
)

func readGolden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGoldenFileRecord(t *testing.T) {
	e := shapestest.Golden()
	p, err := NormalisePayload(e, JSONOrEnvelope)
	if err != nil {
		t.Fatalf("NormalisePayload: %v", err)
	}
	doc := FileRecord(e, p, true, shapestest.Stored)

	stem, err := FileStem(StrategyStreamSequence, e)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := Safe(e.Subject, "subject")+"/"+stem+".json", "orders.created/ORDERS-00000000000000000042.json"; got != want {
		t.Errorf("path = %q, want %q", got, want)
	}

	for _, tt := range []struct {
		file   string
		encode func(any, jsonx.Flavour) []byte
	}{
		{"file_record_pretty.json", jsonx.MarshalPretty},
		{"file_record_compact.json", jsonx.Marshal},
	} {
		t.Run(tt.file, func(t *testing.T) {
			got := append(tt.encode(doc, jsonx.UTF8), '\n')
			want := readGolden(t, tt.file)
			if !bytes.Equal(got, want) {
				t.Errorf("file record differs from docs/formats.md#file-records (-want +got):\n%s", cmp.Diff(string(want), string(got)))
			}
		})
	}
}

func TestFileRecordWithoutMetadata(t *testing.T) {
	e := shapestest.Golden()
	p, err := NormalisePayload(e, JSONOrEnvelope)
	if err != nil {
		t.Fatal(err)
	}
	doc := FileRecord(e, p, false, shapestest.Stored)
	if _, ok := doc.Get("metadata"); ok {
		t.Errorf("FileRecord(includeMetadata=false) has a metadata key")
	}
	with := FileRecord(e, p, true, shapestest.Stored)
	with = slices.DeleteFunc(with, func(m jsonx.Member) bool { return m.Key == "metadata" })
	if diff := cmp.Diff(with, doc); diff != "" {
		t.Errorf("records differ beyond metadata (-with +without):\n%s", diff)
	}
}

func TestMetadataCustody(t *testing.T) {
	e := shapestest.Golden()
	with := Metadata(e, shapestest.Stored, true)
	v, ok := with.Get("custody")
	if !ok || v != nil {
		t.Errorf("Metadata(withCustody) custody = %v, %v; want null", v, ok)
	}
	without := Metadata(e, shapestest.Stored, false)
	if _, ok := without.Get("custody"); ok {
		t.Errorf("Metadata(withCustody=false) has a custody key")
	}
	with = slices.DeleteFunc(with, func(m jsonx.Member) bool { return m.Key == "custody" })
	if !bytes.Equal(jsonx.Marshal(with, jsonx.UTF8), jsonx.Marshal(without, jsonx.UTF8)) {
		t.Errorf("documents differ beyond custody")
	}
}

func TestGoldenPayloadEnvelopes(t *testing.T) {
	for _, tt := range []struct {
		file   string
		data   []byte
		mode   PayloadMode
		format string
	}{
		{"envelope_text.json", []byte("hello world"), JSONOrEnvelope, FormatText},
		{"envelope_bytes.json", []byte{0xff, 0x00, 0x01}, JSONOrEnvelope, FormatBytes},
		{"envelope_empty.json", nil, JSONOrEnvelope, FormatText},
		{"envelope_text.json", []byte("hello world"), TextEnvelope, FormatText},
		{"envelope_bytes.json", []byte{0xff, 0x00, 0x01}, BytesEnvelope, FormatBytes},
	} {
		t.Run(tt.file+"/"+string(tt.mode), func(t *testing.T) {
			p, err := NormalisePayload(&sink.Envelope{Subject: "s", Data: tt.data}, tt.mode)
			if err != nil {
				t.Fatal(err)
			}
			got := jsonx.Marshal(p.Value, jsonx.UTF8)
			if want := readGolden(t, tt.file); !bytes.Equal(got, want) {
				t.Errorf("envelope = %s\nwant %s", got, want)
			}
			wantInfo := map[string]any{"original_format": tt.format, "wrapped": true,
				"sha256": sha256Hex(tt.data), "size_bytes": len(tt.data)}
			if diff := cmp.Diff(wantInfo, asMap(p.Info())); diff != "" {
				t.Errorf("payload_info mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNormalisePayload(t *testing.T) {
	type out struct {
		JSON   string // compact utf8 encoding of Value
		Format string // payload_info original_format
		Err    string
		Type   string // error type
	}
	headersOnly := sink.PayloadPresence{Omitted: true, OmittedReason: "headers_only", OriginalSize: 9}
	for _, tt := range []struct {
		name    string
		data    string
		omitted bool
		mode    PayloadMode
		want    out
	}{
		{"json kept as parsed, keys sorted", `{"b":1,"a":[1.50,2]}`, false, JSONOrEnvelope, out{JSON: `{"a":[1.5,2],"b":1}`, Format: "json"}},
		{"big integer exact", `123456789012345678901234567890`, false, JSONOrEnvelope, out{JSON: `123456789012345678901234567890`, Format: "json"}},
		{"scalar json", `"x"`, false, JSONOrEnvelope, out{JSON: `"x"`, Format: "json"}},
		{"duplicate keys are text (strict)", `{"a":1,"a":2}`, false, JSONOrEnvelope, out{Format: "text"}},
		{"float overflow is text (Q15)", `1e400`, false, JSONOrEnvelope, out{Format: "text"}},
		{"lone surrogate is text (Q15)", `"\ud800"`, false, JSONOrEnvelope, out{Format: "text"}},
		{"BOM is text", "\ufeff{}", false, JSONOrEnvelope, out{Format: "text"}},
		{"not utf-8 is bytes", "\xff", false, JSONOrEnvelope, out{Format: "bytes"}},
		{"json_only valid", `[1]`, false, JSONOnly, out{JSON: `[1]`, Format: "json"}},
		{"json_only text", `hello`, false, JSONOnly, out{Err: "message payload for subject 'orders.x' is not valid JSON", Type: sink.SerializationError}},
		{"json_only empty", ``, false, JSONOnly, out{Err: "message payload for subject 'orders.x' is not valid JSON", Type: sink.SerializationError}},
		{"json_only bytes", "\xff{}", false, JSONOnly, out{Err: "message payload for subject 'orders.x' is not valid UTF-8", Type: sink.SerializationError}},
		{"text_envelope wraps json", `{"a":1}`, false, TextEnvelope, out{JSON: `{"_nats_sinks":{"payload_encoding":"utf-8","payload_envelope_version":1,"payload_format":"text","sha256":"015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862","size_bytes":7},"payload":"{\"a\":1}"}`, Format: "text"}},
		{"text_envelope bytes", "\xfe", false, TextEnvelope, out{Err: "message payload for subject 'orders.x' is not valid UTF-8", Type: sink.SerializationError}},
		{"bytes_envelope json", `{}`, false, BytesEnvelope, out{JSON: `{"_nats_sinks":{"payload_encoding":"base64","payload_envelope_version":1,"payload_format":"bytes","sha256":"44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size_bytes":2},"payload":"e30="}`, Format: "bytes"}},
		{"headers-only json_only is the empty marker", ``, true, JSONOnly, out{Format: "text"}},
		{"headers-only bytes_envelope is the empty marker", ``, true, BytesEnvelope, out{Format: "text"}},
		{"unknown mode", `{}`, false, "yaml", out{Err: "unknown payload mode yaml", Type: sink.SerializationError}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := &sink.Envelope{Subject: "orders.x", Data: []byte(tt.data)}
			if tt.omitted {
				e.Payload = headersOnly
			}
			p, err := NormalisePayload(e, tt.mode)
			var got out
			if err != nil {
				got.Err = err.Error()
				got.Type = sink.Failed(err).ErrorType
			} else {
				format, _ := p.Info().Get("original_format")
				got.Format, _ = format.(string)
				if tt.want.JSON != "" {
					got.JSON = string(jsonx.Marshal(p.Value, jsonx.UTF8))
				}
				if w, _ := p.Info().Get("wrapped"); w != (got.Format != "json") {
					t.Errorf("wrapped = %v, want %v", w, got.Format != "json")
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("NormalisePayload(%q, %s) mismatch (-want +got):\n%s", tt.data, tt.mode, diff)
			}
			if tt.omitted && err == nil {
				if want := readGolden(t, "envelope_empty.json"); !bytes.Equal(jsonx.Marshal(p.Value, jsonx.UTF8), want) {
					t.Errorf("omitted payload value = %s, want the empty marker %s", jsonx.Marshal(p.Value, jsonx.UTF8), want)
				}
			}
			if err != nil && strings.Contains(err.Error(), tt.data) && tt.data != "" {
				t.Errorf("error %q contains the payload", err)
			}
		})
	}
}

func TestSafe(t *testing.T) {
	for _, tt := range []struct {
		in, fallback, want string
	}{
		{"orders.created", "subject", "orders.created"},
		{"../..", "subject", "subject-0cfd1c96cbc0c0e0"},
		{"", "subject", "subject-e3b0c44298fc1c14"},
		{"Ünïcode/x y", "subject", "n_code_x_y"},
		{"..hidden.", "subject", "hidden"},
		{strings.Repeat("a", 130), "subject", strings.Repeat("a", 80) + "-1e3c4f4750c8c29bbfa9ced317788176"},
		{strings.Repeat("a", 120), "subject", strings.Repeat("a", 120)},
		{"__a__b--", "stream", "a__b"},
		{"a//\\\\b", "stream", "a_b"},
		{"O 1001/é", "message", "O_1001"},
		{"-", "message", "message-" + sha256Hex([]byte("-"))[:16]},
		{"a\xffb", "stream", "a_b"},
	} {
		if got := Safe(tt.in, tt.fallback); got != tt.want {
			t.Errorf("Safe(%q, %q) = %q, want %q", tt.in, tt.fallback, got, tt.want)
		}
	}
}

func TestCoreKey(t *testing.T) {
	omitted := sink.PayloadPresence{Omitted: true, OmittedReason: "headers_only"}
	for _, tt := range []struct {
		name    string
		e       sink.Envelope
		want    string
		wantErr bool
	}{
		{"stream sequence", sink.Envelope{Stream: "ORDERS", StreamSequence: 42, MessageID: "m"}, "stream-sequence:ORDERS:42", false},
		{"stream without sequence falls back to message id", sink.Envelope{Stream: "ORDERS", MessageID: "O-1"}, "message-id:O-1", false},
		{"payload hash", sink.Envelope{Subject: "a.b", Data: []byte("hello world")},
			"payload-sha256:a.b:b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9", false},
		{"omitted payload with message id", sink.Envelope{MessageID: "m", Payload: omitted}, "message-id:m", false},
		{"omitted payload without material", sink.Envelope{Subject: "a", Payload: omitted}, "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CoreKey(&tt.e)
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Fatalf("CoreKey = %q, %v; want %q, error %v", got, err, tt.want, tt.wantErr)
			}
			if err != nil {
				r := sink.Failed(err)
				if r.Outcome != sink.Permanent || r.ErrorType != sink.ValidationError || !errors.Is(err, ErrNoCoreKey) {
					t.Errorf("CoreKey error classified %v/%s (%v), want permanent ValidationError", r.Outcome, r.ErrorType, err)
				}
			}
		})
	}
}

func TestFileStem(t *testing.T) {
	omitted := sink.PayloadPresence{Omitted: true, OmittedReason: "headers_only"}
	e := sink.Envelope{Subject: "orders/created", Stream: "OR DERS", StreamSequence: 18446744073709551615, MessageID: "O 1001/é", Data: []byte("hello world")}
	for _, tt := range []struct {
		name     string
		strategy string
		e        sink.Envelope
		want     string
	}{
		// Sanitised names get a hash of the raw value: they stay distinct.
		{"stream_sequence", StrategyStreamSequence, e, "OR_DERS-" + sha256Hex([]byte("OR DERS"))[:16] + "-18446744073709551615"},
		{"stream_sequence pads", StrategyStreamSequence, sink.Envelope{Stream: "ORDERS", StreamSequence: 42}, "ORDERS-00000000000000000042"},
		{"message_id", StrategyMessageID, e, "O_1001-" + sha256Hex([]byte("O 1001/é"))[:16]},
		{"payload_sha256", StrategyPayloadSHA256, e, "orders_created-" + sha256Hex([]byte("orders/created"))[:16] + "-b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"},
		{"payload_sha256 unchanged subject", StrategyPayloadSHA256, sink.Envelope{Subject: "orders.created", Data: []byte("hello world")},
			"orders.created-b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"},
		{"stream_sequence missing", StrategyStreamSequence, sink.Envelope{Stream: "S"}, ""},
		{"message_id missing", StrategyMessageID, sink.Envelope{Stream: "S", StreamSequence: 1}, ""},
		{"payload_sha256 of omitted payload", StrategyPayloadSHA256, sink.Envelope{Subject: "a", Payload: omitted}, ""},
		{"unknown strategy", "uuid", e, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FileStem(tt.strategy, &tt.e)
			if got != tt.want {
				t.Errorf("FileStem(%s) = %q, %v; want %q", tt.strategy, got, err, tt.want)
			}
			if tt.want == "" {
				r := sink.Failed(err)
				if r.Outcome != sink.Permanent || r.ErrorType != sink.PermanentSinkError {
					t.Errorf("FileStem(%s) error %v classified %v/%s, want permanent PermanentSinkError", tt.strategy, err, r.Outcome, r.ErrorType)
				}
			}
		})
	}
}
