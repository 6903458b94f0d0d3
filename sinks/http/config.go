// Package httpsink is the HTTP sink (docs/http.md): one request per
// message to one fixed endpoint, Committed only when the endpoint answers
// with a success status.
//
// The endpoint is the sink's duplicate model: every request carries an
// idempotency header (docs/formats.md#idempotency-keys), and the endpoint must treat it as a
// de-duplication key, because a crash between its 2xx and the runner's ACK
// redelivers the message.
//
// The directory is sinks/http; the package is named httpsink so that it does
// not shadow net/http in the files that use both.
package httpsink

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/urlcheck"
	"github.com/nats-sinks/nats-sink/sink"
)

// Config is the http sink's configuration (docs/http.md). Default returns it
// with every default; Decode fills it from a "sink" object.
type Config struct {
	Type                     string            `json:"type" trim:"true" lower:"true" enum:"http" doc:"Sink type."`
	URL                      string            `json:"url" nopad:"true" nocontrol:"true" doc:"Endpoint URL: https, or http for localhost with allow_http_for_local_testing. No user-info, query or fragment. Exactly one of url, url_env, url_file."`
	URLEnv                   *string           `json:"url_env" pattern:"^[A-Z_][A-Z0-9_]{0,127}$" doc:"Environment variable holding the endpoint URL (for URLs that carry a token in their path); read when the sink starts and checked like url."`
	URLFile                  *string           `json:"url_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"File holding the endpoint URL (one line); read when the sink starts and checked like url."`
	Method                   string            `json:"method" trim:"true" upper:"true" enum:"POST,PUT,PATCH" doc:"Request method."`
	BodyFormat               string            `json:"body_format" enum:"envelope,payload" doc:"Request body: the nats_sinks.http.message.v1 envelope, or the normalised payload alone (docs/formats.md#http-body)."`
	EndpointAllowedHosts     []string          `json:"endpoint_allowed_hosts" unique:"true" lower:"true" nonblank:"true" nopad:"true" nocontrol:"true" doc:"When non-empty, the URL's host must be one of these (lower-case host names)."`
	AllowHTTPForLocalTesting bool              `json:"allow_http_for_local_testing" doc:"Allow an http URL whose host is localhost, 127.0.0.1 or ::1."`
	Headers                  map[string]string `json:"headers" maxitems:"32" nonblank:"true" nopad:"true" nocontrol:"true" maxlen:"2048" doc:"Extra request headers (at most 32). Credentials must come from headers_env."`
	HeadersEnv               map[string]string `json:"headers_env" maxitems:"32" pattern:"^[A-Z_][A-Z0-9_]{0,127}$" doc:"Extra request headers whose values are read from these environment variables when the sink starts."`
	UserAgent                string            `json:"user_agent" nonblank:"true" nopad:"true" nocontrol:"true" maxlen:"2048" doc:"User-Agent header."`
	RequestTimeoutSeconds    float64           `json:"request_timeout_seconds" xmin:"0" max:"120" doc:"Timeout of one request attempt, response body included."`
	MaxRequestBytes          int               `json:"max_request_bytes" min:"128" max:"52428800" doc:"Largest request body; a larger message is dead-lettered."`
	MaxResponseBytes         int               `json:"max_response_bytes" min:"0" max:"1048576" doc:"Largest response body read; a larger one is a temporary failure."`
	SuccessStatuses          []int             `json:"success_statuses" minitems:"1" maxitems:"64" min:"100" max:"599" unique:"true" doc:"Statuses that mean the message is stored."`
	RetryStatuses            []int             `json:"retry_statuses" minitems:"1" maxitems:"64" min:"100" max:"599" unique:"true" doc:"Statuses that are temporary failures, retried per retry."`
	PayloadMode              string            `json:"payload_mode" enum:"json_or_envelope,json_only,text_envelope,bytes_envelope" doc:"How the payload is normalised (docs/formats.md#payload-normalisation)."`
	IncludeMetadata          bool              `json:"include_metadata" doc:"Add the standard metadata document to the envelope body."`
	IncludeMissionMetadata   bool              `json:"include_mission_metadata" doc:"Add mission_metadata (null) to the envelope body."`
	IncludeSecurityLabels    bool              `json:"include_security_labels" doc:"Add security_labels (null) to the envelope body."`
	IncludeCustody           bool              `json:"include_custody" doc:"Add custody (null) to the envelope body."`
	Idempotency              Idempotency       `json:"idempotency" doc:"The idempotency header the endpoint de-duplicates on."`
	Retry                    Retry             `json:"retry" doc:"Retries of temporary failures inside one write."`
	Concurrency              int               `json:"concurrency" min:"1" max:"256" doc:"Requests of one batch in flight at once; 1 sends in order and stops at the first temporary failure."`
}

