// Package natsconn turns NATS connection settings (natsconfig.Connection:
// the nats section, or the NATS republish sink's connection object) into
// nats.go client options, the same way for both (docs/security.md#authenticating-to-nats).
//
// Everything the client would otherwise only discover while connecting —
// an unset environment variable, an unreadable or malformed credentials,
// NKey seed, CA, certificate or key file, an expired user JWT — is checked
// here and reported as a *sink.ConfigError naming the key (exit 2), every
// problem at once. What only the server can judge (a wrong password, a
// revoked user, a certificate the server does not trust) is left to the
// connection attempt, whose error carries the server's reason.
//
// Decisions where the spec is silent:
//   - Seed URLs are tried in the configured order (nats.DontRandomize):
//     docs/security.md#authenticating-to-nats calls them ordered, and an operator listing a primary before
//     a disaster-recovery cluster means it.
//   - An authentication error while reconnecting does not end the connection
//     after the second attempt, as nats.go does by default: the client keeps
//     retrying within max_reconnect_attempts, so credentials rotated on the
//     server (or a refreshed creds file) are picked up without a restart.
//     The files are re-read on every connection attempt for the same reason.
//   - tls_verify false on its own does not switch TLS on (docs/security.md#authenticating-to-nats lists
//     what does); it applies when the server requires TLS and the client
//     upgrades.
package natsconn

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/nats-sinks/nats-sink/natsconfig"
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
)

// Options returns the client options for c. Secrets are resolved here, when
// a connection is about to open, never during validation; env looks up
// environment variables (nil: the process environment). A missing
// variable, an unreadable or malformed file is a *sink.ConfigError whose
// paths start with path ("nats" or "connection") and never show a secret or
// a file's content. Event handlers are the caller's to add.
func Options(c *natsconfig.Connection, path string, env func(name string) (string, bool)) ([]nats.Option, error) {
	if env == nil {
		env = os.LookupEnv
	}
	opts := []nats.Option{
		nats.Timeout(time.Duration(c.ConnectTimeoutSeconds) * time.Second),
		nats.ReconnectWait(time.Duration(c.ReconnectTimeWaitSeconds) * time.Second),
		nats.MaxReconnects(c.MaxReconnectAttempts),
		nats.PingInterval(time.Duration(c.PingIntervalSeconds) * time.Second),
		nats.MaxPingsOutstanding(c.MaxOutstandingPings),
		nats.ReconnectBufSize(c.PendingSizeBytes),
		nats.DrainTimeout(time.Duration(c.DrainTimeoutSeconds) * time.Second),
		nats.DontRandomize(),
		nats.IgnoreAuthErrorAbort(),
	}
	if c.Name != nil {
		opts = append(opts, nats.Name(*c.Name))
	}
	if c.NoEcho {
		opts = append(opts, nats.NoEcho())
	}
	if !c.AllowReconnect {
		opts = append(opts, nats.NoReconnect())
	}

	var problems []sink.Problem
	fail := func(err error) {
		if ce, ok := errors.AsType[*sink.ConfigError](err); ok {
			problems = append(problems, ce.Problems...)
			return
		}
		problems = append(problems, sink.Problem{Path: path, Message: err.Error()})
	}
	problem := func(key, msg string) {
		problems = append(problems, sink.Problem{Path: path + "." + key, Message: msg})
	}

	// Authentication: the loader allows at most one method.
	if c.User != nil {
		pw, _, err := secret.Resolve(path+".password", c.Password, c.PasswordEnv, c.PasswordFile, env)
		if err != nil {
			fail(err)
		} else {
			opts = append(opts, nats.UserInfo(*c.User, pw.Reveal()))
		}
	}
	if tok, ok, err := secret.Resolve(path+".token", c.Token, c.TokenEnv, c.TokenFile, env); err != nil {
		fail(err)
	} else if ok {
		opts = append(opts, nats.Token(tok.Reveal()))
	}
	if c.CredsFile != nil {
		if msg := checkCreds(*c.CredsFile); msg != "" {
			problem("creds_file", msg)
		} else {
			// nats.go reads the file again on every connection attempt, so
			// a rotated creds file is used at the next reconnect.
			opts = append(opts, nats.UserCredentials(*c.CredsFile))
		}
	}
	if c.NkeySeedFile != nil {
		if msg := checkSeedFile(*c.NkeySeedFile); msg != "" {
			problem("nkey_seed_file", msg)
		} else if o, err := nats.NkeyOptionFromSeed(*c.NkeySeedFile); err != nil {
			problem("nkey_seed_file", "cannot use NKey seed file: not a user seed")
		} else {
			opts = append(opts, o)
		}
	}

	// TLS. Secure first (it replaces the TLS config), then the CA and
	// client-certificate options, which amend it and re-read their files on
	// every connection attempt (certificates rotated on disk are picked up
	// at the next reconnect).
	base := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: !c.TLSVerify}
	switch {
	case UsesTLS(c):
		opts = append(opts, nats.Secure(base))
		if c.TLSCAFile != nil {
			if msg := checkCA(*c.TLSCAFile); msg != "" {
				problem("tls_ca_file", msg)
			} else {
				opts = append(opts, nats.RootCAs(*c.TLSCAFile))
			}
		}
		if c.TLSCertFile != nil {
			keyFile, keyKey := *c.TLSCertFile, "tls_cert_file"
			if c.TLSKeyFile != nil {
				keyFile, keyKey = *c.TLSKeyFile, "tls_key_file"
			}
			if certBad, msg := checkKeyPair(*c.TLSCertFile, keyFile); msg != "" {
				if certBad {
					keyKey = "tls_cert_file"
				}
				problem(keyKey, msg)
			} else {
				opts = append(opts, nats.ClientCert(*c.TLSCertFile, keyFile))
			}
		}
	case !c.TLSVerify && !websocket(c):
		// Not TLS by configuration, but a server that requires TLS makes
		// the client upgrade: that handshake must honour tls_verify and
		// the TLS 1.2 minimum. (For WebSocket URLs any TLS config would
		// force TLS, so ws:// is left alone.)
		opts = append(opts, func(o *nats.Options) error { o.TLSConfig = base; return nil })
	}

	if len(c.WebsocketHeaders) > 0 || len(c.WebsocketHeadersEnv) > 0 {
		h := http.Header{}
		for k, v := range c.WebsocketHeaders {
			h.Set(k, v)
		}
		// Sorted, so that several unset variables are reported in a
		// stable order.
		for _, k := range slices.Sorted(maps.Keys(c.WebsocketHeadersEnv)) {
			name := c.WebsocketHeadersEnv[k]
			v, ok := env(name)
			if !ok {
				problem("websocket_headers_env."+k, fmt.Sprintf("environment variable %s is not set", name))
				continue
			}
			h.Set(k, v)
		}
		opts = append(opts, nats.WebSocketConnectionHeaders(h))
	}
	if len(problems) > 0 {
		return nil, &sink.ConfigError{Problems: problems}
	}
	return opts, nil
}

