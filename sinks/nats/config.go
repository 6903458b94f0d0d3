// Package natssink is the NATS republish sink (spec sinks.md §10,
// data-shapes §13): every message is published to a JetStream-stored subject
// and counts as written only when its PubAck arrives. The package is named
// natssink, not nats, so that it does not clash with nats.go in importers.
//
// The duplicate model is JetStream's own: each message carries Nats-Msg-Id =
// the core idempotency key, so a redelivery inside the target stream's
// duplicate window is answered with a PubAck flagged duplicate and reported
// as sink.Duplicate.
package natssink

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/subject"
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/telemetry"
)

// Config is the nats sink's configuration (sinks.md §10). Default returns it
// with every default; Decode fills it from a "sink" object.
type Config struct {
	Type                   string             `json:"type" trim:"true" lower:"true" enum:"nats" doc:"Sink type."`
	Subject                *string            `json:"subject" nonblank:"true" doc:"Literal target subject; exactly one of subject, subject_prefix."`
	SubjectPrefix          *string            `json:"subject_prefix" nonblank:"true" doc:"Target = prefix + \".\" + original subject; exactly one of subject, subject_prefix."`
	Connection             *Connection        `json:"connection" doc:"null reuses the source connection; else the connection keys of the nats section, for another cluster or account."`
	ExpectedStream         *string            `json:"expected_stream" nonblank:"true" doc:"Publishes fail unless this stream stores the message (Nats-Expected-Stream)."`
	BodyFormat             string             `json:"body_format" enum:"raw,envelope" doc:"raw = the delivered bytes; envelope = nats_sinks.nats.message.v1 (data-shapes §13)."`
	PayloadMode            record.PayloadMode `json:"payload_mode" enum:"json_or_envelope,json_only,text_envelope,bytes_envelope" doc:"Payload normalisation for the envelope body (data-shapes §4)."`
	ForwardHeaders         bool               `json:"forward_headers" doc:"Copy the original headers, except names starting with Nats-."`
	PublishTimeoutMS       int                `json:"publish_timeout_ms" min:"100" max:"60000" doc:"How long one publish waits for its PubAck."`
	MaxConcurrentPublishes int                `json:"max_concurrent_publishes" min:"1" max:"10000" doc:"Outstanding asynchronous publishes of the sink."`

	// Metrics, when set (by the CLI), receives nats_republish_seconds and
	// nats_republish_duplicates_total. Nil means no sink metrics.
	Metrics *telemetry.Metrics `json:"-"`
	// Env looks up environment variables for the connection's *_env keys;
	// nil means the process environment.
	Env config.Env `json:"-"`
	// Source is the source connection, used when Connection is nil. The
	// sink never closes it.
	Source *nats.Conn `json:"-"`
	// SourceFilters are the source consumer's filter subjects. Open refuses
	// a target they would consume again (the loop rule).
	SourceFilters []string `json:"-"`
	// SourceDomain and SourceAPIPrefix are the nats section's domain and
	// api_prefix. With connection null the sink reuses the source
	// connection and, with it, the source's JetStream context: on a leaf
	// node whose source is reached through domain "hub", the target
	// stream lookup goes to the hub too. A target in another domain needs
	// a connection object with its own domain.
	SourceDomain    *string `json:"-"`
	SourceAPIPrefix *string `json:"-"`
}

