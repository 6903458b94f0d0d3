package httpsink

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/sink"
)

// The webhook token of these tests: it sits in the URL's path, where
// endpoints such as chat webhooks put their credential.
const hookToken = "T0KEN-in-the-path-7f3a"

// TestURLFromEnvAndFile sends to the URL read from url_env and from
// url_file, and checks that the request reaches the path they hold.
func TestURLFromEnvAndFile(t *testing.T) {
	ep := newEndpoint(t, nil)
	full := ep.srv.URL + "/hooks/" + hookToken
	file := filepath.Join(t.TempDir(), "url")
	if err := os.WriteFile(file, []byte(full+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	envName := "HOOK_URL"
	for _, tt := range []struct {
		name string
		set  func(c *Config)
	}{
		{"url_env", func(c *Config) { c.URLEnv = &envName }},
		{"url_file", func(c *Config) { c.URLFile = &file }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			c.AllowHTTPForLocalTesting = true
			tt.set(&c)
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			before := len(ep.requests())
			s, _ := openWith(t, c, sink.Deps{Env: func(n string) (string, bool) {
				if n == envName {
					return full, true
				}
				return "", false
			}})
			if rs := s.WriteBatch(t.Context(), []*sink.Envelope{shapestest.Golden()}); rs[0].Outcome != sink.Committed {
				t.Fatalf("outcome %v (%v), want committed", rs[0].Outcome, rs[0].Err)
			}
			reqs := ep.requests()
			if len(reqs) != before+1 || reqs[len(reqs)-1].Path != "/hooks/"+hookToken {
				t.Fatalf("requests %d (before %d); last path %q, want /hooks/%s", len(reqs), before, reqs[len(reqs)-1].Path, hookToken)
			}
		})
	}
}

// TestURLFromEnvChecked checks that a URL read at start is validated like
// url, with the problem at url_env and without the URL in it, and that a
// missing variable is a configuration error.
func TestURLFromEnvChecked(t *testing.T) {
	envName := "HOOK_URL"
	for _, tt := range []struct {
		name, value string
		set         bool
		want        string
	}{
		{"unset", "", false, "environment variable HOOK_URL is not set"},
		{"user-info", "https://bob:" + hookToken + "@a.example/x", true, "must not contain user-info"},
		{"query", "https://a.example/x?token=" + hookToken, true, "must not contain a query"},
		{"plain http", "http://a.example/" + hookToken, true, "must use https"},
		{"blank", "  ", true, "is blank"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			c.URLEnv = &envName
			_, err := New(t.Context(), c, sink.Deps{Env: func(string) (string, bool) { return tt.value, tt.set }})
			var ce *sink.ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, sink.ErrConfig) || len(ce.Problems) != 1 {
				t.Fatalf("New: %v, want one configuration problem", err)
			}
			if p := ce.Problems[0]; p.Path != "url_env" || !strings.Contains(p.Message, tt.want) {
				t.Errorf("problem %s: %s, want url_env: …%s…", p.Path, p.Message, tt.want)
			}
			if strings.Contains(err.Error(), hookToken) {
				t.Errorf("the error shows the URL's secret: %v", err)
			}
		})
	}
}

// TestTransportErrorHidesPath checks that a failed request's error names
// only scheme://host:port, never the path that holds the token.
func TestTransportErrorHidesPath(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: the request fails to connect
	c := Default()
	c.URL = "http://" + addr + "/hooks/" + hookToken
	c.AllowHTTPForLocalTesting = true
	c.Retry.MaxRetries = 0
	s, _ := open(t, c)
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{shapestest.Golden()})
	if rs[0].Outcome != sink.Temporary || rs[0].Err == nil {
		t.Fatalf("outcome %v (%v), want temporary", rs[0].Outcome, rs[0].Err)
	}
	msg := rs[0].Err.Error()
	if strings.Contains(msg, hookToken) || strings.Contains(msg, "/hooks") {
		t.Errorf("error shows the URL path: %s", msg)
	}
	if !strings.Contains(msg, "http://"+addr) {
		t.Errorf("error %q does not name the origin http://%s", msg, addr)
	}
}
