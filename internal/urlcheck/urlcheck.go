// Package urlcheck checks the URL of a destination reached over HTTP (the
// HTTP, ClickHouse and S3 sinks): a scheme of http or https, a host, no
// user-info, query or fragment, and plain http only where the sink allows
// it. The sinks differ in what they allow and in the hint their messages
// give (which key carries credentials instead), so the differences are the
// Rules' fields; the checks and their order are shared.
//
// A problem text never contains the URL's path or user-info: an endpoint
// read from an environment variable or a file is a secret.
package urlcheck

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
)

// Rules are one sink's rules for its endpoint URL.
type Rules struct {
	// SchemeProblem is the problem text for a scheme other than http and
	// https, followed by the scheme found: "must use https" or "must use
	// http or https".
	SchemeProblem string
	// UserInfoProblem is the problem text for a URL with user-info; it
	// names the key that carries credentials instead.
	UserInfoProblem string
	// NoPath, when set, refuses a path other than "/" with this text.
	NoPath string
	// MaxPathLen, when positive, is the longest escaped path allowed.
	MaxPathLen int
	// HTTPRefused, when set, is the problem text for plain http: http is
	// not allowed at all.
	HTTPRefused string
	// HTTPLoopbackProblem, when set, is the problem text (followed by the
	// host found) for plain http to a host that is not a loopback name.
	HTTPLoopbackProblem string
	// AllowedHosts, when not empty, lists the only hosts allowed
	// (lower-case).
	AllowedHosts []string
}

// Check returns the problem with raw under r, or "".
func (r Rules) Check(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "is not a valid URL"
	}
	host := strings.ToLower(u.Hostname())
	switch {
	case u.Scheme != "https" && u.Scheme != "http":
		return fmt.Sprintf("%s (got scheme %q)", r.SchemeProblem, u.Scheme)
	case u.Opaque != "" || host == "":
		return "must name a host"
	case u.User != nil:
		// The value is not echoed: user-info is where credentials hide.
		return r.UserInfoProblem
	case r.NoPath != "" && u.Path != "" && u.Path != "/":
		return r.NoPath
	case u.RawQuery != "" || u.ForceQuery:
		return "must not contain a query"
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return "must not contain a fragment"
	case r.MaxPathLen > 0 && len(u.EscapedPath()) > r.MaxPathLen:
		return fmt.Sprintf("path must be at most %d characters (got %d)", r.MaxPathLen, len(u.EscapedPath()))
	case u.Scheme == "http" && r.HTTPRefused != "":
		return r.HTTPRefused
	case u.Scheme == "http" && r.HTTPLoopbackProblem != "" && !IsLoopbackName(host):
		return fmt.Sprintf("%s (got host %q)", r.HTTPLoopbackProblem, host)
	case len(r.AllowedHosts) > 0 && !slices.Contains(r.AllowedHosts, host):
		return fmt.Sprintf("host %q is not in endpoint_allowed_hosts", host)
	}
	if p := u.Port(); p != "" {
		if _, err := net.LookupPort("tcp", p); err != nil {
			return fmt.Sprintf("invalid port %q", p)
		}
	}
	return ""
}

// IsLoopbackName reports whether host (lower-case, without brackets) is one
// of the names plain http is allowed to: localhost, 127.0.0.1 or ::1. Only
// these literal names, not any address that resolves to loopback: the
// check runs at load, without name resolution.
func IsLoopbackName(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}
