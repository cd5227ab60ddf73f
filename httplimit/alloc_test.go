package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/testing/testclock"
)

// discard is a ResponseWriter that keeps one header map, so that only the
// middleware's own allocations are counted.
type discard struct {
	h    http.Header
	code int
}

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(code int)        { d.code = code }

// TestAllocs pins the middleware's allocations per request on an existing
// key of the memory store (allocation counts are deterministic, unlike
// timings). An allowed request costs one: the request's state, which
// holds the key's bytes, the header values and their slices; the handler
// gets the request as it came. A denied one costs the same: the problem
// details are written in parts, the policy's tail built once by New.
func TestAllocs(t *testing.T) {
	for _, tt := range []struct {
		name   string
		limit  string
		rules  func(lim *sluice.Limiter) []httplimit.Rule
		fields httplimit.Fields
		code   int
		want   float64
	}{
		{"allowed", "1000000/s", func(lim *sluice.Limiter) []httplimit.Rule { return []httplimit.Rule{{Limiter: lim}} }, 0, 200, 1},
		{"allowed/legacy fields", "1000000/s", func(lim *sluice.Limiter) []httplimit.Rule { return []httplimit.Rule{{Limiter: lim}} }, httplimit.FieldsDraftAndLegacy, 200, 1},
		{"allowed/prefix key", "1000000/s", func(lim *sluice.Limiter) []httplimit.Rule {
			return []httplimit.Rule{{Limiter: lim, Key: httplimit.IPPrefix(nil, 24, 64)}}
		}, 0, 200, 1},
		{"denied", "1/h", func(lim *sluice.Limiter) []httplimit.Rule { return []httplimit.Rule{{Limiter: lim}} }, 0, 429, 1},
		// Two rules reserve: a Reservation each (package sluice), and
		// the detached context their settlement runs under.
		{"two rules", "1000000/s", func(lim *sluice.Limiter) []httplimit.Rule {
			return []httplimit.Rule{{Name: "a", Limiter: lim}, {Name: "b", Limiter: lim, Key: httplimit.Compose(&httplimit.ClientIP{}, httplimit.Header("X-User"))}}
		}, 0, 200, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := testclock.New(testclock.T0)
			lim := limiter(t, newStore(t), c, "allocs", tt.limit)
			m := middleware(t, httplimit.Config{Rules: tt.rules(lim), Fields: tt.fields})
			h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = "203.0.113.7:4242"
			r.Header.Set("X-User", "alice")
			w := &discard{h: http.Header{}}
			h.ServeHTTP(w, r)
			if got := testing.AllocsPerRun(1000, func() { h.ServeHTTP(w, r) }); got > tt.want {
				t.Errorf("allocations per request = %v, want ≤ %v", got, tt.want)
			}
			if w.code != tt.code || w.h.Get("RateLimit") == "" {
				t.Errorf("status %d, RateLimit %q; want %d and the field", w.code, w.h.Get("RateLimit"), tt.code)
			}
		})
	}
}
