// Package testcert makes certificates for tests: a certificate authority,
// and server and client certificates it signs, written as PEM files to a
// test's temporary directory. Nothing it makes is committed or trusted
// outside the test.
package testcert

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
	"sync/atomic"
	"testing"
	"time"
)

// A CA is a certificate authority made for a test. It is safe for
// concurrent use.
type CA struct {
	// CertFile is the PEM file of the authority's certificate: what
	// clients and servers are told to trust.
	CertFile string
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	dir      string
}

// A Pair is a certificate and its key, as PEM files, and the certificate's
// serial number, which tells one pair from another in a handshake.
type Pair struct {
	CertFile, KeyFile string
	Serial            *big.Int
}

// serial numbers the certificates of the process, so each is told apart.
var serial atomic.Int64

// NewCA makes a certificate authority in a temporary directory of t.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: "sluice test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("create CA certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{cert: cert, key: key, dir: t.TempDir()}
	ca.CertFile = writePEM(t, ca.dir, "ca.crt", "CERTIFICATE", der)
	return ca
}

// Server makes a server certificate for 127.0.0.1, ::1 and localhost,
// named name in the CA's directory (name.crt, name.key).
func (ca *CA) Server(t testing.TB, name string) Pair {
	t.Helper()
	return ca.issue(t, name, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
}

// Client makes a client certificate for the common name cn, named name
// in the CA's directory.
func (ca *CA) Client(t testing.TB, name, cn string) Pair {
	t.Helper()
	return ca.issue(t, name, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// issue signs tmpl, filled in with a serial number, validity and key
// usage, and writes the pair.
func (ca *CA) issue(t testing.TB, name string, tmpl *x509.Certificate) Pair {
	t.Helper()
	key := newKey(t)
	tmpl.SerialNumber = big.NewInt(serial.Add(1))
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("create certificate %s: %v", name, err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Pair{
		CertFile: writePEM(t, ca.dir, name+".crt", "CERTIFICATE", der),
		KeyFile:  writePEM(t, ca.dir, name+".key", "EC PRIVATE KEY", kder),
		Serial:   tmpl.SerialNumber,
	}
}

// Pool returns a pool that trusts the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// TLS returns the pair loaded for a tls.Config.
func (p Pair) TLS(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ClientConfig returns a client configuration that trusts ca and, when
// client is given, presents it.
func ClientConfig(t testing.TB, ca *CA, client ...Pair) *tls.Config {
	t.Helper()
	c := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	for _, p := range client {
		c.Certificates = append(c.Certificates, p.TLS(t))
	}
	return c
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// writePEM writes one PEM block to dir/name, readable by its owner only,
// and returns the path.
func writePEM(t testing.TB, dir, name, typ string, der []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
