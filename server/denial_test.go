package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/store/memory"
)

// TestOneDenialFormat asks every surface that refuses a request to
// refuse one, and checks that each answers alike: RFC 9457 problem
// details whose status is the response's, Retry-After where there is a
// wait, and, with a rule's limits, RateLimit fields that an independent
// structured-field parser (httpsfv) reads as lists.
func TestOneDenialFormat(t *testing.T) {
	s, _ := newService(t, serviceConfig)
	if _, err := s.admin.Ban(t.Context(), ManualJail, banEntry("203.0.113.66"), time.Hour, "admin"); err != nil {
		t.Fatal(err)
	}
	mw := middlewares(t)
	for _, tt := range []struct {
		name   string
		answer func() *httptest.ResponseRecorder
		status int
		wait   bool // Retry-After
		fields bool // RateLimit-Policy and RateLimit
	}{
		{"httplimit 429", func() *httptest.ResponseRecorder { return getFrom(mw.limit, "198.18.0.1", 2) }, 429, true, true},
		{"guard middleware, banned", func() *httptest.ResponseRecorder { return getFrom(mw.guard, "203.0.113.66", 1) }, 403, true, false},
		{"guard middleware, deny list", func() *httptest.ResponseRecorder { return getFrom(mw.guard, "198.51.100.7", 1) }, 403, false, false},
		{"forward-auth 429", func() *httptest.ResponseRecorder {
			var w *httptest.ResponseRecorder
			for range 4 { // api: 3 a minute
				w = auth(t, s.Handler(), "?rule=api", "198.18.0.2")
			}
			return w
		}, 429, true, true},
		{"forward-auth, banned", func() *httptest.ResponseRecorder { return auth(t, s.Handler(), "?rule=api", "203.0.113.66") }, 403, true, false},
		{"forward-auth, deny list", func() *httptest.ResponseRecorder { return auth(t, s.Handler(), "?rule=api", "198.51.100.7") }, 403, false, false},
		{"HTTP API error", func() *httptest.ResponseRecorder {
			return do(t, s.Handler(), http.MethodPost, "/v1/check", `{"rule":"nope","key":"k"}`)
		}, 400, false, false},
	} {
		w := tt.answer()
		var p httplimit.Problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != tt.status || p.Status != tt.status || p.Type == "" || p.Title == "" ||
			w.Header().Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s %q (%v), want %d with problem details", tt.name, w.Code, w.Header().Get("Content-Type"), w.Body, err, tt.status)
		}
		if ra, err := strconv.Atoi(w.Header().Get("Retry-After")); tt.wait != (err == nil && ra >= 1) {
			t.Errorf("%s: Retry-After %q, want one: %v", tt.name, w.Header().Get("Retry-After"), tt.wait)
		}
		if tt.fields {
			for _, f := range []string{"RateLimit-Policy", "RateLimit"} {
				if l, err := httpsfv.UnmarshalList(w.Header().Values(f)); err != nil || len(l) == 0 {
					t.Errorf("%s: %s %q is not a structured-field list: %v", tt.name, f, w.Header().Values(f), err)
				}
			}
		}
	}
}

// middlewares are the library's middlewares of the test: a limit of one
// a minute per address, and the guard with a deny list and a ban.
type middlewareSet struct{ limit, guard http.Handler }

func middlewares(t *testing.T) middlewareSet {
	t.Helper()
	st := memory.New(memory.Config{})
	t.Cleanup(func() { st.Close() })
	lim, err := sluice.New(st, sluice.Config{Action: "page", Limits: []sluice.Limit{sluice.PerMinute(1)}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := httplimit.New(httplimit.Config{Rules: []httplimit.Rule{{Name: "page", Limiter: lim}}})
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	var deny guard.List
	deny.AddPrefix(netip.MustParsePrefix("198.51.100.0/24"))
	reg := guard.NewMemoryRegistry(guard.BanLimits{})
	jail, err := guard.NewJail(st, guard.JailConfig{Name: "manual", Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jail.Ban(t.Context(), "203.0.113.66", time.Hour, "test"); err != nil {
		t.Fatal(err)
	}
	g := guard.Middleware(guard.MiddlewareConfig{Deny: &deny, Jails: []*guard.Jail{jail}})
	return middlewareSet{limit: m.Handler(ok), guard: g(ok)}
}

// getFrom sends n requests from ip to h and returns the last answer.
func getFrom(h http.Handler, ip string, n int) *httptest.ResponseRecorder {
	var w *httptest.ResponseRecorder
	for range n {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = ip + ":1234"
		w = httptest.NewRecorder()
		h.ServeHTTP(w, r)
	}
	return w
}
