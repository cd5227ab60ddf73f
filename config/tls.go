package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// TLS versions of ServerTLS.MinVersion, as the file writes them.
var tlsVersions = map[string]uint16{"1.2": tls.VersionTLS12, "1.3": tls.VersionTLS13}

// ServerTLS configures TLS on one listener of sluice serve. Each listener
// has its own block (tls, grpc.tls, admin.tls), and a listener without one
// serves plain text. The files are read when the configuration is
// loaded, to check them, and by the server, which reads them again when
// they change (see server.TLS): a certificate is renewed by replacing
// its files, without a restart. Paths are absolute here; the file may
// write them relative to its own directory.
type ServerTLS struct {
	// CertFile and KeyFile are the PEM files of the certificate (with
	// its chain) and its private key. Both required.
	CertFile, KeyFile string
	// ClientCAFile, when set, turns on mutual TLS: a client must present
	// a certificate signed by one of the authorities of this PEM file.
	// Default none: any client may connect.
	ClientCAFile string
	// MinVersion is the lowest TLS version accepted: tls.VersionTLS12
	// (the default; the file writes "1.2") or tls.VersionTLS13 ("1.3").
	MinVersion uint16
}

// RedisTLS configures TLS to Redis: to its servers and, with Sentinel,
// to the sentinels too (one deployment, one authority).
type RedisTLS struct {
	// CAFile is a PEM file of the authorities trusted to sign the
	// servers' certificates. Default none: the system's roots.
	CAFile string
	// CertFile and KeyFile, when set (both or neither), are the client
	// certificate presented to servers that ask for one
	// (tls-auth-clients). Default none.
	CertFile, KeyFile string
	// ServerName is the name checked in the servers' certificates.
	// Default the host of each address dialled.
	ServerName string
	// InsecureSkipVerify accepts any certificate a server presents: for
	// tests only, since anyone on the path can then read and change the
	// traffic. Default false.
	InsecureSkipVerify bool
}

// The YAML forms of the TLS blocks.
type (
	fileServerTLS struct {
		CertFile     string `yaml:"cert_file"`
		KeyFile      string `yaml:"key_file"`
		ClientCAFile string `yaml:"client_ca_file"`
		MinVersion   string `yaml:"min_version"`
	}
	fileRedisTLS struct {
		CAFile             string `yaml:"ca_file"`
		CertFile           string `yaml:"cert_file"`
		KeyFile            string `yaml:"key_file"`
		ServerName         string `yaml:"server_name"`
		InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
	}
)

// serverTLS validates a listener's tls block at path: nil when the file
// has none.
func (f *fileServerTLS) serverTLS(v *validator, path []any) (*ServerTLS, error) {
	if f == nil {
		return nil, nil
	}
	t := &ServerTLS{CertFile: v.abs(f.CertFile), KeyFile: v.abs(f.KeyFile), ClientCAFile: v.abs(f.ClientCAFile)}
	switch ver, ok := tlsVersions[f.MinVersion]; {
	case f.MinVersion == "":
		t.MinVersion = tls.VersionTLS12
	case !ok:
		return t, v.errorf(append(path, "min_version"), "min_version %q: want \"1.2\" or \"1.3\"", f.MinVersion)
	default:
		t.MinVersion = ver
	}
	if f.CertFile == "" || f.KeyFile == "" {
		return t, v.errorf(path, "cert_file and key_file are both required")
	}
	if err := v.keyPair(path, t.CertFile, t.KeyFile); err != nil {
		return t, err
	}
	return t, v.certPool(append(path, "client_ca_file"), t.ClientCAFile)
}

// redisTLS validates store.redis.tls: nil when the file has none.
func (f *fileRedisTLS) redisTLS(v *validator) (*RedisTLS, error) {
	if f == nil {
		return nil, nil
	}
	path := at("store", "redis", "tls")
	t := &RedisTLS{CAFile: v.abs(f.CAFile), CertFile: v.abs(f.CertFile), KeyFile: v.abs(f.KeyFile),
		ServerName: f.ServerName, InsecureSkipVerify: f.InsecureSkipVerify}
	if (f.CertFile == "") != (f.KeyFile == "") {
		return t, v.errorf(path, "set cert_file and key_file both, or neither")
	}
	if f.CertFile != "" {
		if err := v.keyPair(path, t.CertFile, t.KeyFile); err != nil {
			return t, err
		}
	}
	return t, v.certPool(append(path, "ca_file"), t.CAFile)
}

