package natsconn_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/nats-sinks/nats-sink/internal/natsconn"
	"github.com/nats-sinks/nats-sink/internal/natsconn/natsconntest"
	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/natsconfig"
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
)

// settings returns the nats section's defaults with the given seed URLs,
// no reconnects (a failed handshake must fail the test at once) and a short
// connect timeout.
func settings(urls ...string) *natsconfig.Connection {
	c := natsconfig.Default()
	c.URLs = urls
	c.AllowReconnect = false
	c.ConnectTimeoutSeconds = 5
	return &c
}

// env looks up environment variables, as Options takes them.
type env = func(name string) (string, bool)

func envOf(m map[string]string) env {
	return func(name string) (string, bool) { v, ok := m[name]; return v, ok }
}

// dial builds the options for c and connects. A configuration error fails
// the test: use options() for the cases that expect one.
func dial(t *testing.T, c *natsconfig.Connection, env env) (*nats.Conn, error) {
	t.Helper()
	opts, err := natsconn.Options(c, "nats", env)
	if err != nil {
		t.Fatalf("Options: %v", err)
	}
	nc, err := nats.Connect(strings.Join(c.Servers(), ","), opts...)
	if err == nil {
		t.Cleanup(nc.Close)
	}
	return nc, err
}

// mustConnect connects and checks the connection works end to end (a
// request/reply round trip through the server).
func mustConnect(t *testing.T, c *natsconfig.Connection, env env) *nats.Conn {
	t.Helper()
	nc, err := dial(t, c, env)
	if err != nil {
		t.Fatalf("connect to %v: %v", c.Servers(), err)
	}
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		t.Fatalf("flush: %v", err)
	}
	return nc
}

// mustFail connects, expects a failure whose text contains want
// (case-insensitive; alternatives separated by "|") and none of the
// secrets.
func mustFail(t *testing.T, c *natsconfig.Connection, env env, want string, secrets ...string) {
	t.Helper()
	nc, err := dial(t, c, env)
	if err == nil {
		nc.Close()
		t.Fatalf("connect to %v succeeded, want an error containing %q", c.Servers(), want)
	}
	matched := false
	for _, w := range strings.Split(want, "|") {
		matched = matched || strings.Contains(strings.ToLower(err.Error()), strings.ToLower(w))
	}
	if !matched {
		t.Errorf("connect error = %q, want it to contain %q", err, want)
	}
	noSecrets(t, err.Error(), secrets...)
}

// configProblems expects Options to fail with a *sink.ConfigError and returns
// its problems as "path: message" lines.
func configProblems(t *testing.T, c *natsconfig.Connection, env env, secrets ...string) []string {
	t.Helper()
	_, err := natsconn.Options(c, "nats", env)
	var ce *sink.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("Options error = %v, want a *sink.ConfigError", err)
	}
	var got []string
	for _, p := range ce.Problems {
		got = append(got, p.Path+": "+p.Message)
	}
	noSecrets(t, err.Error(), secrets...)
	return got
}

func noSecrets(t *testing.T, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if s != "" && strings.Contains(text, s) {
			t.Errorf("error text %q reveals a secret", text)
		}
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	return natsconntest.WriteFile(t, name, []byte(content))
}

func TestNoAuthAndSeedOrder(t *testing.T) {
	a := natsconntest.StartServer(t, &server.Options{ServerName: "a"})
	b := natsconntest.StartServer(t, &server.Options{ServerName: "b"})
	// A port nobody listens on: the first seed fails, the next is tried.
	dead := natsconntest.StartServer(t, &server.Options{})
	deadURL := dead.ClientURL()
	dead.Shutdown()
	dead.WaitForShutdown()

	for _, tt := range []struct {
		name string
		urls []string
		want string
	}{
		{"first of two", []string{a.ClientURL(), b.ClientURL()}, a.ClientURL()},
		{"order is kept, not randomised", []string{b.ClientURL(), a.ClientURL()}, b.ClientURL()},
		{"unreachable seed skipped", []string{deadURL, b.ClientURL()}, b.ClientURL()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Several connections: a randomised pool would pick the other
			// server about half of the time.
			for range 6 {
				nc := mustConnect(t, settings(tt.urls...), nil)
				if got := nc.ConnectedUrl(); got != tt.want {
					t.Fatalf("ConnectedUrl = %s, want %s", got, tt.want)
				}
				nc.Close()
			}
		})
	}
	t.Run("no seed reachable", func(t *testing.T) {
		mustFail(t, settings(deadURL), nil, "no servers available")
	})
}

