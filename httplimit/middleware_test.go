package httplimit_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dunglas/httpsfv"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/testing/testclock"
)

func limiter(t *testing.T, s sluice.Store, c *testclock.Clock, action string, limits ...string) *sluice.Limiter {
	t.Helper()
	var ls []sluice.Limit
	for _, l := range limits {
		ls = append(ls, mustLimit(t, l))
	}
	lim, err := sluice.New(s, sluice.Config{Limits: ls, Action: action, Clock: c.Now})
	if err != nil {
		t.Fatalf("sluice.New: %v", err)
	}
	return lim
}

func mustLimit(t *testing.T, s string) sluice.Limit {
	t.Helper()
	l, err := sluice.ParseLimit(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func middleware(t *testing.T, c httplimit.Config) *httplimit.Middleware {
	t.Helper()
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	m, err := httplimit.New(c)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

// ok answers 200 and records the outcome it saw.
type recordingHandler struct {
	status  int
	last    httplimit.Outcome
	calls   int
	skipped int // side effects skipped for shadowed requests
}

func (h *recordingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.calls++
	h.last, _ = httplimit.OutcomeOf(r)
	if httplimit.Shadowed(r) {
		h.skipped++
	}
	if h.status != 0 {
		w.WriteHeader(h.status)
	}
	_, _ = w.Write([]byte("ok"))
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// rateLimitFields parses RateLimit and RateLimit-Policy with an
// independent structured-field parser and returns, per policy name, its
// parameters.
func rateLimitFields(t *testing.T, h http.Header) (policy, limit map[string]map[string]int64) {
	t.Helper()
	parse := func(field string) map[string]map[string]int64 {
		l, err := httpsfv.UnmarshalList(h.Values(field))
		if err != nil {
			t.Fatalf("%s %q: not a structured-field list: %v", field, h.Values(field), err)
		}
		out := map[string]map[string]int64{}
		for _, m := range l {
			it, ok := m.(httpsfv.Item)
			if !ok {
				t.Fatalf("%s member %v is not an item", field, m)
			}
			name, ok := it.Value.(string)
			if !ok {
				t.Fatalf("%s item %v is not a string", field, it.Value)
			}
			params := map[string]int64{}
			for _, k := range it.Params.Names() {
				v, _ := it.Params.Get(k)
				n, ok := v.(int64)
				if !ok {
					t.Fatalf("%s param %s=%v is not an integer", field, k, v)
				}
				params[k] = n
			}
			out[name] = params
		}
		return out
	}
	return parse("RateLimit-Policy"), parse("RateLimit")
}

func TestEnforce(t *testing.T) {
	c := testclock.New(testclock.T0)
	lim := limiter(t, newStore(t), c, "api", "3/min")
	h := &recordingHandler{}
	m := middleware(t, httplimit.Config{Rules: []httplimit.Rule{{Name: "api", Limiter: lim}}, AttachOutcome: true})
	srv := m.Handler(h)
	for i := range 3 {
		w := serve(srv, request("203.0.113.7:1"))
		if w.Code != http.StatusOK {
			t.Fatalf("request %d: status = %d, want 200", i, w.Code)
		}
		policy, limit := rateLimitFields(t, w.Header())
		if p := policy["api"]; p["q"] != 3 || p["w"] != 60 {
			t.Errorf("request %d: RateLimit-Policy = %v, want q=3 w=60", i, policy)
		}
		if l := limit["api"]; l["r"] != int64(2-i) || l["t"] != int64(20*(i+1)) {
			t.Errorf("request %d: RateLimit = %v, want r=%d t=%d", i, limit, 2-i, 20*(i+1))
		}
		if h.last.Decision.Remaining != 2-i || h.last.Policy != "api" || h.last.Denied {
			t.Errorf("request %d: handler saw %+v", i, h.last)
		}
	}
	c.Advance(500 * time.Millisecond)
	w := serve(srv, request("203.0.113.7:1"))
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("4th request: status = %d, want 429", w.Code)
	}
	if got := w.Header().Get("Retry-After"); got != "20" { // 19.5 s rounded up
		t.Errorf("Retry-After = %q, want 20", got)
	}
	if got := w.Header().Get("Content-Type"); got != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", got)
	}
	var p httplimit.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("body %q: %v", w.Body, err)
	}
	if p.Status != 429 || p.Type != httplimit.ProblemType || len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "api" {
		t.Errorf("problem = %+v, want 429 quota-exceeded violating api", p)
	}
	_, limit := rateLimitFields(t, w.Header())
	if l := limit["api"]; l["r"] != 0 {
		t.Errorf("RateLimit on 429 = %v, want r=0", limit)
	}
	if h.calls != 3 {
		t.Errorf("handler ran %d times, want 3", h.calls)
	}
	// Another client is not affected.
	if w := serve(srv, request("203.0.113.8:1")); w.Code != http.StatusOK {
		t.Errorf("other client: status = %d, want 200", w.Code)
	}
}

func TestLegacyFieldsAndNone(t *testing.T) {
	c := testclock.New(testclock.T0)
	s := newStore(t)
	m := middleware(t, httplimit.Config{Fields: httplimit.FieldsDraftAndLegacy, Rules: []httplimit.Rule{{Limiter: limiter(t, s, c, "a", "10/min")}}})
	w := serve(m.Handler(&recordingHandler{}), request("203.0.113.7:1"))
	for k, want := range map[string]string{"X-Ratelimit-Limit": "10", "X-Ratelimit-Remaining": "9", "X-Ratelimit-Reset": "6", "Ratelimit": `"default";r=9;t=6`} {
		if got := w.Header().Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	m = middleware(t, httplimit.Config{Fields: httplimit.FieldsNone, Rules: []httplimit.Rule{{Limiter: limiter(t, s, c, "b", "1/min")}}})
	serve(m.Handler(&recordingHandler{}), request("203.0.113.7:1"))
	w = serve(m.Handler(&recordingHandler{}), request("203.0.113.7:1"))
	if w.Code != 429 || w.Header().Get("Retry-After") != "60" || w.Header().Get("RateLimit") != "" {
		t.Errorf("FieldsNone: status %d, headers %v; want 429, Retry-After 60 and no RateLimit", w.Code, w.Header())
	}
}

// TestRuleFields: a rule's Fields choose the form of the fields of the
// responses whose binding decision is that rule's — the X-RateLimit-*
// trio beside the draft's, or draft -07's or -06's instead — and another
// rule's responses keep the middleware's.
func TestRuleFields(t *testing.T) {
	for _, tt := range []struct {
		fields httplimit.RuleFields
		want   map[string]string
	}{
		{httplimit.RuleFieldsLegacy, map[string]string{"X-Ratelimit-Limit": "5", "Ratelimit": `"v1";r=4;t=12`}},
		{httplimit.RuleFieldsDraft07, map[string]string{"Ratelimit-Policy": "5;w=60", "Ratelimit": "limit=5, remaining=4, reset=12"}},
		{httplimit.RuleFieldsDraft06, map[string]string{"Ratelimit-Policy": "5;w=60", "Ratelimit-Limit": "5", "Ratelimit-Remaining": "4", "Ratelimit-Reset": "12", "Ratelimit": ""}},
	} {
		c := testclock.New(testclock.T0)
		s := newStore(t)
		m := middleware(t, httplimit.Config{Rules: []httplimit.Rule{
			{Name: "v1", Limiter: limiter(t, s, c, "l", "5/min"), Fields: tt.fields, Match: func(r *http.Request) bool { return r.URL.Path == "/v1" }},
			{Name: "new", Limiter: limiter(t, s, c, "n", "100/min"), Match: func(r *http.Request) bool { return r.URL.Path != "/v1" }},
		}})
		v1 := request("203.0.113.7:1")
		v1.URL.Path = "/v1"
		w := serve(m.Handler(&recordingHandler{}), v1)
		for k, want := range tt.want {
			if got := w.Header().Get(k); got != want {
				t.Errorf("Fields %d: %s = %q, want %q", tt.fields, k, got, want)
			}
		}
		if tt.fields == httplimit.RuleFieldsDraft07 {
			if _, err := httpsfv.UnmarshalDictionary(w.Header().Values("RateLimit")); err != nil {
				t.Errorf("draft-07 RateLimit %q is not a structured-field dictionary: %v", w.Header().Get("RateLimit"), err)
			}
		}
		if w := serve(m.Handler(&recordingHandler{}), request("203.0.113.7:1")); w.Header().Get("X-RateLimit-Limit") != "" || !strings.HasPrefix(w.Header().Get("RateLimit"), `"new"`) {
			t.Errorf("Fields %d: the other rule's response %v, want the middleware's fields", tt.fields, w.Header())
		}
	}
}

func TestModes(t *testing.T) {
	for _, tt := range []struct {
		mode         httplimit.Mode
		wantStatus   int
		wantCalls    int
		wantSkipped  int
		wantLog      string
		wantOutcomes func(o httplimit.Outcome) bool
	}{
		{httplimit.Enforce, 429, 1, 0, "httplimit: denied", func(o httplimit.Outcome) bool { return !o.DryRun && !o.Shadowed }},
		{httplimit.DryRun, 200, 2, 0, "would deny", func(o httplimit.Outcome) bool { return o.DryRun && !o.Shadowed }},
		{httplimit.Shadow, 200, 2, 1, "shadow-denied", func(o httplimit.Outcome) bool { return o.Shadowed && !o.DryRun }},
	} {
		t.Run(tt.mode.String(), func(t *testing.T) {
			c := testclock.New(testclock.T0)
			var logs bytes.Buffer
			h := &recordingHandler{}
			m := middleware(t, httplimit.Config{
				Logger: slog.New(slog.NewTextHandler(&logs, nil)),
				Rules:  []httplimit.Rule{{Name: "invite", Limiter: limiter(t, newStore(t), c, "invite", "1/h"), Mode: tt.mode}},
			})
			srv := m.Handler(h)
			serve(srv, request("203.0.113.7:1"))
			w := serve(srv, request("203.0.113.7:1"))
			if w.Code != tt.wantStatus || h.calls != tt.wantCalls || h.skipped != tt.wantSkipped {
				t.Errorf("status %d, calls %d, skipped %d; want %d, %d, %d", w.Code, h.calls, h.skipped, tt.wantStatus, tt.wantCalls, tt.wantSkipped)
			}
			if tt.mode != httplimit.Enforce && !tt.wantOutcomes(h.last) {
				t.Errorf("handler saw %+v", h.last)
			}
			if tt.mode != httplimit.Enforce && w.Header().Get("RateLimit") != "" {
				t.Errorf("%v rule advertised RateLimit %q: it must not tell the client", tt.mode, w.Header().Get("RateLimit"))
			}
			if !strings.Contains(logs.String(), tt.wantLog) || !strings.Contains(logs.String(), "key=203.0.113.7") {
				t.Errorf("log %q lacks %q and the key", logs.String(), tt.wantLog)
			}
		})
	}
}

// TestDenialLogThrottled floods two rules with denials in a synctest
// bubble (a still clock): each policy logs its burst of 10 lines, no
// more, and the first line a second later counts those left out.
func TestDenialLogThrottled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := testclock.New(testclock.T0)
		var logs bytes.Buffer
		s := newStore(t)
		m := middleware(t, httplimit.Config{
			Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			Rules: []httplimit.Rule{
				{Name: "api", Limiter: limiter(t, s, c, "api", "1/h"), Match: httplimit.PathPrefix("/api/")},
				{Name: "trial", Limiter: limiter(t, s, c, "trial", "1/h"), Match: httplimit.PathPrefix("/trial/"), Mode: httplimit.DryRun},
			},
		})
		srv := m.Handler(&recordingHandler{})
		for range 1000 {
			serve(srv, httptest.NewRequest("GET", "/api/x", nil))
			serve(srv, httptest.NewRequest("GET", "/trial/x", nil))
		}
		denied, wouldDeny := strings.Count(logs.String(), "httplimit: denied"), strings.Count(logs.String(), "would deny")
		if denied != 10 || wouldDeny != 10 {
			t.Errorf("1000 requests: %d denial and %d dry-run lines, want 10 each (the burst)", denied, wouldDeny)
		}
		time.Sleep(time.Second) // fake time: one more line, which tells
		logs.Reset()
		serve(srv, httptest.NewRequest("GET", "/api/x", nil))
		if !strings.Contains(logs.String(), "suppressed=989") {
			t.Errorf("line after a second = %q, want it to count the 989 left out", logs.String())
		}
	})
}

