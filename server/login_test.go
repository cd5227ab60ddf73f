package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/wire"
)

const loginConfig = `rules:
  - name: api
    limits: ["100/min"]
guard:
  jails:
    - {name: logins, max_failures: 6, find_time: 10m, ban_time: 1h}
logins:
  - name: web
    per_ip_user: 3/15m
    per_user: 5/h
    jail: logins
`

// loginCall posts a login call and decodes its 200 answer into out.
func loginCall(t *testing.T, h http.Handler, path string, body any, out any) {
	t.Helper()
	b, _ := json.Marshal(body)
	w := do(t, h, http.MethodPost, path, string(b))
	if w.Code != http.StatusOK {
		t.Fatalf("POST %s %s = %d %s", path, b, w.Code, w.Body)
	}
	if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
		t.Fatal(err)
	}
}

// attemptLogin begins an attempt and settles it; it returns begin's
// answer.
func attemptLogin(t *testing.T, h http.Handler, user, addr string, ok bool) wire.LoginResponse {
	t.Helper()
	req := wire.LoginRequest{Login: "web", User: user, Address: addr}
	var begin wire.LoginResponse
	loginCall(t, h, "/v1/login/begin", req, &begin)
	if begin.Allowed {
		req.Ticket = begin.Ticket
		var s wire.SettleResponse
		loginCall(t, h, map[bool]string{true: "/v1/login/succeed", false: "/v1/login/fail"}[ok], req, &s)
	}
	return begin
}

// TestLoginAPI runs the login construct over the HTTP API: failures slow
// an address down then stop it, a botnet puts the account under attack
// while its known-good address still gets in, and a ticket settles once.
func TestLoginAPI(t *testing.T) {
	s, _ := newService(t, loginConfig)
	h := s.Handler()
	attemptLogin(t, h, "alice", "192.0.2.1", true) // alice's own address
	var delays []float64
	for range 3 {
		delays = append(delays, attemptLogin(t, h, "bob", "203.0.113.9", false).Delay)
	}
	if delays[0] != 0 || delays[1] <= 0 || delays[2] <= delays[1] {
		t.Errorf("delays of 3 failures = %v, want 0, then growing", delays)
	}
	if a := attemptLogin(t, h, "bob", "203.0.113.9", false); a.Allowed || a.RetryAfter <= 0 {
		t.Errorf("4th failure of one address on one user = %+v, want denied with a wait", a)
	}
	for i := range 8 { // a botnet on alice
		attemptLogin(t, h, "alice", fmt.Sprintf("198.51.100.%d", i+1), false)
	}
	if a := attemptLogin(t, h, "alice", "198.51.100.200", false); a.Allowed || !a.Captcha {
		t.Errorf("alice under attack, a new address = %+v, want denied, asking a CAPTCHA", a)
	}
	if a := attemptLogin(t, h, "alice", "192.0.2.1", true); !a.Allowed || !a.KnownGood {
		t.Errorf("alice from her known-good address during the attack = %+v, want allowed", a)
	}

	var begin wire.LoginResponse
	req := wire.LoginRequest{Login: "web", User: "carol", Address: "192.0.2.50"}
	loginCall(t, h, "/v1/login/begin", req, &begin)
	req.Ticket = begin.Ticket
	for i := range 3 {
		var st wire.SettleResponse
		loginCall(t, h, "/v1/login/fail", req, &st)
		if st.Duplicate != (i > 0) {
			t.Errorf("fail %d of one ticket: duplicate %v, want %v", i, st.Duplicate, i > 0)
		}
	}
	for _, bad := range []string{
		`{"login":"nope","user":"a","address":"192.0.2.1"}`,
		`{"login":"web","user":"a","address":"not-an-ip"}`,
		`{"login":"web","user":"a","address":"192.0.2.1","ticket":"1.2"}`,
		`{"login":"web","user":"a","address":"192.0.2.1","ticket":"` + strings.Repeat("9", 30) + `"}`,
	} {
		path := "/v1/login/begin"
		if strings.Contains(bad, "ticket") {
			path = "/v1/login/fail"
		}
		if w := do(t, h, http.MethodPost, path, bad); w.Code != http.StatusBadRequest {
			t.Errorf("POST %s %s = %d %s, want 400", path, bad, w.Code, w.Body)
		}
	}
}
