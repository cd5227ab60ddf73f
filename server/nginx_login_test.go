package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"text/template"
	"time"

	"github.com/sluicehq/sluice/guard/notify"
	"github.com/sluicehq/sluice/internal/testing/testserver"
	"github.com/sluicehq/sluice/wire"
)

// nginxLoginConf puts nginx in front of a login form: each POST /login
// begins an attempt of the login rule "web" through forward-auth, with the
// username the form carries (?user=), and passes the ticket and the
// username on to the application, which checks the password and reports
// the outcome to sluice. Denials (403 from the subrequest) become 429.
// It is the http block of testserver.NginxConf.
const nginxLoginConf = `  access_log off;

  server {
    listen 127.0.0.1:{{.Port}};

    location = /login {
      # A subrequest has no query of its own, but shares the variables
      # of its request: the username goes to sluice through $login_user.
      set $login_user $arg_user;
      auth_request /_sluice_login;
      auth_request_set $sluice_ticket $upstream_http_x_sluice_ticket;
      auth_request_set $sluice_retry $upstream_http_retry_after;
      proxy_set_header X-Sluice-Ticket $sluice_ticket;
      proxy_set_header X-Sluice-User $arg_user;
      proxy_set_header X-Real-IP $remote_addr;
      error_page 403 = @denied;
      proxy_pass {{.Upstream}};
    }

    location = /_sluice_login {
      internal;
      proxy_pass {{.Sluice}}/v1/auth?login=web&deny_status=403;
      proxy_pass_request_body off;
      proxy_set_header Content-Length "";
      proxy_set_header X-Sluice-User $login_user;
      proxy_set_header X-Forwarded-For $remote_addr;
    }

    location @denied {
      add_header Retry-After $sluice_retry always;
      default_type text/plain;
      return 429 "too many attempts\n";
    }
  }
`

// nginxLoginRules are the rules of TestNginxLoginAttack, with a webhook
// on the jail at HOOK.
const nginxLoginRules = `rules:
  - name: api
    limits: ["1000/min"]
guard:
  jails:
    - name: logins
      max_failures: 5
      find_time: 10m
      ban_time: 1h
      notify:
        - {type: webhook, url: "HOOK", secret: ` + hookSecret + `}
admin:
  token: ` + adminToken + `
logins:
  - name: web
    per_ip_user: 5/15m
    per_ip: 30/h
    per_user: 20/h
    delay: 5ms
    max_delay: 40ms
    max_hold: 40ms
    jail: logins
`

// loginApp is the application behind nginx: it checks the password (the
// right one is "correct") and reports the outcome with the ticket nginx
// passed on, as an application in any language would.
func loginApp(t *testing.T, sluice string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := wire.LoginRequest{Login: "web", User: r.Header.Get("X-Sluice-User"), Address: r.Header.Get("X-Real-IP"), Ticket: r.Header.Get("X-Sluice-Ticket")}
		ok := r.Header.Get("X-Password") == "correct"
		path := map[bool]string{true: "/v1/login/succeed", false: "/v1/login/fail"}[ok]
		b, _ := json.Marshal(req)
		resp, err := http.Post(sluice+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Errorf("reporting the outcome: %v", err)
			http.Error(w, "sluice unreachable", http.StatusBadGateway)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("POST %s %s = %d %s", path, b, resp.StatusCode, body)
		}
		if !ok {
			http.Error(w, "wrong username or password", http.StatusUnauthorized)
			return
		}
		fmt.Fprintln(w, "welcome")
	}))
}

