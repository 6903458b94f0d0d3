package natssink

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/natsconfig"
	"github.com/nats-sinks/nats-sink/sink"
)

func ptr[T any](v T) *T { return &v }

func TestDecode(t *testing.T) {
	with := func(f func(*Config)) Config {
		c := Default()
		f(&c)
		return c
	}
	conn := natsconfig.Default()
	conn.URL = "nats://other:4222"
	for _, tt := range []struct {
		name string
		raw  string
		want Config
	}{
		{"defaults", `{"type":"nats","subject":"copy.orders"}`,
			with(func(c *Config) { c.Subject = ptr("copy.orders") })},
		{"prefix, null subject", `{"type":" NATS ","subject":null,"subject_prefix":"copy"}`,
			with(func(c *Config) { c.SubjectPrefix = ptr("copy") })},
		{"every option", `{"type":"nats","subject_prefix":"copy","connection":{"url":"nats://other:4222"},
			"expected_stream":"COPY","body_format":"envelope","payload_mode":"json_only","forward_headers":"no",
			"publish_timeout_ms":100,"max_concurrent_publishes":"10000"}`,
			Config{Type: "nats", SubjectPrefix: ptr("copy"), Connection: &conn, ExpectedStream: ptr("COPY"),
				BodyFormat: "envelope", PayloadMode: "json_only", PublishTimeoutMS: 100, MaxConcurrentPublishes: 10000}},
		{"null connection reuses the source", `{"type":"nats","subject":"a","connection":null}`,
			with(func(c *Config) { c.Subject = ptr("a") })},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o, err := Decode(json.RawMessage(tt.raw))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if diff := cmp.Diff(tt.want, o); diff != "" {
				t.Errorf("Decode(%s) mismatch (-want +got):\n%s", tt.raw, diff)
			}
		})
	}
}

func TestDecodeProblems(t *testing.T) {
	for _, tt := range []struct {
		name string
		raw  string
		want []sink.Problem
	}{
		{"neither subject nor prefix", `{"type":"nats"}`,
			[]sink.Problem{{Path: "subject", Message: "exactly one of subject, subject_prefix is required"}}},
		{"both", `{"type":"nats","subject":"a","subject_prefix":"b"}`,
			[]sink.Problem{{Path: "subject", Message: "set only one of subject, subject_prefix"}}},
		{"wildcard subject", `{"type":"nats","subject":"a.*"}`,
			[]sink.Problem{{Path: "subject", Message: "must be a literal subject: no wildcards, empty tokens or whitespace"}}},
		{"empty token", `{"type":"nats","subject":"a..b"}`,
			[]sink.Problem{{Path: "subject", Message: "must be a literal subject: no wildcards, empty tokens or whitespace"}}},
		{"blank subject", `{"type":"nats","subject":" "}`,
			[]sink.Problem{{Path: "subject", Message: "must not be empty"}}},
		{"prefix ending in a dot", `{"type":"nats","subject_prefix":"copy."}`,
			[]sink.Problem{{Path: "subject_prefix", Message: "must be a literal subject prefix: no wildcards, empty tokens or whitespace"}}},
		{"prefix with >", `{"type":"nats","subject_prefix":"copy.>"}`,
			[]sink.Problem{{Path: "subject_prefix", Message: "must be a literal subject prefix: no wildcards, empty tokens or whitespace"}}},
		{"expected stream name", `{"type":"nats","subject":"a","expected_stream":"A.B"}`,
			[]sink.Problem{{Path: "expected_stream", Message: `must not contain whitespace, '.', '*', '>', '/' or '\'`}}},
		{"ranges and enums, in schema order", `{"type":"nats","subject":"a","max_concurrent_publishes":0,
			"publish_timeout_ms":99,"body_format":"payload","payload_mode":"raw"}`, []sink.Problem{
			{Path: "body_format", Message: `must be one of raw, envelope (got "payload")`},
			{Path: "payload_mode", Message: `must be one of json_or_envelope, json_only, text_envelope, bytes_envelope (got "raw")`},
			{Path: "publish_timeout_ms", Message: "must be between 100 and 60000 (got 99)"},
			{Path: "max_concurrent_publishes", Message: "must be between 1 and 10000 (got 0)"},
		}},
		{"upper bounds", `{"type":"nats","subject":"a","publish_timeout_ms":60001,"max_concurrent_publishes":10001}`, []sink.Problem{
			{Path: "publish_timeout_ms", Message: "must be between 100 and 60000 (got 60001)"},
			{Path: "max_concurrent_publishes", Message: "must be between 1 and 10000 (got 10001)"},
		}},
		{"unknown key", `{"type":"nats","subject":"a","subjetc":"b"}`,
			[]sink.Problem{{Path: "subjetc", Message: `unknown key (did you mean "subject")`}}},
		{"connection: unknown key and range", `{"type":"nats","subject":"a","connection":{"stream":"S","connect_timeout_seconds":0}}`,
			[]sink.Problem{
				{Path: "connection.connect_timeout_seconds", Message: "must be between 1 and 300 (got 0)"},
				{Path: "connection.stream", Message: "unknown key"},
			}},
		{"connection: URL rules", `{"type":"nats","subject":"a","connection":{"urls":["http://h:1","nats://u:p@h:1","ws://h:1","nats://h:2"]}}`,
			[]sink.Problem{
				{Path: "connection.urls", Message: "must not mix ws/wss with nats/tls URLs"},
				{Path: "connection.urls[0]", Message: "scheme must be one of nats, tls, ws, wss"},
				{Path: "connection.urls[1]", Message: "must not include credentials; use user, password_env, token_env, creds_file or nkey_seed_file"},
			}},
		// A comma-separated list is what nats.go splits and dials: each
		// element passes the rules of one URL.
		{"connection: comma-separated url list", `{"type":"nats","subject":"a","connection":{"url":"nats://h:1,nats://alice:pw@h:2"}}`,
			[]sink.Problem{{Path: "connection.url", Message: "element 2 of the comma-separated list: must not include credentials; use user, password_env, token_env, creds_file or nkey_seed_file"}}},
		{"connection: authentication", `{"type":"nats","subject":"a","connection":{"user":"u","token":"t","password":"p","password_env":"P"}}`,
			[]sink.Problem{
				{Path: "connection", Message: "configure a single NATS authentication method"},
				{Path: "connection.password", Message: "set only one of password, password_env, password_file"},
			}},
		{"connection: password without user", `{"type":"nats","subject":"a","connection":{"password_env":"P"}}`,
			[]sink.Problem{{Path: "connection.password_env", Message: "requires user"}}},
		{"connection: user without password", `{"type":"nats","subject":"a","connection":{"user":"u"}}`,
			[]sink.Problem{{Path: "connection.user", Message: "requires one of password, password_env, password_file"}}},
		{"connection: tls, websocket, domain", `{"type":"nats","subject":"a","connection":{"tls_key_file":"k",
			"websocket_headers":{"Authorization":"x","X-Ok":"v"},"domain":"d","api_prefix":"p"}}`,
			[]sink.Problem{
				{Path: "connection.tls_key_file", Message: "requires tls_cert_file"},
				{Path: "connection.websocket_headers.Authorization", Message: "carries credentials; set it through websocket_headers_env"},
				{Path: "connection.websocket_headers", Message: "requires ws:// or wss:// server URLs"},
				{Path: "connection.api_prefix", Message: "must not be set together with domain"},
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(json.RawMessage(tt.raw))
			ce, ok := errors.AsType[*sink.ConfigError](err)
			if !ok {
				t.Fatalf("Decode(%s) = %v, want *sink.ConfigError", tt.raw, err)
			}
			if diff := cmp.Diff(tt.want, ce.Problems); diff != "" {
				t.Errorf("Decode(%s) problems (-want +got):\n%s", tt.raw, diff)
			}
		})
	}
}

