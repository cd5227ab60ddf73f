package client_test

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/testing/testclock"
)

// A Rule decides for httplimit's middleware.
var _ httplimit.Decider = (*client.Rule)(nil)

// login is the service's rule "login" as the tests' middleware declares
// it.
var login = sluice.Limit{Rate: 2, Period: time.Minute}

// serveLogin sends a login request from ip through h, with the given
// password, and returns the answer.
func serveLogin(h http.Handler, ip, password string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/login", nil)
	r.RemoteAddr = ip + ":40000"
	r.Header.Set("Password", password)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// loginHandler accepts the password "right".
var loginHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Password") != "right" {
		w.WriteHeader(http.StatusUnauthorized)
	}
})

// TestMiddleware runs httplimit's middleware on a rule of the service,
// over each transport: the third login of a minute is refused with 429
// and Retry-After, and its repeats are refused from the cache; a
// successful login resets the address's count.
func TestMiddleware(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			c := newClient(t, startService(t, testclock.New(t0)), tr, client.Config{})
			m, err := httplimit.New(httplimit.Config{
				Rules:  []httplimit.Rule{{Name: "login", Decider: c.Rule("login", login), Reset: httplimit.Status(http.StatusOK)}},
				Logger: slog.New(slog.DiscardHandler),
			})
			if err != nil {
				t.Fatal(err)
			}
			h := m.Handler(loginHandler)
			for i, want := range []int{401, 401, 429, 429} {
				w := serveLogin(h, "203.0.113.7", "wrong")
				if w.Code != want {
					t.Fatalf("login %d = %d, want %d", i+1, w.Code, want)
				}
				if want == 429 && (w.Header().Get("Retry-After") != "30" || w.Header().Get("RateLimit-Policy") != `"login";q=2;w=60`) {
					t.Errorf("login %d: Retry-After %q, RateLimit-Policy %q; want 30 and the rule's policy", i+1, w.Header().Get("Retry-After"), w.Header().Get("RateLimit-Policy"))
				}
			}
			if st := c.Stats(); st.CacheHits != 1 {
				t.Errorf("Stats() = %+v; want the second 429 from the cache", st)
			}
			if w := serveLogin(h, "203.0.113.8", "right"); w.Code != 200 {
				t.Fatalf("right login = %d, want 200", w.Code)
			}
			if w := serveLogin(h, "203.0.113.8", "wrong"); w.Code != 401 {
				t.Errorf("login after a reset = %d, want 401", w.Code)
			}
			if w := serveLogin(h, "203.0.113.8", "wrong"); w.Code != 401 {
				t.Errorf("second login after a reset = %d, want 401: the success reset the count", w.Code)
			}
		})
	}
}

// TestMiddlewareFailure runs the middleware on a service that is down:
// its own failure policy applies.
func TestMiddlewareFailure(t *testing.T) {
	c := failingClient(t, "http", closedAddr(t), client.Config{})
	for _, tt := range []struct {
		policy sluice.FailurePolicy
		want   int
	}{{sluice.FailOpen, 401}, {sluice.FailClosed, 503}} {
		m, err := httplimit.New(httplimit.Config{
			Rules:   []httplimit.Rule{{Name: "login", Decider: c.Rule("login", login)}},
			Failure: tt.policy,
			Logger:  slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		if w := serveLogin(m.Handler(loginHandler), "203.0.113.7", "wrong"); w.Code != tt.want {
			t.Errorf("policy %d: login = %d, want %d", tt.policy, w.Code, tt.want)
		}
	}
}

// TestMiddlewareRefusesCount checks that a rule of the service cannot
// count by status, which needs a refund the service's API lacks, nor go
// without limits.
func TestMiddlewareRefusesCount(t *testing.T) {
	c := failingClient(t, "http", closedAddr(t), client.Config{})
	for name, r := range map[string]httplimit.Rule{
		"count":     {Decider: c.Rule("login", login), Count: httplimit.Status(http.StatusUnauthorized)},
		"no limits": {Decider: c.Rule("login")},
	} {
		if _, err := httplimit.New(httplimit.Config{Rules: []httplimit.Rule{r}}); !errors.Is(err, sluice.ErrInvalidRequest) {
			t.Errorf("%s: New = %v, want sluice.ErrInvalidRequest", name, err)
		}
	}
}
