package httpsink

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/sink"
)

func problems(t *testing.T, err error) []sink.Problem {
	t.Helper()
	if err == nil {
		return nil
	}
	var ce *sink.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not a *sink.ConfigError", err, err)
	}
	return ce.Problems
}

func TestDecodeDefaults(t *testing.T) {
	op, err := Decode([]byte(`{"type":"http","url":"https://hooks.example.com/in"}`))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	want := Default()
	want.URL = "https://hooks.example.com/in"
	if diff := cmp.Diff(want, op.(Config)); diff != "" {
		t.Errorf("Decode mismatch (-want +got):\n%s", diff)
	}
	if want.Retry != (Retry{MaxRetries: 0, BackoffMS: 250, MaxBackoffMS: 5000, BackoffMode: "exponential", BackoffMultiplier: 2, Jitter: "full"}) {
		t.Errorf("default retry = %+v", want.Retry)
	}
}

func TestDecodeNormalises(t *testing.T) {
	op, err := Decode([]byte(`{"type":" HTTP ","url":"https://a.example/x","method":" patch ",
		"endpoint_allowed_hosts":["A.Example"]}`))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	c := op.(Config)
	if c.Method != "PATCH" || c.EndpointAllowedHosts[0] != "a.example" {
		t.Errorf("method %q, allowed hosts %q; want PATCH, [a.example]", c.Method, c.EndpointAllowedHosts)
	}
}

