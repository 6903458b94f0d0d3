package urlcheck

import "testing"

// TestCheck covers every rule once, in the order the checks run: the first
// failing rule names the problem, and no text carries the URL's path or
// user-info.
func TestCheck(t *testing.T) {
	strict := Rules{
		SchemeProblem:       "must use https",
		UserInfoProblem:     "no user-info",
		NoPath:              "no path",
		MaxPathLen:          8,
		HTTPLoopbackProblem: "loopback only",
		AllowedHosts:        []string{"a.example", "localhost"},
	}
	noHTTP := strict
	noHTTP.HTTPRefused = "no http"
	noHTTP.NoPath = ""
	for _, tt := range []struct {
		rules Rules
		raw   string
		want  string
	}{
		{strict, "https://a.example", ""},
		{strict, "https://a.example/", ""},
		{strict, "ftp://a.example", `must use https (got scheme "ftp")`},
		{strict, "https:opaque", "must name a host"},
		{strict, "https://u:secret@a.example", "no user-info"},
		{strict, "https://a.example/token", "no path"},
		{strict, "https://a.example/?q", "must not contain a query"},
		{strict, "https://a.example/#f", "must not contain a fragment"},
		{noHTTP, "https://a.example/123456789", "path must be at most 8 characters (got 10)"},
		{noHTTP, "http://localhost", "no http"},
		{strict, "http://b.example", `loopback only (got host "b.example")`},
		{strict, "http://LOCALHOST:8080", ""},
		{strict, "https://b.example", `host "b.example" is not in endpoint_allowed_hosts`},
		{strict, "https://a.example:8443", ""},
		{strict, "https://a.example:99999999", `invalid port "99999999"`},
		{strict, "%zz", "is not a valid URL"},
	} {
		if got := tt.rules.Check(tt.raw); got != tt.want {
			t.Errorf("Check(%q) = %q, want %q", tt.raw, got, tt.want)
		}
	}
}

func TestIsLoopbackName(t *testing.T) {
	for host, want := range map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true, "127.0.0.2": false, "localhost.example": false} {
		if got := IsLoopbackName(host); got != want {
			t.Errorf("IsLoopbackName(%q) = %v, want %v", host, got, want)
		}
	}
}
