package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natsconn/natsconntest"
	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// result is one finished nats-sink command.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// cmdEnv is the environment of a nats-sink subprocess in these tests:
// PATH plus extra, nothing inherited that could override configuration.
func cmdEnv(extra ...string) []string {
	return append([]string{"PATH=" + os.Getenv("PATH")}, extra...)
}

// runNatsSink runs nats-sink with args and env to completion (at most 60 s).
func runNatsSink(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = env
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("nats-sink %v did not finish within 60s\nstderr:\n%s", args, stderr.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("nats-sink %v: %v", args, err)
	}
	return result{stdout.String(), stderr.String(), code}
}

// startWithEnv is start (e2e_test.go) with an explicit environment.
func startWithEnv(t *testing.T, env []string, configPath string) *process {
	t.Helper()
	p := &process{done: make(chan struct{})}
	p.cmd = exec.Command(binary, "run", configPath)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start nats-sink: %v", err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	natstest.WaitFor(t, 30*time.Second, func() error {
		select {
		case <-p.done:
			return nil // exited early: the caller checks
		default:
		}
		if !strings.Contains(p.stdout.String(), "Active sink:") {
			return fmt.Errorf("no \"Active sink:\" line yet; stderr:\n%s", p.stderr.String())
		}
		return nil
	})
	return p
}

func writeConfig(t *testing.T, doc string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// secretSet is the distinctive secret values of one test; check fails the
// test when any of them, or a recognisable part, appears in text.
type secretSet map[string]string // description → value

func (s secretSet) check(t *testing.T, where, text string) {
	t.Helper()
	for what, v := range s {
		if strings.Contains(text, v) {
			t.Errorf("%s reveals the %s", where, what)
		}
	}
}

func randomTag(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// recordingEndpoint is an HTTP sink endpoint that stores bodies, answers
// 400 to bodies containing "poison" (a permanent failure), and records the
// Authorization header it was sent.
type recordingEndpoint struct {
	srv  *httptest.Server
	mu   sync.Mutex
	ok   map[string]bool // Idempotency-Key → stored
	auth map[string]bool
}

func newRecordingEndpoint(t *testing.T) *recordingEndpoint {
	t.Helper()
	e := &recordingEndpoint{ok: map[string]bool{}, auth: map[string]bool{}}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		defer e.mu.Unlock()
		e.auth[r.Header.Get("Authorization")] = true
		if strings.Contains(string(body), "poison") {
			http.Error(w, "rejected", http.StatusBadRequest)
			return
		}
		e.ok[r.Header.Get("Idempotency-Key")] = true
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *recordingEndpoint) stored() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.ok)
}

func (e *recordingEndpoint) sawAuth(v string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.auth[v]
}

