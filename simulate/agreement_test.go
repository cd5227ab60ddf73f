package simulate

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testing/testserver"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/simulate/accesslog"
)

// agreementConf puts nginx in front of an upstream with auth_request to
// sluice serve: rule login for /login, web for the rest (the rule of
// forward_auth). nginx logs each request in the combined format, the
// client's address from X-Forwarded-For (realip), and its status: 429
// when sluice denied or refused it. It is the http block of
// testserver.NginxConf.
const agreementConf = `  access_log {{.Dir}}/access.log combined;
  server {
    listen 127.0.0.1:{{.Port}};
    location / {
      auth_request /_sluice;
      error_page 403 = @denied;
      proxy_pass {{.Upstream}};
    }
    location = /login {
      auth_request /_sluice_login;
      error_page 403 = @denied;
      proxy_pass {{.Upstream}};
    }
{{.AuthLocations}}    location @denied { return 429; }
  }
`

// agreementRules use fixed windows of an hour: the service decides at
// the wall clock, the replay at the log's second, and the two fall in
// the same window unless an hour starts between a decision and its log
// line, a few milliseconds later. The jail bans on the fourth denial of
// a sign-in, and a ban refuses every rule.
const agreementRules = `rules:
  - name: web
    limits: ["12/h fixed", "30/d fixed"]
  - name: login
    limits: ["3/h fixed"]
forward_auth:
  rule: web
guard:
  deny: [198.51.100.0/24]
  jails:
    - {name: stuffing, rules: [login], max_failures: 4, find_time: 1h, ban_time: 1h}
`

// TestAgreesWithServe sends traffic through nginx to a running sluice
// service, then replays nginx's access log: simulate decides every
// request as the service did.
func TestAgreesWithServe(t *testing.T) {
	cfg := parseConfig(t, agreementRules)
	svc, err := server.NewService(context.Background(), cfg, server.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	sluice := httptest.NewServer(svc.Handler())
	t.Cleanup(sluice.Close)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(upstream.Close)
	var dir string
	tmpl := template.Must(template.New("nginx").Parse(agreementConf))
	base := testserver.StartNginx(t, func(d string, port int) string {
		dir = d
		var b strings.Builder
		if err := tmpl.Execute(&b, map[string]any{"Dir": d, "Port": port, "Upstream": upstream.URL, "Sluice": sluice.URL, "AuthLocations": testserver.NginxAuthLocations(sluice.URL)}); err != nil {
			t.Fatal(err)
		}
		return testserver.NginxConf(d, b.String())
	})

	sent := send(t, base, 600)
	// nginx logs a request after answering it: wait for the last lines.
	waitLines(t, filepath.Join(dir, "access.log"), sent, 10*time.Second)

	f, err := os.Open(filepath.Join(dir, "access.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := accesslog.Open(f, accesslog.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rd := accesslog.NewReader([]*accesslog.Stream{s}, []string{"access.log"})
	defer rd.Close()
	rp, err := NewReplayer(context.Background(), Config{Rules: cfg, Routes: []Route{{Rule: "web"}, {Rule: "login", PathPrefix: "/login"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Close()
	n, denied := 0, 0
	for e := rd.Next(); e != nil; e = rd.Next() {
		rp.Decide(context.Background(), e)
		served := e.Status == http.StatusTooManyRequests
		for _, rs := range rp.routes {
			if rs.asked && rs.wasDenied != served {
				t.Errorf("line %d (%s %s from %s): serve answered %d, simulate's rule %s denied=%v", e.Line, e.Method, e.URI, e.Addr, e.Status, rs.route.Rule, rs.wasDenied)
			}
		}
		n++
		if served {
			denied++
		}
	}
	if n != sent || rd.Stats.Malformed != 0 {
		t.Fatalf("replayed %d lines (%d malformed) of %d requests sent", n, rd.Stats.Malformed, sent)
	}
	var bans int64
	for _, rs := range rp.routes {
		bans += rs.Bans
	}
	bansServed, err := svc.Admin().Bans(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if bans == 0 || bans != int64(len(bansServed)) {
		t.Errorf("simulate made %d bans, serve %d: want the same, and some", bans, len(bansServed))
	}
	t.Logf("%d requests, %d denied, %d bans", n, denied, bans)
	if denied == 0 || denied == n {
		t.Errorf("%d of %d denied: the traffic does not exercise the rules", denied, n)
	}
	agreesSplit(t, cfg, filepath.Join(dir, "access.log"), int64(denied), int64(len(bansServed)))
}

// agreesSplit replays the log on several workers, as sluice simulate
// does by default, and wants the denials and bans serve made.
func agreesSplit(t *testing.T, cfg *config.Config, log string, denied, bans int64) {
	t.Helper()
	rep, err := Run(context.Background(), Options{Config: Config{Rules: cfg, Routes: []Route{{Rule: "web"}, {Rule: "login", PathPrefix: "/login"}}}, Files: []string{log}, Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	var gotDenied, gotBans int64
	for _, rr := range rep.Rules {
		gotDenied, gotBans = gotDenied+rr.WouldDeny, gotBans+rr.Bans
	}
	if gotDenied != denied || gotBans != bans {
		t.Errorf("on 4 workers, simulate denied %d and made %d bans; serve %d and %d", gotDenied, gotBans, denied, bans)
	}
}

// send sends n requests through nginx at base, one at a time, from a
// few clients: IPv4 ones, one rotating inside an IPv6 /64, and one on
// the deny list; a third of them sign in. It returns how many nginx
// answered.
// waitLines waits until the file at path holds n lines, for at most
// timeout, and fails t if it does not.
func waitLines(t *testing.T, path string, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		got := bytes.Count(b, []byte("\n"))
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %d lines after %v, want %d", path, got, timeout, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func send(t *testing.T, base string, n int) int {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range n {
		var ip string
		switch c := rng.IntN(12); c {
		case 10:
			ip = fmt.Sprintf("2001:db8:1:2:%x:%x::1", rng.Uint32()&0xffff, rng.Uint32()&0xffff)
		case 11:
			ip = "198.51.100.9"
		default:
			ip = fmt.Sprintf("203.0.113.%d", 1+c)
		}
		method, path := http.MethodGet, fmt.Sprintf("/page/%d?q=%d", i%7, i)
		if rng.IntN(3) == 0 {
			method, path = http.MethodPost, "/login"
		}
		req, err := http.NewRequest(method, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Forwarded-For", ip)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("request %d: status %d, want 200 or 429", i, resp.StatusCode)
		}
	}
	return n
}
