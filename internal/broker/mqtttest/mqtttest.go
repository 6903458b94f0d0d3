// Package mqtttest holds the MQTT fixtures of the mqtt sink's tests and
// the end-to-end tests: a Mosquitto broker owned by one test (its own port,
// password file, ACL and queue limit), and a subscriber that keeps its
// session (Clean Start 0, session expiry one hour, QoS 2) and records every
// message it receives.
package mqtttest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
)

// Broker is a Mosquitto process owned by one test.
type Broker struct {
	URL  string // mqtt://127.0.0.1:<port>
	Port int
	cmd  *exec.Cmd
	conf string
	dir  string
	acl  string
	logs *lockedBuffer

	passwords string
}

// writePasswords writes a Mosquitto password file holding users.
func writePasswords(t testing.TB, path string, users map[string]string) {
	t.Helper()
	os.Remove(path)
	for user, pw := range users {
		args := []string{"-b", path, user, pw}
		if _, err := os.Stat(path); err != nil {
			args = append([]string{"-c"}, args...)
		}
		if out, err := exec.Command("mosquitto_passwd", args...).CombinedOutput(); err != nil {
			t.Fatalf("mosquitto_passwd: %v\n%s", err, out)
		}
	}
}

// lockedBuffer collects the broker's log for a failing test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Options configure a test-owned Mosquitto.
type Options struct {
	// Users maps user names to passwords; with any, anonymous clients are
	// refused.
	Users map[string]string
	// ACL is the content of an acl_file (Mosquitto syntax), if set.
	ACL string
	// MaxQueued is max_queued_messages (0 = 1,000,000).
	MaxQueued int
	// Port is the port to listen on; 0 picks a free one.
	Port int
	// CAFile, CertFile and KeyFile, when set, make the listener TLS-only
	// (URL mqtts://); RequireCertificate asks clients for a certificate
	// signed by the CA.
	CAFile, CertFile, KeyFile string
	RequireCertificate        bool
}