// TestSecuritySecretHygiene runs validate, show-effective-config, test-sink
// and run — successful runs, wrong passwords, unreachable servers, unknown
// credentials, missing and malformed secrets — with distinctive secret
// values, and checks that none of them ever appears on stdout or stderr
// (where the logs go, at DEBUG level).
func TestSecuritySecretHygiene(t *testing.T) {
	tag := randomTag(t)
	key := make([]byte, 32)
	rand.Read(key)
	short := make([]byte, 16)
	rand.Read(short)
	right := "Pw-Right-" + tag
	secrets := secretSet{
		"right password":       right,
		"wrong password":       "Pw-Wrong-" + tag,
		"inline password":      "Pw-Inline-" + tag,
		"token file content":   "Tok-File-" + tag,
		"http header value":    "Http-Secret-" + tag,
		"encryption key":       base64.StdEncoding.EncodeToString(key),
		"encryption key (hex)": hex.EncodeToString(key),
		"short key":            base64.StdEncoding.EncodeToString(short),
		"secret tag":           tag, // any fragment of the values above
	}
	op := natsconntest.NewOperator(t, false)
	creds := op.UserCreds(t, "stranger", nil)
	for _, l := range strings.Split(string(creds), "\n") {
		if strings.HasPrefix(l, "SU") || strings.HasPrefix(l, "eyJ") {
			secrets["creds file line "+l[:2]] = l
		}
	}
	credsFile := natsconntest.WriteFile(t, "stranger.creds", creds)
	tokenFile := natsconntest.WriteFile(t, "token", []byte(secrets["token file content"]+"\n"))

	s := natsconntest.StartServer(t, &server.Options{JetStream: true, Users: []*server.User{{Username: "sink", Password: right}}})
	_, js := natstest.Connect(t, s, nats.UserInfo("sink", right))
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "HYG", Subjects: []string{"hyg.>"}})
	for i := range 3 {
		natstest.Publish(t, js, "hyg.event", fmt.Appendf(nil, `{"n":%d}`, i+1), nil)
	}
	endpoint := newRecordingEndpoint(t)
	closedURL := func() string {
		dead := natsconntest.StartServer(t, &server.Options{})
		u := dead.ClientURL()
		dead.Shutdown()
		dead.WaitForShutdown()
		return u
	}()

	natsSection := func(url, auth string) string {
		return fmt.Sprintf(`"nats": {"url": %q, "stream": "HYG", "consumer": "hyg", "subject": "hyg.>", "connect_timeout_seconds": 2, %s}`, url, auth)
	}
	envCfg := writeConfig(t, fmt.Sprintf(`{%s,
  "encryption": {"enabled": true, "key_id": "k-2026", "key_b64_env": "NS_KEY"},
  "delivery": {"batch_timeout_ms": 100, "shutdown_timeout_ms": 5000},
  "logging": {"level": "DEBUG"},
  "sink": {"type": "http", "url": %q, "allow_http_for_local_testing": true,
           "headers_env": {"Authorization": "NS_HTTP_AUTH"}}}`,
		natsSection(s.ClientURL(), `"user": "sink", "password_env": "NS_PW"`), endpoint.srv.URL+"/ingest"))
	inlineCfg := writeConfig(t, fmt.Sprintf(`{%s,
  "encryption": {"enabled": true, "key_b64": %q},
  "logging": {"level": "DEBUG"},
  "sink": {"type": "file", "directory": %q}}`,
		natsSection(s.ClientURL(), fmt.Sprintf(`"user": "sink", "password": %q`, secrets["inline password"])),
		secrets["encryption key"], t.TempDir()))
	republishCfg := writeConfig(t, fmt.Sprintf(`{%s, "logging": {"level": "DEBUG"},
  "sink": {"type": "nats", "subject_prefix": "copy"}}`, natsSection(s.ClientURL(), `"user": "sink", "password_env": "NS_PW"`)))
	tokenCfg := writeConfig(t, fmt.Sprintf(`{%s, "logging": {"level": "DEBUG"},
  "sink": {"type": "file", "directory": %q}}`, natsSection(closedURL, fmt.Sprintf(`"token_file": %q`, tokenFile)), t.TempDir()))
	credsCfg := writeConfig(t, fmt.Sprintf(`{%s, "logging": {"level": "DEBUG"},
  "sink": {"type": "file", "directory": %q}}`, natsSection(s.ClientURL(), fmt.Sprintf(`"creds_file": %q`, credsFile)), t.TempDir()))

	keyEnv := "NS_KEY=" + secrets["encryption key"]
	authEnv := "NS_HTTP_AUTH=Bearer " + secrets["http header value"]
	wrongEnv := cmdEnv("NS_PW="+secrets["wrong password"], keyEnv, authEnv)

	for _, tt := range []struct {
		name   string
		env    []string
		args   []string
		code   int
		stderr string // a line the output must contain
	}{
		{"validate, env secrets unset", cmdEnv(), []string{"validate", envCfg}, 0, ""},
		{"validate, env secrets set", wrongEnv, []string{"validate", envCfg}, 0, ""},
		{"validate inline secrets", cmdEnv(), []string{"validate", inlineCfg}, 0, ""},
		{"show-effective-config env", wrongEnv, []string{"show-effective-config", envCfg}, 0, ""},
		{"show-effective-config inline", cmdEnv(), []string{"show-effective-config", inlineCfg}, 0, ""},
		{"test-sink http with header secret", wrongEnv, []string{"test-sink", envCfg}, 0, ""},
		{"test-sink file with inline secrets", cmdEnv(), []string{"test-sink", inlineCfg}, 0, ""},
		{"test-sink republish, wrong password", wrongEnv, []string{"test-sink", republishCfg}, 1,
			"Sink test failed: connect to NATS: nats: Authorization Violation"},
		{"run, wrong password from env", wrongEnv, []string{"run", envCfg}, 1,
			"Runtime error: connect to NATS: nats: Authorization Violation"},
		{"run, wrong inline password", cmdEnv(), []string{"run", inlineCfg}, 1,
			"Runtime error: connect to NATS: nats: Authorization Violation"},
		{"run, unreachable server with a token file", cmdEnv(), []string{"run", tokenCfg}, 1,
			"Runtime error: connect to NATS: "},
		{"run, credentials of an unknown account", cmdEnv(), []string{"run", credsCfg}, 1,
			"Runtime error: connect to NATS: nats: Authorization Violation"},
		{"run, password variable unset", cmdEnv(keyEnv, authEnv), []string{"run", envCfg}, 2,
			"Configuration error: nats.password_env: environment variable NS_PW is not set"},
		{"run, key of the wrong length", cmdEnv("NS_PW="+right, "NS_KEY="+secrets["short key"], authEnv), []string{"run", envCfg}, 2,
			"Configuration error: encryption.key_b64_env: must decode to exactly 32 bytes for AES-256"},
		{"run, key not base64", cmdEnv("NS_PW="+right, "NS_KEY=%%"+tag+"%%", authEnv), []string{"run", envCfg}, 2,
			"Configuration error: encryption.key_b64_env: must be standard base64 with padding"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := runNatsSink(t, tt.env, tt.args...)
			if r.code != tt.code || !strings.Contains(r.stderr, tt.stderr) {
				t.Errorf("want exit %d and stderr containing %q; got %v", tt.code, tt.stderr, r)
			}
			secrets.check(t, "stdout", r.stdout)
			secrets.check(t, "stderr", r.stderr)
			if tt.args[0] == "show-effective-config" && !strings.Contains(r.stdout, `"********"`) && !strings.Contains(r.stdout, `"NS_PW"`) {
				t.Errorf("show-effective-config shows neither masks nor variable names:\n%s", r.stdout)
			}
		})
	}

	t.Run("run, right password, DEBUG logs, then stop", func(t *testing.T) {
		p := startWithEnv(t, cmdEnv("NS_PW="+right, keyEnv, authEnv), envCfg)
		natstest.WaitFor(t, 30*time.Second, func() error {
			if n := endpoint.stored(); n != 3 {
				return fmt.Errorf("endpoint stored %d messages, want 3; stderr:\n%s", n, p.stderr.String())
			}
			return nil
		})
		if !endpoint.sawAuth("Bearer " + secrets["http header value"]) {
			t.Error("the endpoint never received the Authorization header from NS_HTTP_AUTH")
		}
		p.stop(t)
		if !strings.Contains(p.stderr.String(), `"level":"DEBUG"`) && !strings.Contains(p.stderr.String(), `"msg":"ready"`) {
			t.Errorf("no log records captured:\n%s", p.stderr.String())
		}
		secrets.check(t, "stdout", p.stdout.String())
		secrets.check(t, "stderr", p.stderr.String())
	})
}