func TestOverlap(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"a.b", "a.b", true},
		{"a.b", "a.c", false},
		{"a.*", "a.b", true},
		{"a.*", "a.b.c", false},
		{"a.>", "a.b.c", true},
		{"a.>", "a", false},
		{">", "x.y", true},
		{"copy.>", "orders.>", false},
		{"*.orders.*", "copy.>", true},
		{"a.b", "a.b.c", false},
	} {
		if got := overlap(tt.a, tt.b); got != tt.want {
			t.Errorf("overlap(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := overlap(tt.b, tt.a); got != tt.want {
			t.Errorf("overlap(%q, %q) = %v, want %v", tt.b, tt.a, got, tt.want)
		}
	}
}

func TestCheckLoop(t *testing.T) {
	for _, tt := range []struct {
		name     string
		subject  *string
		prefix   *string
		filters  []string
		wantLoop bool
	}{
		{"literal outside the filters", ptr("copy.orders"), nil, []string{"orders.>"}, false},
		{"literal inside a filter", ptr("orders.copy"), nil, []string{"audit.>", "orders.*"}, true},
		{"literal equal to a filter", ptr("orders.new"), nil, []string{"orders.new"}, true},
		{"prefix outside", nil, ptr("copy"), []string{"orders.>"}, false},
		{"prefix consumed by a full wildcard", nil, ptr("copy"), []string{">"}, true},
		{"prefix consumed by a second filter", nil, ptr("copy"), []string{"orders.>", "copy.orders.*"}, true},
		{"prefix under the filter's own root", nil, ptr("orders"), []string{"orders.>"}, true},
		{"prefix with a * filter of other length", nil, ptr("x"), []string{"*.new"}, false},
		{"no filters (library use)", ptr("orders.new"), nil, nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			c.Subject, c.SubjectPrefix = tt.subject, tt.prefix
			err := c.checkLoop(tt.filters)
			if got := err != nil; got != tt.wantLoop {
				t.Fatalf("checkLoop() = %v, want loop %v", err, tt.wantLoop)
			}
			if err != nil && !errors.Is(err, sink.ErrConfig) {
				t.Errorf("checkLoop() = %v, want an error wrapping sink.ErrConfig", err)
			}
		})
	}
}

