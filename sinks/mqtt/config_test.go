package mqtt

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/sink"
)

func TestDecodeDefaults(t *testing.T) {
	o, err := Decode([]byte(`{"type":"mqtt"}`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Default(), o.(Config)); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

func TestDecodeProblems(t *testing.T) {
	for _, tt := range []struct {
		name, raw string
		want      []sink.Problem
	}{
		{"mqtt 3.1.1", `{"type":"mqtt","protocol_version":4}`, []sink.Problem{
			{Path: "protocol_version", Message: "MQTT 3.1.1 cannot report refused publishes; only 5 is supported"},
		}},
		{"tags", `{"type":"mqtt","qos":0,"client_id":"a b","keep_alive_seconds":0,"max_inflight":70000}`, []sink.Problem{
			{Path: "client_id", Message: `must match ^[A-Za-z0-9_.-]{1,64}$ (got "a b")`},
			{Path: "keep_alive_seconds", Message: "must be between 1 and 65535 (got 0)"},
			{Path: "qos", Message: "must be one of 1, 2 (got 0)"},
			{Path: "max_inflight", Message: "must be between 1 and 65535 (got 70000)"},
		}},
		{"cross-key", `{"type":"mqtt","url":"mqtt://h/path","topic":"$SYS/{subject}","retain":true}`, []sink.Problem{
			{Path: "url", Message: "a path is only allowed for ws and wss"},
			{Path: "topic", Message: `must not start with "$" (topics starting with "$" are reserved by the broker)`},
			{Path: "retain", Message: "must be false"},
		}},
		{"max_record_bytes", `{"type":"mqtt","max_record_bytes":268435456}`, []sink.Problem{
			{Path: "max_record_bytes", Message: "must be between 1024 and 268435455 (got 268435456)"},
		}},
		{"wildcard literal", `{"type":"mqtt","topic":"a/+/{subject}"}`, []sink.Problem{
			{Path: "topic", Message: `literal text must not contain the MQTT wildcards "+" or "#"`},
		}},
		{"tls", `{"type":"mqtt","tls":{"enabled":true,"cert_file":"/c.pem"}}`, []sink.Problem{
			{Path: "tls.enabled", Message: "requires an mqtts or wss URL"},
			{Path: "tls.cert_file", Message: "requires tls.key_file"},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.raw))
			ce, ok := errors.AsType[*sink.ConfigError](err)
			if !ok {
				t.Fatalf("Decode = %v, want *sink.ConfigError", err)
			}
			if diff := cmp.Diff(tt.want, ce.Problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseURL(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"mqtt://127.0.0.1", "mqtt://127.0.0.1:1883"},
		{"mqtts://broker.example", "mqtts://broker.example:8883"},
		{"ws://h/mqtt", "ws://h:80/mqtt"},
		{"wss://h:9443/mqtt", "wss://h:9443/mqtt"},
	} {
		got, msg := parseURL(tt.in)
		if msg != "" || got.url.String() != tt.want {
			t.Errorf("parseURL(%q) = %v, %q, want %s", tt.in, got, msg, tt.want)
		}
	}
	for _, bad := range []string{"tcp://h", "mqtt://u:p@h", "mqtt://h?x=1", "mqtt://", "mqtt://h:70000"} {
		if _, msg := parseURL(bad); msg == "" {
			t.Errorf("parseURL(%q) accepted", bad)
		}
	}
}
