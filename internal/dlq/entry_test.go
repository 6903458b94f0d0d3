package dlq

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/seal"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/sink"
)

var stored = time.Date(2026, 5, 29, 10, 0, 1, 0, time.UTC)

// built dead-letters e with o and reads the DLQ message back as entry 17.
func built(e *sink.Envelope, o Options) *Entry {
	m := Build(e, Failure{ErrorType: sink.PermanentSinkError, Error: "boom"}, o, failedAt)
	return Read(17, stored, m.Header, m.Body)
}

var all = Options{IncludePayload: true, IncludeHeaders: true, IncludeError: true, Consumer: "orders-file"}

func TestReadRoundTrip(t *testing.T) {
	e := built(shapestest.Golden(), all)
	got := struct {
		Record                                                        bool
		Subject, Stream, Consumer, MessageID, Key, ErrorType, Payload string
		Seq                                                           uint64
		Error                                                         string
		HasHeaders                                                    bool
	}{e.Record, e.Subject, e.Stream, e.Consumer, e.MessageID, e.IdempotencyKey, e.ErrorType, e.PayloadState(),
		e.StreamSequence, e.Error, e.HasHeaders}
	want := got
	want.Record, want.Subject, want.Stream, want.Consumer, want.MessageID = true, "orders.created", "ORDERS", "orders-file", "O-1001"
	want.Key, want.ErrorType, want.Payload, want.Seq, want.Error, want.HasHeaders = "stream-sequence:ORDERS:42", "PermanentSinkError", "yes", 42, "boom", true
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Read(Build(golden)) mismatch (-want +got):\n%s", diff)
	}
}

func TestReadFallsBackToHeaders(t *testing.T) {
	h := map[string][]string{
		"x-original-subject":    {"orders.poison"},
		"X-Original-Stream":     {"ORDERS"},
		"Nats-Sinks-Error-Type": {"SerializationError"},
	}
	for _, body := range []string{`not json`, `[1,2]`, `{"labels":[]}`} {
		e := Read(3, stored, h, []byte(body))
		if e.Subject != "orders.poison" || e.Stream != "ORDERS" || e.ErrorType != "SerializationError" {
			t.Errorf("Read(%s) = subject %q stream %q type %q, want the header values", body, e.Subject, e.Stream, e.ErrorType)
		}
		text, _ := e.ErrorText()
		if wantRecord := strings.HasPrefix(body, "{"); e.Record != wantRecord || (text == NotRecord) == wantRecord {
			t.Errorf("Read(%s): Record %v, error text %q", body, e.Record, text)
		}
	}
}