// UsesTLS reports whether the connection uses TLS by configuration
// (docs/security.md#authenticating-to-nats): a TLS file is set or a URL has the tls or wss scheme. The
// client also upgrades when the server requires TLS.
func UsesTLS(c *natsconfig.Connection) bool {
	if c.TLSCAFile != nil || c.TLSCertFile != nil || c.TLSKeyFile != nil {
		return true
	}
	for _, u := range c.Servers() {
		if l := strings.ToLower(u); strings.HasPrefix(l, "tls://") || strings.HasPrefix(l, "wss://") {
			return true
		}
	}
	return false
}

// websocket reports whether the seed URLs are WebSocket URLs (the loader
// does not let them mix with nats/tls).
func websocket(c *natsconfig.Connection) bool {
	for _, u := range c.Servers() {
		if l := strings.ToLower(u); strings.HasPrefix(l, "ws://") || strings.HasPrefix(l, "wss://") {
			return true
		}
	}
	return false
}

// readFile reads a key file, returning a message for the configuration error
// on failure. The os error names the path and the operation, never content.
func readFile(name string) ([]byte, string) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Sprintf("cannot read file: %v", err)
	}
	return b, ""
}

// wipe overwrites key material read from a file once it has been checked,
// as nats.go does with the copies it reads.
func wipe(b []byte) {
	for i := range b {
		b[i] = 'x'
	}
}

// checkCreds checks that a .creds file holds a user JWT whose signature
// verifies and that has not expired, and a user NKey seed. The messages
// never quote the file: it holds a private key.
func checkCreds(name string) string {
	b, msg := readFile(name)
	if msg != "" {
		return msg
	}
	defer wipe(b)
	token, err := nkeys.ParseDecoratedJWT(b)
	if err != nil || token == "" {
		return "cannot use credentials file: no user JWT found"
	}
	claims, err := jwt.DecodeUserClaims(token)
	if err != nil {
		return "cannot use credentials file: the user JWT is malformed or its signature does not verify"
	}
	t := time.Now()
	if claims.Expires > 0 && t.Unix() >= claims.Expires {
		return fmt.Sprintf("cannot use credentials file: the user JWT expired at %s", time.Unix(claims.Expires, 0).UTC().Format(time.RFC3339))
	}
	if claims.NotBefore > 0 && t.Unix() < claims.NotBefore {
		return fmt.Sprintf("cannot use credentials file: the user JWT is not valid before %s", time.Unix(claims.NotBefore, 0).UTC().Format(time.RFC3339))
	}
	kp, err := nkeys.ParseDecoratedUserNKey(b)
	if err != nil {
		return "cannot use credentials file: no user NKey seed found"
	}
	defer kp.Wipe()
	if pub, err := kp.PublicKey(); err != nil || pub != claims.Subject {
		return "cannot use credentials file: the NKey seed does not belong to the user JWT"
	}
	return ""
}

// checkSeedFile checks that an NKey seed file holds a user seed.
func checkSeedFile(name string) string {
	b, msg := readFile(name)
	if msg != "" {
		return msg
	}
	defer wipe(b)
	kp, err := nkeys.ParseDecoratedUserNKey(b)
	if err != nil {
		return "cannot use NKey seed file: no valid user NKey seed found"
	}
	kp.Wipe()
	return ""
}

// checkCA checks that a CA bundle holds at least one PEM certificate.
func checkCA(name string) string {
	b, msg := readFile(name)
	if msg != "" {
		return msg
	}
	if !x509.NewCertPool().AppendCertsFromPEM(b) {
		return "no PEM certificate found"
	}
	return ""
}

// checkKeyPair checks that the client certificate and its key load and
// match; certBad says whether the certificate file (not the key) is at
// fault.
func checkKeyPair(certName, keyName string) (certBad bool, msg string) {
	certPEM, msg := readFile(certName)
	if msg != "" {
		return true, msg
	}
	hasCert := false
	for rest := certPEM; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		if blk.Type == "CERTIFICATE" {
			hasCert = true
			break
		}
	}
	if !hasCert {
		return true, "no PEM certificate found"
	}
	keyPEM := certPEM
	if keyName != certName {
		if keyPEM, msg = readFile(keyName); msg != "" {
			return false, msg
		}
	}
	defer wipe(keyPEM)
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		// crypto/tls errors describe the problem ("private key does not
		// match public key", "failed to find any PEM data in key input")
		// without quoting the input.
		return false, fmt.Sprintf("cannot load client certificate and key: %v", err)
	}
	return false, ""
}
