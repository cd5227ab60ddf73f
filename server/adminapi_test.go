package server

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/server/admin"
	"github.com/sluicehq/sluice/wire"
)

const adminToken = "test-token-0123456789"

// adminDo sends an admin request with the given Authorization value.
func adminDo(t *testing.T, h http.Handler, method, path, body, authz string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if authz != "" {
		r.Header.Set("Authorization", authz)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestAdminAuth(t *testing.T) {
	s, _ := newService(t, serviceConfig)
	h := s.AdminHandler()
	if h == nil {
		t.Fatal("AdminHandler() = nil with a token configured")
	}
	const unauthorized = `{"type":"about:blank","title":"Unauthorized","status":401,"detail":"unauthorized","error":"unauthorized"}` + "\n"
	tests := []struct {
		name, method, path, authz string
		want                      int
	}{
		{"no token", "GET", "/admin/api/bans", "", 401},
		{"wrong token", "GET", "/admin/api/bans", "Bearer test-token-0123456788", 401},
		{"prefix of the token", "GET", "/admin/api/bans", "Bearer test-token", 401},
		{"token plus more", "GET", "/admin/api/bans", "Bearer " + adminToken + "x", 401},
		{"empty bearer", "GET", "/admin/api/bans", "Bearer ", 401},
		{"other scheme", "GET", "/admin/api/bans", "Token " + adminToken, 401},
		{"unknown path without token", "GET", "/admin/secret", "", 401},
		{"mutation without token", "DELETE", "/admin/api/bans?jail=manual&key=x", "", 401},
		{"basic auth may not mutate without the CSRF header", "POST", "/admin/api/lists/deny", basic(adminToken), 403},
		{"bearer", "GET", "/admin/api/bans", "Bearer " + adminToken, 200},
		{"basic auth may read", "GET", "/admin/", basic(adminToken), 200},
		{"unknown path with token", "GET", "/admin/secret", "Bearer " + adminToken, 404},
		{"profile without token", "GET", "/admin/debug/pprof/heap", "", 401},
		{"profile", "GET", "/admin/debug/pprof/heap", "Bearer " + adminToken, 200},
		{"goroutines", "GET", "/admin/debug/pprof/goroutine?debug=1", "Bearer " + adminToken, 200},
		{"cpu profile", "GET", "/admin/debug/pprof/profile?seconds=1", "Bearer " + adminToken, 200},
		{"unknown profile", "GET", "/admin/debug/pprof/nothing", "Bearer " + adminToken, 404},
	}
	for _, tt := range tests {
		w := adminDo(t, h, tt.method, tt.path, `{"entry":"10.0.0.1"}`, tt.authz)
		if w.Code != tt.want {
			t.Errorf("%s: %s %s = %d, want %d", tt.name, tt.method, tt.path, w.Code, tt.want)
		}
		if tt.want == 401 && (w.Body.String() != unauthorized || w.Header().Get("WWW-Authenticate") == "") {
			t.Errorf("%s: 401 body %q, WWW-Authenticate %q; want %q and a challenge", tt.name, w.Body, w.Header().Get("WWW-Authenticate"), unauthorized)
		}
	}
	if lists, _ := s.admin.List("deny"); slices.Contains(lists, banEntry("10.0.0.1")) {
		t.Error("an unauthorized request edited the deny list")
	}

	off, _ := newService(t, "rules: [{name: a, limits: [\"1/s\"]}]\n")
	if off.AdminHandler() != nil {
		t.Error("AdminHandler() != nil without a token: the admin API must be off")
	}
}

func basic(password string) string {
	r := httptest.NewRequest("GET", "/", nil)
	r.SetBasicAuth("admin", password)
	return r.Header.Get("Authorization")
}

func TestAdminAPI(t *testing.T) {
	s, _ := newService(t, serviceConfig)
	h, fa := s.AdminHandler(), s.Handler()
	bearer := "Bearer " + adminToken
	call := func(method, path, body string, want int) *httptest.ResponseRecorder {
		t.Helper()
		w := adminDo(t, h, method, path, body, bearer)
		if w.Code != want {
			t.Fatalf("%s %s %s = %d %s, want %d", method, path, body, w.Code, w.Body, want)
		}
		return w
	}

	// Ban by hand: forward-auth refuses the address, the list shows it.
	call("POST", "/admin/api/bans", `{"jail":"manual","key":"203.0.113.9","duration":"1h","reason":"scraping"}`, 201)
	if w := auth(t, fa, "", "203.0.113.9"); w.Code != http.StatusForbidden {
		t.Errorf("banned address = %d, want 403", w.Code)
	}
	var bans []wire.Ban
	if err := json.Unmarshal(call("GET", "/admin/api/bans", "", 200).Body.Bytes(), &bans); err != nil || len(bans) != 1 ||
		bans[0].Key != "203.0.113.9" || bans[0].Reason != "scraping" || bans[0].Until.Sub(bans[0].Since).Round(1e9).String() != "1h0m0s" {
		t.Fatalf("bans = %+v, %v; want the manual ban of 1h", bans, err)
	}
	call("DELETE", "/admin/api/bans?jail=manual&key=203.0.113.9", "", 204)
	if w := auth(t, fa, "", "203.0.113.9"); w.Code != http.StatusOK {
		t.Errorf("lifted address = %d, want 200", w.Code)
	}
	call("POST", "/admin/api/bans", `{"jail":"nope","key":"x"}`, 404)
	call("POST", "/admin/api/bans", `{"jail":"manual","key":"x","duration":"forever"}`, 400)
	call("POST", "/admin/api/bans", `{"jail":"manual"}`, 400)
	call("POST", "/admin/api/bans", `{"jail":"manual","key":"x","extra":1}`, 400)
	call("POST", "/admin/api/bans", `{"jail":"manual","key":"`+strings.Repeat("x", 20<<10)+`"}`, 413)

	// Lists.
	call("POST", "/admin/api/lists/deny", `{"entry":"203.0.113.0/24"}`, 204)
	if w := auth(t, fa, "", "203.0.113.77"); w.Code != http.StatusForbidden {
		t.Errorf("deny-listed by admin = %d, want 403", w.Code)
	}
	var lists struct{ Entries []string }
	_ = json.Unmarshal(call("GET", "/admin/api/lists/deny", "", 200).Body.Bytes(), &lists)
	if got := strings.Join(lists.Entries, " "); got != "198.51.100.0/24 203.0.113.0/24" {
		t.Errorf("deny list = %q, want both networks", got)
	}
	call("DELETE", "/admin/api/lists/deny?entry=203.0.113.0/24", "", 204)
	if w := auth(t, fa, "", "203.0.113.77"); w.Code != http.StatusOK {
		t.Errorf("after removal = %d, want 200", w.Code)
	}
	call("POST", "/admin/api/lists/allow", `{"entry":"not an address"}`, 400)
	call("GET", "/admin/api/lists/other", "", 404)

	// Edits outlive a reload of the file: an entry added, and an entry
	// of the file removed.
	call("POST", "/admin/api/lists/deny", `{"entry":"key:mallory"}`, 204)
	call("DELETE", "/admin/api/lists/deny?entry=198.51.100.0/24", "", 204)
	c, err := config.Parse("test.yaml", []byte(serviceConfig))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(c); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(call("GET", "/admin/api/lists/deny", "", 200).Body.Bytes(), &lists)
	if got := strings.Join(lists.Entries, " "); got != "key:mallory" {
		t.Errorf("deny list after a reload = %q, want the admin's edits kept (key:mallory, 198.51.100.0/24 removed)", got)
	}
	call("POST", "/admin/api/lists/deny", `{"entry":"198.51.100.0/24"}`, 204)
	call("DELETE", "/admin/api/lists/deny?entry=key:mallory", "", 204)

	// Rules, peek (which takes nothing) and denials.
	var rules []admin.RuleView
	_ = json.Unmarshal(call("GET", "/admin/api/rules", "", 200).Body.Bytes(), &rules)
	if len(rules) != 2 || rules[1].Name != "login" || rules[1].Limits[0] != "2/min" || rules[1].Jails[0] != "abuse" {
		t.Errorf("rules = %+v", rules)
	}
	for range 4 {
		auth(t, fa, "", "203.0.113.5")
	}
	var d admin.Decision
	for range 2 {
		_ = json.Unmarshal(call("POST", "/admin/api/peek", `{"rule":"api","key":"203.0.113.6"}`, 200).Body.Bytes(), &d)
	}
	if !d.Allowed || d.Remaining != 2 {
		t.Errorf("peek = %+v, want allowed with 2 remaining after it (peeks take nothing)", d)
	}
	call("POST", "/admin/api/peek", `{"rule":"nope","key":"k"}`, 404)
	var denials []admin.Denial
	_ = json.Unmarshal(call("GET", "/admin/api/denials", "", 200).Body.Bytes(), &denials)
	if len(denials) != 1 || denials[0].Key != "203.0.113.5" || denials[0].Rule != "api" {
		t.Errorf("denials = %+v, want one of 203.0.113.5 under api", denials)
	}
}

// TestAdminSession signs in as the dashboard does and checks what the
// session cookie may do: read, and change only with the CSRF header from
// the page's own origin.
func TestAdminSession(t *testing.T) {
	s, _ := newService(t, serviceConfig)
	h := s.AdminHandler()
	send := func(method, path, body string, headers ...string) *httptest.ResponseRecorder {
		t.Helper()
		r := httptest.NewRequest(method, "http://admin.test"+path, strings.NewReader(body))
		for i := 0; i+1 < len(headers); i += 2 {
			r.Header.Set(headers[i], headers[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	const form = "application/x-www-form-urlencoded"
	if w := send("GET", "/admin/", "", "Sec-Fetch-Mode", "navigate"); w.Code != 303 || w.Header().Get("Location") != "/admin/login" {
		t.Errorf("GET /admin/ without a session = %d to %q, want 303 to /admin/login", w.Code, w.Header().Get("Location"))
	}
	if w := send("GET", "/admin/login", ""); w.Code != 200 || !strings.Contains(w.Body.String(), `name="token"`) ||
		!strings.Contains(w.Header().Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Errorf("login page = %d, CSP %q", w.Code, w.Header().Get("Content-Security-Policy"))
	}
	if w := send("GET", "/admin/static/uplot.min.js", ""); w.Code != 200 || w.Body.Len() < 10_000 {
		t.Errorf("the embedded chart library = %d, %d bytes", w.Code, w.Body.Len())
	}
	tests := []struct {
		name    string
		body    string
		headers []string
		want    int
	}{
		{"wrong token", "token=nope", []string{"Content-Type", form}, 401},
		{"from another site", "token=" + adminToken, []string{"Content-Type", form, "Sec-Fetch-Site", "cross-site"}, 403},
		{"from another origin", "token=" + adminToken, []string{"Content-Type", form, "Origin", "https://evil.test"}, 403},
		{"right token", "token=" + adminToken, []string{"Content-Type", form, "Origin", "http://admin.test", "Sec-Fetch-Site", "same-origin"}, 303},
	}
	var cookie string
	for _, tt := range tests {
		w := send("POST", "/admin/login", tt.body, tt.headers...)
		if w.Code != tt.want {
			t.Errorf("login %s = %d, want %d", tt.name, w.Code, tt.want)
		}
		if c := w.Header().Get("Set-Cookie"); c != "" {
			if tt.want != 303 {
				t.Errorf("login %s set a cookie", tt.name)
			}
			cookie = strings.Split(c, ";")[0]
			for _, attr := range []string{"HttpOnly", "SameSite=Strict", "Path=/admin/"} {
				if !strings.Contains(c, attr) {
					t.Errorf("session cookie %q lacks %s", c, attr)
				}
			}
		}
	}
	if cookie == "" || strings.Contains(cookie, adminToken) {
		t.Fatalf("session cookie %q: want one, without the token", cookie)
	}
	page := send("GET", "/admin/", "", "Cookie", cookie)
	body := page.Body.String()
	_, after, _ := strings.Cut(body, `<meta name="sluice-csrf" content="`)
	csrf, _, _ := strings.Cut(after, `"`)
	if page.Code != 200 || csrf == "" || strings.Contains(body, adminToken) || !strings.Contains(page.Header().Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("dashboard = %d, CSRF %q, CSP %q; want the page, its CSRF value, no token", page.Code, csrf, page.Header().Get("Content-Security-Policy"))
	}
	edits := []struct {
		name    string
		headers []string
		want    int
	}{
		{"no CSRF header", []string{"Cookie", cookie}, 403},
		{"wrong CSRF value", []string{"Cookie", cookie, "X-Sluice-CSRF", csrf + "x"}, 403},
		{"CSRF value from another origin", []string{"Cookie", cookie, "X-Sluice-CSRF", csrf, "Origin", "https://evil.test"}, 403},
		{"CSRF value of Basic on the cookie", []string{"Cookie", cookie, "X-Sluice-CSRF", "x"}, 403},
		{"forged cookie", []string{"Cookie", admin.SessionCookie + "=99999999999.AAAA", "X-Sluice-CSRF", csrf}, 401},
		{"expired cookie", []string{"Cookie", admin.SessionCookie + "=1.AAAA", "X-Sluice-CSRF", csrf}, 401},
		{"from the page", []string{"Cookie", cookie, "X-Sluice-CSRF", csrf, "Origin", "http://admin.test", "Sec-Fetch-Site", "same-origin"}, 204},
	}
	for _, tt := range edits {
		if w := send("POST", "/admin/api/lists/deny", `{"entry":"203.0.113.50"}`, tt.headers...); w.Code != tt.want {
			t.Errorf("edit with %s = %d %s, want %d", tt.name, w.Code, w.Body, tt.want)
		}
	}
	if w := send("GET", "/admin/api/bans", "", "Cookie", cookie); w.Code != 200 {
		t.Errorf("GET bans with the session = %d, want 200", w.Code)
	}
	if w := send("POST", "/admin/logout", "", "Cookie", cookie, "X-Sluice-CSRF", csrf); w.Code != 204 || !strings.Contains(w.Header().Get("Set-Cookie"), "Max-Age=0") {
		t.Errorf("logout = %d, Set-Cookie %q", w.Code, w.Header().Get("Set-Cookie"))
	}
	// A new token, by a reload, ends the sessions of the old one.
	c, err := config.Parse("test.yaml", []byte(strings.Replace(serviceConfig, adminToken, "another-token-0123456789", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(c); err != nil {
		t.Fatal(err)
	}
	if w := send("GET", "/admin/api/bans", "", "Cookie", cookie); w.Code != 401 {
		t.Errorf("a session of the old token after a reload = %d, want 401", w.Code)
	}
}

// TestListEditsBound checks that the edits kept for reloads are one per
// entry and at most maxEdits.
func TestListEditsBound(t *testing.T) {
	var es listEdits
	for i := range maxEdits {
		e := listEdit{list: "deny", entry: guard.KeyEntry(fmt.Sprintf("k%d", i)), add: true}
		if err := es.room(e); err != nil {
			t.Fatalf("edit %d: %v", i, err)
		}
		es.record(e)
	}
	again := listEdit{list: "deny", entry: guard.KeyEntry("k0")}
	if err := es.room(again); err != nil {
		t.Errorf("editing an entry again at the bound: %v, want room", err)
	}
	es.record(again)
	if len(es) != maxEdits || es[len(es)-1] != again {
		t.Errorf("%d kept, last %+v; want %d, the edit replaced and last", len(es), es[len(es)-1], maxEdits)
	}
	if err := es.room(listEdit{list: "deny", entry: guard.KeyEntry("one-more"), add: true}); err == nil {
		t.Errorf("edit beyond %d: no error", maxEdits)
	}
}

// TestAdminWayIn: without credentials, a browser opening the dashboard
// gets the sign-in page and anything else a 401 challenge (a script, a
// fetch, a wallboard that asks for it with ?auth=basic); with Basic or
// Bearer credentials, the dashboard. The read-only token views the
// dashboard and the API, marked read-only, and changes nothing.
func TestAdminWayIn(t *testing.T) {
	const readOnly = "read-only-token-0123456789"
	s, _ := newService(t, strings.Replace(serviceConfig, "admin:\n", "admin:\n  read_only_token: "+readOnly+"\n", 1))
	h := s.AdminHandler()
	basic := func(tok string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+tok)) }
	tests := []struct {
		name, method, path string
		headers            []string
		want               int
		body               string // in the answer
	}{
		{"browser opens the page", "GET", "/admin/", []string{"Sec-Fetch-Mode", "navigate", "Accept", "text/html"}, 303, ""},
		{"old browser opens the page", "GET", "/admin/", []string{"Accept", "text/html,*/*"}, 303, ""},
		{"curl", "GET", "/admin/", []string{"Accept", "*/*"}, 401, "unauthorized"},
		{"a page's fetch, asked for Bearer alone", "GET", "/admin/api/rules", []string{"Sec-Fetch-Mode", "cors"}, 401, "unauthorized"},
		{"wallboard asks for the challenge", "GET", "/admin/?auth=basic", []string{"Sec-Fetch-Mode", "navigate"}, 401, "unauthorized"},
		{"Basic", "GET", "/admin/?auth=basic", []string{"Sec-Fetch-Mode", "navigate", "Authorization", basic(adminToken)}, 200, `id="rules"`},
		{"Bearer", "GET", "/admin/", []string{"Authorization", "Bearer " + adminToken}, 200, `id="rules"`},
		{"read-only Basic", "GET", "/admin/", []string{"Authorization", basic(readOnly)}, 200, `class="read-only"`},
		{"read-only reads", "GET", "/admin/api/bans", []string{"Authorization", "Bearer " + readOnly}, 200, "["},
		{"read-only bans", "POST", "/admin/api/bans", []string{"Authorization", "Bearer " + readOnly}, 403, "read-only"},
		{"read-only lifts", "DELETE", "/admin/api/bans?key=203.0.113.7", []string{"Authorization", "Bearer " + readOnly}, 403, "read-only"},
		{"read-only edits a list", "POST", "/admin/api/lists/deny", []string{"Authorization", "Bearer " + readOnly}, 403, "read-only"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(tt.method, "http://admin.test"+tt.path, strings.NewReader(`{"jail":"manual","key":"203.0.113.7","entry":"203.0.113.7"}`))
		for i := 0; i+1 < len(tt.headers); i += 2 {
			r.Header.Set(tt.headers[i], tt.headers[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		challenge := w.Header().Get("WWW-Authenticate")
		wantBasic := tt.want == 401 && !strings.Contains(tt.name, "Bearer alone")
		if w.Code != tt.want || !strings.Contains(w.Body.String(), tt.body) || wantBasic != strings.Contains(challenge, "Basic realm=") ||
			(tt.want == 401) != strings.Contains(strings.Join(w.Header().Values("WWW-Authenticate"), ","), "Bearer realm=") {
			t.Errorf("%s: %s %s = %d, challenge %q, body %.200q; want %d with %q", tt.name, tt.method, tt.path, w.Code, challenge, w.Body, tt.want, tt.body)
		}
	}
	if bans, _ := s.admin.Bans(t.Context()); len(bans) != 0 {
		t.Errorf("the read-only token banned: %v", bans)
	}
}

// TestAdminSignInThrottled: an address that tries SignInFailures wrong
// tokens a minute is refused with 429 and a Retry-After, right token or
// wrong, on the login form and the API alike, until the limit lets it
// try again; another address is not held back; a right token never
// counts.
func TestAdminSignInThrottled(t *testing.T) {
	s, clk := newService(t, serviceConfig)
	h := s.AdminHandler()
	try := func(from, token string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "http://admin.test/admin/api/rules", nil)
		r.RemoteAddr = from + ":4242"
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for range 3 * admin.SignInFailures {
		if w := try("192.0.2.1", adminToken); w.Code != 200 {
			t.Fatalf("the right token = %d, want 200: right tokens must not count", w.Code)
		}
	}
	for i := range admin.SignInFailures {
		if w := try("192.0.2.9", "wrong-token-guess-"+strconv.Itoa(i)); w.Code != 401 {
			t.Fatalf("wrong token %d = %d, want 401", i, w.Code)
		}
	}
	w := try("192.0.2.9", adminToken)
	if w.Code != 429 || w.Header().Get("Retry-After") == "" {
		t.Errorf("the right token after %d wrong ones = %d, Retry-After %q; want 429 and a Retry-After", admin.SignInFailures, w.Code, w.Header().Get("Retry-After"))
	}
	form := httptest.NewRequest("POST", "http://admin.test/admin/login", strings.NewReader("token="+adminToken))
	form.RemoteAddr = "192.0.2.9:4242"
	form.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	fw := httptest.NewRecorder()
	h.ServeHTTP(fw, form)
	if fw.Code != 429 || !strings.Contains(fw.Body.String(), "Too many wrong tokens") {
		t.Errorf("the login form from the throttled address = %d, want 429 and a sign-in page that says why", fw.Code)
	}
	if w := try("192.0.2.10", adminToken); w.Code != 200 {
		t.Errorf("another address = %d, want 200", w.Code)
	}
	clk.Advance(time.Minute / admin.SignInFailures)
	if w := try("192.0.2.9", adminToken); w.Code != 200 {
		t.Errorf("the right token once the limit lets it try again = %d, want 200", w.Code)
	}
}
