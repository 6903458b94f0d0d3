package broker

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/nats-sinks/nats-sink/sink"
)

// TLS is the "tls" object of a broker sink. The files are read when the sink
// starts.
type TLS struct {
	Enabled            bool    `json:"enabled" doc:"Connect with TLS."`
	CAFile             *string `json:"ca_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"PEM CA bundle; when set only these CAs are trusted, else the system roots."`
	CertFile           *string `json:"cert_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"Client certificate (mutual TLS); requires key_file."`
	KeyFile            *string `json:"key_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"Client key (mutual TLS); requires cert_file."`
	InsecureSkipVerify bool    `json:"insecure_skip_verify" doc:"Disable certificate and host-name verification (lab use only)."`
}

// Problems returns the rule violations of t, with paths under "tls". on
// reports whether TLS is used at all (tls.enabled, or a TLS URL scheme such
// as amqps): files or a verification switch without TLS would silently do
// nothing, so they are errors.
func (t *TLS) Problems(on bool) []sink.Problem {
	var ps problems
	if !on {
		for _, f := range []struct {
			key string
			set bool
		}{{"ca_file", t.CAFile != nil}, {"cert_file", t.CertFile != nil}, {"key_file", t.KeyFile != nil}, {"insecure_skip_verify", t.InsecureSkipVerify}} {
			if f.set {
				ps.add("tls."+f.key, "requires tls.enabled")
			}
		}
	}
	if t.CertFile != nil && t.KeyFile == nil {
		ps.add("tls.cert_file", "requires tls.key_file")
	}
	if t.KeyFile != nil && t.CertFile == nil {
		ps.add("tls.key_file", "requires tls.cert_file")
	}
	return ps
}

// Config builds the client TLS configuration (TLS 1.2 or newer) for a server
// named serverName. An unreadable or invalid file is a configuration error
// naming the key and the path, never key material.
func (t *TLS) Config(serverName string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName, InsecureSkipVerify: t.InsecureSkipVerify}
	if t.CAFile != nil {
		pem, err := os.ReadFile(*t.CAFile)
		if err != nil {
			return nil, ConfigError("tls.ca_file", fmt.Sprintf("cannot read CA file: %v", err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, ConfigError("tls.ca_file", fmt.Sprintf("no PEM certificate in %s", *t.CAFile))
		}
		tc.RootCAs = pool
	}
	if t.CertFile != nil && t.KeyFile != nil {
		cert, err := tls.LoadX509KeyPair(*t.CertFile, *t.KeyFile)
		if err != nil {
			return nil, ConfigError("tls.cert_file", fmt.Sprintf("cannot load the client certificate and key: %v", err))
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// CertificateError reports whether err is a failed certificate check on
// either side: the server's certificate did not verify (unknown authority,
// wrong host name, invalid or expired), or the server refused the client's
// (a TLS alert: none sent, bad, unknown CA, expired, access denied). Either
// is a destination problem that retrying cannot fix.
func CertificateError(err error) bool {
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		invalid          x509.CertificateInvalidError
		verify           *tls.CertificateVerificationError
		alert            tls.AlertError
	)
	if errors.As(err, &alert) {
		switch alert {
		case 42, 43, 44, 45, 46, 48, 49, 116: // bad/unsupported/revoked/expired/unknown certificate, unknown CA, access denied, certificate required
			return true
		}
	}
	return errors.As(err, &unknownAuthority) || errors.As(err, &hostname) ||
		errors.As(err, &invalid) || errors.As(err, &verify)
}
