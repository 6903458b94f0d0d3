package broker

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/brokerconfig"
	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
)

var stored = time.Date(2026, 5, 29, 10, 0, 0, 0, time.UTC)

func env(subject, stream string, seq uint64, header map[string][]string, body string) *sink.Envelope {
	reply := ""
	if seq != 0 {
		reply = fmt.Sprintf("$JS.ACK.%s.c.1.%d.%d.1780048800123456000.0", stream, seq, seq)
	}
	return intake.Build(intake.Message{Subject: subject, Reply: reply, Data: []byte(body), Header: header}, nil, stored)
}

func TestTemplateRender(t *testing.T) {
	for _, tt := range []struct {
		tmpl, subject, stream string
		esc                   Escaping
		want                  string
	}{
		{"nats:{subject}", "orders.created", "ORDERS", Raw, "nats:orders.created"},
		{"{stream}/{token:2}", "orders.created", "ORDERS", Raw, "ORDERS/created"},
		{"{subject}", "orders.created", "", Topic, "orders/created"},
		{"{subject}", "site.eu/west.temp+max", "", Topic, "site/eu%2Fwest/temp%2Bmax"},
		{"nats/{stream}/{subject}", "orders.created", "ORDERS", Topic, "nats/ORDERS/orders/created"},
		{"{subject}", "$SYS.a#b.c%d", "", Topic, "%24SYS/a%23b/c%25d"},
		{"x/{token:1}", "a\x01b.c", "", Topic, "x/a%01b"},
		{"{token:3}", "a.b.c", "", Topic, "c"},
	} {
		tp, err := ParseTemplate(tt.tmpl, tt.esc)
		if err != nil {
			t.Fatalf("ParseTemplate(%q): %v", tt.tmpl, err)
		}
		got, err := tp.Render(env(tt.subject, tt.stream, 1, nil, "{}"))
		if tt.stream == "" {
			got, err = tp.Render(env(tt.subject, "", 0, nil, "{}"))
		}
		if err != nil || got != tt.want {
			t.Errorf("Render(%q, %q) = %q, %v, want %q", tt.tmpl, tt.subject, got, err, tt.want)
		}
	}
}

// TestTopicRoundTrip: hostile subjects survive escaping and unescaping,
// and never produce a wildcard, an extra level or a reserved topic.
func TestTopicRoundTrip(t *testing.T) {
	tp, err := ParseTemplate("{subject}", Topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, subj := range []string{"a.b", "a/b.c", "a+.#", "100%.x", "$SYS.x", "$", "é.ü", "a\x7f.b\x1f", "%24.x"} {
		topic, err := tp.Render(env(subj, "", 0, nil, "{}"))
		if err != nil {
			t.Fatalf("Render(%q): %v", subj, err)
		}
		if strings.ContainsAny(topic, "+#\x00\x1f\x7f") || strings.HasPrefix(topic, "$") {
			t.Errorf("topic of %q = %q: wildcard, control or reserved", subj, topic)
		}
		if strings.Count(topic, "/") != strings.Count(subj, ".") {
			t.Errorf("topic of %q = %q: levels differ from tokens", subj, topic)
		}
		back, err := UnescapeTopic(topic)
		if err != nil || back != subj {
			t.Errorf("UnescapeTopic(%q) = %q, %v, want %q", topic, back, err, subj)
		}
	}
}

func TestTemplateErrors(t *testing.T) {
	for _, tt := range []struct {
		tmpl string
		esc  Escaping
		want string
	}{
		{"a{x}", Raw, "unknown placeholder {x}"},
		{"a}b", Raw, `stray "}"`},
		{"a{subject", Raw, `unclosed "{"`},
		{"{token:0}", Raw, "N must be an integer from 1 to 32"},
		{"{token:33}", Raw, "N must be an integer from 1 to 32"},
		{"{token:01}", Raw, "N must be an integer from 1 to 32"},
		{"a/+/{subject}", Topic, "wildcards"},
		{"a/#", Topic, "wildcards"},
		{"$share/{subject}", Topic, `must not start with "$"`},
		{"a\tb", Topic, "control characters"},
	} {
		_, err := ParseTemplate(tt.tmpl, tt.esc)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseTemplate(%q) = %v, want an error containing %q", tt.tmpl, err, tt.want)
		}
	}
	// A "+" in a literal is fine for Redis and AMQP.
	if _, err := ParseTemplate("a+#{subject}", Raw); err != nil {
		t.Errorf("raw literal with + and #: %v", err)
	}
}