// TestNginxLoginAttack runs a login attack through nginx and forward-auth:
// a credential-stuffing botnet across a /16 against one user, one address
// against many users, and the real user from her known-good address
// logging in throughout. The attack is slowed, then refused, then banned;
// the real user is never refused; the jail's webhook and the audit trail
// see every ban exactly once.
func TestNginxLoginAttack(t *testing.T) {
	hook := newHookReceiver(t, false)
	s, _ := newService(t, strings.Replace(nginxLoginRules, "HOOK", hook.URL, 1))
	sluice := httptest.NewServer(s.Handler())
	t.Cleanup(sluice.Close)
	app := loginApp(t, sluice.URL)
	t.Cleanup(app.Close)
	tmpl := template.Must(template.New("nginx").Parse(nginxLoginConf))
	base := testserver.StartNginx(t, func(dir string, port int) string {
		var conf strings.Builder
		tmpl.Execute(&conf, map[string]any{"Dir": dir, "Port": port, "Upstream": app.URL, "Sluice": sluice.URL})
		return testserver.NginxConf(dir, conf.String())
	})
	client := &http.Client{Timeout: 5 * time.Second}
	var slowed atomic.Int64
	login := func(user, ip, password string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+"/login?user="+user, nil)
		req.Header.Set("X-Forwarded-For", ip)
		req.Header.Set("X-Password", password)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if time.Since(start) >= 5*time.Millisecond {
			slowed.Add(1)
		}
		return resp.StatusCode
	}
	const alice, home = "alice", "192.0.2.10"
	if code := login(alice, home, "correct"); code != http.StatusOK {
		t.Fatalf("alice's first login = %d, want 200", code)
	}
	codes := map[string]map[int]int{"botnet": {}, "sprayer": {}}
	for round := range 10 {
		for i := range 20 { // the botnet: 200 addresses of 10.1.0.0/16 on alice
			codes["botnet"][login(alice, fmt.Sprintf("10.1.%d.%d", round, i+1), "guess")]++
		}
		for i := range 20 { // one address against many users
			codes["sprayer"][login(fmt.Sprintf("user%d", round*20+i), "203.0.113.66", "123456")]++
		}
		if code := login(alice, home, "correct"); code != http.StatusOK {
			t.Fatalf("round %d: alice from her known-good address = %d, want 200", round, code)
		}
	}
	t.Logf("botnet %v, sprayer %v, slowed %d", codes["botnet"], codes["sprayer"], slowed.Load())
	if codes["botnet"][http.StatusUnauthorized] > 20 || codes["botnet"][http.StatusTooManyRequests] < 150 {
		t.Errorf("botnet answers %v: want at most the 20 failures per user to reach the password check, the rest refused", codes["botnet"])
	}
	if codes["sprayer"][http.StatusUnauthorized] > 5 || codes["sprayer"][http.StatusTooManyRequests] < 190 {
		t.Errorf("sprayer answers %v: want at most 5 failures (the jail's) to reach the password check", codes["sprayer"])
	}
	if slowed.Load() == 0 {
		t.Error("no attempt was slowed down by its delay")
	}
	bans, err := s.admin.Bans(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	banned := map[string]bool{}
	for _, b := range bans {
		banned[b.Key] = true
	}
	if !banned["203.0.113.66"] || banned[home] {
		t.Errorf("bans %+v: want the sprayer banned, never alice's address", bans)
	}
	waitFor(t, "a webhook per ban", func() bool { return hook.count() >= len(bans) })
	if kinds := hook.kinds(t); len(kinds) != len(bans) || slices.ContainsFunc(kinds, func(k notify.Kind) bool { return k != notify.Ban }) {
		t.Errorf("webhook events %v for %d bans, want one ban event each", kinds, len(bans))
	}
	trail := audit(t, s, "")
	audited := map[string]int{}
	for _, e := range trail.Entries {
		if e.Kind == notify.Ban {
			audited[e.Key]++
		}
	}
	for key := range banned {
		if audited[key] != 1 {
			t.Errorf("the audit trail has %d bans of %s, want 1", audited[key], key)
		}
	}
	if len(audited) != len(banned) {
		t.Errorf("the audit trail bans %v, the registry %v", audited, banned)
	}
}