// TestCountFailuresResetOnSuccess drives a login endpoint: only 401s
// count, and a success forgets the actor's failures.
func TestCountFailuresResetOnSuccess(t *testing.T) {
	c := testclock.New(testclock.T0)
	status := http.StatusUnauthorized
	login := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) })
	m := middleware(t, httplimit.Config{Rules: []httplimit.Rule{{
		Name:    "login",
		Limiter: limiter(t, newStore(t), c, "login", "3/h"),
		Count:   httplimit.Status(http.StatusUnauthorized),
		Reset:   httplimit.Successful,
	}}})
	srv := m.Handler(login)
	try := func(want int) {
		t.Helper()
		if w := serve(srv, request("203.0.113.7:1")); w.Code != want {
			t.Fatalf("status = %d, want %d", w.Code, want)
		}
	}
	try(401)
	try(401)
	status = http.StatusOK // the user remembers the password
	try(200)
	status = http.StatusUnauthorized
	try(401) // the failures before the success no longer count
	try(401)
	try(401)
	try(429)
	// Non-matching responses are refunded: 500s do not count.
	c.Advance(time.Hour)
	status = http.StatusInternalServerError
	for range 10 {
		try(500)
	}
	status = http.StatusUnauthorized
	try(401)
}

// TestRulesDecidedTogether is the classic nested decorators: 2 per IP and
// username and 3 per IP. A request denied by one consumes nothing under
// the other.
func TestRulesDecidedTogether(t *testing.T) {
	c := testclock.New(testclock.T0)
	s := newStore(t)
	user := httplimit.FormField("username", httplimit.FormFieldOptions{})
	ip := &httplimit.ClientIP{}
	m := middleware(t, httplimit.Config{AttachOutcome: true, Rules: []httplimit.Rule{
		{Name: "ip-user", Limiter: limiter(t, s, c, "ip-user", "2/3m"), Key: httplimit.Compose(ip, user)},
		{Name: "ip", Limiter: limiter(t, s, c, "ip", "3/3m"), Key: ip},
	}})
	h := &recordingHandler{}
	srv := m.Handler(h)
	post := func(name string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(url.Values{"username": {name}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.RemoteAddr = "203.0.113.7:1"
		return serve(srv, r)
	}
	want := []struct {
		user   string
		status int
		policy string
	}{
		{"alice", 200, ""},
		{"alice", 200, ""},
		{"alice", 429, "ip-user"}, // must not consume under "ip"
		{"bob", 200, ""},
		{"carol", 429, "ip"},
	}
	for i, w := range want {
		got := post(w.user)
		if got.Code != w.status {
			t.Fatalf("request %d (%s): status = %d, want %d", i, w.user, got.Code, w.status)
		}
		if w.policy != "" && !strings.Contains(got.Body.String(), `"violated-policies":["`+w.policy+`"]`) {
			t.Errorf("request %d: body %s, want violated policy %s", i, got.Body, w.policy)
		}
		if w.status == 200 {
			policy, limit := rateLimitFields(t, got.Header())
			if len(policy) != 2 || len(limit) != 2 {
				t.Errorf("request %d: fields %v %v, want both policies", i, policy, limit)
			}
		}
	}
	if h.last.Policy != "ip" || h.last.Decision.Remaining != 0 {
		t.Errorf("binding outcome %+v, want ip with 0 remaining", h.last)
	}
}

// TestAttachOutcome: without AttachOutcome, an allowed request reaches
// the handler as it came (no request copy, no Outcome), while shadowed and
// dry-run requests still carry theirs; with it, every request does.
func TestAttachOutcome(t *testing.T) {
	for _, tt := range []struct {
		attach   bool
		mode     httplimit.Mode
		wantSame []bool // per request: the handler got the very request served
		wantOK   []bool // per request: OutcomeOf found an Outcome
	}{
		{false, httplimit.Enforce, []bool{true, false}, []bool{false, true}}, // the 2nd is denied: Deny sees it
		{false, httplimit.Shadow, []bool{true, false}, []bool{false, true}},
		{false, httplimit.DryRun, []bool{true, false}, []bool{false, true}},
		{true, httplimit.Enforce, []bool{false, false}, []bool{true, true}},
	} {
		c := testclock.New(testclock.T0)
		var gotSame, gotOK []bool
		var served *http.Request
		seen := func(w http.ResponseWriter, r *http.Request) {
			_, ok := httplimit.OutcomeOf(r)
			gotSame, gotOK = append(gotSame, r == served), append(gotOK, ok)
		}
		m := middleware(t, httplimit.Config{
			AttachOutcome: tt.attach,
			Rules:         []httplimit.Rule{{Limiter: limiter(t, newStore(t), c, "o", "1/h"), Mode: tt.mode}},
			Deny:          http.HandlerFunc(seen),
		})
		srv := m.Handler(http.HandlerFunc(seen))
		for range 2 {
			served = request("203.0.113.7:1")
			serve(srv, served)
		}
		if !slices.Equal(gotSame, tt.wantSame) || !slices.Equal(gotOK, tt.wantOK) {
			t.Errorf("AttachOutcome %v, mode %v: same request %v, outcome found %v; want %v, %v", tt.attach, tt.mode, gotSame, gotOK, tt.wantSame, tt.wantOK)
		}
	}
}

func TestMatch(t *testing.T) {
	c := testclock.New(testclock.T0)
	m := middleware(t, httplimit.Config{Rules: []httplimit.Rule{{
		Limiter: limiter(t, newStore(t), c, "posts", "1/h"),
		Match:   func(r *http.Request) bool { return httplimit.Methods("POST")(r) && httplimit.PathPrefix("/api/")(r) },
	}}})
	srv := m.Handler(&recordingHandler{})
	for i, tt := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/api/x", 200}, {"POST", "/api/x", 200}, {"GET", "/api/x", 200}, {"POST", "/other", 200}, {"POST", "/api/y", 429},
	} {
		r := httptest.NewRequest(tt.method, tt.path, nil)
		if w := serve(srv, r); w.Code != tt.want {
			t.Errorf("request %d %s %s: status = %d, want %d", i, tt.method, tt.path, w.Code, tt.want)
		}
	}
}

// TestNoKeySharesOneLimit: requests without a key are limited together,
// never let through unlimited.
func TestNoKeySharesOneLimit(t *testing.T) {
	c := testclock.New(testclock.T0)
	m := middleware(t, httplimit.Config{Rules: []httplimit.Rule{{Limiter: limiter(t, newStore(t), c, "k", "2/h"), Key: httplimit.Header("X-API-Key")}}})
	srv := m.Handler(&recordingHandler{})
	for i, want := range []int{200, 200, 429, 429} {
		if w := serve(srv, request("203.0.113."+strconv.Itoa(i)+":1")); w.Code != want {
			t.Errorf("keyless request %d: status = %d, want %d", i, w.Code, want)
		}
	}
	if w := serve(srv, request("203.0.113.9:1", "X-API-Key", "k1")); w.Code != 200 {
		t.Errorf("keyed request: status = %d, want 200", w.Code)
	}
}

// TestStoreFailure runs in a synctest bubble, whose clock stands still,
// so the one-line-a-second log throttle is deterministic.
func TestStoreFailure(t *testing.T) {
	synctest.Test(t, testStoreFailure)
}

func testStoreFailure(t *testing.T) {
	for _, tt := range []struct {
		policy sluice.FailurePolicy
		want   int
	}{{sluice.FailOpen, 200}, {sluice.FailClosed, 503}} {
		c := testclock.New(testclock.T0)
		s := newStore(t)
		s.SetFail(true)
		var logs bytes.Buffer
		m := middleware(t, httplimit.Config{
			Failure: tt.policy,
			Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
			Rules:   []httplimit.Rule{{Limiter: limiter(t, s, c, "f", "1/h")}},
		})
		srv := m.Handler(&recordingHandler{})
		for i := range 50 {
			if w := serve(srv, request("203.0.113.7:1")); w.Code != tt.want {
				t.Fatalf("policy %d, request %d: status = %d, want %d", tt.policy, i, w.Code, tt.want)
			}
		}
		if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
			t.Errorf("policy %d: %d log lines for 50 failures in a burst, want 1: %s", tt.policy, n, logs.String())
		}
		time.Sleep(time.Second) // fake time: the next failure is logged again
		serve(srv, request("203.0.113.7:1"))
		if n := strings.Count(logs.String(), "suppressed=49"); n != 1 {
			t.Errorf("policy %d: second line does not count the 49 suppressed: %s", tt.policy, logs.String())
		}
		s.SetFail(false)
		if w := serve(srv, request("203.0.113.7:1")); w.Code != 200 {
			t.Errorf("after recovery: status = %d, want 200", w.Code)
		}
	}
}

