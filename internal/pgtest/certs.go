package pgtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"time"
)

// writeCerts creates a CA, a server certificate for 127.0.0.1 and a
// client certificate for user postgres in the cluster's directory, and a
// pg_hba.conf that demands the client certificate on TCP and trusts the
// Unix socket.
func (c *Cluster) writeCerts() {
	c.t.Helper()
	caKey, caCert := c.newCert("pgtest CA", nil, nil, true)
	c.CA = c.writePEM("root.crt", "CERTIFICATE", caCert.Raw, 0o644)
	srvKey, srvCert := c.newCert("127.0.0.1", caKey, caCert, false)
	c.writePEM("server.crt", "CERTIFICATE", srvCert.Raw, 0o644)
	c.writeKey("server.key", srvKey, true)
	cliKey, cliCert := c.newCert("postgres", caKey, caCert, false)
	c.ClientCert = c.writePEM("client.crt", "CERTIFICATE", cliCert.Raw, 0o644)
	c.ClientKey = c.writeKey("client.key", cliKey, false)
	hba := "local all all trust\nhostssl all all 127.0.0.1/32 cert\n"
	if err := os.WriteFile(filepath.Join(c.dataDir, "pg_hba.conf"), []byte(hba), 0o644); err != nil {
		c.t.Fatal(err)
	}
}

func (c *Cluster) newCert(cn string, parentKey *ecdsa.PrivateKey, parent *x509.Certificate, ca bool) (*ecdsa.PrivateKey, *x509.Certificate) {
	c.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		c.t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if ip := net.ParseIP(cn); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	}
	if ca {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		c.t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		c.t.Fatal(err)
	}
	return key, cert
}

func (c *Cluster) writeKey(name string, key *ecdsa.PrivateKey, server bool) string {
	c.t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		c.t.Fatal(err)
	}
	path := c.writePEM(name, "PRIVATE KEY", der, 0o600)
	if server && len(c.asUser) > 0 {
		// The server refuses a key file it does not own.
		u, err := user.Lookup("postgres")
		if err != nil {
			c.t.Fatal(err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(path, uid, gid); err != nil {
			c.t.Fatal(err)
		}
	}
	return path
}

func (c *Cluster) writePEM(name, typ string, der []byte, mode os.FileMode) string {
	c.t.Helper()
	path := filepath.Join(c.root, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
		c.t.Fatal(err)
	}
	return path
}
