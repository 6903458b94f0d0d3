package rabbitmq

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/sink"
)

func TestDecodeDefaults(t *testing.T) {
	o, err := Decode([]byte(`{"type":"rabbitmq","exchange":"events"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Exchange = "events"
	if diff := cmp.Diff(want, o.(Config)); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

func TestDecodeProblems(t *testing.T) {
	for _, tt := range []struct {
		name, raw string
		want      []sink.Problem
	}{
		{"required", `{"type":"rabbitmq"}`, []sink.Problem{{Path: "exchange", Message: "required"}}},
		{"tags", `{"type":"rabbitmq","exchange":"a b","delivery_mode":1,"heartbeat_seconds":601}`, []sink.Problem{
			{Path: "exchange", Message: `must match ^[A-Za-z0-9._:-]*$ (got "a b")`},
			{Path: "delivery_mode", Message: "must be one of 2 (got 1)"},
			{Path: "heartbeat_seconds", Message: "must be between 0 and 600 (got 601)"},
		}},
		{"cross-key", `{"type":"rabbitmq","exchange":"e","url":"amqp://u:p@h/","password":"x","routing_key":"{x}","mandatory":false,"tls":{"enabled":true}}`, []sink.Problem{
			{Path: "url", Message: "must not include credentials; use username and password_env (or password_file)"},
			{Path: "username", Message: "required with a password (or set neither for guest/guest)"},
			{Path: "routing_key", Message: "unknown placeholder {x}: use {subject}, {stream} or {token:N}"},
			{Path: "mandatory", Message: "must be true: an unroutable message must come back, never be dropped after a confirm"},
		}},
		{"tls needs amqps", `{"type":"rabbitmq","exchange":"e","tls":{"enabled":true}}`, []sink.Problem{
			{Path: "tls.enabled", Message: "requires an amqps URL"},
		}},
		{"url", `{"type":"rabbitmq","exchange":"e","url":"http://h/"}`, []sink.Problem{
			{Path: "url", Message: `scheme must be amqp or amqps (got "http")`},
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
	for _, tt := range []struct {
		url  string
		want target
	}{
		{"amqp://127.0.0.1:5672/", target{addr: "127.0.0.1:5672", host: "127.0.0.1", vhost: "/"}},
		{"amqp://h", target{addr: "h:5672", host: "h", vhost: "/"}},
		{"amqps://h/orders", target{tls: true, addr: "h:5671", host: "h", vhost: "orders"}},
		{"amqp://h/%2F", target{addr: "h:5672", host: "h", vhost: "/"}},
		{"amqp://h/a%2Fb", target{addr: "h:5672", host: "h", vhost: "a/b"}},
		{"amqp://[::1]:5673/", target{addr: "[::1]:5673", host: "::1", vhost: "/"}},
	} {
		got, msg := parseURL(tt.url)
		if msg != "" || got == nil || *got != tt.want {
			t.Errorf("parseURL(%q) = %+v, %q, want %+v", tt.url, got, msg, tt.want)
		}
	}
	for _, bad := range []string{"amqp://h/a/b", "amqp://h/?x=1", "amqp:///v", "amqp://h:0/"} {
		if _, msg := parseURL(bad); msg == "" {
			t.Errorf("parseURL(%q) accepted", bad)
		}
	}
}
