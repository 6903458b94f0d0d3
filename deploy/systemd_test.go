package deploy_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

const unitFile = "systemd/nats-sink@.service"

// unitForBinary writes a copy of the unit whose ExecStart runs the test's
// binary (systemd-analyze checks that the executable exists) and returns its
// path.
func unitForBinary(t *testing.T) string {
	t.Helper()
	unit, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	const installed = "/usr/local/bin/nats-sink"
	if !bytes.Contains(unit, []byte("ExecStart="+installed+" run ")) {
		t.Fatalf("%s: ExecStart does not run %s", unitFile, installed)
	}
	path := filepath.Join(t.TempDir(), "nats-sink@.service")
	if err := os.WriteFile(path, bytes.ReplaceAll(unit, []byte(installed), []byte(binary)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSystemdUnitVerify runs systemd-analyze verify on the unit and fails on
// any complaint, warnings included.
func TestSystemdUnitVerify(t *testing.T) {
	analyze := requireTool(t, "systemd-analyze", "Debian package systemd")
	path := unitForBinary(t)
	for _, name := range []string{"nats-sink@.service", "nats-sink@orders.service"} {
		target := filepath.Join(filepath.Dir(path), name)
		if name != filepath.Base(path) {
			if err := os.Link(path, target); err != nil {
				t.Fatal(err)
			}
		}
		out, err := exec.Command(analyze, "verify", target).CombinedOutput()
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("systemd-analyze verify %s: err %v, output:\n%s", name, err, out)
		}
	}
}

// TestSystemdUnitSettings checks the settings the service's behaviour
// depends on, which systemd-analyze accepts either way.
func TestSystemdUnitSettings(t *testing.T) {
	unit, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, line := range strings.Split(string(unit), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			got[k] = append(got[k], v)
		}
	}
	for key, want := range map[string]string{
		"Type":                     "notify",
		"User":                     "nats-sink",
		"Restart":                  "on-failure",
		"RestartPreventExitStatus": "2",
		"EnvironmentFile":          "-/etc/nats-sink/%i.env",
		"ExecStart":                "/usr/local/bin/nats-sink run /etc/nats-sink/%i.json",
		"NoNewPrivileges":          "yes",
		"ProtectSystem":            "strict",
		"ReadWritePaths":           "/var/lib/nats-sink",
		"ProtectHome":              "yes",
		"PrivateTmp":               "yes",
		"PrivateDevices":           "yes",
		"RestrictAddressFamilies":  "AF_UNIX AF_INET AF_INET6",
		"CapabilityBoundingSet":    "",
		"MemoryDenyWriteExecute":   "yes",
		"SystemCallArchitectures":  "native",
		"WatchdogSec":              "30s",
		"NotifyAccess":             "main",
	} {
		if v := got[key]; len(v) != 1 || v[0] != want {
			t.Errorf("%s=%q, want %q", key, v, want)
		}
	}
	if v := got["SystemCallFilter"]; len(v) == 0 || v[0] != "@system-service" {
		t.Errorf("SystemCallFilter=%q, want @system-service first", v)
	}
	for _, key := range []string{"ExecReload", "PermissionsStartOnly", "DynamicUser"} {
		if v, ok := got[key]; ok {
			t.Errorf("%s=%q present; nats-sink has no reload and runs as its own system user", key, v)
		}
	}
	// The stop timeout must cover the default drain (shutdown_timeout_ms,
	// 20 s) plus the 5 s the sink, connection and trace export share.
	stop, err := time.ParseDuration(strings.Join(got["TimeoutStopSec"], ""))
	if err != nil || stop < 25*time.Second {
		t.Errorf("TimeoutStopSec=%q, want at least 25s (%v)", got["TimeoutStopSec"], err)
	}
}

var exposureRE = regexp.MustCompile(`Overall exposure level for \S+: ([0-9]+\.[0-9]+)`)

// TestSystemdUnitSecurity rates the unit's sandbox with systemd-analyze
// security (0 = fully locked down, 10 = unprotected) and requires 2.0 or
// lower.
func TestSystemdUnitSecurity(t *testing.T) {
	analyze := requireTool(t, "systemd-analyze", "Debian package systemd")
	path := unitForBinary(t)
	out, err := exec.Command(analyze, "security", "--offline=true", "--no-pager", path).CombinedOutput()
	m := exposureRE.FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security: %v; no exposure level in:\n%s", err, out)
	}
	score, _ := strconv.ParseFloat(string(m[1]), 64)
	t.Logf("systemd-analyze security --offline=true: exposure %.1f", score)
	if score > 2.0 {
		t.Errorf("exposure level %.1f, want 2.0 or lower:\n%s", score, out)
	}
}

