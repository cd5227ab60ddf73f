package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/store/memory"
)

const password = "correct horse battery staple"

type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

type harness struct {
	t     *testing.T
	app   *app
	srv   *httptest.Server
	clock *clock
}

// start runs the app behind a real HTTP server on loopback. The test
// client plays a reverse proxy on 127.0.0.1: each simulated client's
// address travels in X-Forwarded-For, which the app trusts from loopback
// only.
func start(t *testing.T) *harness {
	t.Helper()
	c := &clock{}
	c.ns.Store(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC).UnixNano())
	store := memory.New(memory.Config{})
	t.Cleanup(func() { _ = store.Close() })
	a, err := newApp(store, appConfig{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
		Delay:          time.Millisecond, MaxDelay: 4 * time.Millisecond,
		Clock: c.now, AdminToken: "admin", Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.handler())
	t.Cleanup(srv.Close)
	return &harness{t: t, app: a, srv: srv, clock: c}
}

type reply struct {
	status int
	body   string
	header http.Header
}

func (h *harness) post(from, path string, form url.Values) reply {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-For", from)
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return reply{resp.StatusCode, strings.TrimSpace(string(body)), resp.Header}
}

func (h *harness) login(from, user, pw string, extra ...string) reply {
	h.t.Helper()
	f := url.Values{"username": {user}, "password": {pw}}
	for i := 0; i+1 < len(extra); i += 2 {
		f.Set(extra[i], extra[i+1])
	}
	return h.post(from, "/login", f)
}

// TestDictionaryAttackFromOneAddress: one address tries password after
// password on alice. It gets 5 tries on alice, then 429; trying other
// accounts, the jail bans it after 30 failures; alice, at home, is never
// bothered.
func TestDictionaryAttackFromOneAddress(t *testing.T) {
	h := start(t)
	const attacker, home = "198.51.100.66", "203.0.113.10"
	if r := h.login(home, "alice", password); r.status != 200 {
		t.Fatalf("alice at home: %v", r)
	}
	var got []int
	for i := range 8 {
		got = append(got, h.login(attacker, "alice", fmt.Sprintf("guess%d", i)).status)
	}
	if want := []int{401, 401, 401, 401, 401, 429, 429, 429}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("attacker on alice: statuses %v, want %v", got, want)
	}
	r := h.login(attacker, "alice", password)
	if r.status != 429 {
		t.Errorf("attacker with the right password after the limit: %v, want 429", r)
	}
	// The 429 is the login's, as httplimit writes one: problem details
	// naming its policy, a wait, and no fields of the per-address rule.
	var p httplimit.Problem
	if err := json.Unmarshal([]byte(r.body), &p); err != nil || r.header.Get("Content-Type") != "application/problem+json" ||
		p.Status != 429 || fmt.Sprint(p.ViolatedPolicies) != "[login]" || r.header.Get("Retry-After") == "" {
		t.Errorf("the login's 429: %s %q (%v), want problem details of the login's policy with Retry-After", r.header, r.body, err)
	}
	if f := r.header.Get("RateLimit"); f != "" {
		t.Errorf("the login's 429 carries another rule's fields: RateLimit: %s", f)
	}
	// Spreading over accounts: each gets 5, the jail bans at 30 failures.
	banned := 0
	for i := range 40 {
		if r := h.login(attacker, fmt.Sprintf("user%d", i/5), "guess"); r.status == http.StatusForbidden {
			banned++
		} else if r.status != 401 {
			t.Fatalf("attempt %d on user%d: %v", i, i/5, r)
		}
	}
	if banned != 15 { // 5 failures on alice + 25 here = 30: the 26th attempt here is refused
		t.Errorf("%d attempts refused by the ban, want 15", banned)
	}
	if r := h.post(attacker, "/invite", url.Values{"email": {"x@example.com"}}); r.status != http.StatusForbidden {
		t.Errorf("banned address on another page: %v, want 403", r)
	}
	if r := h.login(home, "alice", password); r.status != 200 {
		t.Errorf("alice at home during the attack: %v, want 200", r)
	}
	// The ban is listed and exported for the firewall.
	req, _ := http.NewRequest(http.MethodGet, h.srv.URL+"/admin/bans?format=nftables", nil)
	req.Header.Set("Authorization", "Bearer admin")
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "\t\t\t198.51.100.66/32 timeout") {
		t.Errorf("nftables export lacks the ban:\n%s", body)
	}
	// The ban lapses.
	h.clock.advance(20 * time.Minute)
	if r := h.login(attacker, "someone", "guess"); r.status != 401 {
		t.Errorf("after the ban: %v, want 401", r)
	}
}