func TestTemplateMissingValue(t *testing.T) {
	for _, tt := range []struct{ tmpl, want string }{
		{"{token:3}", `subject "a.b" has no token 3`},
		{"{stream}", `subject "a.b" has no stream`},
	} {
		tp, err := ParseTemplate(tt.tmpl, Raw)
		if err != nil {
			t.Fatal(err)
		}
		_, err = tp.Render(env("a.b", "", 0, nil, "{}"))
		res := sink.Failed(err)
		if res.Outcome != sink.Permanent || res.ErrorType != sink.ValidationError || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Render(%q) = %+v, want Permanent ValidationError %q", tt.tmpl, res, tt.want)
		}
	}
}

// TestBuildMetadata: forwarded headers (sorted, without trace headers and
// without names of the metadata set in any case), then the metadata set in
// its order with the message's trace headers last.
func TestBuildMetadata(t *testing.T) {
	o := brokerconfig.DefaultOptions("raw")
	e := env("orders.new", "ORDERS", 42, map[string][]string{
		"Zeta":                       {"z"},
		"Alpha":                      {"a"},
		"traceparent":                {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		"Baggage":                    {"k=v"},
		"NATS-SINKS-SUBJECT":         {"spoofed"},
		"nats-sinks-idempotency-key": {"spoofed"},
		"Nats-Sinks-Priority":        {"high"},
		"Nats-Sinks-Labels":          {"b;a;b"},
	}, "hello")
	r, err := Build(&o, "mqtt", e, stored)
	if err != nil {
		t.Fatal(err)
	}
	wantHeaders := []Pair{{"Alpha", "a"}, {"Zeta", "z"}}
	if diff := cmp.Diff(wantHeaders, r.Headers); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	wantMeta := []Pair{
		{Subject, "orders.new"}, {Stream, "ORDERS"}, {StreamSequence, "42"},
		{IdempotencyKey, "stream-sequence:ORDERS:42"},
		{"Nats-Sinks-Priority", "high"}, {"Nats-Sinks-Labels", "b;a"},
		{"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{"baggage", "k=v"},
	}
	if diff := cmp.Diff(wantMeta, r.Meta); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	if string(r.Body) != "hello" || r.ContentType != Bytes {
		t.Errorf("raw body = %q %s", r.Body, r.ContentType)
	}
	if want := `{"Alpha":"a","Zeta":"z"}`; string(r.HeadersJSON()) != want {
		t.Errorf("HeadersJSON = %s, want %s", r.HeadersJSON(), want)
	}
	r.SetTrace(map[string]string{"traceparent": "00-new-01", "tracestate": "x=1"})
	if diff := cmp.Diff(append(wantMeta[:6:6], Pair{"traceparent", "00-new-01"}, Pair{"tracestate", "x=1"}), r.Meta); diff != "" {
		t.Errorf("metadata after SetTrace (-want +got):\n%s", diff)
	}

	o.ForwardHeaders = false
	r, _ = Build(&o, "mqtt", e, stored)
	if len(r.Headers) != 0 || r.HeadersJSON() != nil {
		t.Errorf("forward_headers false: headers %v", r.Headers)
	}
}

func TestBuildFormats(t *testing.T) {
	e := env("orders.new", "ORDERS", 7, nil, `{"b":1,"a":2}`)
	o := brokerconfig.DefaultOptions("payload")
	r, err := Build(&o, "redis", e, stored)
	if err != nil || string(r.Body) != `{"a":2,"b":1}` || r.ContentType != JSON {
		t.Errorf("payload = %s %s %v", r.Body, r.ContentType, err)
	}
	o.RecordFormat = "envelope"
	o.IncludeMetadata = false
	r, err = Build(&o, "rabbitmq", e, stored)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"schema":"nats_sinks.rabbitmq.message.v1"`, `"idempotency_key":"stream-sequence:ORDERS:7"`, `"payload":{"a":2,"b":1}`, `"custody":null`} {
		if !strings.Contains(string(r.Body), want) {
			t.Errorf("envelope %s lacks %s", r.Body, want)
		}
	}
	if strings.Contains(string(r.Body), `"metadata"`) {
		t.Errorf("include_metadata false but envelope has metadata: %s", r.Body)
	}
	o.PayloadMode = "json_only"
	_, err = Build(&o, "redis", env("x", "S", 1, nil, "not json"), stored)
	if res := sink.Failed(err); res.Outcome != sink.Permanent || res.ErrorType != sink.SerializationError {
		t.Errorf("json_only with text = %+v", res)
	}
}

func TestKeys(t *testing.T) {
	noMeta := env("a.b", "", 0, map[string][]string{"Nats-Msg-Size": {"10"}}, "")
	for _, tt := range []struct {
		strategy string
		e        *sink.Envelope
		want     string
		errType  string
	}{
		{"idempotency_key", env("a.b", "S", 3, nil, "x"), "stream-sequence:S:3", ""},
		{"idempotency_key", noMeta, "", sink.ValidationError},
		{"stream_sequence", env("a.b", "", 0, nil, "x"), "", sink.ValidationError},
		{"message_id", env("a.b", "S", 3, map[string][]string{"Nats-Msg-Id": {"m1"}}, "x"), "message-id:m1", ""},
		{"message_id", env("a.b", "S", 3, nil, "x"), "", sink.ValidationError},
		{"payload_sha256", env("a.b", "S", 3, nil, "hello world"), "payload-sha256:a.b:b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9", ""},
		{"payload_sha256", noMeta, "", sink.ValidationError},
	} {
		o := brokerconfig.DefaultOptions("raw")
		o.KeyStrategy = tt.strategy
		got, err := Key(&o, tt.e)
		if tt.errType != "" {
			if res := sink.Failed(err); res.Outcome != sink.Permanent || res.ErrorType != tt.errType {
				t.Errorf("Key(%s) error = %+v, want Permanent %s", tt.strategy, res, tt.errType)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Key(%s) = %q, %v, want %q", tt.strategy, got, err, tt.want)
		}
	}
}

func TestCheckSize(t *testing.T) {
	o := brokerconfig.DefaultOptions("raw")
	r, err := Build(&o, "redis", env("a", "S", 1, nil, strings.Repeat("x", 900)), stored)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckSize("redis", r.Size(), 1024); err != nil {
		t.Errorf("900-byte body: %v", err)
	}
	r.Body = []byte(strings.Repeat("x", 1000))
	err = CheckSize("redis", r.Size(), 1024)
	if res := sink.Failed(err); res.Outcome != sink.Permanent || res.ErrorType != sink.PermanentSinkError ||
		!strings.Contains(err.Error(), "redis record exceeds max_record_bytes") {
		t.Errorf("oversized = %+v", res)
	}
}

func TestResolvePassword(t *testing.T) {
	lookup := func(name string) (string, bool) {
		switch name {
		case "SET":
			return "s3cret", true
		case "EMPTY":
			return "", true
		}
		return "", false
	}
	v := secret.Value("inline")
	for _, tt := range []struct {
		name string
		a    brokerconfig.Auth
		want string
		path string
	}{
		{"inline", brokerconfig.Auth{Password: &v}, "inline", ""},
		{"env", brokerconfig.Auth{PasswordEnv: ptr("SET")}, "s3cret", ""},
		{"env unset", brokerconfig.Auth{PasswordEnv: ptr("UNSET")}, "", "password_env"},
		{"env empty", brokerconfig.Auth{PasswordEnv: ptr("EMPTY")}, "", "password_env"},
		{"file missing", brokerconfig.Auth{PasswordFile: ptr("/nonexistent/pw")}, "", "password_file"},
	} {
		got, _, err := ResolvePassword(&tt.a, lookup)
		if tt.path != "" {
			ce, ok := errors.AsType[*sink.ConfigError](err)
			if !ok || ce.Problems[0].Path != tt.path {
				t.Errorf("%s: err = %v, want a configuration error at %s", tt.name, err, tt.path)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s: %q, %v", tt.name, got, err)
		}
	}
	a := brokerconfig.Auth{Username: ptr("u"), Password: &v, PasswordEnv: ptr("bad-name")}
	got := a.Rules(true)
	want := []sink.Problem{
		{Path: "password", Message: "set only one of password, password_env, password_file"},
		{Path: "password_env", Message: "must match ^[A-Z_][A-Z0-9_]{0,127}$"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Problems (-want +got):\n%s", diff)
	}
	if got := (&brokerconfig.Auth{Username: ptr("u")}).Rules(true); len(got) != 1 || got[0].Path != "username" {
		t.Errorf("username without password: %v", got)
	}
}

func ptr[T any](v T) *T { return &v }