// treeEntry is one file of an installed tree, for comparing two installs.
type treeEntry struct {
	Mode     fs.FileMode
	UID, GID uint32
	Digest   string // content of regular files
}

func snapshotTree(t *testing.T, root string) map[string]treeEntry {
	t.Helper()
	out := map[string]treeEntry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		e := treeEntry{Mode: info.Mode(), UID: st.Uid, GID: st.Gid}
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			e.Digest = hex.EncodeToString(sum[:8])
		}
		rel, _ := filepath.Rel(root, p)
		out[rel] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// lookupID returns the id of name in an /etc/passwd or /etc/group file.
func lookupID(t *testing.T, file, name string) uint32 {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) > 2 && f[0] == name {
			id, err := strconv.ParseUint(f[2], 10, 32)
			if err != nil {
				t.Fatalf("%s: %q: %v", file, line, err)
			}
			return uint32(id)
		}
	}
	t.Fatalf("%s: no entry for %s", file, name)
	return 0
}

// TestSystemdInstall runs deploy/systemd/install into a temporary root
// twice and checks the layout, the owners and modes (configurations
// readable only by root and the service's group), that the second run
// changes nothing but a configuration's wrong mode, and that uninstall
// removes the unit and binary but keeps configurations unless --purge.
func TestSystemdInstall(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the install script sets owners: run as root (CI does)")
	}
	if _, err := exec.LookPath("systemd-sysusers"); err != nil {
		requireTool(t, "useradd", "the install script creates the nats-sink user with systemd-sysusers or useradd")
	}
	root := t.TempDir()
	install := func() string { return run(t, ".", "systemd/install", "--root", root, "--binary", binary) }
	install()

	uid := lookupID(t, filepath.Join(root, "etc/passwd"), "nats-sink")
	gid := lookupID(t, filepath.Join(root, "etc/group"), "nats-sink")
	if uid == 0 || gid == 0 {
		t.Fatalf("nats-sink uid %d gid %d, want a system user other than root", uid, gid)
	}
	tree := snapshotTree(t, root)
	for path, want := range map[string]treeEntry{
		"etc/nats-sink":                         {Mode: fs.ModeDir | 0o750, UID: 0, GID: gid},
		"var/lib/nats-sink":                     {Mode: fs.ModeDir | 0o750, UID: uid, GID: gid},
		"usr/local/bin/nats-sink":               {Mode: 0o755},
		"etc/systemd/system/nats-sink@.service": {Mode: 0o644},
		"usr/lib/sysusers.d/nats-sink.conf":     {Mode: 0o644},
	} {
		got, ok := tree[path]
		if !ok {
			t.Errorf("%s not installed", path)
			continue
		}
		got.Digest = ""
		if got != want {
			t.Errorf("%s: %+v, want %+v", path, got, want)
		}
	}
	unit, _ := os.ReadFile(unitFile)
	if got, _ := os.ReadFile(filepath.Join(root, "etc/systemd/system/nats-sink@.service")); !bytes.Equal(got, unit) {
		t.Error("installed unit differs from deploy/systemd/nats-sink@.service")
	}
	passwd, _ := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if !strings.Contains(string(passwd), ":/var/lib/nats-sink:/usr/sbin/nologin") {
		t.Errorf("nats-sink user has a login shell or another home:\n%s", passwd)
	}

	// A configuration an operator copied in with the default umask is
	// world-readable; the next install run fixes that, and changes nothing
	// else.
	conf := filepath.Join(root, "etc/nats-sink/orders.json")
	if err := os.WriteFile(conf, []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	before := snapshotTree(t, root)
	install()
	after := snapshotTree(t, root)
	wantConf := before["etc/nats-sink/orders.json"]
	wantConf.Mode, wantConf.UID, wantConf.GID = 0o640, 0, gid
	before["etc/nats-sink/orders.json"] = wantConf
	// systemd-sysusers and useradd keep backup copies of the files they
	// rewrite; a second run may refresh those.
	for _, m := range []map[string]treeEntry{before, after} {
		for p := range m {
			if strings.HasSuffix(p, "-") || strings.HasSuffix(p, ".pwd.lock") {
				delete(m, p)
			}
		}
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("second install run changed the tree (-want +got):\n%s", diff)
	}

	run(t, ".", "systemd/uninstall", "--root", root)
	for _, gone := range []string{"usr/local/bin/nats-sink", "etc/systemd/system/nats-sink@.service"} {
		if _, err := os.Stat(filepath.Join(root, gone)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("after uninstall %s: %v, want it removed", gone, err)
		}
	}
	if _, err := os.Stat(conf); err != nil {
		t.Errorf("uninstall without --purge removed the configuration: %v", err)
	}
	run(t, ".", "systemd/uninstall", "--root", root, "--purge")
	if _, err := os.Stat(filepath.Join(root, "etc/nats-sink")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after --purge etc/nats-sink: %v, want it removed", err)
	}
	if passwd, _ := os.ReadFile(filepath.Join(root, "etc/passwd")); strings.Contains(string(passwd), "nats-sink:") {
		t.Errorf("after --purge the user is still in etc/passwd:\n%s", passwd)
	}
}

