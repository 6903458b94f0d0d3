// Package clickhousetest runs private ClickHouse servers for tests: the
// machine's clickhouse-server binary (Debian's package is 18.16) with a
// configuration this package writes into a temporary directory (free HTTP,
// TCP and interserver ports on 127.0.0.1, data, tmp and log paths, the
// users below), started in well under a second and stopped when the test
// or test package ends.
//
// Users: "default" without a password, Password for User (full access) and
// "reader" (password "reader", read-only profile).
package clickhousetest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	// requireServicesEnv makes a missing server binary a failure (CI).
	requireServicesEnv = "NATS_SINKS_REQUIRE_SERVICES"
	// URLEnv names an already running server to use instead of a private
	// one (tests that stop or pause the server always start their own).
	URLEnv = "NATS_SINKS_TEST_CLICKHOUSE_URL"

	// User and Password are the password-protected account.
	User     = "sink"
	Password = "sink-password"
)

// A Server is one ClickHouse server process owned by a test, or an external
// server named by URLEnv (then Pid is 0 and the process methods fail).
type Server struct {
	// URL is the HTTP interface, "http://127.0.0.1:<port>".
	URL string

	dir  string
	argv []string
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Binary returns the command that runs a server ("clickhouse-server", or a
// newer single "clickhouse" binary with "server"), or nil.
func Binary() []string {
	if p, err := exec.LookPath("clickhouse-server"); err == nil {
		return []string{p}
	}
	for _, p := range []string{"/usr/sbin/clickhouse-server", "/usr/bin/clickhouse-server"} {
		if _, err := os.Stat(p); err == nil {
			return []string{p}
		}
	}
	if p, err := exec.LookPath("clickhouse"); err == nil {
		return []string{p, "server"}
	}
	return nil
}

// Start writes a configuration into dir (which must exist) and starts a
// server on free ports; it returns once the server answers /ping.
func Start(dir string) (*Server, error) {
	argv := Binary()
	if argv == nil {
		return nil, errors.New("clickhouse-server not found; install Debian's clickhouse-server package")
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	if err := writeConfig(dir, ports); err != nil {
		return nil, err
	}
	s := &Server{
		URL:  "http://127.0.0.1:" + strconv.Itoa(ports[0]),
		dir:  dir,
		argv: append(argv, "--config-file="+filepath.Join(dir, "config.xml")),
	}
	if err := s.Restart(); err != nil {
		return nil, err
	}
	return s, nil
}

// Run starts a private server for one test, under t.TempDir, stopped when
// the test ends. Without the binary the test is skipped with the reason, or
// fails when NATS_SINKS_REQUIRE_SERVICES=1.
func Run(t testing.TB) *Server {
	t.Helper()
	if Binary() == nil {
		missing(t)
	}
	s, err := Start(t.TempDir())
	if err != nil {
		t.Fatalf("clickhousetest: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

func missing(t testing.TB) {
	t.Helper()
	reason := "clickhouse-server not found (apt-get install clickhouse-server), and " + URLEnv + " is unset"
	if os.Getenv(requireServicesEnv) == "1" {
		t.Fatalf("%s (%s=1 makes this a failure)", reason, requireServicesEnv)
	}
	t.Skip(reason)
}

// Shared is one server for a whole test package, started on first use.
// Declare it as a package variable of the test package and call Close from
// TestMain after m.Run:
//
//	var server clickhousetest.Shared
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		server.Close()
//		os.Exit(code)
//	}
type Shared struct {
	once sync.Once
	srv  *Server
	dir  string
	err  error
}

// Get returns the package's server: the one URLEnv names, else a private
// one. It skips or fails the test like Run when neither is available.
func (sh *Shared) Get(t testing.TB) *Server {
	t.Helper()
	sh.once.Do(func() {
		if u := os.Getenv(URLEnv); u != "" {
			sh.srv = &Server{URL: strings.TrimRight(u, "/")}
			return
		}
		if Binary() == nil {
			return
		}
		sh.dir, sh.err = os.MkdirTemp("", "clickhousetest-")
		if sh.err == nil {
			sh.srv, sh.err = Start(sh.dir)
		}
	})
	if sh.err != nil {
		t.Fatalf("clickhousetest: %v", sh.err)
	}
	if sh.srv == nil {
		missing(t)
	}
	return sh.srv
}

// Close stops a private server and removes its directory.
func (sh *Shared) Close() {
	if sh.srv != nil && sh.srv.dir != "" {
		_ = sh.srv.Stop()
	}
	if sh.dir != "" {
		_ = os.RemoveAll(sh.dir)
	}
}

// Pid returns the server's process id, 0 when it is not running or external.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Restart starts the server process again (same ports and data) after Stop
// or Kill, and waits until it answers.
func (s *Server) Restart() error {
	if s.dir == "" {
		return errors.New("clickhousetest: an external server cannot be restarted")
	}
	logf, err := os.OpenFile(filepath.Join(s.dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", s.argv[0], err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("clickhouse-server exited at start; see %s", filepath.Join(s.dir, "log"))
		default:
		}
		if resp, err := http.DefaultClient.Do(pingRequest(s.URL)); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = s.Kill()
	return errors.New("clickhouse-server did not answer /ping within 30s")
}

func pingRequest(base string) *http.Request {
	req, _ := http.NewRequest(http.MethodGet, base+"/ping", nil)
	req.Close = true
	return req
}

// Stop ends the server with SIGTERM (SIGKILL after 20 s) and waits.
func (s *Server) Stop() error { return s.signal(syscall.SIGTERM, 20*time.Second) }

// Kill ends the server with SIGKILL and waits.
func (s *Server) Kill() error { return s.signal(syscall.SIGKILL, 10*time.Second) }

// Pause stops the process with SIGSTOP: connections stay open, nothing is
// answered.
func (s *Server) Pause() error { return s.send(syscall.SIGSTOP) }

// Resume continues a paused process.
func (s *Server) Resume() error { return s.send(syscall.SIGCONT) }

func (s *Server) send(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return errors.New("clickhousetest: server not running")
	}
	return s.cmd.Process.Signal(sig)
}

func (s *Server) signal(sig syscall.Signal, wait time.Duration) error {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGCONT) // a paused server cannot handle SIGTERM
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		<-done
	}
	s.mu.Lock()
	s.cmd = nil
	s.mu.Unlock()
	return nil
}

// Query runs sql as the default user and returns the output (64-bit
// integers unquoted in JSON formats).
func (s *Server) Query(sql string) (string, error) {
	return Query(s.URL, "default", "", sql)
}

// MustQuery is Query that fails the test on an error.
func (s *Server) MustQuery(t testing.TB, sql string) string {
	t.Helper()
	out, err := s.Query(sql)
	if err != nil {
		t.Fatalf("clickhouse %q: %v", sql, err)
	}
	return out
}

// Query runs sql on the server at base as user with password.
func Query(base, user, password, sql string) (string, error) {
	req, err := http.NewRequest(http.MethodPost, base+"/?output_format_json_quote_64bit_integers=0&wait_end_of_query=1", strings.NewReader(sql))
	if err != nil {
		return "", err
	}
	req.SetBasicAuth(user, password)
	// No keep-alive: an idle connection delays the server's graceful
	// shutdown by seconds.
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func writeConfig(dir string, ports []int) error {
	for _, sub := range []string{"data", "tmp", "log", "user_files", "format_schemas"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return err
		}
	}
	p := func(sub string) string { return filepath.Join(dir, sub) + "/" }
	config := `<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>` + p("log") + `server.log</log><errorlog>` + p("log") + `error.log</errorlog><console>0</console></logger>
  <http_port>` + strconv.Itoa(ports[0]) + `</http_port>
  <tcp_port>` + strconv.Itoa(ports[1]) + `</tcp_port>
  <interserver_http_port>` + strconv.Itoa(ports[2]) + `</interserver_http_port>
  <listen_host>127.0.0.1</listen_host>
  <path>` + p("data") + `</path>
  <tmp_path>` + p("tmp") + `</tmp_path>
  <user_files_path>` + p("user_files") + `</user_files_path>
  <format_schema_path>` + p("format_schemas") + `</format_schema_path>
  <users_config>` + filepath.Join(dir, "users.xml") + `</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>268435456</mark_cache_size>
  <uncompressed_cache_size>268435456</uncompressed_cache_size>
  <max_concurrent_queries>100</max_concurrent_queries>
</yandex>
`
	users := `<?xml version="1.0"?>
<yandex>
  <profiles><default></default><readonly><readonly>1</readonly></readonly></profiles>
  <users>
    <default><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks><profile>default</profile><quota>default</quota></default>
    <` + User + `><password>` + Password + `</password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks><profile>default</profile><quota>default</quota></` + User + `>
    <reader><password>reader</password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks><profile>readonly</profile><quota>default</quota></reader>
  </users>
  <quotas><default></default></quotas>
</yandex>
`
	if err := os.WriteFile(filepath.Join(dir, "config.xml"), []byte(config), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "users.xml"), []byte(users), 0o644)
}

// QuoteURL returns base with a query string of params, for tests that send
// raw requests.
func QuoteURL(base string, params url.Values) string { return base + "/?" + params.Encode() }
