package server

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"text/template"
	"time"

	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// nginxConf puts nginx in front of an upstream, asking sluice about every
// request with auth_request. nginx passes on only 401 and 403 from the
// auth subrequest, so sluice is asked for 403 on a denial
// (deny_status=403) and error_page turns it into a 429 carrying the
// RateLimit fields and Retry-After that auth_request_set captured.
// It is the http block of testserver.NginxConf, whose realip makes the
// X-Forwarded-For of the test's clients their address, as a trusted load
// balancer in front of nginx would.
const nginxConf = `  access_log off;

  server {
    listen 127.0.0.1:{{.Port}};

    location / {
      auth_request /_sluice;
      auth_request_set $sluice_ratelimit $upstream_http_ratelimit;
      auth_request_set $sluice_policy $upstream_http_ratelimit_policy;
      auth_request_set $sluice_retry $upstream_http_retry_after;
      add_header RateLimit $sluice_ratelimit always;
      add_header RateLimit-Policy $sluice_policy always;
      error_page 403 = @sluice_denied;
      proxy_pass {{.Upstream}};
    }

    location = /login {
      auth_request /_sluice_login;
      auth_request_set $sluice_ratelimit $upstream_http_ratelimit;
      auth_request_set $sluice_policy $upstream_http_ratelimit_policy;
      auth_request_set $sluice_retry $upstream_http_retry_after;
      add_header RateLimit $sluice_ratelimit always;
      error_page 403 = @sluice_denied;
      proxy_pass {{.Upstream}};
    }

{{.AuthLocations}}
    location @sluice_denied {
      add_header Retry-After $sluice_retry always;
      add_header RateLimit $sluice_ratelimit always;
      add_header RateLimit-Policy $sluice_policy always;
      default_type text/plain;
      return 429 "rate limited\n";
    }
  }
`

// startNginx runs nginx with nginxConf on a free loopback port, stopped
// when the test ends, and returns its URL.
func startNginx(t *testing.T, upstream, sluice string) string {
	t.Helper()
	tmpl := template.Must(template.New("nginx").Parse(nginxConf))
	return testserver.StartNginx(t, func(dir string, port int) string {
		var conf strings.Builder
		if err := tmpl.Execute(&conf, map[string]any{"Dir": dir, "Port": port, "Upstream": upstream, "Sluice": sluice, "AuthLocations": testserver.NginxAuthLocations(sluice)}); err != nil {
			t.Fatal(err)
		}
		return testserver.NginxConf(dir, conf.String())
	})
}

// TestNginxAuthRequest puts a real nginx in front of a tiny upstream, with
// auth_request to sluice: requests beyond the limit get 429 from nginx,
// with sluice's Retry-After and RateLimit fields, and never reach the
// upstream.
func TestNginxAuthRequest(t *testing.T) {
	s, _ := newService(t, `rules:
  - name: web
    limits: ["5/min"]
  - name: login
    limits: ["2/h"]
forward_auth:
  rule: web
guard:
  deny: [198.51.100.0/24]
`)
	sluice := httptest.NewServer(s.Handler())
	t.Cleanup(sluice.Close)
	var hits atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprintf(w, "upstream: %s %s\n", r.Method, r.URL.Path)
	}))
	t.Cleanup(upstream.Close)
	base := startNginx(t, upstream.URL, sluice.URL)

	client := &http.Client{Timeout: 5 * time.Second}
	get := func(path, ip string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Forwarded-For", ip)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}

	for i := range 5 {
		resp, body := get(fmt.Sprintf("/page/%d", i), "203.0.113.7")
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(body, "upstream: GET /page/") {
			t.Fatalf("request %d = %d %q, want 200 from the upstream", i+1, resp.StatusCode, body)
		}
		if got, want := resp.Header.Get("RateLimit"), fmt.Sprintf(`"web";r=%d;`, 4-i); !strings.HasPrefix(got, want) {
			t.Errorf("request %d RateLimit = %q, want prefix %q", i+1, got, want)
		}
	}
	resp, body := get("/page/6", "203.0.113.7")
	if resp.StatusCode != http.StatusTooManyRequests || body != "rate limited\n" {
		t.Fatalf("request 6 = %d %q, want 429 from nginx", resp.StatusCode, body)
	}
	for name, want := range map[string]string{"Retry-After": "12", "RateLimit": `"web";r=0;t=60`, "RateLimit-Policy": `"web";q=5;w=60`} {
		if got := resp.Header.Get(name); got != want {
			t.Errorf("429 %s = %q, want %q", name, got, want)
		}
	}
	if n := hits.Load(); n != 5 {
		t.Errorf("upstream hits = %d, want 5: a denied request reached it", n)
	}

	// Another client has its own allowance; a route with its own rule
	// counts apart; the deny list refuses.
	if resp, _ := get("/page/1", "203.0.113.8"); resp.StatusCode != http.StatusOK {
		t.Errorf("other client = %d, want 200", resp.StatusCode)
	}
	codes := []int{}
	for range 3 {
		resp, _ := get("/login", "203.0.113.7")
		codes = append(codes, resp.StatusCode)
	}
	if fmt.Sprint(codes) != "[200 200 429]" {
		t.Errorf("/login codes = %v, want [200 200 429] (rule login, 2/h)", codes)
	}
	if resp, _ := get("/page/1", "198.51.100.4"); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("deny-listed client = %d, want refused (403 from sluice, mapped by error_page)", resp.StatusCode)
	}
	if n := hits.Load(); n != 8 {
		t.Errorf("upstream hits = %d, want 8", n)
	}
}