// abs returns a path of the file relative to the file's own directory,
// made absolute, so that the server finds it again wherever it runs; ""
// stays "".
func (v *validator) abs(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	p = filepath.Join(filepath.Dir(v.name), p)
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// keyPair checks that certFile and keyFile hold a certificate and its
// key. A lenient load (Validate) only warns about files it cannot read:
// the machine that validates need not hold the production keys.
func (v *validator) keyPair(path []any, certFile, keyFile string) error {
	_, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err == nil {
		return nil
	}
	if v.lenientFiles(path, err, certFile, keyFile) {
		return nil
	}
	return v.errorf(path, "certificate %s and key %s: %v", certFile, keyFile, err)
}

// certPool checks that file, when set, holds at least one PEM
// certificate.
func (v *validator) certPool(path []any, file string) error {
	if file == "" {
		return nil
	}
	_, err := LoadCertPool(file)
	if err != nil && !v.lenientFiles(path, err, file) {
		return v.errorf(path, "%v", err)
	}
	return nil
}

// lenientFiles reports whether err, an error reading files, is only a
// warning: in a lenient load, when one of the files cannot be read.
func (v *validator) lenientFiles(path []any, err error, files ...string) bool {
	if !v.lenientSecrets {
		return false
	}
	for _, f := range files {
		if _, serr := os.Stat(f); serr != nil {
			v.warn(path, serr.Error())
			return true
		}
	}
	return false
}

// LoadCertPool reads a PEM file of certificates into a pool: the
// authorities of a ServerTLS.ClientCAFile or a RedisTLS.CAFile. A file
// without a certificate is an error.
func LoadCertPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return pool, nil
}

// maxSecretFile bounds a secret's file: a password or a token is short,
// and a wrong path (a log) should fail fast.
const maxSecretFile = 64 << 10

// secret returns a secret given literally, through an environment
// variable (what_env) or in a file (what_file): at most one of them. An
// env name of a variable that is unset or empty, or a file that cannot
// be read or is empty, is an error: the file asks for a secret that is
// not there. A file's trailing line break is not part of the secret.
func secret(v *validator, path []any, literal, env, file, what string) (string, error) {
	if n := btoi(literal != "") + btoi(env != "") + btoi(file != ""); n > 1 {
		return "", v.errorf(path, "set one of %s, %s_env and %s_file", what, what, what)
	}
	switch {
	case env != "":
		s, ok := os.LookupEnv(env)
		switch {
		case ok && s != "":
			return s, nil
		case v.lenientSecrets:
			v.warn(append(path, what+"_env"), "environment variable "+env+" is not set here")
			return "unset-secret-placeholder-" + env, nil
		}
		return "", v.errorf(append(path, what+"_env"), "environment variable %s is not set", env)
	case file != "":
		s, err := readSecret(v.abs(file))
		switch {
		case err == nil:
			return s, nil
		case v.lenientSecrets:
			v.warn(append(path, what+"_file"), err.Error())
			return "unset-secret-placeholder-file", nil
		}
		return "", v.errorf(append(path, what+"_file"), "%v", err)
	}
	return literal, nil
}

// readSecret reads a secret's file: the file without its trailing line
// break, not empty.
func readSecret(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("%s: %w", file, err)
	case len(b) > maxSecretFile:
		return "", fmt.Errorf("%s: larger than %d bytes", file, maxSecretFile)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", fmt.Errorf("%s is empty", file)
	}
	return s, nil
}

// warn records a warning of a lenient load about the field at path.
func (v *validator) warn(path []any, msg string) {
	n := v.node(path...)
	w := &Error{File: v.name, Line: n.Line, Column: n.Column, Path: fieldPath(path), Err: errors.New(msg + " (needed to serve)")}
	v.warnings = append(v.warnings, w.Error())
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
