package broker

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/nats-sinks/nats-sink/brokerconfig"
)

// TLSConfig builds the client TLS configuration of t (TLS 1.2 or newer) for
// a server named serverName. An unreadable or invalid file is a
// configuration error naming the key and the path, never key material.
func TLSConfig(t *brokerconfig.TLS, serverName string) (*tls.Config, error) {
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
