// Package natsconfig holds the settings of one NATS connection: the keys of
// the configuration's nats section (docs/configuration.md#nats) other than the
// stream, consumer and subject to read, which the NATS republish sink's
// "connection" object shares. It is one type, decoded, validated and turned
// into client options the same way wherever it appears; the configuration
// loader embeds it in its nats section and the republish sink points at it.
//
// The package is a leaf: it imports package sink (for the error type),
// package secret and the module's internal decoder, never the loader, so
// that a sink can use it.
package natsconfig

import (
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
)

// Connection is how to reach and authenticate to a NATS server
// (docs/configuration.md#nats). Nullable keys are pointers: nil is null. Default returns it with
// every default; the per-key rules are in the struct tags (Validate checks
// them, and the loader while decoding), the rules between keys in Rules.
type Connection struct {
	URL                      string            `json:"url" trim:"true" doc:"Server URL: nats, tls, ws or wss scheme; no credentials. A comma-separated list is checked element by element."`
	URLs                     []string          `json:"urls" trim:"true" doc:"Seed URLs, each validated like url (a comma-separated item element by element); when non-empty they replace url. ws/wss must not be mixed with nats/tls."`
	Name                     *string           `json:"name" doc:"Client connection name."`
	User                     *string           `json:"user" doc:"Requires exactly one of password, password_env, password_file."`
	Password                 *secret.Value     `json:"password" secret:"true" doc:"Requires user; only one of password, password_env, password_file."`
	PasswordEnv              *string           `json:"password_env" nonblank:"true" doc:"Environment variable holding the password; requires user."`
	PasswordFile             *string           `json:"password_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"File holding the password (one trailing newline removed); requires user."`
	Token                    *secret.Value     `json:"token" secret:"true" doc:"Only one of token, token_env, token_file."`
	TokenEnv                 *string           `json:"token_env" nonblank:"true" doc:"Environment variable holding the token."`
	TokenFile                *string           `json:"token_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"File holding the token."`
	CredsFile                *string           `json:"creds_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"Path to a .creds file."`
	NkeySeedFile             *string           `json:"nkey_seed_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"Path to an NKey seed file."`
	TLSCAFile                *string           `json:"tls_ca_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"PEM CA bundle; when set only these CAs are trusted."`
	TLSCertFile              *string           `json:"tls_cert_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"Client certificate (mTLS)."`
	TLSKeyFile               *string           `json:"tls_key_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"Client key; requires tls_cert_file."`
	TLSVerify                bool              `json:"tls_verify" doc:"false disables certificate and host-name verification (lab use only)."`
	WebsocketHeaders         map[string]string `json:"websocket_headers" null:"empty" maxitems:"32" doc:"Headers sent on the WebSocket upgrade (ws/wss URLs only); credential-bearing names must use websocket_headers_env."`
	WebsocketHeadersEnv      map[string]string `json:"websocket_headers_env" null:"empty" maxitems:"32" pattern:"^[A-Z_][A-Z0-9_]{0,127}$" doc:"Headers whose values come from environment variables."`
	NoEcho                   bool              `json:"no_echo"`
	AllowReconnect           bool              `json:"allow_reconnect"`
	ConnectTimeoutSeconds    int               `json:"connect_timeout_seconds" min:"1" max:"300"`
	ReconnectTimeWaitSeconds int               `json:"reconnect_time_wait_seconds" min:"0" max:"3600"`
	MaxReconnectAttempts     int               `json:"max_reconnect_attempts" min:"-1" max:"1000000" doc:"-1 = forever."`
	PingIntervalSeconds      int               `json:"ping_interval_seconds" min:"1" max:"3600"`
	MaxOutstandingPings      int               `json:"max_outstanding_pings" min:"1" max:"100"`
	PendingSizeBytes         int               `json:"pending_size_bytes" min:"1024" max:"1073741824" doc:"Reconnect buffer size."`
	DrainTimeoutSeconds      int               `json:"drain_timeout_seconds" min:"1" max:"3600" doc:"Bound on connection drain at shutdown."`
	Domain                   *string           `json:"domain" nonblank:"true" nopad:"true" nocontrol:"true" doc:"JetStream domain; not with api_prefix."`
	APIPrefix                *string           `json:"api_prefix" nonblank:"true" nopad:"true" nocontrol:"true" doc:"JetStream API prefix; not with domain."`
}