// TestSecurityMutualTLS runs the binary over mutual TLS with a private CA
// end to end, and checks the two ways it must refuse: a CA that did not
// sign the server's certificate, and no client certificate.
func TestSecurityMutualTLS(t *testing.T) {
	const n = 200
	pki := natsconntest.NewPKI(t)
	s := natsconntest.StartServer(t, &server.Options{JetStream: true, TLSConfig: pki.ServerTLS(t, true), TLSVerify: true, TLSTimeout: 5})
	_, js := natstest.Connect(t, s, nats.RootCAs(pki.CAFile), nats.ClientCert(pki.ClientCertFile, pki.ClientKeyFile))
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "MTLS", Subjects: []string{"mtls.>"}})
	natstest.PublishN(t, js, "mtls.events", n, body)

	cfg := func(tls string) string {
		return fileConfigWith(t, s.ClientURL(), "MTLS", "mtls-file", "mtls.>", t.TempDir(), tls)
	}
	t.Run("wrong CA", func(t *testing.T) {
		r := runNatsSink(t, cmdEnv(), "run", cfg(fmt.Sprintf(`"tls_ca_file": %q, "tls_cert_file": %q, "tls_key_file": %q`,
			pki.OtherCAFile, pki.ClientCertFile, pki.ClientKeyFile)))
		if r.code != 1 || !strings.Contains(r.stderr, "x509: certificate signed by unknown authority") {
			t.Errorf("want exit 1 naming the unknown authority; got %v", r)
		}
	})
	t.Run("no client certificate", func(t *testing.T) {
		r := runNatsSink(t, cmdEnv(), "run", cfg(fmt.Sprintf(`"tls_ca_file": %q`, pki.CAFile)))
		if r.code != 1 || !regexp.MustCompile(`certificate required|connection closed by remote after TLS handshake`).MatchString(r.stderr) {
			t.Errorf("want exit 1 with the server's refusal; got %v", r)
		}
	})
	t.Run("key file that does not match", func(t *testing.T) {
		r := runNatsSink(t, cmdEnv(), "run", cfg(fmt.Sprintf(`"tls_ca_file": %q, "tls_cert_file": %q, "tls_key_file": %q`,
			pki.CAFile, pki.ClientCertFile, pki.OtherClientKeyFile)))
		want := "Configuration error: nats.tls_key_file: cannot load client certificate and key: tls: private key does not match public key"
		if r.code != 2 || !strings.Contains(r.stderr, want) {
			t.Errorf("want exit 2 with %q; got %v", want, r)
		}
	})

	dir := t.TempDir()
	p := start(t, fileConfigWith(t, s.ClientURL(), "MTLS", "mtls-file", "mtls.>", dir,
		fmt.Sprintf(`"tls_ca_file": %q, "tls_cert_file": %q, "tls_key_file": %q`, pki.CAFile, pki.ClientCertFile, pki.ClientKeyFile)))
	natstest.WaitFor(t, 60*time.Second, func() error {
		floor, pending, err := ackState(context.Background(), js, "MTLS", "mtls-file")
		if err != nil || floor != n || pending != 0 {
			return fmt.Errorf("ack floor %d, pending %d (%v); stderr:\n%s", floor, pending, err, p.stderr.String())
		}
		return nil
	})
	p.stop(t)
	checkFiles(t, dir, "MTLS", n)
}

// fileConfigWith is fileConfig (e2e_test.go) with extra keys in the nats
// section.
func fileConfigWith(t *testing.T, url, stream, consumer, subject, dir, natsExtra string) string {
	t.Helper()
	return writeConfig(t, fmt.Sprintf(`{
  "nats": {"url": %q, "stream": %q, "consumer": %q, "subject": %q, %s},
  "consumer_management": {"ack_wait_seconds": 3, "max_ack_pending": 4000},
  "delivery": {"batch_size": 100, "batch_timeout_ms": 200, "retry_backoff_ms": 100, "shutdown_timeout_ms": 10000},
  "logging": {"level": "WARNING"},
  "sink": {"type": "file", "directory": %q, "fsync": true}
}`, url, stream, consumer, subject, natsExtra, dir))
}