func TestUserPassword(t *testing.T) {
	const right = "pw-Right-7d1e9c"
	s := natsconntest.StartServer(t, &server.Options{Users: []*server.User{{Username: "sink", Password: right}}})
	user := "sink"
	withPassword := func(edit func(c *natsconfig.Connection)) *natsconfig.Connection {
		c := settings(s.ClientURL())
		c.User = &user
		edit(c)
		return c
	}
	env := envOf(map[string]string{"NS_PW": right, "NS_BAD": "pw-Wrong-0a5f31"})

	t.Run("inline", func(t *testing.T) {
		mustConnect(t, withPassword(func(c *natsconfig.Connection) { c.Password = ptr(secret.Value(right)) }), nil)
	})
	t.Run("password_env", func(t *testing.T) {
		mustConnect(t, withPassword(func(c *natsconfig.Connection) { c.PasswordEnv = ptr("NS_PW") }), env)
	})
	t.Run("password_file", func(t *testing.T) {
		f := writeFile(t, "pw", right+"\n") // one trailing newline is removed
		mustConnect(t, withPassword(func(c *natsconfig.Connection) { c.PasswordFile = &f }), nil)
	})
	t.Run("wrong password", func(t *testing.T) {
		c := withPassword(func(c *natsconfig.Connection) { c.PasswordEnv = ptr("NS_BAD") })
		mustFail(t, c, env, "authorization violation", "pw-Wrong-0a5f31", right)
	})
	t.Run("wrong user", func(t *testing.T) {
		c := withPassword(func(c *natsconfig.Connection) { c.Password = ptr(secret.Value(right)) })
		c.User = ptr("intruder")
		mustFail(t, c, nil, "authorization violation", right)
	})
	t.Run("no credentials", func(t *testing.T) {
		mustFail(t, settings(s.ClientURL()), nil, "authorization violation")
	})
	t.Run("unset variable is a configuration error naming it", func(t *testing.T) {
		c := withPassword(func(c *natsconfig.Connection) { c.PasswordEnv = ptr("NS_UNSET") })
		got := configProblems(t, c, env, right)
		want := []string{"nats.password_env: environment variable NS_UNSET is not set"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("problems (-want +got):\n%s", diff)
		}
	})
	t.Run("unreadable file", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "missing")
		c := withPassword(func(c *natsconfig.Connection) { c.PasswordFile = &missing })
		got := configProblems(t, c, nil)
		if len(got) != 1 || !strings.HasPrefix(got[0], "nats.password_file: cannot read secret file: ") {
			t.Errorf("problems = %q, want one nats.password_file problem", got)
		}
	})
}

func TestToken(t *testing.T) {
	const right = "tok-Right-44c0b2"
	s := natsconntest.StartServer(t, &server.Options{Authorization: right})
	env := envOf(map[string]string{"NS_TOKEN": right})
	for _, tt := range []struct {
		name string
		edit func(*natsconfig.Connection)
	}{
		{"inline", func(c *natsconfig.Connection) { c.Token = ptr(secret.Value(right)) }},
		{"token_env", func(c *natsconfig.Connection) { c.TokenEnv = ptr("NS_TOKEN") }},
		{"token_file", func(c *natsconfig.Connection) { c.TokenFile = ptr(writeFile(t, "tok", right+"\n")) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := settings(s.ClientURL())
			tt.edit(c)
			mustConnect(t, c, env)
		})
	}
	t.Run("wrong token", func(t *testing.T) {
		c := settings(s.ClientURL())
		c.Token = ptr(secret.Value("tok-Wrong-93aa01"))
		mustFail(t, c, nil, "authorization violation", "tok-Wrong-93aa01", right)
	})
	t.Run("unset variable", func(t *testing.T) {
		c := settings(s.ClientURL())
		c.TokenEnv = ptr("NS_NO_TOKEN")
		got := configProblems(t, c, env, right)
		if diff := cmp.Diff([]string{"nats.token_env: environment variable NS_NO_TOKEN is not set"}, got); diff != "" {
			t.Errorf("problems (-want +got):\n%s", diff)
		}
	})
}

