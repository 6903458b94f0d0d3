package natsconfig_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/natsconfig"
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
)

func ptr[T any](v T) *T { return &v }

func TestDefaultIsValid(t *testing.T) {
	c := natsconfig.Default()
	if err := c.Validate(); err != nil {
		t.Errorf("Default().Validate() = %v", err)
	}
	if got := c.Servers(); !cmp.Equal(got, []string{"nats://localhost:4222"}) {
		t.Errorf("Servers() = %v", got)
	}
}

// TestValidate: a Connection built in Go gets the struct-tag rules and the
// rules between keys, with paths relative to it.
func TestValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		set  func(*natsconfig.Connection)
		want []sink.Problem
	}{
		{"tag rule", func(c *natsconfig.Connection) { c.ConnectTimeoutSeconds = 0 },
			[]sink.Problem{{Path: "connect_timeout_seconds", Message: "must be between 1 and 300 (got 0)"}}},
		{"user without password", func(c *natsconfig.Connection) { c.User = ptr("u") },
			[]sink.Problem{{Path: "user", Message: "requires one of password, password_env, password_file"}}},
		{"two methods", func(c *natsconfig.Connection) {
			c.User, c.PasswordEnv, c.Token = ptr("u"), ptr("P"), ptr(secret.Value("t"))
		},
			[]sink.Problem{{Path: "(root)", Message: "configure a single NATS authentication method"}}},
		{"credentials in the url are not echoed", func(c *natsconfig.Connection) { c.URL = "nats://u:s3cret@h:4222" },
			[]sink.Problem{{Path: "url", Message: "must not include credentials; use user, password_env, token_env, creds_file or nkey_seed_file"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := natsconfig.Default()
			tt.set(&c)
			err := c.Validate()
			ce, ok := errors.AsType[*sink.ConfigError](err)
			if !ok {
				t.Fatalf("Validate = %v, want a *sink.ConfigError", err)
			}
			if diff := cmp.Diff(tt.want, ce.Problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRulesSameForBothPlaces: the nats section and the republish sink's
// connection object apply the same rules; only the path and the way
// messages name sibling keys ("nats.user" or "user") differ.
func TestRulesSameForBothPlaces(t *testing.T) {
	for _, set := range []func(*natsconfig.Connection){
		func(c *natsconfig.Connection) { c.URLs = []string{"ws://a:80", "nats://b:4222", "http://c"} },
		func(c *natsconfig.Connection) { c.PasswordEnv, c.PasswordFile = ptr("P"), ptr("f") },
		func(c *natsconfig.Connection) { c.User, c.TokenEnv, c.TLSKeyFile = ptr("u"), ptr("T"), ptr("k") },
		func(c *natsconfig.Connection) { c.Domain, c.APIPrefix = ptr("d"), ptr("p") },
		func(c *natsconfig.Connection) {
			c.WebsocketHeaders = map[string]string{"Authorization": "x", "Host": "h", "X-A": " v"}
			c.WebsocketHeadersEnv = map[string]string{"x-a": "A"}
		},
	} {
		c := natsconfig.Default()
		set(&c)
		section := c.Rules("nats", "nats.")
		object := c.Rules("connection", "")
		if len(section) == 0 || len(section) != len(object) {
			t.Fatalf("Rules: %d problems for the nats section, %d for a connection object", len(section), len(object))
		}
		for i := range section {
			want := sink.Problem{
				Path:    "connection" + strings.TrimPrefix(section[i].Path, "nats"),
				Message: strings.ReplaceAll(section[i].Message, "nats.", ""),
			}
			if object[i] != want {
				t.Errorf("connection problem %v, want %v (from the nats section's %v)", object[i], want, section[i])
			}
		}
	}
}