// Connection is the "connection" object: the connection keys of the nats
// section (config.md §3) without stream, consumer, subject and durable.
// Defaults are the nats section's.
type Connection struct {
	URL                      string            `json:"url" trim:"true" doc:"Server URL: nats, tls, ws or wss scheme; no credentials."`
	URLs                     []string          `json:"urls" trim:"true" doc:"Seed URLs, each validated like url; when non-empty they replace url."`
	Name                     *string           `json:"name" doc:"Client connection name."`
	User                     *string           `json:"user" doc:"Requires exactly one of password, password_env, password_file."`
	Password                 *secret.Value     `json:"password" secret:"true" doc:"Requires user."`
	PasswordEnv              *string           `json:"password_env" nonblank:"true" doc:"Environment variable holding the password; requires user."`
	PasswordFile             *string           `json:"password_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"File holding the password; requires user."`
	Token                    *secret.Value     `json:"token" secret:"true" doc:"Only one of token, token_env, token_file."`
	TokenEnv                 *string           `json:"token_env" nonblank:"true" doc:"Environment variable holding the token."`
	TokenFile                *string           `json:"token_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"File holding the token."`
	CredsFile                *string           `json:"creds_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"Path to a .creds file."`
	NkeySeedFile             *string           `json:"nkey_seed_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"Path to an NKey seed file."`
	TLSCAFile                *string           `json:"tls_ca_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"PEM CA bundle; when set only these CAs are trusted."`
	TLSCertFile              *string           `json:"tls_cert_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"Client certificate (mTLS)."`
	TLSKeyFile               *string           `json:"tls_key_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"Client key; requires tls_cert_file."`
	TLSVerify                bool              `json:"tls_verify" doc:"false disables certificate and host-name verification (lab use only)."`
	WebsocketHeaders         map[string]string `json:"websocket_headers" null:"empty" maxitems:"32" doc:"Headers sent on the WebSocket upgrade (ws/wss URLs only)."`
	WebsocketHeadersEnv      map[string]string `json:"websocket_headers_env" null:"empty" maxitems:"32" pattern:"^[A-Z_][A-Z0-9_]{0,127}$" doc:"Headers whose values come from environment variables."`
	NoEcho                   bool              `json:"no_echo"`
	AllowReconnect           bool              `json:"allow_reconnect"`
	ConnectTimeoutSeconds    int               `json:"connect_timeout_seconds" min:"1" max:"300"`
	ReconnectTimeWaitSeconds int               `json:"reconnect_time_wait_seconds" min:"0" max:"3600"`
	MaxReconnectAttempts     int               `json:"max_reconnect_attempts" min:"-1" max:"1000000" doc:"-1 = forever."`
	PingIntervalSeconds      int               `json:"ping_interval_seconds" min:"1" max:"3600"`
	MaxOutstandingPings      int               `json:"max_outstanding_pings" min:"1" max:"100"`
	PendingSizeBytes         int               `json:"pending_size_bytes" min:"1024" max:"1073741824" doc:"Reconnect buffer size."`
	DrainTimeoutSeconds      int               `json:"drain_timeout_seconds" min:"1" max:"3600" doc:"Bound on connection drain at Stop."`
	Domain                   *string           `json:"domain" nonblank:"true" nopad:"true" nocontrol:"true" doc:"JetStream domain of the stream lookup; not with api_prefix."`
	APIPrefix                *string           `json:"api_prefix" nonblank:"true" nopad:"true" nocontrol:"true" doc:"JetStream API prefix of the stream lookup; not with domain."`
}

// SetDefaults sets the nats section's defaults (config.md §3); the decoder
// calls it before decoding a "connection" object.
func (c *Connection) SetDefaults() {
	*c = Connection{
		URL:                      "nats://localhost:4222",
		URLs:                     []string{},
		TLSVerify:                true,
		WebsocketHeaders:         map[string]string{},
		WebsocketHeadersEnv:      map[string]string{},
		AllowReconnect:           true,
		ConnectTimeoutSeconds:    2,
		ReconnectTimeWaitSeconds: 2,
		MaxReconnectAttempts:     60,
		PingIntervalSeconds:      120,
		MaxOutstandingPings:      2,
		PendingSizeBytes:         2097152,
		DrainTimeoutSeconds:      30,
	}
}

// Servers returns the seed URLs: urls when non-empty, else [url].
func (c *Connection) Servers() []string {
	if len(c.URLs) > 0 {
		return c.URLs
	}
	return []string{c.URL}
}

var _ fields.Validator = (*Config)(nil)