func TestDecodeProblems(t *testing.T) {
	for _, tt := range []struct {
		name string
		doc  string
		want []sink.Problem
	}{
		{"url required", `{"type":"http"}`, []sink.Problem{{Path: "url", Message: "is required (or url_env, url_file)"}}},
		{"url and url_env", `{"type":"http","url":"https://a.example/x","url_env":"HOOK_URL"}`, []sink.Problem{{Path: "url", Message: "exactly one of url, url_env, url_file may be set"}}},
		{"unknown key", `{"type":"http","url":"https://a.example","retries":1}`,
			[]sink.Problem{{Path: "retries", Message: "unknown key"}}},
		{"per-key rules, schema order", `{"type":"http","url":"https://a.example","method":"GET","body_format":"xml",
			"endpoint_allowed_hosts":["a.example","A.example"," b"],
			"headers":{"X-A":" v","X-B":""},"headers_env":{"X-C":"lower"},
			"user_agent":" ua","request_timeout_seconds":0,"max_request_bytes":127,"max_response_bytes":1048577,
			"success_statuses":[],"retry_statuses":[99,600,503,503],"payload_mode":"raw",
			"idempotency":{"strategy":"uuid","header":""},
			"retry":{"max_retries":11,"backoff_ms":-1,"max_backoff_ms":300001,"backoff_mode":"random","backoff_multiplier":0.5,"jitter":"some"},
			"concurrency":257}`,
			[]sink.Problem{
				{Path: "method", Message: `must be one of POST, PUT, PATCH (got "GET")`},
				{Path: "body_format", Message: `must be one of envelope, payload (got "xml")`},
				{Path: "endpoint_allowed_hosts[1]", Message: `duplicate value "a.example"`},
				{Path: "endpoint_allowed_hosts[2]", Message: "must not have surrounding whitespace"},
				{Path: "headers.X-A", Message: "must not have surrounding whitespace"},
				{Path: "headers.X-B", Message: "must not be empty"},
				{Path: "headers_env.X-C", Message: `must match ^[A-Z_][A-Z0-9_]{0,127}$ (got "lower")`},
				{Path: "user_agent", Message: "must not have surrounding whitespace"},
				{Path: "request_timeout_seconds", Message: "must be greater than 0 and at most 120 (got 0)"},
				{Path: "max_request_bytes", Message: "must be between 128 and 52428800 (got 127)"},
				{Path: "max_response_bytes", Message: "must be between 0 and 1048576 (got 1048577)"},
				{Path: "success_statuses", Message: "must not be empty"},
				{Path: "retry_statuses[0]", Message: "must be between 100 and 599 (got 99)"},
				{Path: "retry_statuses[1]", Message: "must be between 100 and 599 (got 600)"},
				{Path: "retry_statuses[3]", Message: "duplicate value 503"},
				{Path: "payload_mode", Message: `must be one of json_or_envelope, json_only, text_envelope, bytes_envelope (got "raw")`},
				{Path: "idempotency.header", Message: "must not be empty"},
				{Path: "idempotency.strategy", Message: `must be one of idempotency_key, stream_sequence, message_id, payload_sha256 (got "uuid")`},
				{Path: "retry.max_retries", Message: "must be between 0 and 10 (got 11)"},
				{Path: "retry.backoff_ms", Message: "must be between 0 and 60000 (got -1)"},
				{Path: "retry.max_backoff_ms", Message: "must be between 0 and 300000 (got 300001)"},
				{Path: "retry.backoff_mode", Message: `must be one of fixed, linear, exponential (got "random")`},
				{Path: "retry.backoff_multiplier", Message: "must be between 1 and 10 (got 0.5)"},
				{Path: "retry.jitter", Message: `must be one of none, full, equal (got "some")`},
				{Path: "concurrency", Message: "must be between 1 and 256 (got 257)"},
			}},
		{"headers limit", `{"type":"http","url":"https://a.example","headers":{` + manyHeaders(33) + `}}`,
			[]sink.Problem{{Path: "headers", Message: "must have at most 32 entries (got 33)"}}},
		{"header value length", `{"type":"http","url":"https://a.example","headers":{"X-A":"` + strings.Repeat("v", 2049) + `"}}`,
			[]sink.Problem{{Path: "headers.X-A", Message: "must be at most 2048 characters"}}},
		{"header value control", `{"type":"http","url":"https://a.example","headers":{"X-A":"a\u0001b"}}`,
			[]sink.Problem{{Path: "headers.X-A", Message: "must not contain control characters"}}},
		{"cross-key rules", `{"type":"http","url":"https://a.example",
			"headers":{"Authorization":"Bearer x","Content-Type":"text/plain","bad name":"v","X-Tenant":"t","traceparent":"x"},
			"headers_env":{"x-tenant":"TENANT","Host":"H","X-Api-Key":"API_KEY"},
			"retry_statuses":[200,503],
			"idempotency":{"enabled":false},
			"retry":{"backoff_ms":100,"max_backoff_ms":50}}`,
			[]sink.Problem{
				{Path: "headers.Authorization", Message: "carries a credential: set it with headers_env"},
				{Path: "headers.Content-Type", Message: "header Content-Type is set by the sink and cannot be configured"},
				{Path: "headers.bad name", Message: `"bad name" is not a valid header name (RFC 9110 token)`},
				{Path: "headers.traceparent", Message: "header traceparent is set by the sink and cannot be configured"},
				{Path: "headers_env.Host", Message: "header Host is set by the sink and cannot be configured"},
				{Path: "headers_env.x-tenant", Message: "duplicates headers.X-Tenant (header names are case-insensitive)"},
				{Path: "retry_statuses[0]", Message: "200 is also in success_statuses"},
				{Path: "idempotency.required", Message: "requires idempotency.enabled"},
				{Path: "retry.max_backoff_ms", Message: "must be at least retry.backoff_ms (100) (got 50)"},
			}},
		{"case-insensitive duplicate headers", `{"type":"http","url":"https://a.example","headers":{"X-A":"1","x-a":"2"}}`,
			[]sink.Problem{{Path: "headers.x-a", Message: "duplicates headers.X-A (header names are case-insensitive)"}}},
		{"idempotency header rules", `{"type":"http","url":"https://a.example","headers":{"X-Key":"v"},
			"idempotency":{"header":"x-key"}}`,
			[]sink.Problem{{Path: "idempotency.header", Message: "is also set by headers.X-Key"}}},
		{"idempotency header forbidden", `{"type":"http","url":"https://a.example","idempotency":{"header":"Content-Length"}}`,
			[]sink.Problem{{Path: "idempotency.header", Message: "header Content-Length is set by the sink and cannot be configured"}}},
		{"disabled idempotency may reuse a header", `{"type":"http","url":"https://a.example","headers":{"X-Key":"v"},
			"idempotency":{"enabled":false,"required":false,"header":"x-key"}}`, nil},
		{"user agent controls", `{"type":"http","url":"https://a.example","user_agent":"a\u0007"}`,
			[]sink.Problem{{Path: "user_agent", Message: "must not contain control characters"}}},
		{"boundaries accepted", `{"type":"http","url":"https://a.example","request_timeout_seconds":120,
			"max_request_bytes":52428800,"max_response_bytes":0,"success_statuses":[100,599],"retry_statuses":[598],
			"retry":{"max_retries":10,"backoff_ms":60000,"max_backoff_ms":300000,"backoff_multiplier":10},"concurrency":256}`, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.doc))
			if diff := cmp.Diff(tt.want, problems(t, err)); diff != "" {
				t.Errorf("Decode problems mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func manyHeaders(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"X-H` + strings.Repeat("a", i+1) + `":"v"`)
	}
	return b.String()
}

func TestURLRules(t *testing.T) {
	for _, tt := range []struct {
		url       string
		allowHTTP bool
		allowed   []string
		want      string // "" = valid
	}{
		{"https://hooks.example.com/in", false, nil, ""},
		{"https://hooks.example.com:8443/a/b", false, []string{"hooks.example.com"}, ""},
		{"HTTPS://Hooks.Example.com/in", false, []string{"hooks.example.com"}, ""},
		{"http://127.0.0.1:8080/in", true, nil, ""},
		{"http://localhost/in", true, nil, ""},
		{"http://[::1]:9/in", true, nil, ""},
		{"http://127.0.0.1/in", false, nil, "must use https (http is allowed only with allow_http_for_local_testing and a loopback host)"},
		{"http://example.com/in", true, nil, `http is allowed only for localhost, 127.0.0.1 or ::1 (got host "example.com")`},
		{"ftp://example.com/in", false, nil, `must use https (got scheme "ftp")`},
		{"hooks.example.com/in", false, nil, `must use https (got scheme "")`},
		{"https:///in", false, nil, "must name a host"},
		{"https://user:pw@hooks.example.com/in", false, nil, "must not contain user-info; send credentials with headers_env"},
		{"https://hooks.example.com/in?token=x", false, nil, "must not contain a query"},
		{"https://hooks.example.com/in?", false, nil, "must not contain a query"},
		{"https://hooks.example.com/in#frag", false, nil, "must not contain a fragment"},
		{"https://hooks.example.com/" + strings.Repeat("p", 2047), false, nil, ""},
		{"https://hooks.example.com/" + strings.Repeat("p", 2048), false, nil, "path must be at most 2048 characters (got 2049)"},
		{"https://other.example.com/in", false, []string{"hooks.example.com"}, `host "other.example.com" is not in endpoint_allowed_hosts`},
		{"https://hooks.example.com:99999/in", false, nil, `invalid port "99999"`},
		{"https://exa mple.com/", false, nil, "is not a valid URL"},
	} {
		t.Run(tt.url, func(t *testing.T) {
			c := Default()
			c.URL, c.AllowHTTPForLocalTesting, c.EndpointAllowedHosts = tt.url, tt.allowHTTP, tt.allowed
			if got := checkURL(c.URL, c.AllowHTTPForLocalTesting, c.EndpointAllowedHosts); got != tt.want {
				t.Errorf("checkURL(%q) = %q, want %q", tt.url, got, tt.want)
			}
		})
	}
}

func TestURLProblemHidesUserInfo(t *testing.T) {
	_, err := Decode([]byte(`{"type":"http","url":"https://user:s3cret@a.example/"}`))
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Decode error = %v, want a problem that does not echo the password", err)
	}
}