// permissionBlock returns the permissions block of docs/nats-permissions.md
// marked "# variant: <name>", so the documentation is what is tested.
func permissionBlock(t *testing.T, name string) string {
	t.Helper()
	doc, err := os.ReadFile("../docs/nats-permissions.md")
	if err != nil {
		t.Fatal(err)
	}
	marker := "```conf\n# variant: " + name + "\n"
	i := strings.Index(string(doc), marker)
	if i < 0 {
		t.Fatalf("docs/nats-permissions.md has no block %q", marker)
	}
	rest := string(doc[i+len("```conf\n"):])
	return rest[:strings.Index(rest, "```")]
}

// without removes the line of block that holds subject.
func without(t *testing.T, block, subject string) string {
	t.Helper()
	var out []string
	removed := false
	for _, l := range strings.Split(block, "\n") {
		if strings.Contains(l, `"`+subject+`"`) {
			removed = true
			continue
		}
		out = append(out, l)
	}
	if !removed {
		t.Fatalf("block has no line for %s", subject)
	}
	// A removed last entry can leave a trailing comma, which the server's
	// configuration parser accepts.
	return strings.Join(out, "\n")
}

// permissionServer starts a JetStream server from a configuration file
// holding two users: admin (everything) and sink with exactly block.
func permissionServer(t *testing.T, block string) *server.Server {
	t.Helper()
	conf := fmt.Sprintf(`host: 127.0.0.1
port: -1
server_name: least-privilege
jetstream: {store_dir: %q}
authorization: {
  users: [
    {user: admin, password: admin}
    {user: sink, password: sinkpw,
%s
    }
  ]
}
`, t.TempDir(), block)
	path := filepath.Join(t.TempDir(), "server.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("the documented block does not load into nats-server: %v\n%s", err, conf)
	}
	return natsconntest.StartServer(t, opts)
}

// leastPrivilegeConfig is a run configuration for the sink user with the
// example names of docs/nats-permissions.md.
func leastPrivilegeConfig(t *testing.T, url, mode string, dlq bool, sinkJSON string) string {
	t.Helper()
	dl := `"dead_letter": {"enabled": false}`
	if dlq {
		dl = `"dead_letter": {"enabled": true, "subject": "dlq.orders", "publish_timeout_ms": 1000}`
	}
	return writeConfig(t, fmt.Sprintf(`{
  "nats": {"url": %q, "stream": "ORDERS", "consumer": "orders-sink", "subject": "orders.>",
           "user": "sink", "password": "sinkpw"},
  "consumer_management": {"mode": %q, "ack_wait_seconds": 2},
  "delivery": {"batch_size": 50, "batch_timeout_ms": 100, "retry_backoff_ms": 100, "shutdown_timeout_ms": 5000},
  %s,
  "logging": {"level": "WARNING"},
  "sink": %s
}`, url, mode, dl, sinkJSON))
}