func TestPayloadState(t *testing.T) {
	for _, tt := range []struct {
		name string
		e    *sink.Envelope
		o    Options
		want string
	}{
		{"payload included", shapestest.Golden(), all, PayloadYes},
		{"include_payload false", shapestest.Golden(), Options{IncludeHeaders: true}, PayloadNo},
		{"headers-only consumer", headersOnlyEnvelope(), all, PayloadOmitted},
	} {
		if got := built(tt.e, tt.o).PayloadState(); got != tt.want {
			t.Errorf("%s: PayloadState() = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestShort(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"abc", "abc"},
		{"a\tb\nc", "a b c"},
		{strings.Repeat("é", 60), strings.Repeat("é", 60)},
		{strings.Repeat("é", 61), strings.Repeat("é", 60) + "…"},
	} {
		if got := Short(tt.in, 60); got != tt.want {
			t.Errorf("Short(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestFilter(t *testing.T) {
	e := built(shapestest.Golden(), all)
	for _, tt := range []struct {
		name string
		f    Filter
		want bool
	}{
		{"none", Filter{}, true},
		{"subject matches", Filter{Subject: "orders.>"}, true},
		{"subject differs", Filter{Subject: "audit.>"}, false},
		{"reason any of", Filter{Reasons: []string{"ValidationError", "PermanentSinkError"}}, true},
		{"reason differs", Filter{Reasons: []string{"ValidationError"}}, false},
		{"consumer", Filter{Consumer: "orders-file"}, true},
		{"other consumer", Filter{Consumer: "orders-pg"}, false},
		{"since equal", Filter{Since: stored}, true},
		{"since later", Filter{Since: stored.Add(time.Second)}, false},
		{"until equal excludes", Filter{Until: stored}, false},
		{"until later", Filter{Until: stored.Add(time.Second)}, true},
	} {
		if got := tt.f.Match(e); got != tt.want {
			t.Errorf("%s: Match = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestRedriveMessage(t *testing.T) {
	e := shapestest.Golden()
	e.Headers["Nats-Msg-Size"] = "51"
	e.Headers["Nats-Expected-Last-Sequence"] = "3"
	e.Headers[HeaderRedriveSource] = "OLD:1"
	entry := built(e, all)
	r, err := entry.Redrive(RedriveOptions{DLQStream: "ORDERS_DLQ"})
	if err != nil {
		t.Fatal(err)
	}
	if want := shapestest.Golden().Data; !bytes.Equal(r.Data, want) {
		t.Errorf("payload = %q, want the producer's bytes %q", r.Data, want)
	}
	want := map[string][]string{
		"Nats-Msg-Id":               {"O-1001"},
		"Nats-Sinks-Labels":         {"billing; eu ;billing"},
		"Nats-Sinks-Priority":       {"high"},
		"Nats-Time-Stamp":           {"2026-05-29T09:59:59.5Z"},
		"traceparent":               {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		"Nats-Sinks-Redrive-Source": {"ORDERS_DLQ:17"},
		"Nats-Expected-Stream":      {"ORDERS"},
	}
	if diff := cmp.Diff(want, r.Header); diff != "" {
		t.Errorf("headers mismatch (-want +got):\n%s", diff)
	}
	if r.Subject != "orders.created" || r.MsgID != "O-1001" || r.OriginalStream != "ORDERS" || r.OriginalSeq != 42 {
		t.Errorf("Redrive = subject %q id %q original %s:%d", r.Subject, r.MsgID, r.OriginalStream, r.OriginalSeq)
	}

	r, err = entry.Redrive(RedriveOptions{DLQStream: "ORDERS_DLQ", To: "orders.retry"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Subject != "orders.retry" || r.ExpectedStream != "" || r.Header["Nats-Expected-Stream"] != nil {
		t.Errorf("--to: subject %q, expected stream %q %v; want orders.retry and none", r.Subject, r.ExpectedStream, r.Header["Nats-Expected-Stream"])
	}
}

func TestRedriveMsgID(t *testing.T) {
	withID := shapestest.Golden()
	noHeaderID := shapestest.Golden()
	delete(noHeaderID.Headers, "Nats-Msg-Id")
	noID := intake.Build(intake.Message{Subject: "orders.created", Data: []byte(`{}`),
		Reply: "$JS.ACK.ORDERS.orders-file.1.42.7.1780048800123456789.3"}, nil, stored)
	bare := intake.Build(intake.Message{Subject: "orders.created", Data: []byte(`{}`)}, nil, stored)
	for _, tt := range []struct {
		name string
		e    *sink.Envelope
		want string
	}{
		{"original header", withID, "O-1001"},
		{"body message_id", noHeaderID, "O-1001"},
		{"original stream and sequence", noID, "nats-sinks-redrive:ORDERS:42"},
		{"the DLQ entry", bare, "nats-sinks-redrive:ORDERS_DLQ:17"},
	} {
		r, err := built(tt.e, all).Redrive(RedriveOptions{DLQStream: "ORDERS_DLQ"})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if r.MsgID != tt.want || r.Header["Nats-Msg-Id"][0] != tt.want {
			t.Errorf("%s: Nats-Msg-Id %q (header %v), want %q", tt.name, r.MsgID, r.Header["Nats-Msg-Id"], tt.want)
		}
	}
}

func TestRedriveRefusals(t *testing.T) {
	for _, tt := range []struct {
		name  string
		entry *Entry
		o     RedriveOptions
		want  string
	}{
		{"not a record", Read(1, stored, nil, []byte("garbage")), RedriveOptions{}, "body is not a DLQ record"},
		{"payload not included", built(shapestest.Golden(), Options{IncludeHeaders: true}), RedriveOptions{}, "payload not included"},
		{"headers-only", built(headersOnlyEnvelope(), all), RedriveOptions{}, "payload omitted (headers_only)"},
		{"no headers", built(shapestest.Golden(), Options{IncludePayload: true}), RedriveOptions{}, "headers not included"},
		{"no subject", Read(1, stored, nil, []byte(`{"payload_base64":"","headers":{}}`)), RedriveOptions{}, "no original subject"},
		{"bad base64", Read(1, stored, nil, []byte(`{"subject":"a.b","payload_base64":"!!","headers":{}}`)), RedriveOptions{}, "payload_base64 is not valid base64"},
	} {
		_, err := tt.entry.Redrive(tt.o)
		if _, ok := err.(*Refusal); !ok || err.Error() != tt.want {
			t.Errorf("%s: Redrive error = %v, want refusal %q", tt.name, err, tt.want)
		}
	}
	// --without-headers publishes an entry without a headers map.
	r, err := built(shapestest.Golden(), Options{IncludePayload: true}).Redrive(RedriveOptions{WithoutHeaders: true, DLQStream: "D"})
	if err != nil || r.MsgID != "O-1001" {
		t.Errorf("--without-headers: %v, id %v; want published with the body's message_id", err, r)
	}
}

func TestRedriveEncrypted(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	var secret [32]byte
	copy(secret[:], key)
	plain := []byte(`{"report":"classified"}`)
	sealed, err := seal.Encrypt(plain, seal.Settings{Algorithm: seal.AES256GCM, KeyID: "k1", Key: key, NonceSize: 12}, nil)
	if err != nil {
		t.Fatal(err)
	}
	entry := func(payload []byte) *Entry {
		e := intake.Build(intake.Message{Subject: "secure.report", Data: payload, Header: map[string][]string{"Nats-Msg-Id": {"r-1"}}}, nil, stored)
		return built(e, all)
	}
	encrypts := func(s string) bool { return strings.HasPrefix(s, "secure.") }
	haveKey := func(id string) (seal.Key, bool) {
		if id == "k1" {
			return seal.Key{ID: id, Secret: secret}, true
		}
		return seal.Key{}, false
	}
	tampered := bytes.Replace(sealed, []byte(`"plaintext_size_bytes":23`), []byte(`"plaintext_size_bytes":24`), 1)
	if bytes.Equal(tampered, sealed) {
		t.Fatal("test setup: size field not found in the envelope")
	}
	for _, tt := range []struct {
		name    string
		payload []byte
		u       Unsealer
		want    []byte
		refusal string
	}{
		{"decrypted", sealed, Unsealer{Encrypts: encrypts, Key: haveKey}, plain, ""},
		{"not encrypted by the policy: as stored", sealed, Unsealer{Key: haveKey}, sealed, ""},
		{"key unavailable", sealed, Unsealer{Encrypts: encrypts, Key: func(string) (seal.Key, bool) { return seal.Key{}, false }}, nil, `key "k1" not available`},
		{"plaintext on an encrypted subject", plain, Unsealer{Encrypts: encrypts, Key: haveKey}, nil,
			`encryption mismatch: the configuration encrypts "secure.report" but the payload is not an encryption envelope`},
		{"size mismatch", tampered, Unsealer{Encrypts: encrypts, Key: haveKey}, nil, seal.ErrSizeMismatch.Error()},
	} {
		r, err := entry(tt.payload).Redrive(RedriveOptions{DLQStream: "D", Unseal: tt.u})
		if tt.refusal != "" {
			if _, ok := err.(*Refusal); !ok || !strings.Contains(err.Error(), tt.refusal) {
				t.Errorf("%s: error %v, want a refusal containing %q", tt.name, err, tt.refusal)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if !bytes.Equal(r.Data, tt.want) {
			t.Errorf("%s: published %q, want %q", tt.name, r.Data, tt.want)
		}
	}
}
