package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// tlsFlags are the flags of a command that talks to a listener of
// sluice serve over TLS: the authority to trust, and the client's
// certificate for mTLS.
type tlsFlags struct {
	caFile, certFile, keyFile string
}

// register adds the flags to fs: -tls-ca, -tls-cert and -tls-key, and
// their names before this release (-cacert, -cert, -key, which read like
// a rate-limit key beside -keys), deprecated, warning on warn.
func (f *tlsFlags) register(fs *flag.FlagSet, warn io.Writer) {
	fs.StringVar(&f.caFile, "tls-ca", "", "trust the server certificates `file` (PEM) signs, for an https:// or grpcs:// URL (default: the system's)")
	fs.StringVar(&f.certFile, "tls-cert", "", "present this client certificate `file` (PEM), for a listener that requires one (mTLS); with -tls-key")
	fs.StringVar(&f.keyFile, "tls-key", "", "the client certificate's private key `file` (PEM)")
	alias(fs, "cacert", "tls-ca", warn)
	alias(fs, "cert", "tls-cert", warn)
	alias(fs, "key", "tls-key", warn)
}

// tlsUsage is the synopsis of the TLS flags.
const tlsUsage = "[-tls-ca FILE] [-tls-cert FILE -tls-key FILE]"

// client returns an HTTP client with the TLS settings of f and timeout.
func (f *tlsFlags) client(timeout time.Duration) (*http.Client, error) {
	c, err := f.config()
	if err != nil {
		return nil, err
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = c
	return &http.Client{Timeout: timeout, Transport: t}, nil
}

// config returns the TLS client settings of f.
func (f *tlsFlags) config() (*tls.Config, error) {
	if (f.certFile == "") != (f.keyFile == "") {
		return nil, usageError("-tls-cert and -tls-key go together")
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.caFile != "" {
		pem, err := os.ReadFile(f.caFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-tls-ca %s: no PEM certificate in it", f.caFile)
		}
	}
	if f.certFile != "" {
		pair, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
		if err != nil {
			return nil, fmt.Errorf("-tls-cert, -tls-key: %w", err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}