// Default returns the connection settings with every default of
// docs/configuration.md#nats: nats://localhost:4222, reconnecting 60 times 2 s apart, TLS verified.
func Default() Connection {
	return Connection{
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

// SetDefaults sets c to Default(); the decoder calls it before decoding an
// object onto a new *Connection.
func (c *Connection) SetDefaults() { *c = Default() }

// Servers returns the seed URLs: urls when non-empty, else url, with
// every comma-separated list split into its elements (trimmed), as
// nats.go splits a URL string it is given.
func (c *Connection) Servers() []string {
	list := c.URLs
	if len(list) == 0 {
		list = []string{c.URL}
	}
	var out []string
	for _, u := range list {
		out = append(out, splitURLs(u)...)
	}
	return out
}

// splitURLs splits a URL string on commas and trims each element, as
// nats.go does before it dials.
func splitURLs(raw string) []string {
	parts := strings.Split(raw, ",")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
	}
	return parts
}

// Validate checks c on its own, as a Connection built in Go: the per-key
// rules of the struct tags and, when they pass, Rules. Problems have paths
// relative to c ("urls[0]", "tls_key_file") and come back as a
// *sink.ConfigError in schema order, or nil.
func (c *Connection) Validate() error {
	return fields.Validate(c, func(p *fields.Problems) {
		for _, pr := range c.Rules("", "") {
			p.Add(pr.Path, pr.Message)
		}
	})
}

var (
	headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
	// Headers that carry credentials must come from the environment, so
	// they never sit in a configuration file.
	credentialHeaders = []string{"authorization", "cookie", "proxy-authorization", "x-api-key", "x-auth-token"}
	// Headers the WebSocket handshake itself controls.
	protocolHeaders = []string{"connection", "content-length", "host", "sec-websocket-accept", "sec-websocket-extensions", "sec-websocket-key", "sec-websocket-protocol", "sec-websocket-version", "transfer-encoding", "upgrade"}
)

// Rules returns the problems of the rules between c's keys
// (docs/security.md#authenticating-to-nats): valid server URLs without credentials, no ws/wss mixed with
// nats/tls, a single authentication method, user and password as a pair,
// one source per secret, a TLS key only with its certificate, WebSocket
// headers only for WebSocket URLs, not both domain and api_prefix. The
// per-key rules are the struct tags'.
//
// path is c's JSON path ("nats", or "connection" inside a sink object; ""
// for c itself). ref is put in front of the other keys a message names:
// "nats." gives "requires nats.tls_cert_file", "" gives "requires
// tls_cert_file". Problems come in the order the rules run; a
// fields-sorted list puts them into schema order.
func (c *Connection) Rules(path, ref string) []sink.Problem {
	var out []sink.Problem
	add := func(p, msg string) { out = append(out, sink.Problem{Path: p, Message: msg}) }
	at := func(key string) string { return join(path, key) }
	name := func(key string) string { return ref + key }

	schemes := map[string]bool{}
	hint := "must not include credentials; use " + name("user") + ", " + name("password_env") + ", " + name("token_env") +
		", " + name("creds_file") + " or " + name("nkey_seed_file")
	if s, msg := checkServerURLs(c.URL, hint); msg != "" {
		add(at("url"), msg)
	} else if len(c.URLs) == 0 {
		for _, x := range s {
			schemes[x] = true
		}
	}
	for i, u := range c.URLs {
		if s, msg := checkServerURLs(u, hint); msg != "" {
			add(at("urls")+"["+itoa(i)+"]", msg)
		} else {
			for _, x := range s {
				schemes[x] = true
			}
		}
	}
	websocket := schemes["ws"] || schemes["wss"]
	if websocket && (schemes["nats"] || schemes["tls"]) {
		key := "urls"
		if len(c.URLs) == 0 {
			key = "url"
		}
		add(at(key), "must not mix ws/wss with nats/tls URLs")
	}

	// Authentication: sources of one secret are exclusive, user and
	// password come as a pair, and at most one mode is configured.
	passwordSources := count(c.Password != nil, c.PasswordEnv != nil, c.PasswordFile != nil)
	tokenSources := count(c.Token != nil, c.TokenEnv != nil, c.TokenFile != nil)
	modes := count(c.User != nil || passwordSources > 0, tokenSources > 0, c.CredsFile != nil, c.NkeySeedFile != nil)
	if modes > 1 {
		add(at(""), "configure a single NATS authentication method")
	}
	if c.User != nil && passwordSources == 0 {
		add(at("user"), "requires one of "+name("password")+", "+name("password_env")+", "+name("password_file"))
	}
	if passwordSources > 1 {
		add(at("password"), "set only one of password, password_env, password_file")
	}
	if c.User == nil {
		for _, s := range []struct {
			set bool
			key string
		}{{c.Password != nil, "password"}, {c.PasswordEnv != nil, "password_env"}, {c.PasswordFile != nil, "password_file"}} {
			if s.set {
				add(at(s.key), "requires "+name("user"))
			}
		}
	}
	if tokenSources > 1 {
		add(at("token"), "set only one of token, token_env, token_file")
	}
	if c.TLSKeyFile != nil && c.TLSCertFile == nil {
		add(at("tls_key_file"), "requires "+name("tls_cert_file"))
	}
	if c.Domain != nil && c.APIPrefix != nil {
		add(at("api_prefix"), "must not be set together with "+name("domain"))
	}
	c.websocketHeaders(websocket, at, name, add)
	return out
}

func (c *Connection) websocketHeaders(websocket bool, at, name func(string) string, add func(p, msg string)) {
	plain := map[string]string{} // lower-cased name -> name as written
	for _, h := range sortedKeys(c.WebsocketHeaders) {
		p := at("websocket_headers") + "." + h
		if !checkHeaderName(p, h, plain, add) {
			continue
		}
		lower := strings.ToLower(h)
		if slices.Contains(credentialHeaders, lower) {
			add(p, "carries credentials; set it through "+name("websocket_headers_env"))
			continue
		}
		v := c.WebsocketHeaders[h]
		switch {
		case len([]rune(v)) > 2048:
			add(p, "must be at most 2048 characters")
		case fields.HasControl(v):
			add(p, "must not contain control characters")
		case strings.TrimSpace(v) != v:
			add(p, "must not have surrounding whitespace")
		}
	}
	fromEnv := map[string]string{}
	for _, h := range sortedKeys(c.WebsocketHeadersEnv) {
		p := at("websocket_headers_env") + "." + h
		if !checkHeaderName(p, h, fromEnv, add) {
			continue
		}
		if other, dup := plain[strings.ToLower(h)]; dup {
			add(p, "header "+quote(other)+" is also set in "+name("websocket_headers"))
		}
	}
	if !websocket {
		if len(c.WebsocketHeaders) > 0 {
			add(at("websocket_headers"), "requires ws:// or wss:// server URLs")
		}
		if len(c.WebsocketHeadersEnv) > 0 {
			add(at("websocket_headers_env"), "requires ws:// or wss:// server URLs")
		}
	}
}

// checkServerURLs checks a URL string as nats.go reads it: a
// comma-separated list whose every element is one server URL (a list can
// otherwise hide credentials behind a first element that passes). It
// returns the elements' lower-cased schemes, or the first problem, naming
// the element when there are several.
func checkServerURLs(raw, credentialsHint string) (schemes []string, msg string) {
	parts := splitURLs(raw)
	if len(parts) == 1 {
		s, msg := checkServerURL(raw, credentialsHint)
		return []string{s}, msg
	}
	for i, p := range parts {
		s, msg := checkServerURL(p, credentialsHint)
		if msg != "" {
			return nil, "element " + itoa(i+1) + " of the comma-separated list: " + msg
		}
		schemes = append(schemes, s)
	}
	return schemes, ""
}

// checkServerURL returns the lower-cased scheme of a server URL, or a
// problem message. Messages never quote the URL: it may hold credentials.
func checkServerURL(raw, credentialsHint string) (scheme, msg string) {
	if strings.ContainsAny(raw, "\x00\r\n") {
		return "", "must not contain control characters"
	}
	if raw == "" {
		return "", "must not be empty"
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse errors quote the input.
		return "", "must be a valid URL"
	}
	scheme = strings.ToLower(u.Scheme)
	switch {
	case !slices.Contains([]string{"nats", "tls", "ws", "wss"}, scheme):
		return "", "scheme must be one of nats, tls, ws, wss"
	case u.Host == "" || u.Hostname() == "" && !strings.HasPrefix(u.Host, ":"):
		return "", "must include a host"
	case u.User != nil:
		return "", credentialsHint
	}
	return scheme, ""
}

// checkHeaderName applies the header-name rules shared by both WebSocket
// header maps and records the name in seen (case-insensitively).
func checkHeaderName(path, h string, seen map[string]string, add func(p, msg string)) bool {
	lower := strings.ToLower(h)
	switch {
	case strings.TrimSpace(h) != h:
		add(path, "header name must not have surrounding whitespace")
	case !headerName.MatchString(h):
		add(path, "invalid header name")
	case slices.Contains(protocolHeaders, lower):
		add(path, "is a WebSocket protocol header and cannot be set")
	default:
		if other, dup := seen[lower]; dup {
			add(path, "duplicate header name (same as "+quote(other)+" ignoring case)")
			return false
		}
		seen[lower] = h
		return true
	}
	return false
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

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func join(path, key string) string {
	switch {
	case key == "":
		return path
	case path == "":
		return key
	}
	return path + "." + key
}

func itoa(i int) string { return strconv.Itoa(i) }

func quote(s string) string { return strconv.Quote(s) }
