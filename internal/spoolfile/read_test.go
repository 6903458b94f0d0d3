package spoolfile

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/seal"
	"github.com/nats-sinks/nats-sink/sink"
)

func TestEpochNSVectors(t *testing.T) {
	base := time.Date(2026, 5, 29, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		us   int
		want int64
	}{
		{0, 1780048800000000000},
		{1, 1780048800000001024},
		{123456, 1780048800123456000},
		{250000, 1780048800249999872},
		{500001, 1780048800500001024},
		{999999, 1780048800999998976},
	} {
		in := base.Add(time.Duration(tt.us) * time.Microsecond)
		if got := EpochNS(in); got != tt.want {
			t.Errorf("EpochNS(%s) = %d, want %d", in.Format(time.RFC3339Nano), got, tt.want)
		}
		if got := FromEpochNS(tt.want); !got.Equal(in) {
			t.Errorf("FromEpochNS(%d) = %s, want %s", tt.want, got.Format(time.RFC3339Nano), in.Format(time.RFC3339Nano))
		}
	}
}

// TestEpochNSRoundTrip checks the documented property: before 2038 every
// microsecond reads back unchanged.
func TestEpochNSRoundTrip(t *testing.T) {
	start := time.Date(2026, 5, 29, 10, 0, 0, 0, time.UTC)
	for i := range 200000 {
		in := start.Add(time.Duration(i*7919) * time.Microsecond)
		if got := FromEpochNS(EpochNS(in)); !got.Equal(in) {
			t.Fatalf("FromEpochNS(EpochNS(%s)) = %s", in.Format(time.RFC3339Nano), got.Format(time.RFC3339Nano))
		}
	}
}

