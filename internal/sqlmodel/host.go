package sqlmodel

import (
	"net"
	"strings"
)

// LocalHost reports whether host is reached without leaving the machine:
// a Unix socket path, "localhost" or a loopback address. The SQL sinks warn
// about unverified or unencrypted connections only to other hosts.
func LocalHost(host string) bool {
	if strings.HasPrefix(host, "/") || strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
