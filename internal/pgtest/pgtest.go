// Package pgtest runs throw-away PostgreSQL clusters for tests: initdb into
// a temporary directory, a free port, pg_ctl start and stop. Tests use it
// where the shared test server cannot serve: taking the database away
// mid-run, or password authentication (the shared server trusts local
// connections).
package pgtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

// requireServicesEnv is requireServicesEnv, repeated so that
// this package does not link the NATS server into database tests.
const requireServicesEnv = "NATS_SINKS_REQUIRE_SERVICES"

// A Cluster is one throw-away PostgreSQL cluster owned by a test.
type Cluster struct {
	Port int
	// Password is the superuser's password when Options.Password is set.
	Password string
	// SocketDir is the directory of the server's Unix socket when
	// Options.Socket is set, else "".
	SocketDir string
	// CA, ClientCert and ClientKey are PEM files when Options.ClientCerts
	// is set: the CA that signed the server's and the client's
	// certificates, and a client certificate for user postgres.
	CA, ClientCert, ClientKey string

	t       testing.TB
	root    string
	bin     string
	dataDir string
	logFile string
	asUser  []string // command prefix that runs as the postgres OS user
	certs   bool
}

// Options configure a Cluster.
type Options struct {
	// Password, when set, makes the cluster require scram-sha-256
	// password authentication for user postgres; otherwise it trusts
	// every connection.
	Password string
	// Socket makes the server listen on a Unix socket too, in SocketDir,
	// where it trusts every local connection.
	Socket bool
	// ClientCerts makes the server require TLS with a client
	// certificate (pg_hba "cert") on TCP; Unix-socket connections stay
	// trusted.
	ClientCerts bool
}

// Start initialises and starts a cluster; it is stopped and removed when
// the test ends. Without the PostgreSQL 15 server binaries the test is
// skipped with a reason, or fails when NATS_SINKS_REQUIRE_SERVICES=1.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	bin := findBin()
	if bin == "" {
		reason := "PostgreSQL server binaries (initdb, pg_ctl) not found; install postgresql-15"
		if os.Getenv(requireServicesEnv) == "1" {
			t.Fatalf("%s (%s=1 makes this a failure)", reason, requireServicesEnv)
		}
		t.Skip(reason)
	}
	c := &Cluster{t: t, bin: bin, Password: o.Password, certs: o.ClientCerts}
	if os.Geteuid() == 0 {
		// initdb refuses to run as root; the data directory must belong
		// to the user that runs the server.
		if _, err := user.Lookup("postgres"); err != nil {
			t.Skipf("running as root without a postgres OS user: %v", err)
		}
		c.asUser = []string{"runuser", "-u", "postgres", "--"}
	}
	root, err := os.MkdirTemp("/var/tmp", "pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o777); err != nil {
		t.Fatal(err)
	}
	c.root = root
	if o.Socket {
		c.SocketDir = root
	}
	c.dataDir = filepath.Join(root, "data")
	c.logFile = filepath.Join(root, "server.log")
	args := []string{filepath.Join(bin, "initdb"), "-D", c.dataDir, "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C"}
	if o.Password != "" {
		pw := filepath.Join(root, "pw")
		if err := os.WriteFile(pw, []byte(o.Password+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--auth=scram-sha-256", "--pwfile="+pw)
	} else {
		args = append(args, "--auth=trust")
	}
	c.run(args...)
	if o.ClientCerts {
		c.writeCerts()
	}
	c.Port = freePort(t)
	c.Start()
	t.Cleanup(func() { c.stop(false) })
	return c
}

// DSN returns a connection URL for database postgres as user postgres.
func (c *Cluster) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.Port)
}

// Start starts the server (again) on the same port and waits until it
// accepts connections.
func (c *Cluster) Start() {
	c.t.Helper()
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories='%s' -c fsync=off", c.Port, c.SocketDir) // fsync: the tests exercise the sink, not the disk
	if c.certs {
		opts += fmt.Sprintf(" -c ssl=on -c ssl_cert_file=%s -c ssl_key_file=%s -c ssl_ca_file=%s",
			filepath.Join(c.root, "server.crt"), filepath.Join(c.root, "server.key"), c.CA)
	}
	c.run(filepath.Join(c.bin, "pg_ctl"), "-D", c.dataDir, "-l", c.logFile, "-o", opts, "-w", "-t", "30", "start")
}

// Stop stops the server with fast shutdown: open sessions are
// disconnected and their transactions rolled back.
func (c *Cluster) Stop() {
	c.t.Helper()
	c.stop(true)
}

func (c *Cluster) stop(must bool) {
	cmd := c.command(filepath.Join(c.bin, "pg_ctl"), "-D", c.dataDir, "-m", "fast", "-w", "-t", "30", "stop")
	out, err := cmd.CombinedOutput()
	if err != nil && must {
		c.t.Fatalf("pg_ctl stop: %v\n%s", err, out)
	}
}

func (c *Cluster) command(args ...string) *exec.Cmd {
	full := append(append([]string{}, c.asUser...), args...)
	cmd := exec.Command(full[0], full[1:]...)
	cmd.Dir = "/"
	return cmd
}

func (c *Cluster) run(args ...string) {
	c.t.Helper()
	out, err := c.command(args...).CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(c.logFile)
		c.t.Fatalf("%s: %v\n%s\nserver log:\n%s", strings.Join(args, " "), err, out, log)
	}
}

// findBin returns the directory holding initdb and pg_ctl, or "".
func findBin() string {
	candidates := []string{"/usr/lib/postgresql/15/bin"}
	if p, err := exec.LookPath("initdb"); err == nil {
		candidates = append([]string{filepath.Dir(p)}, candidates...)
	}
	if matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin"); matches != nil {
		candidates = append(candidates, matches...)
	}
	for _, dir := range candidates {
		if isExec(filepath.Join(dir, "initdb")) && isExec(filepath.Join(dir, "pg_ctl")) {
			return dir
		}
	}
	return ""
}

func isExec(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