// TestSecurityLeastPrivilege runs the binary as a NATS user holding exactly
// the permissions docs/nats-permissions.md lists, for each documented
// variant, and checks every message is written and acknowledged (and, with
// the DLQ, dead-lettered) without a single permissions violation. Then it
// takes one permission away and checks the documented failure.
func TestSecurityLeastPrivilege(t *testing.T) {
	admin := func(t *testing.T, s *server.Server) jetstream.JetStream {
		t.Helper()
		_, js := natstest.Connect(t, s, nats.UserInfo("admin", "admin"))
		natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
		natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "DLQ", Subjects: []string{"dlq.>"}, Duplicates: time.Minute})
		return js
	}
	bindConsumer := func(t *testing.T, js jetstream.JetStream) {
		t.Helper()
		_, err := js.CreateConsumer(context.Background(), "ORDERS", jetstream.ConsumerConfig{
			Durable: "orders-sink", FilterSubject: "orders.>", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 2 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	publish := func(t *testing.T, js jetstream.JetStream, n int, poison map[int]bool) {
		t.Helper()
		for i := 1; i <= n; i++ {
			data := fmt.Sprintf(`{"n":%d}`, i)
			if poison[i] {
				data = fmt.Sprintf(`{"n":%d,"poison":true}`, i)
			}
			natstest.Publish(t, js, "orders.new", []byte(data), nil)
		}
	}
	waitAcked := func(t *testing.T, js jetstream.JetStream, p *process, n uint64) {
		t.Helper()
		natstest.WaitFor(t, 30*time.Second, func() error {
			floor, pending, err := ackState(context.Background(), js, "ORDERS", "orders-sink")
			if err != nil || floor != n || pending != 0 {
				return fmt.Errorf("ack floor %d, pending %d (%v); stderr:\n%s", floor, pending, err, p.stderr.String())
			}
			return nil
		})
	}
	noViolations := func(t *testing.T, p *process) {
		t.Helper()
		if strings.Contains(p.stderr.String(), "Permissions Violation") || strings.Contains(p.stderr.String(), "not permitted") {
			t.Errorf("the documented permissions were not enough:\n%s", p.stderr.String())
		}
	}

	t.Run("bind-only", func(t *testing.T) {
		s := permissionServer(t, permissionBlock(t, "bind-only"))
		js := admin(t, s)
		bindConsumer(t, js)
		publish(t, js, 20, nil)
		dir := t.TempDir()
		p := start(t, leastPrivilegeConfig(t, s.ClientURL(), "bind_only", false, fmt.Sprintf(`{"type": "file", "directory": %q}`, dir)))
		waitAcked(t, js, p, 20)
		p.stop(t)
		noViolations(t, p)
	})
	t.Run("create", func(t *testing.T) {
		s := permissionServer(t, permissionBlock(t, "create"))
		js := admin(t, s)
		publish(t, js, 20, nil)
		p := start(t, leastPrivilegeConfig(t, s.ClientURL(), "create_if_missing", false, fmt.Sprintf(`{"type": "file", "directory": %q}`, t.TempDir())))
		waitAcked(t, js, p, 20)
		p.stop(t)
		noViolations(t, p)
	})
	t.Run("create-dlq", func(t *testing.T) {
		s := permissionServer(t, permissionBlock(t, "create-dlq"))
		js := admin(t, s)
		publish(t, js, 20, map[int]bool{4: true, 17: true})
		endpoint := newRecordingEndpoint(t)
		p := start(t, leastPrivilegeConfig(t, s.ClientURL(), "create_if_missing", true, fmt.Sprintf(
			`{"type": "http", "url": %q, "allow_http_for_local_testing": true}`, endpoint.srv.URL)))
		waitAcked(t, js, p, 20)
		p.stop(t)
		noViolations(t, p)
		if got := endpoint.stored(); got != 18 {
			t.Errorf("endpoint stored %d messages, want 18", got)
		}
		st, err := js.Stream(context.Background(), "DLQ")
		if err != nil {
			t.Fatal(err)
		}
		if got := st.CachedInfo().State.Msgs; got != 2 {
			t.Errorf("DLQ stream holds %d messages, want 2", got)
		}
	})

	t.Run("missing CONSUMER.INFO fails the start", func(t *testing.T) {
		s := permissionServer(t, without(t, permissionBlock(t, "bind-only"), "$JS.API.CONSUMER.INFO.ORDERS.orders-sink"))
		js := admin(t, s)
		bindConsumer(t, js)
		r := runNatsSink(t, cmdEnv(), "run", leastPrivilegeConfig(t, s.ClientURL(), "bind_only", false,
			fmt.Sprintf(`{"type": "file", "directory": %q}`, t.TempDir())))
		for _, want := range []string{
			`Permissions Violation for Publish to \"$JS.API.CONSUMER.INFO.ORDERS.orders-sink\"`,
			`Runtime error: look up consumer "orders-sink" on stream "ORDERS": context canceled; the server refused a request: ` +
				`nats: permissions violation: Permissions Violation for Publish to "$JS.API.CONSUMER.INFO.ORDERS.orders-sink"`,
		} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr lacks %q", want)
			}
		}
		if r.code != 1 {
			t.Errorf("exit %d, want 1\n%v", r.code, r)
		}
	})
	t.Run("missing CONSUMER.CREATE fails the start", func(t *testing.T) {
		s := permissionServer(t, without(t, permissionBlock(t, "create"), "$JS.API.CONSUMER.CREATE.ORDERS.orders-sink.>"))
		admin(t, s)
		r := runNatsSink(t, cmdEnv(), "run", leastPrivilegeConfig(t, s.ClientURL(), "create_if_missing", false,
			fmt.Sprintf(`{"type": "file", "directory": %q}`, t.TempDir())))
		want := `the server refused a request: nats: permissions violation: Permissions Violation for Publish to "$JS.API.CONSUMER.CREATE.ORDERS.orders-sink.orders.>"`
		if r.code != 1 || !strings.Contains(r.stderr, `Runtime error: create consumer "orders-sink" on stream "ORDERS": `) || !strings.Contains(r.stderr, want) {
			t.Errorf("want exit 1 with %q; got %v", want, r)
		}
	})
	t.Run("subscribe allow-list without _INBOX fails the start", func(t *testing.T) {
		block := permissionBlock(t, "bind-only")
		if !strings.Contains(block, `["_INBOX.>"]`) {
			t.Fatal(`bind-only block lacks ["_INBOX.>"]`)
		}
		s := permissionServer(t, strings.Replace(block, `["_INBOX.>"]`, `["unrelated.>"]`, 1))
		js := admin(t, s)
		bindConsumer(t, js)
		r := runNatsSink(t, cmdEnv(), "run", leastPrivilegeConfig(t, s.ClientURL(), "bind_only", false,
			fmt.Sprintf(`{"type": "file", "directory": %q}`, t.TempDir())))
		want := `the server refused a request: nats: permissions violation: Permissions Violation for Subscription to "_INBOX.`
		if r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Errorf("want exit 1 with %q; got %v", want, r)
		}
	})
	t.Run("missing STREAM.NAMES skips the DLQ check", func(t *testing.T) {
		s := permissionServer(t, without(t, permissionBlock(t, "create-dlq"), "$JS.API.STREAM.NAMES"))
		js := admin(t, s)
		publish(t, js, 5, nil)
		p := start(t, leastPrivilegeConfig(t, s.ClientURL(), "create_if_missing", true, fmt.Sprintf(`{"type": "file", "directory": %q}`, t.TempDir())))
		waitAcked(t, js, p, 5)
		p.stop(t)
		if !strings.Contains(p.stderr.String(), `"msg":"dead-letter stream lookup not permitted; skipping the check"`) {
			t.Errorf("no warning about the skipped DLQ check:\n%s", p.stderr.String())
		}
	})
	t.Run("missing MSG.NEXT delivers nothing", func(t *testing.T) {
		s := permissionServer(t, without(t, permissionBlock(t, "bind-only"), "$JS.API.CONSUMER.MSG.NEXT.ORDERS.orders-sink"))
		js := admin(t, s)
		bindConsumer(t, js)
		publish(t, js, 5, nil)
		addr := freeAddr(t)
		cfg := leastPrivilegeConfig(t, s.ClientURL(), "bind_only", false, fmt.Sprintf(`{"type": "file", "directory": %q}`, t.TempDir()))
		replaceInFile(t, cfg, `"logging": {"level": "WARNING"}`, fmt.Sprintf(`"logging": {"level": "WARNING"}, "metrics": {"listen": %q}`, addr))
		p := start(t, cfg)
		natstest.WaitFor(t, 30*time.Second, func() error {
			if !strings.Contains(p.stderr.String(), `Permissions Violation for Publish to \"$JS.API.CONSUMER.MSG.NEXT.ORDERS.orders-sink\"`) {
				return fmt.Errorf("no refused fetch logged; stderr:\n%s", p.stderr.String())
			}
			return nil
		})
		// The client sees a refused fetch as an empty one; readiness
		// must not claim the consumer works.
		natstest.WaitFor(t, 30*time.Second, func() error {
			resp, err := http.Get("http://" + addr + "/readyz")
			if err != nil {
				return err
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 503 || !strings.Contains(string(b), `"consumer":"fetch_failing"`) {
				return fmt.Errorf("/readyz = %d %s, want 503 with consumer fetch_failing", resp.StatusCode, b)
			}
			return nil
		})
		p.stop(t)
		if floor, _, _ := ackState(context.Background(), js, "ORDERS", "orders-sink"); floor != 0 {
			t.Errorf("ack floor %d with fetches refused", floor)
		}
	})
	t.Run("missing $JS.ACK writes but never acknowledges", func(t *testing.T) {
		s := permissionServer(t, without(t, permissionBlock(t, "bind-only"), "$JS.ACK.ORDERS.orders-sink.>"))
		js := admin(t, s)
		bindConsumer(t, js)
		publish(t, js, 5, nil)
		dir := t.TempDir()
		p := start(t, leastPrivilegeConfig(t, s.ClientURL(), "bind_only", false, fmt.Sprintf(`{"type": "file", "directory": %q}`, dir)))
		// Written, refused ACKs logged, redelivered after AckWait (2 s),
		// and still nothing acknowledged.
		natstest.WaitFor(t, 30*time.Second, func() error {
			c, err := js.Consumer(context.Background(), "ORDERS", "orders-sink")
			if err != nil {
				return err
			}
			info, err := c.Info(context.Background())
			if err != nil {
				return err
			}
			if info.NumRedelivered == 0 || !strings.Contains(p.stderr.String(), `Permissions Violation for Publish to \"$JS.ACK.ORDERS.orders-sink.`) {
				return fmt.Errorf("redelivered %d; stderr:\n%s", info.NumRedelivered, p.stderr.String())
			}
			if info.AckFloor.Stream != 0 {
				return fmt.Errorf("ack floor %d: an ACK got through", info.AckFloor.Stream)
			}
			return nil
		})
		p.stop(t)
		checkFiles(t, dir, "ORDERS", 5)
	})
	t.Run("missing DLQ subject leaves the poison message unacknowledged", func(t *testing.T) {
		s := permissionServer(t, without(t, permissionBlock(t, "create-dlq"), "dlq.orders"))
		js := admin(t, s)
		publish(t, js, 5, map[int]bool{3: true})
		endpoint := newRecordingEndpoint(t)
		p := start(t, leastPrivilegeConfig(t, s.ClientURL(), "create_if_missing", true, fmt.Sprintf(
			`{"type": "http", "url": %q, "allow_http_for_local_testing": true}`, endpoint.srv.URL)))
		natstest.WaitFor(t, 30*time.Second, func() error {
			if !strings.Contains(p.stderr.String(), `"msg":"dlq publish failed"`) ||
				!strings.Contains(p.stderr.String(), `Permissions Violation for Publish to \"dlq.orders\"`) {
				return fmt.Errorf("no refused DLQ publish logged yet; stderr:\n%s", p.stderr.String())
			}
			if endpoint.stored() != 4 {
				return fmt.Errorf("endpoint stored %d, want 4", endpoint.stored())
			}
			return nil
		})
		p.stop(t)
		// 1, 2, 4 and 5 acknowledged (the last ACKs may still be on their
		// way), the poison message (seq 3) never: ack floor 2 with exactly
		// that one pending, a state an ACK of seq 3 would skip.
		natstest.WaitAckState(t, js, "ORDERS", "orders-sink", 2, 1, 30*time.Second)
	})

	// delivery.fail_fast turns the same refusals into a stop with exit 1,
	// after the batch in flight settled.
	failFast := func(t *testing.T, cfg, extra, reason string) *process {
		t.Helper()
		replaceInFile(t, cfg, `"shutdown_timeout_ms": 5000}`, `"shutdown_timeout_ms": 5000, "fail_fast": true`+extra+`}`)
		p := start(t, cfg)
		if code := p.wait(t, 30*time.Second); code != 1 {
			t.Errorf("exit code = %d, want 1\nstderr:\n%s", code, p.stderr.String())
		}
		if want := "Runtime error: delivery.fail_fast: stopping after " + reason + " failure"; !strings.Contains(p.stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, p.stderr.String())
		}
		return p
	}
	t.Run("fail_fast: refused DLQ publish exits 1", func(t *testing.T) {
		s := permissionServer(t, without(t, permissionBlock(t, "create-dlq"), "dlq.orders"))
		js := admin(t, s)
		publish(t, js, 5, map[int]bool{3: true})
		endpoint := newRecordingEndpoint(t)
		failFast(t, leastPrivilegeConfig(t, s.ClientURL(), "create_if_missing", true, fmt.Sprintf(
			`{"type": "http", "url": %q, "allow_http_for_local_testing": true}`, endpoint.srv.URL)), "", "dlq publish")
		natstest.WaitAckState(t, js, "ORDERS", "orders-sink", 2, 1, 30*time.Second)
	})
	t.Run("fail_fast: unconfirmed ACK exits 1", func(t *testing.T) {
		s := permissionServer(t, without(t, permissionBlock(t, "bind-only"), "$JS.ACK.ORDERS.orders-sink.>"))
		js := admin(t, s)
		bindConsumer(t, js)
		publish(t, js, 5, nil)
		failFast(t, leastPrivilegeConfig(t, s.ClientURL(), "bind_only", false, fmt.Sprintf(`{"type": "file", "directory": %q}`, t.TempDir())),
			`, "ack_confirmation": {"enabled": true, "timeout_ms": 500}`, "ack")
		if floor, _, err := ackState(context.Background(), js, "ORDERS", "orders-sink"); err != nil || floor != 0 {
			t.Errorf("ack floor %d (%v), want 0: every ACK was refused", floor, err)
		}
	})
}