func TestNewHeadersEnv(t *testing.T) {
	env := map[string]string{"TOKEN": "Bearer abc", "BLANK": "  ", "PADDED": " x", "CTRL": "a\x01b"}
	lookup := func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	for _, tt := range []struct {
		name    string
		headers map[string]string
		want    []sink.Problem
	}{
		{"resolved", map[string]string{"Authorization": "TOKEN"}, nil},
		{"missing, blank, padded, control", map[string]string{"X-A": "MISSING", "X-B": "BLANK", "X-C": "PADDED", "X-D": "CTRL"}, []sink.Problem{
			{Path: "headers_env.X-A", Message: "environment variable MISSING is not set"},
			{Path: "headers_env.X-B", Message: "environment variable BLANK must not be blank"},
			{Path: "headers_env.X-C", Message: "environment variable PADDED must not have surrounding whitespace"},
			{Path: "headers_env.X-D", Message: "environment variable CTRL must not contain control characters"},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			c.URL = "https://a.example/"
			c.HeadersEnv = tt.headers
			s, err := New(context.Background(), c, sink.Deps{Env: lookup})
			if diff := cmp.Diff(tt.want, problems(t, err)); diff != "" {
				t.Errorf("New problems mismatch (-want +got):\n%s", diff)
			}
			if err != nil {
				for _, v := range env {
					if strings.Contains(err.Error(), strings.TrimSpace(v)) && strings.TrimSpace(v) != "" {
						t.Errorf("New error %q leaks an environment value", err)
					}
				}
				return
			}
			if got := s.static.Get("Authorization"); got != "Bearer abc" {
				t.Errorf("Authorization = %q, want the environment value", got)
			}
		})
	}
}

func TestNewRejectsHandBuiltConfig(t *testing.T) {
	c := Default()
	c.URL = "https://a.example/"
	c.Concurrency = 0
	c.Method = "DELETE"
	_, err := New(context.Background(), c, sink.Deps{})
	want := []sink.Problem{
		{Path: "method", Message: `must be one of POST, PUT, PATCH (got "DELETE")`},
		{Path: "concurrency", Message: "must be between 1 and 256 (got 0)"},
	}
	if diff := cmp.Diff(want, problems(t, err)); diff != "" {
		t.Errorf("New problems mismatch (-want +got):\n%s", diff)
	}
}

func TestOpenMakesNoRequest(t *testing.T) {
	ep := newEndpoint(t, nil)
	s, err := ep.config().Open(t.Context(), sink.Deps{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := s.Stop(t.Context()); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if n := len(ep.requests()); n != 0 {
		t.Errorf("Open and Stop sent %d requests, want 0", n)
	}
	if _, ok := s.(sink.HealthChecker); ok {
		t.Errorf("the http sink implements HealthChecker; test-sink must make no request (docs/http.md)")
	}
}