// Default returns the configuration with every default of sinks.md §10.
func Default() Config {
	return Config{
		Type:                   "nats",
		BodyFormat:             "raw",
		PayloadMode:            record.JSONOrEnvelope,
		ForwardHeaders:         true,
		PublishTimeoutMS:       5000,
		MaxConcurrentPublishes: 256,
	}
}

// Decode validates one nats "sink" object without I/O and returns its
// Config. Problems come back as one *sink.ConfigError with paths relative to
// the sink object ("subject: ...").
func Decode(raw json.RawMessage) (sink.Opener, error) {
	c := Default()
	if err := fields.DecodeSink(raw, &c); err != nil {
		return nil, err
	}
	return c, nil
}

// Validate checks the rules the struct tags cannot express; fields.DecodeSink
// calls it after decoding.
func (c *Config) Validate(p *fields.Problems) {
	for _, pr := range c.problems() {
		p.Add(pr.Path, pr.Message)
	}
}

var streamNameBad = regexp.MustCompile(`[\x00-\x20\x7f.*>/\\\x{85}\x{a0}]`)

// problems returns every rule violation in schema order. New runs it too,
// for Configs built by hand rather than decoded.
func (c *Config) problems() []sink.Problem {
	var out []sink.Problem
	add := func(path, msg string) { out = append(out, sink.Problem{Path: path, Message: msg}) }
	switch {
	case c.Subject == nil && c.SubjectPrefix == nil:
		add("subject", "exactly one of subject, subject_prefix is required")
	case c.Subject != nil && c.SubjectPrefix != nil:
		add("subject", "set only one of subject, subject_prefix")
	}
	if c.Subject != nil && !subject.IsLiteral(*c.Subject) {
		add("subject", "must be a literal subject: no wildcards, empty tokens or whitespace")
	}
	if c.SubjectPrefix != nil && !subject.IsLiteral(*c.SubjectPrefix) {
		add("subject_prefix", "must be a literal subject prefix: no wildcards, empty tokens or whitespace")
	}
	if c.Connection != nil {
		c.Connection.problems("connection", add)
	}
	if c.ExpectedStream != nil && streamNameBad.MatchString(*c.ExpectedStream) {
		add("expected_stream", `must not contain whitespace, '.', '*', '>', '/' or '\'`)
	}
	if c.BodyFormat != "raw" && c.BodyFormat != "envelope" {
		add("body_format", fmt.Sprintf("must be one of raw, envelope (got %q)", c.BodyFormat))
	}
	switch c.PayloadMode {
	case record.JSONOrEnvelope, record.JSONOnly, record.TextEnvelope, record.BytesEnvelope:
	default:
		add("payload_mode", fmt.Sprintf("must be one of json_or_envelope, json_only, text_envelope, bytes_envelope (got %q)", c.PayloadMode))
	}
	if c.PublishTimeoutMS < 100 || c.PublishTimeoutMS > 60000 {
		add("publish_timeout_ms", fmt.Sprintf("must be between 100 and 60000 (got %d)", c.PublishTimeoutMS))
	}
	if c.MaxConcurrentPublishes < 1 || c.MaxConcurrentPublishes > 10000 {
		add("max_concurrent_publishes", fmt.Sprintf("must be between 1 and 10000 (got %d)", c.MaxConcurrentPublishes))
	}
	return out
}

var (
	headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
	// Headers that carry credentials must come from the environment.
	credentialHeaders = []string{"authorization", "cookie", "proxy-authorization", "x-api-key", "x-auth-token"}
	protocolHeaders   = []string{"connection", "content-length", "host", "sec-websocket-accept", "sec-websocket-extensions", "sec-websocket-key", "sec-websocket-protocol", "sec-websocket-version", "transfer-encoding", "upgrade"}
)

