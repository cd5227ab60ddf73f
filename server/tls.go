package server

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/config"
)

// CertCheckInterval is how often, at most, a TLS reads its files again to
// see whether they changed: only when a handshake comes, so an idle
// listener reads nothing.
const CertCheckInterval = time.Second

// ALPN protocols of the listeners: what each negotiates.
var (
	// HTTPProtos are those of an HTTP listener: HTTP/2, then HTTP/1.1.
	HTTPProtos = []string{"h2", "http/1.1"}
	// GRPCProtos are those of the gRPC listener, which speaks only
	// HTTP/2.
	GRPCProtos = []string{"h2"}
)

// A TLS serves a listener's certificate, and with mutual TLS checks its
// clients' certificates, as a config.ServerTLS describes, and reads the
// files again when they change: at most every CertCheckInterval, on the
// next handshake. New handshakes use the new certificate (and the new
// client authorities); connections already established keep theirs, so
// renewing a certificate is replacing its files, with no restart and no
// dropped connection. Files that do not make a valid pair (a key that
// does not match, a file half written) leave the previous certificate in
// force; why is logged once per change of the files.
//
// Build one with NewTLS; its methods are safe for concurrent use.
type TLS struct {
	files      config.ServerTLS
	nextProtos []string
	log        *slog.Logger
	every      time.Duration // CertCheckInterval; tests set 0

	checkAt atomic.Int64 // UnixNano of the next check
	mu      sync.Mutex   // held by the one check under way
	failed  *tlsFiles    // the contents the last failed check read, if it failed; under mu
	cur     atomic.Pointer[tlsState]
}

// tlsFiles are the contents of the files of a config.ServerTLS.
type tlsFiles struct{ cert, key, ca []byte }

func (f tlsFiles) equal(g tlsFiles) bool {
	return bytes.Equal(f.cert, g.cert) && bytes.Equal(f.key, g.key) && bytes.Equal(f.ca, g.ca)
}

// tlsState is the configuration handshakes are given, and the contents
// of the files it was built from.
type tlsState struct {
	files tlsFiles
	cfg   *tls.Config
}

// NewTLS reads the files of c and returns the TLS of a listener that
// negotiates nextProtos (HTTPProtos, GRPCProtos). A failed reload is
// logged to log.
func NewTLS(c config.ServerTLS, nextProtos []string, log *slog.Logger) (*TLS, error) {
	t := &TLS{files: c, nextProtos: nextProtos, log: log, every: CertCheckInterval}
	f, err := t.read()
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	st, err := t.build(f)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	t.cur.Store(st)
	t.checkAt.Store(time.Now().Add(t.every).UnixNano())
	return t, nil
}

// Config returns the configuration of the listener: http.Server.TLSConfig,
// or credentials.NewTLS for gRPC. Each handshake gets the certificate in
// force.
func (t *TLS) Config() *tls.Config {
	return &tls.Config{
		MinVersion:         t.files.MinVersion,
		NextProtos:         t.nextProtos,
		GetConfigForClient: t.configFor,
	}
}

// configFor is the GetConfigForClient of Config: the configuration in
// force, after a check of the files when one is due and no other
// handshake is doing it.
func (t *TLS) configFor(*tls.ClientHelloInfo) (*tls.Config, error) {
	if now := time.Now(); now.UnixNano() >= t.checkAt.Load() && t.mu.TryLock() {
		t.check(now)
		t.mu.Unlock()
	}
	return t.cur.Load().cfg, nil
}

// check reads the files and, if they changed, puts the pair they hold in
// force, or logs why it cannot (once per change). It requires t.mu.
func (t *TLS) check(now time.Time) {
	t.checkAt.Store(now.Add(t.every).UnixNano())
	f, err := t.read()
	if err == nil && f.equal(t.cur.Load().files) {
		return
	}
	var st *tlsState
	if err == nil {
		st, err = t.build(f)
	}
	if err != nil {
		if t.failed == nil || !f.equal(*t.failed) {
			t.log.Error("TLS certificate not reloaded; the previous one is still served",
				"cert_file", t.files.CertFile, "key_file", t.files.KeyFile, "err", err)
		}
		t.failed = &f
		return
	}
	t.failed = nil
	t.cur.Store(st)
	t.log.Info("TLS certificate reloaded", "cert_file", t.files.CertFile, "not_after", st.cfg.Certificates[0].Leaf.NotAfter)
}

// read reads the files of t.
func (t *TLS) read() (tlsFiles, error) {
	var f tlsFiles
	var errs [3]error
	f.cert, errs[0] = os.ReadFile(t.files.CertFile)
	f.key, errs[1] = os.ReadFile(t.files.KeyFile)
	if t.files.ClientCAFile != "" {
		f.ca, errs[2] = os.ReadFile(t.files.ClientCAFile)
	}
	return f, errors.Join(errs[:]...)
}

// build makes the configuration of the contents f.
func (t *TLS) build(f tlsFiles) (*tlsState, error) {
	pair, err := tls.X509KeyPair(f.cert, f.key)
	if err != nil {
		return nil, fmt.Errorf("%s, %s: %w", t.files.CertFile, t.files.KeyFile, err)
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{pair},
		MinVersion:   t.files.MinVersion,
		NextProtos:   t.nextProtos,
	}
	if t.files.ClientCAFile != "" {
		cfg.ClientCAs = x509.NewCertPool()
		if !cfg.ClientCAs.AppendCertsFromPEM(f.ca) {
			return nil, fmt.Errorf("%s holds no PEM certificate", t.files.ClientCAFile)
		}
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return &tlsState{files: f, cfg: cfg}, nil
}

// redisTLS returns the client configuration of t: nil (plain text) when
// t is nil.
func redisTLS(t *config.RedisTLS) (*tls.Config, error) {
	if t == nil {
		return nil, nil
	}
	c := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,         // empty: tls.Dialer checks the host dialled
		InsecureSkipVerify: t.InsecureSkipVerify, // the operator's explicit choice; off by default
	}
	if t.CAFile != "" {
		pool, err := config.LoadCertPool(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		c.RootCAs = pool
	}
	if t.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}