// Idempotency is the "idempotency" object.
type Idempotency struct {
	Enabled  bool   `json:"enabled" doc:"Send the idempotency header."`
	Required bool   `json:"required" doc:"Dead-letter a message that has no material for the strategy instead of sending it without a key."`
	Header   string `json:"header" nonblank:"true" doc:"Header name."`
	Strategy string `json:"strategy" enum:"idempotency_key,stream_sequence,message_id,payload_sha256" doc:"What the key is derived from (docs/formats.md#idempotency-keys)."`
}

// Retry is the "retry" object: how often and how fast a temporary failure
// is retried inside one write before it is returned to the runner.
type Retry struct {
	MaxRetries        int     `json:"max_retries" min:"0" max:"10" doc:"Retries after the first attempt."`
	BackoffMS         int     `json:"backoff_ms" min:"0" max:"60000" doc:"Base delay in milliseconds."`
	MaxBackoffMS      int     `json:"max_backoff_ms" min:"0" max:"300000" doc:"Largest delay in milliseconds; at least backoff_ms."`
	BackoffMode       string  `json:"backoff_mode" enum:"fixed,linear,exponential" doc:"How the delay grows with the attempt."`
	BackoffMultiplier float64 `json:"backoff_multiplier" min:"1" max:"10" doc:"Growth factor of exponential mode."`
	Jitter            string  `json:"jitter" enum:"none,full,equal" doc:"Random spread of the delay."`
}

var _ fields.Validator = (*Config)(nil)

// Default returns the configuration with every default of docs/http.md.
func Default() Config {
	return Config{
		Type:                   "http",
		Method:                 "POST",
		BodyFormat:             "envelope",
		EndpointAllowedHosts:   []string{},
		Headers:                map[string]string{},
		HeadersEnv:             map[string]string{},
		UserAgent:              "nats-sinks-http/0.4",
		RequestTimeoutSeconds:  10,
		MaxRequestBytes:        1048576,
		MaxResponseBytes:       65536,
		SuccessStatuses:        []int{200, 201, 202, 204},
		RetryStatuses:          []int{408, 425, 429, 500, 502, 503, 504},
		PayloadMode:            string(record.JSONOrEnvelope),
		IncludeMetadata:        true,
		IncludeMissionMetadata: true,
		IncludeSecurityLabels:  true,
		IncludeCustody:         true,
		Idempotency: Idempotency{
			Enabled:  true,
			Required: true,
			Header:   "Idempotency-Key",
			Strategy: "idempotency_key",
		},
		Retry: Retry{
			MaxRetries:        0,
			BackoffMS:         250,
			MaxBackoffMS:      5000,
			BackoffMode:       "exponential",
			BackoffMultiplier: 2,
			Jitter:            "full",
		},
		Concurrency: 1,
	}
}

// Decode validates one http "sink" object without I/O and returns its
// Config. Problems come back as one *sink.ConfigError with paths relative to
// the sink object ("url: required"). Environment variables named by
// headers_env are read by Open, not here.
func Decode(raw json.RawMessage) (sink.Opener, error) {
	c := Default()
	if err := fields.DecodeSink(raw, &c); err != nil {
		return nil, err
	}
	c.Method = strings.ToUpper(strings.TrimSpace(c.Method))
	return c, nil
}

// Validate checks c: the rules of the struct tags and, when they pass, the
// rules they cannot express. Problems have paths relative to the sink
// object and come back as one *sink.ConfigError, or nil. Decode calls it on
// the decoded object, New before anything else, so a Config built in Go is
// checked like a loaded one.
func (c *Config) Validate() error { return fields.Validate(c, c.rules) }