func TestExempt(t *testing.T) {
	c := testclock.New(testclock.T0)
	m := middleware(t, httplimit.Config{Rules: []httplimit.Rule{{Limiter: limiter(t, newStore(t), c, "x", "1/h")}}})
	srv := m.Handler(&recordingHandler{})
	for range 3 {
		if w := serve(srv, httplimit.Exempt(request("203.0.113.7:1"))); w.Code != 200 {
			t.Fatalf("exempt: status = %d, want 200", w.Code)
		}
	}
	if w := serve(srv, request("203.0.113.7:1")); w.Code != 200 {
		t.Errorf("exempt requests were counted: status = %d, want 200", w.Code)
	}
}

func TestCustomDeny(t *testing.T) {
	c := testclock.New(testclock.T0)
	m := middleware(t, httplimit.Config{
		Rules: []httplimit.Rule{{Limiter: limiter(t, newStore(t), c, "d", "1/h")}},
		Deny: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			o, _ := httplimit.OutcomeOf(r)
			http.Error(w, "slow down, "+o.Policy, http.StatusTeapot)
		}),
	})
	srv := m.Handler(&recordingHandler{})
	serve(srv, request("203.0.113.7:1"))
	w := serve(srv, request("203.0.113.7:1"))
	if w.Code != http.StatusTeapot || !strings.Contains(w.Body.String(), "slow down, default") || w.Header().Get("Retry-After") != "3600" {
		t.Errorf("custom deny: %d %q %v", w.Code, w.Body, w.Header())
	}
}

func TestNewRejects(t *testing.T) {
	lim := limiter(t, newStore(t), testclock.New(testclock.T0), "x", "1/h")
	for _, c := range []httplimit.Config{
		{},
		{Rules: []httplimit.Rule{{}}},
		{Rules: []httplimit.Rule{{Name: "a", Limiter: lim}, {Name: "a", Limiter: lim}}},
		{Rules: []httplimit.Rule{{Name: `bad"name`, Limiter: lim}}},
		{Rules: []httplimit.Rule{{Name: "tab\t", Limiter: lim}}},
		{Rules: []httplimit.Rule{{Limiter: lim}}, Failure: sluice.FailLocal}, // needs store/fallback
		{Rules: []httplimit.Rule{{Limiter: lim}}, Failure: sluice.FailurePolicy(9)},
	} {
		if _, err := httplimit.New(c); err == nil {
			t.Errorf("New(%+v) = nil error, want one", c)
		}
	}
}

func mustParse(s string) (sluice.Limit, error) { return sluice.ParseLimit(s) }