func TestNKeySeedFile(t *testing.T) {
	pub, seed := natsconntest.NewUserNKey(t)
	s := natsconntest.StartServer(t, &server.Options{Nkeys: []*server.NkeyUser{{Nkey: pub}}})
	withSeed := func(file string) *natsconfig.Connection {
		c := settings(s.ClientURL())
		c.NkeySeedFile = &file
		return c
	}
	t.Run("registered user", func(t *testing.T) {
		mustConnect(t, withSeed(writeFile(t, "user.nk", string(seed))), nil)
	})
	t.Run("another user's seed", func(t *testing.T) {
		_, other := natsconntest.NewUserNKey(t)
		mustFail(t, withSeed(writeFile(t, "other.nk", string(other))), nil, "authorization violation", string(other[:20]))
	})
	for _, tt := range []struct {
		name, content, want string
	}{
		{"garbage", "not-a-seed-SECRETISH-5e2f\n", "nats.nkey_seed_file: cannot use NKey seed file: no valid user NKey seed found"},
		{"truncated seed", string(seed[:30]), "nats.nkey_seed_file: cannot use NKey seed file: no valid user NKey seed found"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := configProblems(t, withSeed(writeFile(t, "bad.nk", tt.content)), nil, strings.TrimSpace(tt.content))
			if diff := cmp.Diff([]string{tt.want}, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		got := configProblems(t, withSeed(filepath.Join(t.TempDir(), "none.nk")), nil)
		if len(got) != 1 || !strings.HasPrefix(got[0], "nats.nkey_seed_file: cannot read file: ") {
			t.Errorf("problems = %q", got)
		}
	})
}

func TestCredsFile(t *testing.T) {
	op := natsconntest.NewOperator(t, false)
	opts := &server.Options{}
	op.Configure(t, opts)
	s := natsconntest.StartServer(t, opts)
	withCreds := func(creds []byte) *natsconfig.Connection {
		c := settings(s.ClientURL())
		f := natsconntest.WriteFile(t, "user.creds", creds)
		c.CredsFile = &f
		return c
	}

	t.Run("valid user", func(t *testing.T) {
		mustConnect(t, withCreds(op.UserCreds(t, "sink", nil)), nil)
	})
	t.Run("user of an account the server does not know", func(t *testing.T) {
		stranger := natsconntest.NewOperator(t, false)
		mustFail(t, withCreds(stranger.UserCreds(t, "sink", nil)), nil, "authorization violation")
	})

	valid := op.UserCreds(t, "sink", nil)
	jwtLine := func(creds []byte) string {
		for _, l := range strings.Split(string(creds), "\n") {
			if strings.HasPrefix(l, "eyJ") {
				return l
			}
		}
		t.Fatal("no JWT in creds")
		return ""
	}
	seedLine := func(creds []byte) string {
		for _, l := range strings.Split(string(creds), "\n") {
			if strings.HasPrefix(l, "SU") {
				return l
			}
		}
		t.Fatal("no seed in creds")
		return ""
	}
	// Tampering: flip one character of the claims part; the signature no
	// longer matches.
	tampered := func() []byte {
		j := jwtLine(valid)
		parts := strings.Split(j, ".")
		b := []byte(parts[1])
		b[10] ^= 1
		parts[1] = string(b)
		return []byte(strings.Replace(string(valid), j, strings.Join(parts, "."), 1))
	}()
	other := op.UserCreds(t, "other", nil)
	mixed := strings.Replace(string(valid), seedLine(valid), seedLine(other), 1)

	for _, tt := range []struct {
		name  string
		creds []byte
		want  string
	}{
		{"expired JWT", op.UserCreds(t, "sink", func(c *jwt.UserClaims) { c.Expires = time.Now().Add(-time.Hour).Unix() }),
			"nats.creds_file: cannot use credentials file: the user JWT expired at "},
		{"not yet valid JWT", op.UserCreds(t, "sink", func(c *jwt.UserClaims) { c.NotBefore = time.Now().Add(time.Hour).Unix() }),
			"nats.creds_file: cannot use credentials file: the user JWT is not valid before "},
		{"tampered JWT", tampered, "nats.creds_file: cannot use credentials file: the user JWT is malformed or its signature does not verify"},
		{"seed of another user", []byte(mixed), "nats.creds_file: cannot use credentials file: the NKey seed does not belong to the user JWT"},
		{"no seed", []byte(jwtLine(valid) + "\n"), "nats.creds_file: cannot use credentials file: no user NKey seed found"},
		{"not a creds file", []byte("hello\n"), "nats.creds_file: cannot use credentials file: "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := configProblems(t, withCreds(tt.creds), nil, seedLine(valid), seedLine(other))
			if len(got) != 1 || !strings.HasPrefix(got[0], tt.want) {
				t.Errorf("problems = %q, want one starting %q", got, tt.want)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		c := settings(s.ClientURL())
		c.CredsFile = ptr(filepath.Join(t.TempDir(), "none.creds"))
		got := configProblems(t, c, nil)
		if len(got) != 1 || !strings.HasPrefix(got[0], "nats.creds_file: cannot read file: ") {
			t.Errorf("problems = %q", got)
		}
	})
}

// TestCredsRotatedWhileConnected: the server disconnects a user whose JWT
// expires; the client keeps retrying through the authentication errors
// (nats.go would give up after two) and reconnects as soon as the creds
// file holds a fresh JWT, without a restart.
func TestCredsRotatedWhileConnected(t *testing.T) {
	op := natsconntest.NewOperator(t, false)
	opts := &server.Options{}
	op.Configure(t, opts)
	s := natsconntest.StartServer(t, opts)

	// Expiry has one-second resolution: two seconds leaves time to connect.
	expires := time.Now().Add(2 * time.Second)
	short := op.UserCreds(t, "sink", func(c *jwt.UserClaims) { c.Expires = expires.Unix() })
	file := natsconntest.WriteFile(t, "user.creds", short)
	c := settings(s.ClientURL())
	c.CredsFile = &file
	c.AllowReconnect = true
	c.ReconnectTimeWaitSeconds = 0
	c.MaxReconnectAttempts = -1
	copts, err := natsconn.Options(c, "nats", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The handlers only record: nats.go runs them one at a time, and a
	// blocked handler would hold back every later event.
	var mu sync.Mutex
	var authErrs, otherErrs []string
	var lastReconnect time.Time
	copts = append(copts,
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			mu.Lock()
			defer mu.Unlock()
			if errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthorization) {
				authErrs = append(authErrs, err.Error())
			} else {
				otherErrs = append(otherErrs, err.Error())
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) {
			mu.Lock()
			lastReconnect = time.Now()
			mu.Unlock()
		}),
	)
	nc, err := nats.Connect(s.ClientURL(), copts...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	// Let the client fail to authenticate several times (the server may
	// still accept the JWT within its last second, then expire it again)
	// before rotating.
	natstest.WaitFor(t, 20*time.Second, func() error {
		if nc.IsClosed() {
			t.Fatalf("connection closed after authentication errors (%v); want it to keep retrying", nc.LastError())
		}
		mu.Lock()
		defer mu.Unlock()
		if len(authErrs) < 3 || time.Now().Before(expires.Add(time.Second)) {
			return fmt.Errorf("%d authentication errors while reconnecting, want at least 3", len(authErrs))
		}
		return nil
	})
	rotated := time.Now()
	if err := os.WriteFile(file, op.UserCreds(t, "sink", nil), 0o600); err != nil {
		t.Fatal(err)
	}
	// Past the old JWT's expiry, a working connection must be the new one.
	natstest.WaitFor(t, 15*time.Second, func() error {
		mu.Lock()
		after := lastReconnect.After(rotated)
		mu.Unlock()
		if !after {
			return errors.New("no reconnect since the creds file was rotated")
		}
		return nc.FlushTimeout(time.Second)
	})
	mu.Lock()
	defer mu.Unlock()
	if len(otherErrs) > 0 {
		t.Errorf("asynchronous errors other than authentication: %q", otherErrs)
	}
}

func TestTLS(t *testing.T) {
	pki := natsconntest.NewPKI(t)
	s := natsconntest.StartServer(t, &server.Options{TLSConfig: pki.ServerTLS(t, false), TLSTimeout: 5})
	port := strings.TrimPrefix(s.ClientURL(), "tls://127.0.0.1:")
	tlsURL, natsURL := "tls://127.0.0.1:"+port, "nats://127.0.0.1:"+port
	plain := natsconntest.StartServer(t, &server.Options{})

	for _, tt := range []struct {
		name string
		url  string
		edit func(*natsconfig.Connection)
		want string // "" = connects over TLS
	}{
		{"tls url and private CA", tlsURL, func(c *natsconfig.Connection) { c.TLSCAFile = &pki.CAFile }, ""},
		{"nats url with a CA file switches TLS on", natsURL, func(c *natsconfig.Connection) { c.TLSCAFile = &pki.CAFile }, ""},
		{"localhost matches the certificate", "tls://localhost:" + port, func(c *natsconfig.Connection) { c.TLSCAFile = &pki.CAFile }, ""},
		{"system roots do not trust the private CA", tlsURL, func(*natsconfig.Connection) {}, "certificate signed by unknown authority"},
		{"wrong CA", tlsURL, func(c *natsconfig.Connection) { c.TLSCAFile = &pki.OtherCAFile }, "certificate signed by unknown authority"},
		{"tls_verify false accepts any certificate", tlsURL, func(c *natsconfig.Connection) {
			c.TLSCAFile, c.TLSVerify = &pki.OtherCAFile, false
		}, ""},
		{"server requiring TLS upgrades a nats url, verifying", natsURL, func(*natsconfig.Connection) {}, "certificate signed by unknown authority"},
		{"upgrade honours tls_verify false", natsURL, func(c *natsconfig.Connection) { c.TLSVerify = false }, ""},
		{"TLS wanted, server has none", plain.ClientURL(), func(c *natsconfig.Connection) { c.TLSCAFile = &pki.CAFile }, "secure connection not available"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := settings(tt.url)
			tt.edit(c)
			if tt.want != "" {
				mustFail(t, c, nil, tt.want)
				return
			}
			nc := mustConnect(t, c, nil)
			if _, err := nc.TLSConnectionState(); err != nil {
				t.Errorf("connection is not TLS: %v", err)
			}
		})
	}
	t.Run("tls_verify false alone keeps a plain connection plain", func(t *testing.T) {
		c := settings(plain.ClientURL())
		c.TLSVerify = false
		nc := mustConnect(t, c, nil)
		if _, err := nc.TLSConnectionState(); err == nil {
			t.Error("connection uses TLS; want plain (docs/security.md#authenticating-to-nats lists what enables TLS)")
		}
	})
	t.Run("CA file without a certificate", func(t *testing.T) {
		c := settings(tlsURL)
		c.TLSCAFile = ptr(writeFile(t, "ca.pem", "not a certificate\n"))
		got := configProblems(t, c, nil)
		if diff := cmp.Diff([]string{"nats.tls_ca_file: no PEM certificate found"}, got); diff != "" {
			t.Errorf("problems (-want +got):\n%s", diff)
		}
	})
}

// mtlsRejected is how a client sees a server refuse its certificate.
const mtlsRejected = "tls: certificate required|connection closed by remote after TLS handshake"

func TestMutualTLS(t *testing.T) {
	pki := natsconntest.NewPKI(t)
	s := natsconntest.StartServer(t, &server.Options{TLSConfig: pki.ServerTLS(t, true), TLSVerify: true, TLSTimeout: 5})
	url := s.ClientURL()
	keyBytes, err := os.ReadFile(pki.ClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	keyBody := strings.Split(string(keyBytes), "\n")[1] // a line of the private key

	for _, tt := range []struct {
		name string
		edit func(*natsconfig.Connection)
		want string
	}{
		{"client certificate and key", func(c *natsconfig.Connection) { c.TLSCertFile, c.TLSKeyFile = &pki.ClientCertFile, &pki.ClientKeyFile }, ""},
		{"key read from the certificate file", func(c *natsconfig.Connection) { c.TLSCertFile = &pki.ClientComboFile }, ""},
		// With TLS 1.3 the server checks the client certificate after the
		// handshake has completed on the client's side: the client reads
		// the server's alert, or finds the connection closed when its
		// CONNECT write comes first. (A certificate from a CA the server
		// does not list is not even sent.)
		{"no client certificate", func(*natsconfig.Connection) {}, mtlsRejected},
		{"certificate from another CA", func(c *natsconfig.Connection) {
			c.TLSCertFile, c.TLSKeyFile = &pki.OtherClientCertFile, &pki.OtherClientKeyFile
		}, mtlsRejected},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := settings(url)
			c.TLSCAFile = &pki.CAFile
			tt.edit(c)
			if tt.want != "" {
				mustFail(t, c, nil, tt.want, keyBody)
				return
			}
			nc := mustConnect(t, c, nil)
			st, err := nc.TLSConnectionState()
			if err != nil || len(st.PeerCertificates) == 0 {
				t.Fatalf("TLS state %v, %v", st, err)
			}
		})
	}

	for _, tt := range []struct {
		name      string
		cert, key string
		want      string
	}{
		{"key of another certificate", pki.ClientCertFile, pki.OtherClientKeyFile,
			"nats.tls_key_file: cannot load client certificate and key: tls: private key does not match public key"},
		{"certificate file without a certificate", writeFile(t, "c.pem", "nothing\n"), pki.ClientKeyFile,
			"nats.tls_cert_file: no PEM certificate found"},
		{"certificate file without a key", pki.ClientCertFile, "",
			"nats.tls_cert_file: cannot load client certificate and key: tls: "},
		{"missing key file", pki.ClientCertFile, filepath.Join(t.TempDir(), "none.pem"), "nats.tls_key_file: cannot read file: "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := settings(url)
			c.TLSCAFile, c.TLSCertFile = &pki.CAFile, &tt.cert
			if tt.key != "" {
				c.TLSKeyFile = &tt.key
			}
			got := configProblems(t, c, nil, keyBody)
			if len(got) != 1 || !strings.HasPrefix(got[0], tt.want) {
				t.Errorf("problems = %q, want one starting %q", got, tt.want)
			}
		})
	}
}