func TestRank(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int
	}{
		{"flash", 0}, {"FLASH", 0}, {"  Flash\t", 0}, {"\u00a0flash\u2003", 0}, {"ﬂash", 0}, {"flaſh", 0},
		{"immediate", 1}, {"urgent", 2}, {"high", 3}, {"HIGH", 3},
		{"routine", 5}, {"normal", 5}, {"medium", 5}, {"low", 7}, {"deferred", 9},
		{"", 6}, {"critical", 6}, {"hi gh", 6}, {"straße", 6},
	} {
		if got := Rank(tt.in); got != tt.want {
			t.Errorf("Rank(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func goldenKeys(t *testing.T) Keys {
	s := goldenSeal(t)
	return Keys{Algorithm: s.Algorithm, KeyID: s.KeyID, Key: s.Key}
}

// TestReadUpstreamVectors replays the upstream files: each rebuilds the
// envelope the message had when it was spooled (delivery count unknown,
// JetStream time at microsecond precision).
func TestReadUpstreamVectors(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	golden := goldenEnvelope()
	golden.DeliveryCount = 0
	golden.Timestamp = record.JetStreamTime(golden.Timestamp)
	audit := headersOnly()
	for _, tt := range []struct {
		file string
		keys Keys
		want *sink.Envelope
	}{
		{"v1.spool.json", Keys{}, golden},
		{"v2.spool.json", goldenKeys(t), golden},
		{"v4.spool.json", Keys{}, audit},
	} {
		t.Run(tt.file, func(t *testing.T) {
			w, err := ParseWrapper(tt.file, readTestdata(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := w.Envelope(tt.keys, now)
			if err != nil {
				t.Fatalf("Envelope: %v", err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("rebuilt envelope (-want +got):\n%s", diff)
			}
		})
	}
	w, _ := ParseWrapper("v4", readTestdata(t, "v4.spool.json"))
	e, _ := w.Envelope(Keys{}, now)
	if want := (sink.PayloadPresence{Omitted: true, OmittedReason: "headers_only", OriginalSize: 2048, SizeHeader: "2048", HasSizeHeader: true}); e.Payload != want {
		t.Errorf("V4 payload presence = %+v, want %+v", e.Payload, want)
	}
}

// TestWriteReadRoundTrip: what this implementation writes reads back to the
// envelope it was given, in every mode.
func TestWriteReadRoundTrip(t *testing.T) {
	e := goldenEnvelope()
	e.Reply = "$JS.ACK.ORDERS.orders-spool.1.42.7.1780048800123456000.3"
	e.Domain = "hub"
	e.Classification = "secret"
	e.Data = []byte{0xff, 0x00, 0x01}
	want := *e
	want.DeliveryCount = 0
	want.Timestamp = record.JetStreamTime(e.Timestamp)
	want.Payload = sink.PayloadPresence{Present: true, OriginalSize: 3}
	for _, enc := range []Encoder{
		{},
		{IncludeMetadata: true, Pretty: true, PayloadMode: record.BytesEnvelope},
		{Seal: goldenSeal(t)},
		{Seal: &seal.Settings{Algorithm: seal.AES256CCM, KeyID: "edge-spool-2026-05", Key: goldenSeal(t).Key, NonceSize: 13, TagLength: 8}},
	} {
		f, err := enc.Encode(e, goldenSpooled)
		if err != nil {
			t.Fatal(err)
		}
		w, err := ParseWrapper(f.Name, f.Data)
		if err != nil {
			t.Fatal(err)
		}
		keys := goldenKeys(t)
		if enc.Seal != nil {
			keys.Algorithm = enc.Seal.Algorithm
		}
		got, err := w.Envelope(keys, time.Now())
		if err != nil {
			t.Fatalf("Envelope: %v", err)
		}
		if diff := cmp.Diff(&want, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	}
}

func TestParseWrapperFailures(t *testing.T) {
	for _, tt := range []struct {
		data, want string
	}{
		{`{"encrypted":false,"record":`, "spool file x.spool.json is not a valid wrapper"},
		{"", "spool file x.spool.json is not a valid wrapper"},
		{"\xff", "spool file x.spool.json is not a valid wrapper"},
		{`{"a":1,"a":2}`, "spool file x.spool.json is not a valid wrapper"},
		{`[1]`, "spool file x.spool.json wrapper must be a JSON object"},
	} {
		_, err := ParseWrapper("x.spool.json", []byte(tt.data))
		if _, ok := errors.AsType[*NotWrapperError](err); !ok || err.Error() != tt.want {
			t.Errorf("ParseWrapper(%q) = %v, want %q", tt.data, err, tt.want)
		}
	}
	w, err := ParseWrapper("x", []byte(`{"priority_rank":2.0,"spooled_at_epoch_ns":"1"}`))
	if err != nil || w.Rank != NoRank || w.SpooledAtNS != 0 {
		t.Errorf("non-integer rank and time: %+v, %v; want rank %d, time 0", w, err, NoRank)
	}
}

// TestEnvelopeFailures checks the texts of the checks after the first row,
// in their order.
func TestEnvelopeFailures(t *testing.T) {
	v1 := string(readTestdata(t, "v1.spool.json"))
	v2 := string(readTestdata(t, "v2.spool.json"))
	edit := func(s, old, new string) string {
		if !strings.Contains(s, old) {
			t.Fatalf("vector does not contain %q", old)
		}
		return strings.Replace(s, old, new, 1)
	}
	keys := goldenKeys(t)
	for _, tt := range []struct {
		name, data string
		keys       Keys
		want       string
	}{
		{"wrapper schema", edit(v1, `"schema":"nats_sinks.spool.wrapper.v1"`, `"schema":"other"`), Keys{}, "spool wrapper schema is not supported"},
		{"wrapper version", edit(v1, `"schema_version":1,"spooled_at_epoch_ns":1780048800300000000}`+"\n", `"schema_version":2,"spooled_at_epoch_ns":1780048800300000000}`), Keys{}, "spool wrapper version is not supported"},
		{"encrypted flag", edit(v1, `"encrypted":false`, `"encrypted":"no"`), Keys{}, "spool wrapper encrypted flag must be true or false"},
		{"missing record", edit(v1, `"encrypted":false`, `"encrypted":true`), Keys{}, "encrypted spool wrapper is missing encrypted_record"},
		{"missing plaintext record", edit(v2, `"encrypted":true`, `"encrypted":false`), keys, "plaintext spool wrapper is missing record"},
		{"algorithm", v2, Keys{Algorithm: "aes-256-ccm", KeyID: keys.KeyID, Key: keys.Key}, "encrypted payload algorithm does not match configuration"},
		{"key id", v2, Keys{Algorithm: keys.Algorithm, KeyID: "other", Key: keys.Key}, "encrypted payload key_id does not match configuration"},
		{"wrong key", v2, Keys{Algorithm: keys.Algorithm, KeyID: keys.KeyID, Key: make([]byte, 32)}, "encrypted payload could not be decrypted"},
		{"no key", v2, Keys{Algorithm: keys.Algorithm, KeyID: keys.KeyID}, "no decryption key is configured for this key_id"},
		{"not an envelope", edit(v2, `"_nats_sinks_encryption"`, `"other"`), keys, "payload does not contain a nats-sinks encryption envelope"},
		{"record schema", edit(v1, `"schema":"nats_sinks.spool.record.v1"`, `"schema":"x"`), Keys{}, "spool record schema is not supported"},
		{"record version", edit(v1, `"schema_version":1,"spooled_at_epoch_ns":1780048800300000000},`, `"schema_version":"1","spooled_at_epoch_ns":1780048800300000000},`), Keys{}, "spool record version is not supported"},
		{"envelope", edit(v1, `"envelope":{`, `"envelope":[],"x":{`), Keys{}, "spool record envelope must be an object"},
		{"subject", edit(v1, `"subject":"orders.created"`, `"subject":""`), Keys{}, "spool record field subject must be a non-empty string"},
		{"headers", edit(v1, `"Nats-Msg-Id":"O-1001"`, `"Nats-Msg-Id":1`), Keys{}, "spool record field headers must be an object of strings"},
		{"labels", edit(v1, `"labels":["billing","eu"]`, `"labels":"billing"`), Keys{}, "spool record field labels must be a list of strings or null"},
		{"data", edit(v1, `"data_b64":"eyJ`, `"data_b64":"*eyJ`), Keys{}, "spool record field data_b64 must be a base64 string"},
		{"sequence", edit(v1, `"stream_sequence":42`, `"stream_sequence":"42"`), Keys{}, "spool record field stream_sequence must be a non-negative integer or null"},
		{"pending", edit(v1, `"pending":3`, `"pending":-3`), Keys{}, "spool record field pending must be a non-negative integer or null"},
		{"time", edit(v1, `"received_at_epoch_ns":1780048800249999872`, `"received_at_epoch_ns":1.5`), Keys{}, "spool record field received_at_epoch_ns must be an integer or null"},
		{"redelivered", edit(v1, `"redelivered":false`, `"redelivered":0`), Keys{}, "spool record field redelivered must be a boolean or null"},
		{"stream", edit(v1, `"stream":"ORDERS"`, `"stream":7`), Keys{}, "spool record field stream must be a string or null"},
		{"custody", edit(v1, `"custody":null`, `"custody":"x"`), Keys{}, "spool record field custody must be an object or null"},
		{"first problem wins", edit(edit(v1, `"stream":"ORDERS"`, `"stream":7`), `"subject":"orders.created"`, `"subject":1`), Keys{}, "spool record field subject must be a non-empty string"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w, err := ParseWrapper("x.spool.json", []byte(tt.data))
			if err != nil {
				t.Fatal(err)
			}
			_, err = w.Envelope(tt.keys, time.Now())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Envelope = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestDecryptedRecordFailures covers records whose plaintext decrypts but
// is not a record object.
func TestDecryptedRecordFailures(t *testing.T) {
	s := goldenSeal(t)
	for _, tt := range []struct{ plain, want string }{
		{"not json\n", "spool record is not valid JSON"},
		{"[]\n", "spool record root must be a JSON object"},
	} {
		sealed, err := seal.Encrypt([]byte(tt.plain), *s, nil)
		if err != nil {
			t.Fatal(err)
		}
		data := `{"encrypted":true,"encrypted_record":` + string(sealed) + `,"schema":"nats_sinks.spool.wrapper.v1","schema_version":1}`
		w, err := ParseWrapper("x", []byte(data))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Envelope(goldenKeys(t), time.Now()); err == nil || err.Error() != tt.want {
			t.Errorf("Envelope(%q) = %v, want %q", tt.plain, err, tt.want)
		}
	}
}

// TestExtraKeys: a --key for the record's key id decrypts it although the
// configured key id and algorithm differ (key rotation).
func TestExtraKeys(t *testing.T) {
	w, err := ParseWrapper("v2", readTestdata(t, "v2.spool.json"))
	if err != nil {
		t.Fatal(err)
	}
	key, _ := base64.StdEncoding.DecodeString(goldenKey)
	k := Keys{Algorithm: "aes-256-ccm", KeyID: "edge-spool-2026-06", Key: make([]byte, 32),
		Extra: map[string][]byte{"edge-spool-2026-05": key}}
	if _, err := w.Envelope(k, time.Now()); err != nil {
		t.Errorf("Envelope with an extra key: %v", err)
	}
	k.Extra["edge-spool-2026-05"] = make([]byte, 32)
	if _, err := w.Envelope(k, time.Now()); !errors.Is(err, seal.ErrDecrypt) {
		t.Errorf("Envelope with a wrong extra key = %v, want %v", err, seal.ErrDecrypt)
	}
}