// gate is a TCP proxy in front of a NATS server that holds everything the
// client sends from its first JetStream consumer request on, until open is
// called: a process it fronts is then stuck in binding its consumer.
type gate struct {
	ln       net.Listener
	held     chan struct{} // closed when the first consumer request arrived
	opened   chan struct{}
	heldOnce sync.Once
	openOnce sync.Once
	wg       sync.WaitGroup
}

const consumerAPI = "$JS.API.CONSUMER."

func startGate(t *testing.T, upstream string) *gate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{ln: ln, held: make(chan struct{}), opened: make(chan struct{})}
	var conns sync.Map
	g.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			conns.Store(c, s)
			g.wg.Go(func() { io.Copy(c, s); c.Close() })
			g.wg.Go(func() { g.forward(s, c); s.Close() })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		g.open()
		conns.Range(func(k, v any) bool { k.(net.Conn).Close(); v.(net.Conn).Close(); return true })
		g.wg.Wait()
	})
	return g
}

func (g *gate) addr() string { return g.ln.Addr().String() }

func (g *gate) open() { g.openOnce.Do(func() { close(g.opened) }) }

// forward copies client bytes to the server, stopping at the first chunk
// that carries a consumer API request until the gate opens.
func (g *gate) forward(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	var tail []byte // the end of the previous chunk: a marker may span two
	for {
		n, err := src.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			select {
			case <-g.opened:
			default:
				if bytes.Contains(append(tail, chunk...), []byte(consumerAPI)) {
					g.heldOnce.Do(func() { close(g.held) })
					<-g.opened
				}
			}
			if len(chunk) >= len(consumerAPI) {
				tail = append(tail[:0], chunk[len(chunk)-len(consumerAPI)+1:]...)
			} else {
				tail = append(tail, chunk...)
			}
			if _, werr := dst.Write(chunk); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// notifySocket is the service manager's end of NOTIFY_SOCKET.
type notifySocket struct {
	conn *net.UnixConn
	path string
}

func listenNotify(t *testing.T) *notifySocket {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &notifySocket{conn: c, path: path}
}

// next returns the next datagram, or "" when none arrives within d.
func (s *notifySocket) next(t *testing.T, d time.Duration) string {
	t.Helper()
	s.conn.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 4096)
	n, err := s.conn.Read(buf)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return ""
		}
		t.Fatalf("read NOTIFY_SOCKET: %v", err)
	}
	return string(buf[:n])
}

// queued returns every datagram already waiting on the socket.
func (s *notifySocket) queued(t *testing.T) []string {
	t.Helper()
	var out []string
	for {
		m := s.next(t, time.Millisecond)
		if m == "" {
			return out
		}
		out = append(out, m)
	}
}