func TestWebSocket(t *testing.T) {
	pki := natsconntest.NewPKI(t)
	const pw = "ws-Pass-61b2"
	user := "sink"
	ws := natsconntest.StartServer(t, &server.Options{
		Users:     []*server.User{{Username: user, Password: pw}},
		Websocket: server.WebsocketOpts{Host: "127.0.0.1", Port: -1, NoTLS: true},
	})
	wss := natsconntest.StartServer(t, &server.Options{
		Websocket: server.WebsocketOpts{Host: "127.0.0.1", Port: -1, TLSConfig: pki.ServerTLS(t, false)},
	})

	t.Run("ws with user and password", func(t *testing.T) {
		c := settings(ws.WebsocketURL())
		c.User, c.Password = &user, ptr(secret.Value(pw))
		mustConnect(t, c, nil)
	})
	t.Run("ws wrong password", func(t *testing.T) {
		c := settings(ws.WebsocketURL())
		c.User, c.Password = &user, ptr(secret.Value("ws-Wrong-88"))
		// Over WebSocket the server may close before the client reads its
		// -ERR: the client then reports the broken connection.
		mustFail(t, c, nil, "authorization violation|broken pipe|connection reset", "ws-Wrong-88")
	})
	t.Run("wss with private CA", func(t *testing.T) {
		c := settings(wss.WebsocketURL())
		c.TLSCAFile = &pki.CAFile
		nc := mustConnect(t, c, nil)
		if _, err := nc.TLSConnectionState(); err != nil {
			t.Errorf("wss connection is not TLS: %v", err)
		}
	})
	t.Run("wss wrong CA", func(t *testing.T) {
		c := settings(wss.WebsocketURL())
		c.TLSCAFile = &pki.OtherCAFile
		mustFail(t, c, nil, "certificate signed by unknown authority")
	})
	t.Run("ws url with tls_verify false stays plain", func(t *testing.T) {
		c := settings(ws.WebsocketURL())
		c.User, c.Password, c.TLSVerify = &user, ptr(secret.Value(pw)), false
		mustConnect(t, c, nil)
	})

	t.Run("headers on the upgrade request", func(t *testing.T) {
		// An HTTP server that records the upgrade request and refuses
		// it: the headers the client sent are what this test checks.
		got := make(chan http.Header, 1)
		h := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case got <- r.Header.Clone():
			default:
			}
			http.Error(w, "no", http.StatusForbidden)
		}))
		defer h.Close()
		c := settings("ws://" + strings.TrimPrefix(h.URL, "http://"))
		c.WebsocketHeaders = map[string]string{"X-Tenant": "blue"}
		c.WebsocketHeadersEnv = map[string]string{"Authorization": "NS_WS_AUTH"}
		env := envOf(map[string]string{"NS_WS_AUTH": "Bearer ws-Secret-1c7"})
		if nc, err := dial(t, c, env); err == nil {
			nc.Close()
			t.Fatal("connected to a server that refused the upgrade")
		} else {
			noSecrets(t, err.Error(), "ws-Secret-1c7")
		}
		hdr := <-got
		if hdr.Get("X-Tenant") != "blue" || hdr.Get("Authorization") != "Bearer ws-Secret-1c7" {
			t.Errorf("upgrade headers X-Tenant=%q Authorization=%q, want blue and the env value", hdr.Get("X-Tenant"), hdr.Get("Authorization"))
		}
	})
	t.Run("unset header variables are all reported", func(t *testing.T) {
		c := settings(ws.WebsocketURL())
		c.WebsocketHeadersEnv = map[string]string{"X-B": "NS_B", "X-A": "NS_A"}
		got := configProblems(t, c, nil)
		want := []string{
			"nats.websocket_headers_env.X-A: environment variable NS_A is not set",
			"nats.websocket_headers_env.X-B: environment variable NS_B is not set",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("problems (-want +got):\n%s", diff)
		}
	})
}

