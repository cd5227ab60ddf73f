package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testing/testclock"
	"github.com/sluicehq/sluice/server/rules"
	"github.com/sluicehq/sluice/store/memory"
	"github.com/sluicehq/sluice/wire"
)

// t0 starts every test clock.
var t0 = testclock.T0

const testConfig = `rules:
  - name: login
    limits: ["5/min", "20/h"]
  - name: api
    limits: ["10/s burst 20"]
  - name: signup
    limits: ["3/h fixed"]
`

func testRules(t testing.TB) []config.NamedRule {
	t.Helper()
	c, err := config.Parse("test.yaml", []byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	return c.Rules
}

// newTestServer returns the API over a fresh memory store, on a clock
// starting at t0.
func newTestServer(t testing.TB) (*Handler, *testclock.Clock) {
	t.Helper()
	st := memory.New(memory.Config{})
	t.Cleanup(func() { st.Close() })
	clk := testclock.New(t0)
	return newHandler(t, rules.Config{Store: st, Rules: testRules(t), Clock: clk.Now}, Config{}), clk
}

// newHandler returns the API of an engine of ec, configured by c.
func newHandler(t testing.TB, ec rules.Config, c Config) *Handler {
	t.Helper()
	e, err := rules.New(ec)
	if err != nil {
		t.Fatalf("rules.New() error = %v", err)
	}
	c.Engine = e
	h, err := New(c)
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	return h
}

// do sends a request to h and returns the recorded answer.
func do(t *testing.T, h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// check posts a check and decodes its 200 answer.
func check(t *testing.T, h http.Handler, body string) (wire.CheckResponse, http.Header) {
	t.Helper()
	w := do(t, h, http.MethodPost, "/v1/check", body)
	if w.Code != http.StatusOK {
		t.Fatalf("POST /v1/check %s: status = %d, want 200; body %s", body, w.Code, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("POST /v1/check: Content-Type = %q, want application/json", ct)
	}
	var resp wire.CheckResponse
	dec := json.NewDecoder(w.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&resp); err != nil {
		t.Fatalf("POST /v1/check %s: decoding %q: %v", body, w.Body, err)
	}
	return resp, w.Header()
}

func TestCheckEnforcesLimits(t *testing.T) {
	s, clk := newTestServer(t)
	const body = `{"rule":"login","key":"203.0.113.7"}`
	for i := range 5 {
		got, h := check(t, s, body)
		want := wire.CheckResponse{Allowed: true, Rule: "login", Limit: 5, Policy: "5/min", Remaining: 4 - i, ResetAfter: float64(12 * (i + 1))}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("check %d = %+v, want %+v", i+1, got, want)
		}
		if ra := h.Get("Retry-After"); ra != "" {
			t.Errorf("check %d: Retry-After = %q, want none", i+1, ra)
		}
	}
	got, h := check(t, s, body)
	want := wire.CheckResponse{Allowed: false, Rule: "login", Limit: 5, Policy: "5/min", Remaining: 0, ResetAfter: 60, RetryAfter: 12}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("check 6 = %+v, want %+v", got, want)
	}
	for name, want := range map[string]string{
		"Retry-After":      "12",
		"RateLimit":        `"login-1m";r=0;t=60`,
		"RateLimit-Policy": `"login-1m";q=5;w=60, "login-1h";q=20;w=3600`,
		"Cache-Control":    "no-store",
	} {
		if got := h.Get(name); got != want {
			t.Errorf("check 6: %s = %q, want %q", name, got, want)
		}
	}

	// Another key has its own allowance; the same key gets one more
	// after one emission interval.
	if got, _ := check(t, s, `{"rule":"login","key":"198.51.100.1"}`); !got.Allowed {
		t.Errorf("check of another key = %+v, want allowed", got)
	}
	clk.Advance(12*time.Second - time.Nanosecond)
	if got, _ := check(t, s, body); got.Allowed || got.RetryAfter != 0.001 {
		t.Errorf("check 1ns early = %+v, want denied with retry_after 0.001", got)
	}
	clk.Advance(time.Nanosecond)
	if got, _ := check(t, s, body); !got.Allowed {
		t.Errorf("check after retry_after = %+v, want allowed", got)
	}
}

// TestCheckBindingLimit checks that the hourly limit binds once the
// per-minute one keeps refilling.
func TestCheckBindingLimit(t *testing.T) {
	s, clk := newTestServer(t)
	const body = `{"rule":"login","key":"k"}`
	allowed := 0
	for range 40 {
		if got, _ := check(t, s, body); got.Allowed {
			allowed++
		}
		clk.Advance(12 * time.Second)
	}
	// 20/h is a bucket of 20 refilling one every 3 minutes: 20 at once,
	// plus the 2 refilled by 4 and 6 minutes in.
	if allowed != 22 {
		t.Errorf("allowed %d in 8 minutes, want 22", allowed)
	}
	got, h := check(t, s, body)
	if got.Allowed || got.Policy != "20/h" {
		t.Errorf("check = %+v, want denied by 20/h", got)
	}
	if rl := h.Get("RateLimit"); !strings.HasPrefix(rl, `"login-1h";r=0;`) {
		t.Errorf("RateLimit = %q, want the hourly item", rl)
	}
}

func TestCheckCostAndPeek(t *testing.T) {
	s, _ := newTestServer(t)
	tests := []struct {
		body          string
		wantAllowed   bool
		wantRemaining int
	}{
		{`{"rule":"api","key":"k","cost":15}`, true, 5},
		{`{"rule":"api","key":"k","cost":6,"peek":true}`, false, 5},
		{`{"rule":"api","key":"k","cost":5,"peek":true}`, true, 0},
		{`{"rule":"api","key":"k","cost":0}`, true, 4}, // 0 means 1
		{`{"rule":"api","key":"k"}`, true, 3},
		{`{"rule":"api","key":"k","cost":4}`, false, 3},
		{`{"rule":"api","key":"k","cost":3}`, true, 0},
	}
	for _, tt := range tests {
		got, _ := check(t, s, tt.body)
		if got.Allowed != tt.wantAllowed || got.Remaining != tt.wantRemaining {
			t.Errorf("check %s = %+v, want allowed %v, remaining %d", tt.body, got, tt.wantAllowed, tt.wantRemaining)
		}
	}
}

// outcome posts an outcome call and decodes its 200 answer.
func outcome(t *testing.T, h http.Handler, path, body string) wire.OutcomeResponse {
	t.Helper()
	w := do(t, h, http.MethodPost, path, body)
	if w.Code != http.StatusOK {
		t.Fatalf("POST %s %s: status = %d, want 200; body %s", path, body, w.Code, w.Body)
	}
	var resp wire.OutcomeResponse
	dec := json.NewDecoder(w.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&resp); err != nil {
		t.Fatalf("POST %s: decoding %q: %v", path, w.Body, err)
	}
	return resp
}

// TestOutcomeCalls runs the outcome calls over HTTP: a reservation
// refunded (the refund retried), a failure reported (retried) and an
// insert, each seen in what the rule then allows.
func TestOutcomeCalls(t *testing.T) {
	s, _ := newTestServer(t)
	r := outcome(t, s, "/v1/reserve", `{"rule":"login","key":"k","cost":2,"id":"a"}`)
	if !r.Allowed || r.Expires == nil || !r.Expires.Equal(t0.Add(rules.ReservationTTL)) || r.Remaining != 3 {
		t.Fatalf("reserve = %+v, want allowed with 3 remaining, expiring after the TTL", r)
	}
	if r := outcome(t, s, "/v1/reserve", `{"rule":"login","key":"k","cost":2,"id":"a"}`); !r.Duplicate || r.Expires != nil {
		t.Errorf("retried reserve = %+v, want a duplicate", r)
	}
	for i := range 2 {
		if r := outcome(t, s, "/v1/refund", `{"rule":"login","key":"k","cost":2,"id":"a"}`); r.Duplicate != (i > 0) || r.Remaining != 4 {
			t.Errorf("refund %d = %+v, want duplicate %v and 4 remaining after a peek", i, r, i > 0)
		}
	}
	for i := range 3 {
		if r := outcome(t, s, "/v1/report", `{"rule":"login","key":"k","cost":4,"id":"f","outcome":"failure"}`); r.Duplicate != (i > 0) || r.Remaining != 0 {
			t.Errorf("report %d = %+v, want duplicate %v and nothing more after the peek", i, r, i > 0)
		}
	}
	if got, _ := check(t, s, `{"rule":"login","key":"k","peek":true}`); got.Remaining != 0 || !got.Allowed {
		t.Errorf("peek after a failure of 4 reported 3 times = %+v, want one left", got)
	}
	w := do(t, s, http.MethodPost, "/v1/insert", `{"rule":"login","key":"k","cost":-3}`)
	var ins wire.CheckResponse
	if err := json.Unmarshal(w.Body.Bytes(), &ins); w.Code != 200 || err != nil || !ins.Allowed || ins.Remaining != 3 {
		t.Errorf("reward of 3 = %d %s, want allowed with 3 left after a take", w.Code, w.Body)
	}
}

func TestReset(t *testing.T) {
	s, _ := newTestServer(t)
	for range 3 {
		check(t, s, `{"rule":"signup","key":"k"}`)
	}
	if got, _ := check(t, s, `{"rule":"signup","key":"k"}`); got.Allowed {
		t.Fatalf("check 4 = %+v, want denied", got)
	}
	w := do(t, s, http.MethodPost, "/v1/reset", `{"rule":"signup","key":"k"}`)
	if w.Code != http.StatusNoContent || w.Body.Len() != 0 {
		t.Fatalf("POST /v1/reset = %d %q, want 204 and no body", w.Code, w.Body)
	}
	if got, _ := check(t, s, `{"rule":"signup","key":"k"}`); !got.Allowed || got.Remaining != 2 {
		t.Errorf("check after reset = %+v, want allowed with 2 remaining", got)
	}
}

// TestErrors checks every error answer: its status, that its body is a
// JSON error saying what is wrong, and that it took nothing.
func TestErrors(t *testing.T) {
	s, _ := newTestServer(t)
	big := `{"rule":"login","key":"` + strings.Repeat("x", DefaultMaxBodyBytes) + `"}`
	tests := []struct {
		name, method, path, ctype, body string
		status                          int
		want                            string // in the error message
	}{
		{"malformed", "POST", "/v1/check", "", `{"rule":`, 400, "malformed request"},
		{"not an object", "POST", "/v1/check", "", `[1]`, 400, "malformed request"},
		{"unknown field", "POST", "/v1/check", "", `{"rule":"login","key":"k","cots":2}`, 400, `unknown field "cots"`},
		{"trailing data", "POST", "/v1/check", "", `{"rule":"login","key":"k"} {}`, 400, "trailing data"},
		{"empty body", "POST", "/v1/check", "", ``, 400, "empty body"},
		{"no rule", "POST", "/v1/check", "", `{"key":"k"}`, 400, "rule is required (one of api, login, signup)"},
		{"unknown rule", "POST", "/v1/check", "", `{"rule":"logon","key":"k"}`, 400, `unknown rule "logon"`},
		{"no key", "POST", "/v1/check", "", `{"rule":"login"}`, 400, "key is required"},
		{"negative cost", "POST", "/v1/check", "", `{"rule":"login","key":"k","cost":-1}`, 400, "cost -1 must be at least 1"},
		{"fractional cost", "POST", "/v1/check", "", `{"rule":"login","key":"k","cost":1.5}`, 400, "malformed request"},
		{"string cost", "POST", "/v1/check", "", `{"rule":"login","key":"k","cost":"1"}`, 400, "malformed request"},
		{"huge cost", "POST", "/v1/check", "", `{"rule":"login","key":"k","cost":1e30}`, 400, "malformed request"},
		{"cost above burst", "POST", "/v1/check", "", `{"rule":"login","key":"k","cost":6}`, 400, `cost 6 exceeds the burst of rule "login": at most 5`},
		{"peek above burst", "POST", "/v1/check", "", `{"rule":"api","key":"k","cost":21,"peek":true}`, 400, "at most 20"},
		{"too large", "POST", "/v1/check", "", big, 413, "request body too large"},
		{"text/plain", "POST", "/v1/check", "text/plain", `{"rule":"login","key":"k"}`, 415, "application/json"},
		{"form", "POST", "/v1/check", "application/x-www-form-urlencoded", `rule=login&key=k`, 415, "application/json"},
		{"GET check", "GET", "/v1/check", "", ``, 405, "use POST"},
		{"reset unknown field", "POST", "/v1/reset", "", `{"rule":"login","key":"k","cost":1}`, 400, `unknown field "cost"`},
		{"reset unknown rule", "POST", "/v1/reset", "", `{"rule":"x","key":"k"}`, 400, `unknown rule "x"`},
		{"reset no key", "POST", "/v1/reset", "", `{"rule":"login"}`, 400, "key is required"},
		{"reset GET", "GET", "/v1/reset", "", ``, 405, "use POST"},
		{"unknown path", "GET", "/v2/check", "", ``, 404, "no endpoint /v2/check"},
		{"insert cost 0", "POST", "/v1/insert", "", `{"rule":"login","key":"k"}`, 400, "cost is required"},
		{"insert above burst", "POST", "/v1/insert", "", `{"rule":"login","key":"k","cost":-6}`, 400, "at most 5 either way"},
		{"insert huge", "POST", "/v1/insert", "", `{"rule":"login","key":"k","cost":1e30}`, 400, "malformed request"},
		{"report unknown outcome", "POST", "/v1/report", "", `{"rule":"login","key":"k","id":"1","outcome":"maybe"}`, 400, `unknown outcome "maybe"`},
		{"report no id", "POST", "/v1/report", "", `{"rule":"login","key":"k","outcome":"failure"}`, 400, "id of 0 bytes"},
		{"report negative cost", "POST", "/v1/report", "", `{"rule":"login","key":"k","id":"1","cost":-3,"outcome":"failure"}`, 400, "at least 1"},
		{"report unknown rule", "POST", "/v1/report", "", `{"rule":"x","key":"k","id":"1","outcome":"failure"}`, 400, `unknown rule "x"`},
		{"refund unknown", "POST", "/v1/refund", "", `{"rule":"login","key":"k","id":"nope"}`, 409, "no such reservation"},
		{"commit GET", "GET", "/v1/commit", "", ``, 405, "use POST"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body))
			ctype := tt.ctype
			if ctype == "" {
				ctype = "application/json; charset=utf-8"
			}
			r.Header.Set("Content-Type", ctype)
			w := httptest.NewRecorder()
			s.ServeHTTP(w, r)
			if w.Code != tt.status {
				t.Errorf("%s %s %.40q: status = %d, want %d; body %s", tt.method, tt.path, tt.body, w.Code, tt.status, w.Body)
			}
			var e wire.ErrorResponse
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || !strings.Contains(e.Error, tt.want) {
				t.Errorf("%s %s %.40q: body = %s, want a JSON error containing %q", tt.method, tt.path, tt.body, w.Body, tt.want)
			}
			if tt.status == 405 && w.Header().Get("Allow") == "" {
				t.Errorf("%s %s: no Allow header on a 405", tt.method, tt.path)
			}
		})
	}
	// None of the bad requests took anything from key k.
	if got, _ := check(t, s, `{"rule":"login","key":"k","peek":true}`); got.Remaining != 4 {
		t.Errorf("after bad requests, peek = %+v, want 4 remaining", got)
	}
}