func TestNewConfigErrors(t *testing.T) {
	_, nc, _ := serverWithStream(t, "COPY", "copy.>")
	missing := func(string) (string, bool) { return "", false }
	withFilters := func(filters ...string) sink.Deps {
		d := deps(nc)
		d.Source.FilterSubjects = filters
		return d
	}
	for _, tt := range []struct {
		name string
		cfg  func() Config
		deps sink.Deps
		want string // the problem, when a key is to blame
	}{
		{"no source connection", func() Config { return literal("copy.a") }, deps(nil),
			"connection: null reuses the source connection, and there is none to reuse"},
		{"loop", func() Config { return literal("copy.a") }, withFilters("copy.*"),
			"subject: target subject copy.a would be consumed again by source filter copy.* (republish loop)"},
		{"prefix loop", func() Config { return prefixed("copy") }, withFilters("copy.>"),
			"subject_prefix: target subject copy.> would be consumed again by source filter copy.> (republish loop)"},
		{"no stream stores the subject", func() Config { return literal("elsewhere.a") }, deps(nc), ""},
		{"no stream stores prefix.healthcheck", func() Config { return prefixed("other") }, deps(nc), ""},
		{"expected_stream names another stream", func() Config {
			c := literal("copy.a")
			c.ExpectedStream = ptr("OTHER")
			return c
		}, deps(nc), ""},
		{"password variable not set", func() Config {
			c := literal("copy.a")
			conn := natsconfig.Default()
			conn.URL = nc.ConnectedUrl()
			conn.User, conn.PasswordEnv = ptr("u"), ptr("NO_SUCH_PASSWORD")
			c.Connection = &conn
			return c
		}, sink.Deps{Env: missing}, "connection.password_env: environment variable NO_SUCH_PASSWORD is not set"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(t.Context(), tt.cfg(), tt.deps)
			if err == nil {
				s.Stop(t.Context())
				t.Fatal("New succeeded, want a configuration error")
			}
			if !errors.Is(err, sink.ErrConfig) {
				t.Errorf("New = %v, want an error wrapping sink.ErrConfig", err)
			}
			if tt.want == "" {
				return
			}
			if _, ok := errors.AsType[*sink.ConfigError](err); !ok || err.Error() != tt.want {
				t.Errorf("New = %T %q, want a *sink.ConfigError %q", err, err, tt.want)
			}
		})
	}

	t.Run("invalid values", func(t *testing.T) {
		// Like a loaded configuration: the key rules fail, so the rules
		// between keys (a non-literal subject) are not reported yet.
		c := literal("copy.*")
		c.PublishTimeoutMS = 0
		_, err := New(t.Context(), c, deps(nc))
		ce, ok := errors.AsType[*sink.ConfigError](err)
		if !ok || len(ce.Problems) != 1 || ce.Problems[0].Path != "publish_timeout_ms" {
			t.Fatalf("New = %v, want a *sink.ConfigError for publish_timeout_ms", err)
		}
		c.PublishTimeoutMS = 100
		_, err = New(t.Context(), c, deps(nc))
		ce, ok = errors.AsType[*sink.ConfigError](err)
		if !ok || len(ce.Problems) != 1 || ce.Problems[0].Path != "subject" {
			t.Fatalf("New = %v, want a *sink.ConfigError for subject", err)
		}
	})
}

// TestEffectiveAndSchema checks that show-effective-config and the JSON
// Schema generator can render the Config: secrets in the connection object
// are masked and the non-JSON fields stay out.
func TestEffectiveAndSchema(t *testing.T) {
	o, err := Decode(json.RawMessage(`{"type":"nats","subject":"a","connection":{"user":"u","password":"hunter2"}}`))
	if err != nil {
		t.Fatal(err)
	}
	c := o.(Config)
	eff := fields.Effective(&c)
	conn, _ := eff["connection"].(map[string]any)
	if conn["password"] != fields.Mask || conn["user"] != "u" {
		t.Errorf("effective connection = %v, want the password masked and the user shown", conn)
	}
	if len(eff) != 10 {
		t.Errorf("effective configuration has %d keys, want the 10 of docs/nats-sink.md plus type", len(eff))
	}
	schema := fields.Schema(&c)
	props, _ := schema["properties"].(map[string]any)
	if _, ok := props["max_concurrent_publishes"]; !ok {
		t.Errorf("schema properties lack max_concurrent_publishes: %v", schema)
	}
}

// TestSourceConnectionError: with connection null the sink asks the host
// for its connection while it opens; the host's connect error comes back
// as it is, not as a configuration problem.
func TestSourceConnectionError(t *testing.T) {
	boom := errors.New("connect to NATS: no servers available for connection")
	d := sink.Deps{Source: sink.Source{Conn: func() (any, error) { return nil, boom }}}
	_, err := New(t.Context(), literal("copy.a"), d)
	if !errors.Is(err, boom) || errors.Is(err, sink.ErrConfig) {
		t.Errorf("New = %v, want the host's connect error, not a configuration error", err)
	}
}