// TestBotnetAgainstOneAccount: 60 addresses try alice once each. After
// 20 failures the account is under attack: the other bots are refused
// (and told a CAPTCHA would help), while alice, from the address she
// logged in from yesterday, still gets in.
func TestBotnetAgainstOneAccount(t *testing.T) {
	h := start(t)
	const home = "203.0.113.10"
	if r := h.login(home, "alice", password); r.status != 200 {
		t.Fatalf("alice yesterday: %v", r)
	}
	h.clock.advance(24 * time.Hour)
	counts := map[int]int{}
	for i := range 60 {
		r := h.login(fmt.Sprintf("198.18.%d.%d", i/250, i%250+1), "alice", "guess")
		counts[r.status]++
		if r.status == 429 && !strings.Contains(r.body, "captcha") {
			t.Errorf("bot %d refused without the CAPTCHA hint: %v", i, r)
		}
		if i%10 == 0 { // alice keeps logging in during the attack
			if r := h.login(home, "alice", password); r.status != 200 {
				t.Fatalf("alice at home after %d bots: %v, want 200", i, r)
			}
		}
	}
	if counts[401] != 20 || counts[429] != 40 || counts[200] != 0 {
		t.Errorf("bots got %v, want 20×401 then 40×429", counts)
	}
	// From a new address, alice must solve the CAPTCHA.
	if r := h.login("192.0.2.44", "alice", password); r.status != 429 {
		t.Errorf("alice from a new address, no CAPTCHA: %v, want 429", r)
	}
	if r := h.login("192.0.2.44", "alice", password, "captcha", "solved"); r.status != 200 {
		t.Errorf("alice from a new address with the CAPTCHA: %v, want 200", r)
	}
}

// TestSpammer: one address sends invitations. All get "invitation sent";
// only the first 5 an hour are sent. Another user is not affected.
func TestSpammer(t *testing.T) {
	h := start(t)
	for i := range 30 {
		r := h.post("198.51.100.9", "/invite", url.Values{"email": {fmt.Sprintf("victim%d@example.com", i)}})
		if r.status != 200 || r.body != "invitation sent" {
			t.Fatalf("invite %d: %v; a shadow ban must look like success", i, r)
		}
	}
	if got := h.app.sent.Load(); got != 5 {
		t.Errorf("invitations sent for the spammer = %d, want 5", got)
	}
	if r := h.post("203.0.113.10", "/invite", url.Values{"email": {"friend@example.com"}}); r.status != 200 || h.app.sent.Load() != 6 {
		t.Errorf("a real user's invite: %v, sent %d, want 200 and 6", r, h.app.sent.Load())
	}
	h.clock.advance(time.Hour)
	h.post("198.51.100.9", "/invite", url.Values{"email": {"later@example.com"}})
	if got := h.app.sent.Load(); got != 7 {
		t.Errorf("sent after an hour = %d, want 7", got)
	}
}

// TestNoUserEnumeration: wrong password and unknown user look the same,
// also once limited.
func TestNoUserEnumeration(t *testing.T) {
	h := start(t)
	for i := range 7 {
		real := h.login("198.51.100.1", "alice", "wrong")
		fake := h.login("198.51.100.2", "mallory-does-not-exist", "wrong")
		if real.status != fake.status || real.body != fake.body {
			t.Errorf("attempt %d: existing user %v, unknown user %v", i, real, fake)
		}
	}
}