// fakeStore is a Store whose behaviour each test sets.
type fakeStore struct {
	DecideFunc func(ctx context.Context, r sluice.Request) (sluice.Decision, error)
}

func (f *fakeStore) Decide(ctx context.Context, r sluice.Request) (sluice.Decision, error) {
	return f.DecideFunc(ctx, r)
}

func TestStoreFailure(t *testing.T) {
	storeErr := fmt.Errorf("%w: dial tcp 10.0.0.1:6379: connection refused", sluice.ErrStore)
	st := &fakeStore{
		DecideFunc: func(context.Context, sluice.Request) (sluice.Decision, error) { return sluice.Decision{}, storeErr },
	}
	var logs bytes.Buffer
	s := newHandler(t, rules.Config{Store: st, Rules: testRules(t)}, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for _, path := range []string{"/v1/check", "/v1/reset"} {
		logs.Reset()
		w := do(t, s, http.MethodPost, path, `{"rule":"login","key":"k"}`)
		var e wire.ErrorResponse
		if w.Code != http.StatusServiceUnavailable || json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Error == "" {
			t.Errorf("POST %s with a failing store = %d %s, want 503 with a JSON error", path, w.Code, w.Body)
		}
		if strings.Contains(e.Error, "10.0.0.1") {
			t.Errorf("POST %s: error %q shows the store's address to the client", path, e.Error)
		}
		if !strings.Contains(logs.String(), "connection refused") || !strings.Contains(logs.String(), "rule=login") {
			t.Errorf("POST %s: log = %q, want the store error and the rule", path, logs.String())
		}
	}
}

// TestCancelledRequest checks that a client that went away is not logged
// as a store failure.
func TestCancelledRequest(t *testing.T) {
	st := &fakeStore{DecideFunc: func(ctx context.Context, _ sluice.Request) (sluice.Decision, error) {
		<-ctx.Done()
		return sluice.Decision{}, fmt.Errorf("%w: %w", sluice.ErrStore, ctx.Err())
	}}
	var logs bytes.Buffer
	s := newHandler(t, rules.Config{Store: st, Rules: testRules(t)}, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/check", strings.NewReader(`{"rule":"login","key":"k"}`))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	if w.Code != http.StatusServiceUnavailable || logs.Len() != 0 {
		t.Errorf("cancelled check = %d, log %q; want 503 and no log", w.Code, logs.String())
	}
}

func TestNew(t *testing.T) {
	if _, err := New(Config{}); !errors.Is(err, sluice.ErrInvalidRequest) {
		t.Errorf("New(no engine) error = %v, want ErrInvalidRequest", err)
	}
}