// StartMosquitto starts a Mosquitto on a free loopback port, skipping the
// test when the mosquitto binary is missing (and failing under
// NATS_SINKS_REQUIRE_SERVICES=1), and stops it when the test ends.
func StartMosquitto(t testing.TB, o Options) *Broker {
	t.Helper()
	bin, err := exec.LookPath("mosquitto")
	if err != nil {
		if os.Getenv("NATS_SINKS_REQUIRE_SERVICES") == "1" {
			t.Fatalf("mosquitto not found (NATS_SINKS_REQUIRE_SERVICES=1 makes this a failure)")
		}
		t.Skip("mosquitto not found: install the mosquitto package")
	}
	dir := t.TempDir()
	port := o.Port
	if port == 0 {
		port = freePort(t)
	}
	queued := o.MaxQueued
	if queued == 0 {
		queued = 1000000
	}
	var conf strings.Builder
	if os.Geteuid() == 0 {
		// Mosquitto started as root drops to the mosquitto user, which
		// cannot read the test's private temporary directory.
		conf.WriteString("user root\n")
	}
	fmt.Fprintf(&conf, "listener %d 127.0.0.1\npersistence false\nmax_queued_messages %d\nmax_inflight_messages 100\nlog_dest stderr\nlog_type error\nlog_type warning\n", port, queued)
	scheme := "mqtt"
	if o.CertFile != "" {
		scheme = "mqtts"
		fmt.Fprintf(&conf, "cafile %s\ncertfile %s\nkeyfile %s\nrequire_certificate %t\n", o.CAFile, o.CertFile, o.KeyFile, o.RequireCertificate)
	}
	pwfile := ""
	if len(o.Users) > 0 {
		pwfile = filepath.Join(dir, "passwords")
		writePasswords(t, pwfile, o.Users)
		fmt.Fprintf(&conf, "allow_anonymous false\npassword_file %s\n", pwfile)
	} else {
		conf.WriteString("allow_anonymous true\n")
	}
	aclFile := ""
	if o.ACL != "" {
		aclFile = filepath.Join(dir, "acl")
		if err := os.WriteFile(aclFile, []byte(o.ACL), 0o600); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&conf, "acl_file %s\n", aclFile)
	}
	confFile := filepath.Join(dir, "mosquitto.conf")
	if err := os.WriteFile(confFile, []byte(conf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	b := &Broker{URL: fmt.Sprintf("%s://127.0.0.1:%d", scheme, port), Port: port, conf: confFile, dir: dir, acl: aclFile, passwords: pwfile, logs: &lockedBuffer{}}
	b.start(t, bin)
	t.Cleanup(func() {
		b.Stop()
		if t.Failed() {
			t.Logf("mosquitto log:\n%s", b.logs.String())
		}
	})
	return b
}

func (b *Broker) start(t testing.TB, bin string) {
	t.Helper()
	b.cmd = exec.Command(bin, "-c", b.conf)
	b.cmd.Stderr = b.logs
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("start mosquitto: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", b.Port))
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("mosquitto did not listen on %d: %v", b.Port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Restart stops the broker and starts it again on the same port (its
// sessions and queues are gone: persistence is off).
func (b *Broker) Restart(t testing.TB) {
	t.Helper()
	b.Stop()
	bin, _ := exec.LookPath("mosquitto")
	b.start(t, bin)
}

// SetACL replaces the broker's ACL (it must have been started with one) and
// makes it reload it (SIGHUP); connected clients get the new rules.
func (b *Broker) SetACL(t testing.TB, acl string) {
	t.Helper()
	if b.acl == "" {
		t.Fatal("mqtttest: SetACL on a broker started without an ACL")
	}
	if err := os.WriteFile(b.acl, []byte(acl), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := b.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatalf("SIGHUP mosquitto: %v", err)
	}
}

// SetPasswords replaces the broker's users (it must have been started with
// some) and makes it reload them (SIGHUP); connections already up stay up,
// new ones need the new passwords.
func (b *Broker) SetPasswords(t testing.TB, users map[string]string) {
	t.Helper()
	if b.passwords == "" {
		t.Fatal("mqtttest: SetPasswords on a broker started without users")
	}
	writePasswords(t, b.passwords, users)
	if err := b.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatalf("SIGHUP mosquitto: %v", err)
	}
}

// Stop kills the broker and waits for it.
func (b *Broker) Stop() {
	if b.cmd != nil && b.cmd.Process != nil {
		b.cmd.Process.Kill()
		b.cmd.Wait()
		b.cmd = nil
	}
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

// Message is one message a Subscriber received.
type Message struct {
	Topic      string
	Payload    []byte
	Properties map[string]string // user properties (a repeated name keeps the last)
	UserOrder  []string          // user property names in order
	Dup        bool
	QoS        byte
	Format     *byte
	Content    string
}

// Subscriber is an MQTT 5 client with a persistent session (Clean Start 0,
// session expiry 3600 s) subscribed at QoS 2 to one filter, connected until
// the test ends.
type Subscriber struct {
	cm *autopaho.ConnectionManager

	mu   sync.Mutex
	msgs []Message
}

// Subscribe connects to brokerURL as clientID (user and password may be
// empty) and subscribes to filter at QoS 2.
func Subscribe(t testing.TB, brokerURL, clientID, filter, user, password string) *Subscriber {
	t.Helper()
	u, err := url.Parse(brokerURL)
	if err != nil {
		t.Fatal(err)
	}
	s := &Subscriber{}
	subscribed := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cfg := autopaho.ClientConfig{
		ServerUrls:            []*url.URL{u},
		KeepAlive:             30,
		SessionExpiryInterval: 3600,
		ReconnectBackoff:      func(int) time.Duration { return 100 * time.Millisecond },
		ConnectUsername:       user,
		ConnectPassword:       []byte(password),
		// Ending the test ends the session too: a session left behind
		// would keep its subscription, and the broker would queue (and
		// acknowledge to publishers) every matching message for an hour.
		DisconnectPacketBuilder: func() *paho.Disconnect {
			zero := uint32(0)
			return &paho.Disconnect{Properties: &paho.DisconnectProperties{SessionExpiryInterval: &zero}}
		},
		OnConnectionUp: func(cm *autopaho.ConnectionManager, _ *paho.Connack) {
			_, err := cm.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: 2}}})
			select {
			case subscribed <- err:
			default:
			}
		},
		ClientConfig: paho.ClientConfig{
			ClientID: clientID,
			OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
				m := Message{Topic: pr.Packet.Topic, Payload: append([]byte(nil), pr.Packet.Payload...),
					Properties: map[string]string{}, Dup: pr.Packet.Duplicate(), QoS: pr.Packet.QoS}
				if p := pr.Packet.Properties; p != nil {
					for _, up := range p.User {
						m.Properties[up.Key] = up.Value
						m.UserOrder = append(m.UserOrder, up.Key)
					}
					m.Format, m.Content = p.PayloadFormat, p.ContentType
				}
				s.mu.Lock()
				s.msgs = append(s.msgs, m)
				s.mu.Unlock()
				return true, nil
			}},
		},
	}
	cm, err := autopaho.NewConnection(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s.cm = cm
	t.Cleanup(func() {
		cancel()
		<-cm.Done()
	})
	select {
	case err := <-subscribed:
		if err != nil {
			t.Fatalf("subscribe %s: %v", filter, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("subscriber did not connect to %s", brokerURL)
	}
	return s
}

// Messages returns the messages received so far.
func (s *Subscriber) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}

// WaitFor polls until at least n messages arrived or d passed, and returns
// what arrived.
func (s *Subscriber) WaitFor(n int, d time.Duration) []Message {
	deadline := time.Now().Add(d)
	for {
		ms := s.Messages()
		if len(ms) >= n || time.Now().After(deadline) {
			return ms
		}
		time.Sleep(20 * time.Millisecond)
	}
}
