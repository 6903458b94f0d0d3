package redissink

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-sinks/nats-sink/internal/broker/brokertest"
	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/sink"
)

// tlsRedis starts a private redis-server that only speaks TLS (and, with
// mutual, asks for client certificates) on a free port, and stops it when
// the test ends.
func tlsRedis(t *testing.T, certs brokertest.Certs, mutual bool) string {
	t.Helper()
	natstest.Service(t, "NATS_SINKS_TEST_REDIS_ADDR") // the suite's switch for Redis
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not found: this test runs a private TLS server")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	auth := "no"
	if mutual {
		auth = "yes"
	}
	cmd := exec.Command(bin, "--port", "0", "--tls-port", fmt.Sprint(port), "--bind", "127.0.0.1",
		"--tls-cert-file", certs.ServerCert, "--tls-key-file", certs.ServerKey, "--tls-ca-cert-file", certs.CA,
		"--tls-auth-clients", auth, "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server with TLS did not listen on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTLS: the sink verifies the server against ca_file, presents a client
// certificate when asked, and treats an untrusted server as Destination.
func TestTLS(t *testing.T) {
	certs := brokertest.NewCerts(t)
	for _, tt := range []struct {
		name   string
		mutual bool
		tls    func(c *Config)
		ok     bool
	}{
		{"ca_file", false, func(c *Config) { c.TLS.CAFile = &certs.CA }, true},
		{"mutual", true, func(c *Config) {
			c.TLS.CAFile, c.TLS.CertFile, c.TLS.KeyFile = &certs.CA, &certs.ClientCert, &certs.ClientKey
		}, true},
		{"system roots", false, func(*Config) {}, false},
		{"insecure_skip_verify", false, func(c *Config) { c.TLS.InsecureSkipVerify = true }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			c.Address = tlsRedis(t, certs, tt.mutual)
			c.TLS.Enabled = true
			c.DialTimeoutMS = 2000
			tt.tls(&c)
			s, err := New(context.Background(), c, sink.Deps{})
			if !tt.ok {
				if err == nil || sink.Failed(err).Outcome != sink.Destination || !strings.Contains(err.Error(), "certificate") || errors.Is(err, sink.ErrConfig) {
					t.Fatalf("New against an untrusted server = %v, want a destination-class certificate error", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			defer s.Stop(context.Background())
			if got := outcomes(s.WriteBatch(t.Context(), batch("tls.a", "TLS", 1, 3))); !slices.Equal(got, repeat(sink.Committed, 3)) {
				t.Errorf("WriteBatch over TLS = %v", got)
			}
		})
	}
}
