package main

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/sluicehq/sluice/internal/testing/testcert"
)

// TestServeTLS serves every listener over TLS, gRPC and the admin API
// with mutual TLS, and checks what each admits, and that the admin token,
// read from a file, never reaches the log.
func TestServeTLS(t *testing.T) {
	ca := testcert.NewCA(t)
	ca.Server(t, "server")
	client := ca.Client(t, "client", "envoy")
	dir := filepath.Dir(ca.CertFile)
	const token = "token-from-a-file-0123456789"
	writeFile(t, filepath.Join(dir, "admin-token"), token+"\n")
	cfg := filepath.Join(dir, "sluice.yaml")
	writeFile(t, cfg, `rules:
  - name: api
    limits: ["100/s"]
  - domain: edge
    descriptors: [{key: remote_address, limits: ["10/s"]}]
tls: {cert_file: server.crt, key_file: server.key}
grpc:
  listen: 127.0.0.1:0
  tls: {cert_file: server.crt, key_file: server.key, client_ca_file: ca.crt}
admin:
  listen: 127.0.0.1:0
  token_file: admin-token
  tls: {cert_file: server.crt, key_file: server.key, client_ca_file: ca.crt}
`)
	addrs, logs := serve(t, []string{"-config", cfg, "-listen", "127.0.0.1:0"}, "sluice: listening on ", "sluice: grpc on ", "sluice: admin on ")
	if !strings.HasPrefix(addrs[0], "https://") || !strings.HasPrefix(addrs[2], "https://") {
		t.Fatalf("announced %q, want https:// URLs", addrs)
	}

	// The HTTP API, over TLS without a client certificate.
	if out, err := checkTLS(t, ca, addrs[0]); err != nil || !strings.Contains(out, `"allowed":true`) {
		t.Errorf("POST /v1/check over TLS = %q, %v; want allowed", out, err)
	}
	// gRPC, with and without a client certificate.
	if err := shouldRateLimit(t, addrs[1], testcert.ClientConfig(t, ca, client)); err != nil {
		t.Errorf("ShouldRateLimit with a client certificate: %v, want an answer", err)
	}
	if err := shouldRateLimit(t, addrs[1], testcert.ClientConfig(t, ca)); err == nil {
		t.Errorf("ShouldRateLimit without a client certificate answered, want refused")
	}
	// The admin API: the certificate and the token are both required.
	for _, tt := range []struct {
		cfg   *tls.Config
		token string
		want  int // 0: the handshake fails
	}{
		{testcert.ClientConfig(t, ca, client), token, 200},
		{testcert.ClientConfig(t, ca, client), "wrong-token-0123456789", 401},
		{testcert.ClientConfig(t, ca), token, 0},
	} {
		req, _ := http.NewRequest("GET", addrs[2]+"/admin/api/bans", nil)
		req.Header.Set("Authorization", "Bearer "+tt.token)
		resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: tt.cfg}}).Do(req)
		got := 0
		if err == nil {
			got = resp.StatusCode
			resp.Body.Close()
		}
		if got != tt.want {
			t.Errorf("GET /admin/api/bans (token %q) = %d, %v; want %d", tt.token[:5], got, err, tt.want)
		}
	}
	if strings.Contains(logs.String(), token) {
		t.Errorf("the log holds the admin token:\n%s", logs)
	}
	// The commands: check trusting the CA, bans with the client's
	// certificate too (the admin listener requires one).
	if out, _, err := runCmd(t, "check", "-server", addrs[0], "-tls-ca", ca.CertFile, "api", "k2"); err != nil || !strings.Contains(out, "allowed") {
		t.Errorf("sluice check -tls-ca = %q, %v; want allowed", out, err)
	}
	if _, _, err := runCmd(t, "check", "-server", addrs[0], "api", "k2"); err == nil {
		t.Error("sluice check without -tls-ca trusted the test CA")
	}
	t.Setenv("SLUICE_ADMIN_TOKEN", token)
	if out, _, err := runCmd(t, "bans", "-server", addrs[2], "-tls-ca", ca.CertFile, "-tls-cert", client.CertFile, "-tls-key", client.KeyFile, "list"); err != nil || !strings.Contains(out, "JAIL") {
		t.Errorf("sluice bans list over mTLS = %q, %v; want the list", out, err)
	}
	if out, _, err := runCmd(t, "bench", "-server", addrs[0], "-rule", "api", "-n", "20", "-quiet", "-tls-ca", ca.CertFile); err != nil || !strings.Contains(out, "requests   20") {
		t.Errorf("sluice bench over https = %q, %v; want 20 requests", out, err)
	}
	if out, _, err := runCmd(t, "bench", "-server", "grpcs://"+addrs[1], "-domain", "edge", "-descriptor", "remote_address={key}", "-n", "20", "-quiet",
		"-tls-ca", ca.CertFile, "-tls-cert", client.CertFile, "-tls-key", client.KeyFile); err != nil || !strings.Contains(out, "requests   20") {
		t.Errorf("sluice bench over grpcs with mTLS = %q, %v; want 20 requests", out, err)
	}
	if _, _, err := runCmd(t, "bans", "-server", addrs[2], "-tls-ca", ca.CertFile, "-tls-cert", client.CertFile, "list"); exitCode(err) != 2 {
		t.Errorf("-cert without -key: %v, want a usage error", err)
	}
}

// checkTLS posts a check to the HTTPS listener at url, trusting ca,
// and returns the answer's body.
func checkTLS(t *testing.T, ca *testcert.CA, url string) (string, error) {
	t.Helper()
	cl := &http.Client{Transport: &http.Transport{TLSClientConfig: testcert.ClientConfig(t, ca)}}
	resp, err := cl.Post(url+"/v1/check", "application/json", strings.NewReader(`{"rule":"api","key":"k"}`))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// shouldRateLimit asks the gRPC listener at addr once, over TLS with cfg.
func shouldRateLimit(t *testing.T, addr string, cfg *tls.Config) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = pb.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &pb.RateLimitRequest{Domain: "edge",
		Descriptors: []*rlv3.RateLimitDescriptor{{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.1"}}}}})
	return err
}
