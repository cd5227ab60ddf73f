package server

import (
	"bytes"
	"crypto/tls"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testing/testcert"
)

// syncBuffer is a log sink that tests read while servers write to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// copyFile copies the file src to dst, replacing it as a deployment
// tool would: write a temporary file beside it, then rename.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		t.Fatal(err)
	}
}

// serveTLS serves h over TLS with the files of c, checking them at every
// handshake, and returns the address and the log.
func serveTLS(t *testing.T, c config.ServerTLS, h http.Handler) (string, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	tl, err := NewTLS(c, HTTPProtos, log)
	if err != nil {
		t.Fatalf("NewTLS: %v", err)
	}
	tl.every = 0
	tl.checkAt.Store(0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := NewHTTPServer(h, log)
	hs.TLSConfig = tl.Config()
	go func() { _ = hs.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = hs.Close() })
	return ln.Addr().String(), logs
}

// get sends GET / with cl and returns the serial number of the server's
// certificate and the protocol spoken.
func get(t *testing.T, cl *http.Client, addr string) (*big.Int, string) {
	t.Helper()
	resp, err := cl.Get("https://" + addr + "/")
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.TLS.PeerCertificates[0].SerialNumber, resp.Proto
}

func newClient(cfg *tls.Config) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}}
}

// TestTLSReload rotates a listener's certificate: new handshakes get the
// new one, a connection made before keeps serving, and a broken pair
// leaves the one in force, logged once.
func TestTLSReload(t *testing.T) {
	ca := testcert.NewCA(t)
	a, b := ca.Server(t, "a"), ca.Server(t, "b")
	dir := t.TempDir()
	files := config.ServerTLS{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"), MinVersion: tls.VersionTLS12}
	copyFile(t, a.CertFile, files.CertFile)
	copyFile(t, a.KeyFile, files.KeyFile)
	addr, logs := serveTLS(t, files, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))

	old := newClient(testcert.ClientConfig(t, ca))
	if got, proto := get(t, old, addr); got.Cmp(a.Serial) != 0 || proto != "HTTP/2.0" {
		t.Fatalf("before rotation: serial %v over %s, want %v over HTTP/2.0", got, proto, a.Serial)
	}
	copyFile(t, b.CertFile, files.CertFile)
	copyFile(t, b.KeyFile, files.KeyFile)
	if got, _ := get(t, newClient(testcert.ClientConfig(t, ca)), addr); got.Cmp(b.Serial) != 0 {
		t.Errorf("new connection after rotation: serial %v, want the new %v", got, b.Serial)
	}
	if got, _ := get(t, old, addr); got.Cmp(a.Serial) != 0 {
		t.Errorf("old connection after rotation: serial %v, want the old %v on the same connection", got, a.Serial)
	}
	if !strings.Contains(logs.String(), "TLS certificate reloaded") {
		t.Errorf("log = %q, want a line about the reload", logs)
	}

	copyFile(t, a.KeyFile, files.KeyFile) // b's certificate with a's key
	for range 3 {
		if got, _ := get(t, newClient(testcert.ClientConfig(t, ca)), addr); got.Cmp(b.Serial) != 0 {
			t.Errorf("broken pair: serial %v, want %v still served", got, b.Serial)
		}
	}
	if n := strings.Count(logs.String(), "TLS certificate not reloaded"); n != 1 {
		t.Errorf("broken pair logged %d times over 3 handshakes, want once:\n%s", n, logs)
	}
}

// TestTLSMutual checks that a listener with a client authority admits
// only clients with a certificate it signed.
func TestTLSMutual(t *testing.T) {
	ca, other := testcert.NewCA(t), testcert.NewCA(t)
	srv := ca.Server(t, "server")
	files := config.ServerTLS{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: ca.CertFile, MinVersion: tls.VersionTLS13}
	addr, _ := serveTLS(t, files, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for _, tt := range []struct {
		name   string
		cfg    *tls.Config
		wantOK bool
	}{
		{"no certificate", testcert.ClientConfig(t, ca), false},
		{"certificate of another authority", testcert.ClientConfig(t, ca, other.Client(t, "c", "mallory")), false},
		{"certificate of the authority", testcert.ClientConfig(t, ca, ca.Client(t, "c", "app")), true},
	} {
		resp, err := newClient(tt.cfg).Get("https://" + addr + "/")
		if err == nil {
			resp.Body.Close()
		}
		if (err == nil) != tt.wantOK {
			t.Errorf("%s: GET error = %v, want ok %v", tt.name, err, tt.wantOK)
		}
	}
	tls12 := testcert.ClientConfig(t, ca, ca.Client(t, "c12", "app"))
	tls12.MaxVersion = tls.VersionTLS12
	if resp, err := newClient(tls12).Get("https://" + addr + "/"); err == nil {
		resp.Body.Close()
		t.Errorf("TLS 1.2 client: GET succeeded, want refused under min_version 1.3")
	}
}