// TestEveryProblemAtOnce: an operator fixing a deployment sees every broken
// secret source and file in one run, under the caller's path prefix.
func TestEveryProblemAtOnce(t *testing.T) {
	c := settings("tls://127.0.0.1:1")
	c.User, c.PasswordEnv = ptr("sink"), ptr("NS_PW_UNSET")
	c.TLSCAFile = ptr(writeFile(t, "ca.pem", "x"))
	c.TLSCertFile = ptr(filepath.Join(t.TempDir(), "none.pem"))
	_, err := natsconn.Options(c, "connection", nil)
	var ce *sink.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("Options error = %v, want *sink.ConfigError", err)
	}
	var paths []string
	for _, p := range ce.Problems {
		paths = append(paths, p.Path)
	}
	if diff := cmp.Diff([]string{"connection.password_env", "connection.tls_ca_file", "connection.tls_cert_file"}, paths); diff != "" {
		t.Errorf("problem paths (-want +got):\n%s", diff)
	}
	if !errors.Is(err, sink.ErrConfig) {
		t.Errorf("error %q is not a sink.ErrConfig", err)
	}
}

// TestOptionsApplied checks that every tuning key reaches the client.
func TestOptionsApplied(t *testing.T) {
	c := natsconfig.Default()
	c.Name = ptr("orders-sink")
	c.NoEcho = true
	c.ConnectTimeoutSeconds = 7
	c.ReconnectTimeWaitSeconds = 3
	c.MaxReconnectAttempts = -1
	c.PingIntervalSeconds = 11
	c.MaxOutstandingPings = 4
	c.PendingSizeBytes = 4096
	c.DrainTimeoutSeconds = 9
	type applied struct {
		Name                                           string
		NoEcho, AllowReconnect, NoRandomize, IgnoreAbo bool
		Timeout, ReconnectWait, PingInterval, Drain    time.Duration
		MaxReconnect, MaxPingsOut                      int
		ReconnectBufSize                               int
	}
	apply := func(c *natsconfig.Connection) applied {
		opts, err := natsconn.Options(c, "nats", nil)
		if err != nil {
			t.Fatal(err)
		}
		o := nats.GetDefaultOptions()
		for _, opt := range opts {
			if err := opt(&o); err != nil {
				t.Fatal(err)
			}
		}
		return applied{o.Name, o.NoEcho, o.AllowReconnect, o.NoRandomize, o.IgnoreAuthErrorAbort,
			o.Timeout, o.ReconnectWait, o.PingInterval, o.DrainTimeout, o.MaxReconnect, o.MaxPingsOut, o.ReconnectBufSize}
	}
	want := applied{"orders-sink", true, true, true, true, 7 * time.Second, 3 * time.Second, 11 * time.Second,
		9 * time.Second, -1, 4, 4096}
	if diff := cmp.Diff(want, apply(&c)); diff != "" {
		t.Errorf("client options (-want +got):\n%s", diff)
	}
	c.AllowReconnect = false
	if apply(&c).AllowReconnect {
		t.Error("allow_reconnect false did not disable reconnects")
	}
}

func ptr[T any](v T) *T { return &v }
