package server

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// caddyConf puts Caddy in front of an upstream with forward_auth to
// sluice, in the shape of docs/operations.md's block (which cmd/sluice's
// TestDocsCaddy runs as written), with a rule and a deny list of its
// own. Caddy hands the client sluice's
// non-2xx answer as it is, status and headers, so sluice keeps its
// default 429. trusted_proxies makes Caddy keep the X-Forwarded-For of
// the test's clients, as behind a trusted load balancer; it appends the
// address it got the request from, which sluice skips as a trusted hop.
// (Caddy 2.6.2, Debian's, takes trusted_proxies per proxy, not per
// server.)
const caddyConf = `{
	admin off
	auto_https off
}

http://127.0.0.1:%d {
	bind 127.0.0.1
	forward_auth %s {
		uri /v1/auth?rule=web
		copy_headers RateLimit RateLimit-Policy
		trusted_proxies 127.0.0.0/8
	}
	reverse_proxy %s
}
`

// TestCaddyForwardAuth puts a real Caddy in front of a tiny upstream with
// forward_auth to sluice: requests beyond the limit get sluice's 429 with
// Retry-After and the RateLimit fields from Caddy, and never reach the
// upstream; other clients are counted apart.
func TestCaddyForwardAuth(t *testing.T) {
	s, _ := newService(t, `rules:
  - name: web
    limits: ["3/min"]
guard:
  deny: [198.51.100.0/24]
`)
	sluice := httptest.NewServer(s.Handler())
	t.Cleanup(sluice.Close)
	var hits atomic.Int64
	var sawPolicy atomic.Bool
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Header.Get("RateLimit-Policy") != "" { // copied from sluice's 200
			sawPolicy.Store(true)
		}
		fmt.Fprintf(w, "upstream: %s\n", r.URL.Path)
	}))
	t.Cleanup(upstream.Close)
	host := func(u string) string { return strings.TrimPrefix(u, "http://") }
	base := testserver.StartCaddy(t, func(port int) string {
		return fmt.Sprintf(caddyConf, port, host(sluice.URL), host(upstream.URL))
	})

	client := &http.Client{Timeout: 5 * time.Second}
	get := func(ip string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, base+"/page", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Forwarded-For", ip)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET /page: %v", err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}

	for i := range 3 {
		if resp, body := get("203.0.113.7"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(body, "upstream:") {
			t.Fatalf("request %d: %d %q, want 200 from the upstream", i+1, resp.StatusCode, body)
		}
	}
	if !sawPolicy.Load() {
		t.Errorf("the upstream never saw RateLimit-Policy: copy_headers did not carry sluice's fields")
	}
	resp, body := get("203.0.113.7")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("request 4: %d %q, want 429", resp.StatusCode, body)
	}
	if got := resp.Header.Get("Retry-After"); got == "" || got == "0" {
		t.Errorf("429 Retry-After = %q, want the seconds until a request is allowed", got)
	}
	if got := resp.Header.Get("RateLimit"); !strings.Contains(got, "r=0") {
		t.Errorf("429 RateLimit = %q, want r=0", got)
	}
	if got := hits.Load(); got != 3 {
		t.Errorf("upstream hits = %d, want 3: a denied request reached it", got)
	}

	// Another client has its own allowance; a deny-listed one is refused.
	if resp, _ := get("203.0.113.8"); resp.StatusCode != http.StatusOK {
		t.Errorf("another client: %d, want 200", resp.StatusCode)
	}
	if resp, _ := get("198.51.100.9"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("deny-listed client: %d, want 403", resp.StatusCode)
	}
	if got := hits.Load(); got != 4 {
		t.Errorf("upstream hits = %d, want 4", got)
	}
}
