// Package natsconn turns NATS connection settings (the nats section, or the
// NATS republish sink's connection object) into nats.go client options, the
// same way for both (spec runtime.md §16).
package natsconn

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nats-sinks/nats-sink/config"
)

// Options returns the client options for c. Secrets are resolved here, when
// a connection is about to open, never during validation; a missing variable
// or unreadable file is a *config.Error whose path starts with path ("nats"
// or "connection") and never shows the secret. Event handlers are the
// caller's to add.
func Options(c *config.NATS, path string, env config.Env) ([]nats.Option, error) {
	opts := []nats.Option{
		nats.Timeout(time.Duration(c.ConnectTimeoutSeconds) * time.Second),
		nats.ReconnectWait(time.Duration(c.ReconnectTimeWaitSeconds) * time.Second),
		nats.MaxReconnects(c.MaxReconnectAttempts),
		nats.PingInterval(time.Duration(c.PingIntervalSeconds) * time.Second),
		nats.MaxPingsOutstanding(c.MaxOutstandingPings),
		nats.ReconnectBufSize(c.PendingSizeBytes),
		nats.DrainTimeout(time.Duration(c.DrainTimeoutSeconds) * time.Second),
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

	// Authentication: the loader allows at most one method.
	if c.User != nil {
		pw, _, err := config.ResolveSecret(path+".password", c.Password, c.PasswordEnv, c.PasswordFile, env)
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.UserInfo(*c.User, pw.Reveal()))
	}
	if tok, ok, err := config.ResolveSecret(path+".token", c.Token, c.TokenEnv, c.TokenFile, env); err != nil {
		return nil, err
	} else if ok {
		opts = append(opts, nats.Token(tok.Reveal()))
	}
	if c.CredsFile != nil {
		opts = append(opts, nats.UserCredentials(*c.CredsFile))
	}
	if c.NkeySeedFile != nil {
		o, err := nats.NkeyOptionFromSeed(*c.NkeySeedFile)
		if err != nil {
			return nil, &config.Error{Problems: []config.Problem{{Path: path + ".nkey_seed_file", Message: fmt.Sprintf("cannot use NKey seed file: %v", err)}}}
		}
		opts = append(opts, o)
	}

	// TLS: Secure first (it replaces the TLS config), then the CA and
	// client-certificate options, which amend it.
	if UsesTLS(c) {
		opts = append(opts, nats.Secure(&tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: !c.TLSVerify}))
		if c.TLSCAFile != nil {
			opts = append(opts, nats.RootCAs(*c.TLSCAFile))
		}
		if c.TLSCertFile != nil {
			key := *c.TLSCertFile
			if c.TLSKeyFile != nil {
				key = *c.TLSKeyFile
			}
			opts = append(opts, nats.ClientCert(*c.TLSCertFile, key))
		}
	}

	if len(c.WebsocketHeaders) > 0 || len(c.WebsocketHeadersEnv) > 0 {
		h := http.Header{}
		for k, v := range c.WebsocketHeaders {
			h.Set(k, v)
		}
		for k, name := range c.WebsocketHeadersEnv {
			v, ok := env.Lookup(name)
			if !ok {
				return nil, &config.Error{Problems: []config.Problem{{Path: path + ".websocket_headers_env." + k, Message: fmt.Sprintf("environment variable %s is not set", name)}}}
			}
			h.Set(k, v)
		}
		opts = append(opts, nats.WebSocketConnectionHeaders(h))
	}
	return opts, nil
}

// UsesTLS reports whether the connection uses TLS: a TLS file is set,
// verification is switched off, or a URL has the tls or wss scheme (the
// client also upgrades when the server requires TLS).
func UsesTLS(c *config.NATS) bool {
	if c.TLSCAFile != nil || c.TLSCertFile != nil || !c.TLSVerify {
		return true
	}
	for _, u := range c.Servers() {
		if l := strings.ToLower(u); strings.HasPrefix(l, "tls://") || strings.HasPrefix(l, "wss://") {
			return true
		}
	}
	return false
}
