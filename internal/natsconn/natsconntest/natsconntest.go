// Package natsconntest gives tests the real security material a NATS
// deployment uses: a private certificate authority with server and client
// certificates (crypto/x509, ECDSA P-256 so generation stays fast), an
// operator/account/user JWT chain with NKeys, and in-process nats-servers
// configured with them. Nothing here mocks a handshake: tests connect to
// the servers these helpers start.
package natsconntest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// PKI is a private CA with a server certificate for 127.0.0.1/localhost and
// a client certificate, written as PEM files under one directory, plus a
// second, unrelated CA (with its own client certificate) for the
// wrong-CA cases.
type PKI struct {
	CAFile         string // the CA that signed the server and client certificates
	ServerCertFile string
	ServerKeyFile  string
	ClientCertFile string
	ClientKeyFile  string
	// ClientComboFile holds the client certificate and its key in one
	// file (tls_key_file absent).
	ClientComboFile string

	OtherCAFile         string // a CA that signed nothing the server uses
	OtherClientCertFile string // a client certificate signed by OtherCA
	OtherClientKeyFile  string
}

// NewPKI generates the certificates into t.TempDir.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	dir := t.TempDir()
	p := &PKI{}
	ca, caKey := newCA(t, "nats-sinks test CA")
	p.CAFile = writePEM(t, dir, "ca.pem", certPEM(ca))
	srv, srvKey := issue(t, ca, caKey, "nats-server", x509.ExtKeyUsageServerAuth)
	p.ServerCertFile = writePEM(t, dir, "server.pem", certPEM(srv))
	p.ServerKeyFile = writePEM(t, dir, "server-key.pem", keyPEM(t, srvKey))
	cl, clKey := issue(t, ca, caKey, "nats-sink", x509.ExtKeyUsageClientAuth)
	p.ClientCertFile = writePEM(t, dir, "client.pem", certPEM(cl))
	p.ClientKeyFile = writePEM(t, dir, "client-key.pem", keyPEM(t, clKey))
	p.ClientComboFile = writePEM(t, dir, "client-combo.pem", append(certPEM(cl), keyPEM(t, clKey)...))

	other, otherKey := newCA(t, "unrelated CA")
	p.OtherCAFile = writePEM(t, dir, "other-ca.pem", certPEM(other))
	ocl, oclKey := issue(t, other, otherKey, "intruder", x509.ExtKeyUsageClientAuth)
	p.OtherClientCertFile = writePEM(t, dir, "other-client.pem", certPEM(ocl))
	p.OtherClientKeyFile = writePEM(t, dir, "other-client-key.pem", keyPEM(t, oclKey))
	return p
}

// ServerTLS returns the server's TLS configuration; verifyClients requires
// a client certificate signed by the CA (mutual TLS).
func (p *PKI) ServerTLS(t testing.TB, verifyClients bool) *tls.Config {
	t.Helper()
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{
		CertFile: p.ServerCertFile, KeyFile: p.ServerKeyFile, CaFile: p.CAFile, Verify: verifyClients,
	})
	if err != nil {
		t.Fatalf("natsconntest: server TLS config: %v", err)
	}
	return tc
}

func newCA(t testing.TB, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("natsconntest: CA certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func issue(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string, usage x509.ExtKeyUsage) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatalf("natsconntest: certificate %s: %v", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func certPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func keyPEM(t testing.TB, k *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// writePEM writes data to dir/name with mode 0600 (key material) and
// returns the path.
func writePEM(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// WriteFile writes data to a new file under t.TempDir with mode 0600 and
// returns its path.
func WriteFile(t testing.TB, name string, data []byte) string {
	t.Helper()
	return writePEM(t, t.TempDir(), name, data)
}

// Operator is a decentralised-auth (JWT) setup: an operator, one account it
// signed, and the means to issue user credentials for that account. The
// server trusts the operator and finds the account in a memory resolver.
type Operator struct {
	claims     *jwt.OperatorClaims
	accountKP  nkeys.KeyPair
	AccountPub string
	AccountJWT string
}

// NewOperator creates an operator and an account whose JWT allows
// JetStream when jetStream is true.
func NewOperator(t testing.TB, jetStream bool) *Operator {
	t.Helper()
	okp, err := nkeys.CreateOperator()
	if err != nil {
		t.Fatal(err)
	}
	opub, _ := okp.PublicKey()
	oc := jwt.NewOperatorClaims(opub)
	oc.Name = "nats-sinks-test-operator"
	ojwt, err := oc.Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := jwt.DecodeOperatorClaims(ojwt)
	if err != nil {
		t.Fatal(err)
	}

	akp, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	apub, _ := akp.PublicKey()
	ac := jwt.NewAccountClaims(apub)
	ac.Name = "SINKS"
	if jetStream {
		ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	}
	ajwt, err := ac.Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	return &Operator{claims: claims, accountKP: akp, AccountPub: apub, AccountJWT: ajwt}
}

// Configure makes opts trust the operator, with the account in a memory
// resolver.
func (o *Operator) Configure(t testing.TB, opts *server.Options) {
	t.Helper()
	r := &server.MemAccResolver{}
	if err := r.Store(o.AccountPub, o.AccountJWT); err != nil {
		t.Fatal(err)
	}
	opts.TrustedOperators = []*jwt.OperatorClaims{o.claims}
	opts.AccountResolver = r
}

// UserCreds returns the contents of a .creds file (user JWT + NKey seed)
// for a new user of the account. edit, when non-nil, changes the claims
// before the account signs them (expiry, permissions).
func (o *Operator) UserCreds(t testing.TB, name string, edit func(*jwt.UserClaims)) []byte {
	t.Helper()
	ukp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	upub, _ := ukp.PublicKey()
	uc := jwt.NewUserClaims(upub)
	uc.Name = name
	if edit != nil {
		edit(uc)
	}
	ujwt, err := uc.Encode(o.accountKP)
	if err != nil {
		t.Fatal(err)
	}
	seed, err := ukp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	creds, err := jwt.FormatUserConfig(ujwt, seed)
	if err != nil {
		t.Fatal(err)
	}
	return creds
}

// NewUserNKey returns a fresh user NKey's public key and its seed file
// contents.
func NewUserNKey(t testing.TB) (pub string, seed []byte) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ = kp.PublicKey()
	seed, err = kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	return pub, append(seed, '\n')
}

// StartServer starts an in-process nats-server with opts (Host, Port,
// NoLog and NoSigs are filled in when unset) and shuts it down when the
// test ends.
func StartServer(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Port == 0 {
		opts.Port = -1
	}
	opts.NoLog, opts.NoSigs = true, true
	if opts.JetStream && opts.StoreDir == "" {
		opts.StoreDir = t.TempDir()
	}
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("natsconntest: new server: %v", err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatal("natsconntest: server not ready after 10s")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}
