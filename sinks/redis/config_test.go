package redissink

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/sink"
)

func TestDecodeDefaults(t *testing.T) {
	o, err := Decode([]byte(`{"type":"redis"}`))
	if err != nil {
		t.Fatal(err)
	}
	c := o.(Config)
	if diff := cmp.Diff(Default(), c); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

func TestDecodeProblems(t *testing.T) {
	for _, tt := range []struct {
		name, raw string
		want      []sink.Problem
	}{
		{"tags", `{"type":"redis","db":2000,"pool_size":0,"record_format":"xml","publish_timeout_ms":50,"bogus":1}`, []sink.Problem{
			{Path: "db", Message: "must be between 0 and 1024 (got 2000)"},
			{Path: "pool_size", Message: "must be between 1 and 256 (got 0)"},
			{Path: "record_format", Message: `must be one of envelope, payload, raw (got "xml")`},
			{Path: "publish_timeout_ms", Message: "must be between 100 and 600000 (got 50)"},
			{Path: "bogus", Message: "unknown key"},
		}},
		{"cross-key", `{"type":"redis","address":"localhost","username":"u","stream_key":"x:{nope}","maxlen_exact":true,"dedupe_key_prefix":"","tls":{"ca_file":"/ca.pem"}}`, []sink.Problem{
			{Path: "address", Message: `must be host:port (got "localhost")`},
			{Path: "username", Message: "requires one of password, password_env, password_file"},
			{Path: "tls.ca_file", Message: "requires tls.enabled"},
			{Path: "stream_key", Message: "unknown placeholder {nope}: use {subject}, {stream} or {token:N}"},
			{Path: "maxlen_exact", Message: "requires maxlen"},
			{Path: "dedupe_key_prefix", Message: "must be 1 to 128 printable ASCII characters"},
		}},
		{"max_record_bytes", `{"type":"redis","max_record_bytes":536870913}`, []sink.Problem{
			{Path: "max_record_bytes", Message: "must be between 1024 and 536870912 (got 536870913)"},
		}},
		{"secrets", `{"type":"redis","password":"a","password_env":"B"}`, []sink.Problem{
			{Path: "password", Message: "set only one of password, password_env, password_file"},
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

// TestOpenValidates: Open checks a Config built by hand before any I/O.
func TestOpenValidates(t *testing.T) {
	c := Default()
	c.PoolSize = 0
	_, err := c.Open(t.Context(), sink.Deps{})
	if ce, ok := errors.AsType[*sink.ConfigError](err); !ok || ce.Problems[0].Path != "pool_size" {
		t.Errorf("Open = %v, want a configuration error at pool_size", err)
	}
}
