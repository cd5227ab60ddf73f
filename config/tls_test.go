package config

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testing/testcert"
)

func TestParseTLS(t *testing.T) {
	ca := testcert.NewCA(t)
	srv, cli := ca.Server(t, "server"), ca.Client(t, "client", "sluice")
	dir := filepath.Dir(ca.CertFile)
	in := twoRules + `listen: 127.0.0.1:8443
tls: {cert_file: server.crt, key_file: server.key}
grpc:
  listen: 127.0.0.1:8444
  tls: {cert_file: server.crt, key_file: server.key, client_ca_file: ca.crt, min_version: "1.3"}
admin:
  token: 0123456789abcdef-token
  tls: {cert_file: ` + srv.CertFile + `, key_file: ` + srv.KeyFile + `, client_ca_file: ca.crt}
store:
  type: redis
  redis:
    addrs: ["127.0.0.1:6380"]
    tls: {ca_file: ca.crt, cert_file: client.crt, key_file: client.key, server_name: redis.internal}
`
	// Relative paths are read from the file's directory.
	c, err := Parse(filepath.Join(dir, "sluice.yaml"), []byte(in))
	if err != nil {
		t.Fatalf("Parse error = %v, want nil", err)
	}
	plain := &ServerTLS{CertFile: srv.CertFile, KeyFile: srv.KeyFile, MinVersion: tls.VersionTLS12}
	mutual13 := &ServerTLS{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: ca.CertFile, MinVersion: tls.VersionTLS13}
	mutual := &ServerTLS{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: ca.CertFile, MinVersion: tls.VersionTLS12}
	for _, tt := range []struct {
		name      string
		got, want any
	}{
		{"tls", c.TLS, plain},
		{"grpc", c.GRPC, GRPC{Listen: "127.0.0.1:8444", TLS: mutual13}},
		{"admin.tls", c.Admin.TLS, mutual},
		{"store.redis.tls", c.Store.Redis.TLS, &RedisTLS{CAFile: ca.CertFile, CertFile: cli.CertFile, KeyFile: cli.KeyFile, ServerName: "redis.internal"}},
	} {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("Parse: %s = %+v, want %+v", tt.name, tt.got, tt.want)
		}
	}
	c, err = Parse("t.yaml", []byte(twoRules))
	if err != nil || c.TLS != nil || c.GRPC.TLS != nil || c.Admin.TLS != nil || c.Store.Redis.TLS != nil {
		t.Errorf("Parse without tls blocks = %+v, %v; want no TLS", c, err)
	}
}

func TestParseTLSErrors(t *testing.T) {
	ca := testcert.NewCA(t)
	a, b := ca.Server(t, "a"), ca.Server(t, "b")
	junk := filepath.Join(t.TempDir(), "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pair := func(cert, key string) string { return "{cert_file: " + cert + ", key_file: " + key }
	tests := []parseError{
		{"no key", "tls: {cert_file: " + a.CertFile + "}\n", []string{"t.yaml:6:6: tls: cert_file and key_file are both required"}},
		{"missing file", "tls: " + pair(a.CertFile, "/nonexistent/k.pem") + "}\n", []string{"t.yaml:6:6: tls: certificate", "no such file"}},
		{"key of another cert", "tls: " + pair(a.CertFile, b.KeyFile) + "}\n", []string{"t.yaml:6:6: tls: certificate", "private key does not match public key"}},
		{"junk ca", "grpc:\n  tls: " + pair(a.CertFile, a.KeyFile) + ", client_ca_file: " + junk + "}\n", []string{"t.yaml:7:", " grpc.tls.client_ca_file: ", "holds no PEM certificate"}},
		{"min version", "tls: " + pair(a.CertFile, a.KeyFile) + ", min_version: \"1.1\"}\n", []string{"t.yaml:6:", " tls.min_version: ", `want "1.2" or "1.3"`}},
		{"unknown field", "tls: {cert: x}\n", []string{`t.yaml:6:7: tls: unknown field "cert"; did you mean "cert_file"?`}},
		{"grpc listen", "grpc: {listen: nowhere}\n", []string{"t.yaml:6:16: grpc.listen:"}},
		{"admin tls without token", "admin:\n  tls: " + pair(a.CertFile, a.KeyFile) + "}\n", []string{"t.yaml:7:8: admin.tls: an admin listener needs a token"}},
		{"redis half pair", "store: {type: redis, redis: {addrs: [\"h:1\"], tls: {cert_file: " + a.CertFile + "}}}\n", []string{"t.yaml:6:51: store.redis.tls: set cert_file and key_file both, or neither"}},
		{"redis junk ca", "store: {type: redis, redis: {addrs: [\"h:1\"], tls: {ca_file: " + junk + "}}}\n", []string{"store.redis.tls.ca_file:", "holds no PEM certificate"}},
	}
	checkParseErrors(t, "t.yaml", twoRules, tests)
}

func TestSecretFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("redis-password", "pw-from-file\n")
	token := write("token", "0123456789abcdef-from-file\r\n")
	sentinel := write("sentinel-password", "sentinel-pw")
	in := twoRules + `store:
  type: redis
  redis:
    password_file: redis-password
    sentinel: {master: m, addrs: ["h:26379"], password_file: ` + sentinel + `}
admin: {token_file: ` + token + `}
`
	c, err := Parse(filepath.Join(dir, "s.yaml"), []byte(in))
	if err != nil {
		t.Fatalf("Parse error = %v, want nil", err)
	}
	if got := [3]string{c.Store.Redis.Password, c.Store.Redis.Sentinel.Password, c.Admin.Token}; got != [3]string{"pw-from-file", "sentinel-pw", "0123456789abcdef-from-file"} {
		t.Errorf("Parse: secrets = %q, want the files' contents without line breaks", got)
	}

	write("empty", "\n")
	checkParseErrors(t, filepath.Join(dir, "s.yaml"), twoRules, []parseError{
		{"empty", "admin: {token_file: empty}\n", []string{"s.yaml:6:21: admin.token_file:", "empty is empty"}},
		{"missing", "admin: {token_file: nope}\n", []string{"s.yaml:6:21: admin.token_file:", "no such file"}},
		{"two forms", "admin: {token: x, token_file: token}\n", []string{"admin: set one of token, token_env and token_file"}},
	})

	// Validate, on a machine without the files, warns instead.
	cfg := filepath.Join(dir, "v.yaml")
	if err := os.WriteFile(cfg, []byte(twoRules+"admin: {token_file: /nonexistent/token}\ntls: {cert_file: /nonexistent/c.pem, key_file: /nonexistent/k.pem}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, warnings, err := Validate(cfg)
	if err != nil || len(warnings) != 2 || !strings.Contains(warnings[0], "v.yaml:7:6: tls:") || !strings.Contains(warnings[1], "admin.token_file") {
		t.Errorf("Validate = %q, %v; want warnings about admin.token_file and tls, no error", warnings, err)
	}
}