// TestForgedForwardedFor: a client that writes its own X-Forwarded-For
// gains nothing: the proxy's appended hop is the one believed.
func TestForgedForwardedFor(t *testing.T) {
	h := start(t)
	for i := range 8 {
		// The attacker forges a new address each time; the proxy appends
		// the real one.
		r := h.login(fmt.Sprintf("10.%d.0.1, 198.51.100.66", i), "alice", "guess")
		if want := 401; i >= 5 {
			if r.status != 429 {
				t.Errorf("attempt %d: %v, want 429 (forged hops ignored)", i, r)
			}
		} else if r.status != want {
			t.Errorf("attempt %d: %v, want %d", i, r, want)
		}
	}
}

// TestBadInput: giant headers, bodies and odd usernames neither crash nor
// bypass anything.
func TestBadInput(t *testing.T) {
	h := start(t)
	if r := h.login("198.51.100.1", "\xff\xfe\x00", "x"); r.status != 401 {
		t.Errorf("non-UTF-8 username: %v, want 401", r)
	}
	if r := h.login("198.51.100.1", "bob", strings.Repeat("x", 10_000)); r.status != 401 && r.status != 400 {
		t.Errorf("huge body: %v, want 401 or 400", r)
	}
	if r := h.login("not-an-ip", "bob", "x"); r.status != 400 {
		t.Errorf("garbage forwarded hop: %v, want 400", r)
	}
	if r := h.login(strings.Repeat("1.2.3.4,", 2000)+"198.51.100.1", "bob", "x"); r.status != 401 {
		t.Errorf("giant forged X-Forwarded-For: %v, want 401", r)
	}
}

// admin sends an admin request editing a list.
func (h *harness) admin(method, list, entry, token string) int {
	h.t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+"/admin/lists/"+list+"?"+url.Values{"entry": {entry}}.Encode(), nil)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestListsAtRunTime: the admin freezes alice's account (a username on
// the deny list: even her password gets the answer of a wrong one, so the
// freeze reveals nothing), lets the office network fail as often as it
// likes, then thaws alice.
func TestListsAtRunTime(t *testing.T) {
	h := start(t)
	const office = "192.0.2.7"
	if got := h.admin(http.MethodPost, "deny", "key:alice", "wrong-token"); got != http.StatusForbidden {
		t.Fatalf("list edit without the token: %d, want 403", got)
	}
	for _, e := range []struct{ list, entry string }{{"deny", "key:alice"}, {"allow", "192.0.2.0/24"}} {
		if got := h.admin(http.MethodPost, e.list, e.entry, "admin"); got != http.StatusNoContent {
			t.Fatalf("add %s to %s: %d", e.entry, e.list, got)
		}
	}
	if got := h.admin(http.MethodPost, "deny", "not an entry", "admin"); got != http.StatusBadRequest {
		t.Errorf("bad entry: %d, want 400", got)
	}
	frozen, wrong := h.login("203.0.113.10", " Alice", password), h.login("203.0.113.11", "alice", "wrong")
	if frozen.status != 401 || frozen.status != wrong.status || frozen.body != wrong.body {
		t.Errorf("frozen alice with her password: %v; wrong password: %v; want the same 401", frozen, wrong)
	}
	for i := range 50 { // more than the per-address limits and the jail allow
		if r := h.login(office, "bob", "guess"); r.status != 401 {
			t.Fatalf("office attempt %d: %v, want 401 (allow-listed: never limited)", i, r)
		}
	}
	if got := h.admin(http.MethodDelete, "deny", "key:alice", "admin"); got != http.StatusNoContent {
		t.Fatalf("delete: %d", got)
	}
	if r := h.login("203.0.113.10", "alice", password); r.status != 200 {
		t.Errorf("thawed alice: %v, want 200", r)
	}
	if got := h.admin(http.MethodDelete, "allow", "192.0.2.0/24", "admin"); got != http.StatusNoContent {
		t.Fatalf("delete: %d", got)
	}
	codes := map[int]int{}
	for range 8 {
		codes[h.login(office, "bob", "guess").status]++
	}
	if codes[401] != 5 || codes[429] != 3 {
		t.Errorf("office off the allow list: %v, want 5×401 then 429s", codes)
	}
}
