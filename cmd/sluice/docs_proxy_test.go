package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// docSluice is the address of sluice serve in the docs' snippets.
const docSluice = "127.0.0.1:8080"

// onlyBlock returns the one block of lang in file.
func onlyBlock(t *testing.T, file, lang string) docBlock {
	t.Helper()
	bs := blocksOf(t, file, lang)
	if len(bs) != 1 {
		t.Fatalf("%s has %d %s blocks, want 1", file, len(bs), lang)
	}
	return bs[0]
}

// upstream is the application behind the proxy; it counts its requests.
func upstream(t *testing.T) (addr string, hits *atomic.Int64) {
	t.Helper()
	hits = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprintln(w, "upstream")
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), hits
}

// untilDenied sends GETs to url as client ip until one is refused, at
// most 2000, and checks the refusal and that no refused request reached
// the upstream: the sample's api rule allows a burst of 200.
func untilDenied(t *testing.T, url, ip string, hits *atomic.Int64) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	for i := range 2000 {
		req, _ := http.NewRequest(http.MethodGet, url+"/page", nil)
		req.Header.Set("X-Forwarded-For", ip)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			continue
		}
		if resp.StatusCode != http.StatusTooManyRequests || i < 200 ||
			resp.Header.Get("Retry-After") == "" || !strings.Contains(resp.Header.Get("RateLimit"), "r=0") {
			t.Fatalf("request %d: %d %q, Retry-After %q, RateLimit %q; want 429 after 200 allowed, with both fields",
				i+1, resp.StatusCode, body, resp.Header.Get("Retry-After"), resp.Header.Get("RateLimit"))
		}
		if int(hits.Load()) != i {
			t.Errorf("upstream hits = %d, want the %d allowed", hits.Load(), i)
		}
		return
	}
	t.Fatal("2000 requests and no 429")
}

// TestDocsNginx runs the nginx block of docs/operations.md as written,
// in a server block of a real nginx, in front of sluice serve with the
// sample rules; the block's upstream app is defined beside it.
func TestDocsNginx(t *testing.T) {
	b := onlyBlock(t, "docs/operations.md", "nginx")
	sluice := strings.TrimPrefix(startServe(t), "http://")
	app, hits := upstream(t)
	base := testserver.StartNginx(t, func(dir string, port int) string {
		return testserver.NginxConf(dir, fmt.Sprintf("  access_log off;\n  upstream app { server %s; }\n  server {\n    listen 127.0.0.1:%d;\n%s  }\n",
			app, port, strings.ReplaceAll(b.text, docSluice, sluice)))
	})
	untilDenied(t, base, "203.0.113.7", hits)
	if resp, err := http.Get(base + "/page"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("another client: %v %v, want 200", resp, err)
	}
}

// TestDocsCaddy runs the Caddyfile block of docs/operations.md as
// written in a real Caddy, in front of sluice serve with the sample
// rules. The test adds global options (no admin endpoint, no automatic
// HTTPS, loopback only) and replaces the addresses.
func TestDocsCaddy(t *testing.T) {
	b := onlyBlock(t, "docs/operations.md", "caddyfile")
	sluice := strings.TrimPrefix(startServe(t), "http://")
	app, hits := upstream(t)
	base := testserver.StartCaddy(t, func(port int) string {
		site := strings.NewReplacer(docSluice, sluice, "127.0.0.1:8000", fmt.Sprintf("127.0.0.1:%d", port), "app:8000", app).Replace(b.text)
		return "{\n\tadmin off\n\tauto_https off\n\tdefault_bind 127.0.0.1\n}\n\n" + site
	})
	untilDenied(t, base, "203.0.113.7", hits)
}

// TestDocsREADMECheck runs the curl line of the README's "Ask the
// service" against sluice serve with the sample rules, and compares its
// output with the JSON block shown after it.
func TestDocsREADMECheck(t *testing.T) {
	curl := testserver.Binary(t, "curl")
	var cmd, want string
	all := docBlocks(t)
	for i, b := range all {
		if b.file == "README.md" && b.lang == "sh" && strings.Contains(b.text, "/v1/check") && i+1 < len(all) && all[i+1].lang == "json" {
			cmd, want = b.text, all[i+1].text
		}
	}
	if cmd == "" {
		t.Fatal("README.md has no curl of /v1/check followed by its answer")
	}
	sluice := strings.TrimPrefix(startServe(t), "http://")
	line := strings.ReplaceAll(strings.TrimSpace(cmd), docSluice, sluice)
	line = strings.Replace(line, "curl", curl, 1)
	out, err := exec.Command("sh", "-c", line).Output()
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	if strings.TrimSpace(string(out)) != strings.TrimSpace(want) {
		t.Errorf("%s\n  = %s\nwant %s", cmd, out, want)
	}
	if !json.Valid(out) {
		t.Errorf("answer is not JSON: %s", out)
	}
}