// Open starts the sink; it is New behind the sink.Opener interface.
func (c Config) Open(ctx context.Context, deps sink.Deps) (sink.Sink, error) {
	s, err := New(ctx, c, deps)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// forbiddenHeaders are set by the sink itself or by the transport; a
// configured value would conflict with them. traceparent, tracestate and
// baggage carry the message's trace context (docs/tracing.md).
var forbiddenHeaders = []string{
	"accept", "connection", "content-length", "content-type", "host", "keep-alive",
	"proxy-connection", "transfer-encoding", "upgrade", "user-agent",
	"traceparent", "tracestate", "baggage",
}

// secretHeaders must come from the environment so that credentials never
// sit in a configuration file.
var secretHeaders = []string{"authorization", "cookie", "proxy-authorization", "x-api-key", "x-auth-token"}

// rules checks what the struct tags cannot express: the endpoint URL,
// allowed hosts, header names (credentials only from headers_env, no
// header set twice), statuses both retried and successful, the idempotency
// header, and the retry delays.
func (c *Config) rules(p *fields.Problems) {
	switch sources := btoi(c.URL != "") + btoi(c.URLEnv != nil) + btoi(c.URLFile != nil); {
	case sources == 0:
		p.Add("url", "is required (or url_env, url_file)")
	case sources > 1:
		p.Add("url", "exactly one of url, url_env, url_file may be set")
	case c.URL != "":
		if msg := checkURL(c.URL, c.AllowHTTPForLocalTesting, c.EndpointAllowedHosts); msg != "" {
			p.Add("url", msg)
		}
	}
	for i, h := range c.EndpointAllowedHosts {
		if strings.ContainsAny(h, "/@") {
			p.Addf(fields.Index("endpoint_allowed_hosts", i), "must be a host name without \"/\" or \"@\" (got %q)", h)
		} else if h != strings.ToLower(h) {
			// Decode lower-cases them; a Config built in Go must.
			p.Addf(fields.Index("endpoint_allowed_hosts", i), "must be lower-case (got %q)", h)
		}
	}
	seen := map[string]string{} // lower-cased name → key path that first used it
	for _, name := range sortedKeys(c.Headers) {
		path := fields.Join("headers", name)
		if msg := checkHeaderName(name); msg != "" {
			p.Add(path, msg)
		} else if slices.Contains(secretHeaders, strings.ToLower(name)) {
			p.Add(path, "carries a credential: set it with headers_env")
		}
		if prev, dup := seen[strings.ToLower(name)]; dup {
			p.Addf(path, "duplicates %s (header names are case-insensitive)", prev)
		}
		seen[strings.ToLower(name)] = path
	}
	for _, name := range sortedKeys(c.HeadersEnv) {
		path := fields.Join("headers_env", name)
		if msg := checkHeaderName(name); msg != "" {
			p.Add(path, msg)
		}
		if prev, dup := seen[strings.ToLower(name)]; dup {
			p.Addf(path, "duplicates %s (header names are case-insensitive)", prev)
		}
		seen[strings.ToLower(name)] = path
	}
	for i, st := range c.RetryStatuses {
		if slices.Contains(c.SuccessStatuses, st) {
			p.Addf(fields.Index("retry_statuses", i), "%d is also in success_statuses", st)
		}
	}
	id := c.Idempotency
	if id.Required && !id.Enabled {
		p.Add("idempotency.required", "requires idempotency.enabled")
	}
	if msg := checkHeaderName(id.Header); msg != "" {
		p.Add("idempotency.header", msg)
	} else if prev, dup := seen[strings.ToLower(id.Header)]; dup && id.Enabled {
		// The spec is silent; two values for one header would leave the
		// endpoint de-duplicating on whichever it reads, so reject it.
		p.Addf("idempotency.header", "is also set by %s", prev)
	}
	if r := c.Retry; r.MaxBackoffMS < r.BackoffMS {
		p.Addf("retry.max_backoff_ms", "must be at least retry.backoff_ms (%d) (got %d)", r.BackoffMS, r.MaxBackoffMS)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// checkURL returns the problem with the endpoint URL raw, or "". The
// message never contains raw's path or user-info: a URL read from url_env
// or url_file is a secret.
func checkURL(raw string, allowHTTP bool, allowedHosts []string) string {
	r := urlcheck.Rules{
		SchemeProblem:       "must use https",
		UserInfoProblem:     "must not contain user-info; send credentials with headers_env",
		MaxPathLen:          2048,
		HTTPLoopbackProblem: "http is allowed only for localhost, 127.0.0.1 or ::1",
		AllowedHosts:        allowedHosts,
	}
	if !allowHTTP {
		r.HTTPRefused = "must use https (http is allowed only with allow_http_for_local_testing and a loopback host)"
	}
	return r.Check(raw)
}

// checkHeaderName returns the problem with a configured header name, or "".
func checkHeaderName(name string) string {
	if name == "" {
		return "header name must not be empty"
	}
	for i := 0; i < len(name); i++ {
		if !isTokenChar(name[i]) {
			return fmt.Sprintf("%q is not a valid header name (RFC 9110 token)", name)
		}
	}
	if slices.Contains(forbiddenHeaders, strings.ToLower(name)) {
		return fmt.Sprintf("header %s is set by the sink and cannot be configured", name)
	}
	return ""
}

// isTokenChar reports whether c is a tchar of RFC 9110 docs/sql.md#per-database.
func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