// until reads datagrams until one contains want, returning those read.
func (s *notifySocket) until(t *testing.T, want string, d time.Duration, stderr func() string) []string {
	t.Helper()
	var seen []string
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		m := s.next(t, time.Until(deadline))
		if m == "" {
			break
		}
		seen = append(seen, m)
		if hasAssignment(m, want) {
			return seen
		}
	}
	t.Fatalf("no %s on NOTIFY_SOCKET within %v; got %q\nstderr:\n%s", want, d, seen, stderr())
	return nil
}

func hasAssignment(datagram, want string) bool {
	for _, line := range strings.Split(datagram, "\n") {
		if line == want {
			return true
		}
	}
	return false
}

// TestSystemdNotify runs the binary as systemd would, with NOTIFY_SOCKET and
// WATCHDOG_USEC set, and checks the protocol from the service manager's side:
// no READY=1 while the consumer is not bound (the test holds the process in
// that step), READY=1 once it is, WATCHDOG=1 pings while it consumes, and
// STOPPING=1 at SIGTERM before a clean exit.
func TestSystemdNotify(t *testing.T) {
	srv := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, srv)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	g := startGate(t, srv.Addr().String())
	sock := listenNotify(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	config := filepath.Join(dir, "orders.json")
	doc := fmt.Sprintf(`{
  "nats": {"url": "nats://%s", "stream": "ORDERS", "consumer": "orders-file", "subject": "orders.>"},
  "consumer_management": {"mode": "create_if_missing"},
  "delivery": {"batch_size": 10, "batch_timeout_ms": 200},
  "sink": {"type": "file", "directory": %q}
}`, g.addr(), out)
	if err := os.WriteFile(config, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(binary, "run", config)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock.path, "WATCHDOG_USEC=1000000")
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
	})

	select {
	case <-g.held:
	case <-exited:
		t.Fatalf("nats-sink exited before binding its consumer: %v\nstderr:\n%s", exitErr, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("nats-sink sent no consumer request within 30s\nstderr:\n%s", stderr.String())
	}
	// The process is inside consumer binding now; whatever it notified
	// before is on the socket already (unix datagrams are queued at send).
	for _, m := range sock.queued(t) {
		if hasAssignment(m, "READY=1") {
			t.Fatalf("READY=1 sent before the consumer was bound: %q", m)
		}
	}
	g.open()
	sock.until(t, "READY=1", 30*time.Second, stderr.String)
	ctx := context.Background()
	if _, err := js.Consumer(ctx, "ORDERS", "orders-file"); err != nil {
		t.Fatalf("READY=1 received, but the consumer does not exist: %v", err)
	}

	for i := range 3 {
		natstest.Publish(t, js, fmt.Sprintf("orders.%d", i), []byte(`{"n":1}`), nil)
	}
	waitFor(t, 30*time.Second, "3 messages acknowledged", func() error {
		c, err := js.Consumer(ctx, "ORDERS", "orders-file")
		if err != nil {
			return err
		}
		info, err := c.Info(ctx)
		if err != nil {
			return err
		}
		if info.AckFloor.Stream != 3 {
			return fmt.Errorf("ack floor %d", info.AckFloor.Stream)
		}
		return nil
	})
	// Pings every half timeout (500 ms) while the fetch loop is alive.
	for range 2 {
		sock.until(t, "WATCHDOG=1", 5*time.Second, stderr.String)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	sock.until(t, "STOPPING=1", 10*time.Second, stderr.String)
	select {
	case <-exited:
		if exitErr != nil {
			t.Fatalf("exit after SIGTERM: %v\nstderr:\n%s", exitErr, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("nats-sink did not exit within 30s of SIGTERM")
	}
	if !strings.Contains(stdout.String(), "Shutdown requested.") {
		t.Errorf("stdout lacks \"Shutdown requested.\":\n%s", stdout.String())
	}
	var files []string
	filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	sort.Strings(files)
	if len(files) != 3 {
		t.Errorf("files written = %d (%q), want 3", len(files), files)
	}
}