// problems applies the nats section's cross-key rules (config.md §3) to a
// connection object at path. The config package keeps its own copy
// unexported, and its messages name "nats.*" keys, so the rules are restated
// here with this object's paths.
func (c *Connection) problems(path string, add func(path, msg string)) {
	at := func(k string) string { return fields.Join(path, k) }
	schemes := map[string]bool{}
	if len(c.URLs) == 0 {
		if s, ok := checkServerURL(c.URL); ok {
			schemes[s] = true
		} else {
			add(at("url"), s)
		}
	}
	for i, u := range c.URLs {
		if s, ok := checkServerURL(u); ok {
			schemes[s] = true
		} else {
			add(fields.Index(at("urls"), i), s)
		}
	}
	websocket := schemes["ws"] || schemes["wss"]
	if websocket && (schemes["nats"] || schemes["tls"]) {
		add(at("urls"), "must not mix ws/wss with nats/tls URLs")
	}
	passwords := count(c.Password != nil, c.PasswordEnv != nil, c.PasswordFile != nil)
	tokens := count(c.Token != nil, c.TokenEnv != nil, c.TokenFile != nil)
	if count(c.User != nil || passwords > 0, tokens > 0, c.CredsFile != nil, c.NkeySeedFile != nil) > 1 {
		add(path, "configure a single NATS authentication method")
	}
	if c.User != nil && passwords == 0 {
		add(at("user"), "requires one of password, password_env, password_file")
	}
	if passwords > 1 {
		add(at("password"), "set only one of password, password_env, password_file")
	}
	if c.User == nil && passwords > 0 {
		add(at("user"), "required when a password is set")
	}
	if tokens > 1 {
		add(at("token"), "set only one of token, token_env, token_file")
	}
	if c.TLSKeyFile != nil && c.TLSCertFile == nil {
		add(at("tls_key_file"), "requires tls_cert_file")
	}
	for _, kind := range []struct {
		key string
		m   map[string]string
	}{{"websocket_headers", c.WebsocketHeaders}, {"websocket_headers_env", c.WebsocketHeadersEnv}} {
		names := make([]string, 0, len(kind.m))
		for k := range kind.m {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, name := range names {
			lower := strings.ToLower(name)
			switch {
			case !headerName.MatchString(name):
				add(at(kind.key)+"."+name, "invalid header name")
			case slices.Contains(protocolHeaders, lower):
				add(at(kind.key)+"."+name, "is a WebSocket protocol header and cannot be set")
			case kind.key == "websocket_headers" && slices.Contains(credentialHeaders, lower):
				add(at(kind.key)+"."+name, "carries credentials; set it through websocket_headers_env")
			case kind.key == "websocket_headers" && fields.HasControl(kind.m[name]):
				add(at(kind.key)+"."+name, "must not contain control characters")
			}
		}
		if len(kind.m) > 0 && !websocket {
			add(at(kind.key), "requires ws:// or wss:// server URLs")
		}
	}
	if c.Domain != nil && c.APIPrefix != nil {
		add(at("api_prefix"), "must not be set together with domain")
	}
}

// checkServerURL returns the lower-cased scheme and true, or a problem
// message and false. Messages never quote the URL: it may hold credentials.
func checkServerURL(raw string) (string, bool) {
	if raw == "" {
		return "must not be empty", false
	}
	if strings.ContainsAny(raw, "\x00\r\n") {
		return "must not contain control characters", false
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "must be a valid URL", false
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case !slices.Contains([]string{"nats", "tls", "ws", "wss"}, scheme):
		return "scheme must be one of nats, tls, ws, wss", false
	case u.Hostname() == "":
		return "must include a host", false
	case u.User != nil:
		return "must not include credentials; use user, password_env, token_env, creds_file or nkey_seed_file", false
	}
	return scheme, true
}

func count(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// Open starts the sink; it is New behind the sink.Opener interface.
func (c Config) Open(ctx context.Context) (sink.Sink, error) {
	s, err := New(ctx, c)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// WithEnv returns c reading its *_env keys through env (nil: the process
// environment); pipeline.OpenSink passes the environment it was given.
func (c Config) WithEnv(env config.Env) sink.Opener {
	c.Env = env
	return c
}

// WithMetrics returns c with its sink metrics reported to m; the CLI calls it
// for every sink that has metrics of its own.
func (c Config) WithMetrics(m *telemetry.Metrics) sink.Opener {
	c.Metrics = m
	return c
}
