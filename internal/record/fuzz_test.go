package record

import (
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/sink"
)

func FuzzSafe(f *testing.F) {
	for _, s := range []string{"orders.created", "../..", "", "Ünïcode/x y", "..hidden.", strings.Repeat("a", 130),
		".", "..", "a\\b", "\xff", strings.Repeat("é", 200)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got := Safe(v, "subject")
		switch {
		case got == "", got == ".", got == "..":
			t.Fatalf("Safe(%q) = %q", v, got)
		case len(got) > 120:
			t.Fatalf("Safe(%q) is %d chars", v, len(got))
		case strings.ContainsAny(got, "/\\"):
			t.Fatalf("Safe(%q) = %q contains a separator", v, got)
		}
		for i := 0; i < len(got); i++ {
			if !safeByte(got[i]) {
				t.Fatalf("Safe(%q) = %q contains %q", v, got, got[i])
			}
		}
		if again := Safe(got, "subject"); again != got {
			t.Fatalf("Safe is not idempotent: Safe(%q) = %q", got, again)
		}
	})
}

func FuzzNormalisePayload(f *testing.F) {
	for _, s := range []string{"", "hello world", "\xff\x00\x01", `{"a":[1,2.5,"x"]}`, `{"a":1,"a":2}`, "1e400", `"\ud800"`,
		"\ufeff{}", "123456789012345678901234567890", "[" + strings.Repeat("[", 1000) + "]"} {
		f.Add([]byte(s), false)
	}
	modes := []PayloadMode{JSONOrEnvelope, JSONOnly, TextEnvelope, BytesEnvelope}
	f.Fuzz(func(t *testing.T, data []byte, omitted bool) {
		e := &sink.Envelope{Subject: "s", Data: data}
		if omitted {
			e.Payload = sink.PayloadPresence{Omitted: true, OmittedReason: "headers_only"}
		}
		for _, m := range modes {
			p, err := NormalisePayload(e, m)
			if err != nil {
				if m == JSONOrEnvelope || m == BytesEnvelope {
					t.Fatalf("NormalisePayload(%q, %s) error %v", data, m, err)
				}
				if sink.Failed(err).ErrorType != sink.SerializationError {
					t.Fatalf("NormalisePayload(%q, %s) error %v is not a SerializationError", data, m, err)
				}
				continue
			}
			enc := jsonx.Marshal(p.Value, jsonx.UTF8)
			back, err := jsonx.Parse(enc)
			if err != nil {
				t.Fatalf("NormalisePayload(%q, %s) encodes to invalid JSON %q: %v", data, m, enc, err)
			}
			if again := jsonx.Marshal(back, jsonx.UTF8); string(again) != string(enc) {
				t.Fatalf("re-encoding differs:\n%s\n%s", enc, again)
			}
			jsonx.Marshal(p.Info(), jsonx.ASCII)
		}
	})
}