// TestSecurityConnectionEvents: while the NATS server is down the process
// is not ready (/readyz 503, nats: disconnected), the disconnect and
// reconnect are counted and logged, and once the server is back the
// process is ready again and keeps delivering. A connection that cannot
// come back (reconnecting off) ends the process with exit 1.
func TestSecurityConnectionEvents(t *testing.T) {
	const pw = "Pw-Events-9f3a"
	dir := t.TempDir()
	opts := func(port int) *server.Options {
		return &server.Options{Port: port, JetStream: true, StoreDir: dir, ServerName: "events",
			Users: []*server.User{{Username: "sink", Password: pw}}}
	}
	s := natsconntest.StartServer(t, opts(-1))
	port := natstest.Port(s)
	nc, js := natstest.Connect(t, s, nats.UserInfo("sink", pw))
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "EVT", Subjects: []string{"evt.>"}})
	natstest.PublishN(t, js, "evt.a", 10, body)

	addr := freeAddr(t)
	out := t.TempDir()
	cfg := fileConfigWith(t, s.ClientURL(), "EVT", "evt-file", "evt.>", out,
		`"user": "sink", "password_env": "NS_PW", "reconnect_time_wait_seconds": 0, "max_reconnect_attempts": -1`)
	replaceInFile(t, cfg, `"logging": {"level": "WARNING"}`,
		fmt.Sprintf(`"logging": {"level": "INFO"}, "metrics": {"enabled": true, "listen": %q}`, addr))
	p := startWithEnv(t, cmdEnv("NS_PW="+pw), cfg)

	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	metric := func(name string) string {
		_, body := get("/metrics")
		m := regexp.MustCompile(`(?m)^nats_sinks_` + name + ` (\S+)$`).FindStringSubmatch(body)
		if m == nil {
			return ""
		}
		return m[1]
	}
	waitReady := func() {
		t.Helper()
		natstest.WaitFor(t, 30*time.Second, func() error {
			if code, body := get("/readyz"); code != 200 {
				return fmt.Errorf("/readyz = %d %s", code, body)
			}
			return nil
		})
	}
	waitReady()
	natstest.WaitFor(t, 30*time.Second, func() error {
		if floor, _, err := ackState(context.Background(), js, "EVT", "evt-file"); err != nil || floor != 10 {
			return fmt.Errorf("ack floor %d (%v)", floor, err)
		}
		return nil
	})

	s.Shutdown()
	s.WaitForShutdown()
	natstest.WaitFor(t, 30*time.Second, func() error {
		code, body := get("/readyz")
		if code != 503 || !strings.Contains(body, `"nats":"disconnected"`) {
			return fmt.Errorf("/readyz = %d %s, want 503 with nats disconnected", code, body)
		}
		if v := metric("nats_connected"); v != "0" {
			return fmt.Errorf("nats_connected = %q, want 0", v)
		}
		if v := metric("nats_connection_disconnected_total"); v == "" || v == "0" {
			return fmt.Errorf("nats_connection_disconnected_total = %q", v)
		}
		return nil
	})

	// The old listener may linger a moment after Shutdown (see
	// natstest.Restart): wait until the port can be bound again.
	natstest.WaitFor(t, 10*time.Second, func() error {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return err
		}
		return l.Close()
	})
	s2 := natsconntest.StartServer(t, opts(port))
	waitReady()
	if v := metric("nats_connection_reconnected_total"); v == "" || v == "0" {
		t.Errorf("nats_connection_reconnected_total = %q after the server came back", v)
	}
	if v := metric("nats_connected"); v != "1" {
		t.Errorf("nats_connected = %q, want 1", v)
	}
	// Still delivering after the reconnect.
	nc.Close()
	_, js = natstest.Connect(t, s2, nats.UserInfo("sink", pw))
	natstest.PublishN(t, js, "evt.b", 10, func(i int) []byte { return body(i + 10) })
	natstest.WaitFor(t, 30*time.Second, func() error {
		if floor, _, err := ackState(context.Background(), js, "EVT", "evt-file"); err != nil || floor != 20 {
			return fmt.Errorf("ack floor %d (%v)", floor, err)
		}
		return nil
	})
	p.stop(t)
	for _, want := range []string{`"msg":"nats disconnected"`, `"msg":"nats reconnected"`} {
		if !strings.Contains(p.stderr.String(), want) {
			t.Errorf("logs lack %s:\n%s", want, p.stderr.String())
		}
	}
	if strings.Contains(p.stdout.String()+p.stderr.String(), pw) {
		t.Error("output reveals the password")
	}
	checkFiles(t, out, "EVT", 20)

	t.Run("closed for good exits 1", func(t *testing.T) {
		cfg := fileConfigWith(t, s2.ClientURL(), "EVT", "evt-closed", "evt.>", t.TempDir(),
			`"user": "sink", "password_env": "NS_PW", "allow_reconnect": false`)
		p := startWithEnv(t, cmdEnv("NS_PW="+pw), cfg)
		waitFetching(t, js, "EVT", "evt-closed")
		s2.Shutdown()
		if code := p.wait(t, 30*time.Second); code != 1 || !strings.Contains(p.stderr.String(), "Runtime error: NATS connection closed") {
			t.Errorf("exit %d, want 1 with \"NATS connection closed\"\nstdout:\n%s\nstderr:\n%s", code, p.stdout.String(), p.stderr.String())
		}
		if strings.Contains(p.stdout.String(), "Shutdown requested.") {
			t.Error("a lost connection reported as a requested shutdown")
		}
	})
}

// TestSecurityBadKeys: malformed encryption keys and missing key sources
// are refused at load (validate, exit 2) with the key's path and never the
// material.
func TestSecurityBadKeys(t *testing.T) {
	short := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef-ShortKeyTag"))
	for _, tt := range []struct {
		name, encryption, want, secret string
	}{
		{"key of the wrong length", fmt.Sprintf(`{"enabled": true, "key_b64": %q}`, short),
			"encryption.key_b64: must decode to exactly 32 bytes for AES-256", short},
		{"malformed base64", `{"enabled": true, "key_b64": "Not*Base64*Key-MalformedTag"}`,
			"encryption.key_b64: ", "MalformedTag"},
		{"rule without a key", `{"rules": [{"subject": "orders.>", "key_id": "k2"}]}`,
			"encryption.rules[0]: key_b64_env or key_b64 is required because no top-level encryption key is configured", ""},
		{"enabled without a key", `{"enabled": true}`,
			"encryption: key_b64_env or key_b64 is required because encryption.enabled is true", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := writeConfig(t, fmt.Sprintf(`{"nats": {"stream": "S", "consumer": "c", "subject": "s.>"},
  "encryption": %s, "sink": {"type": "file", "directory": "out"}}`, tt.encryption))
			r := runNatsSink(t, cmdEnv(), "validate", cfg)
			if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("want exit 2 with %q; got %v", tt.want, r)
			}
			if tt.secret != "" && strings.Contains(r.stdout+r.stderr, tt.secret) {
				t.Errorf("output echoes the key material:\n%v", r)
			}
		})
	}
}
