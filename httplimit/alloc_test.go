package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicehq/sluice/httplimit"
)

// discard is a ResponseWriter that keeps one header map, so that only the
// middleware's own allocations are counted.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

// TestAllocs pins the middleware's allocations per allowed request on an
// existing key of the memory store: the key string, the request's context
// (which also holds the header values) and the request copy that carries
// it — 3 (allocation counts are deterministic, unlike timings).
func TestAllocs(t *testing.T) {
	c := newClock()
	m := middleware(t, httplimit.Config{Rules: []httplimit.Rule{{Limiter: limiter(t, newStore(t), c, "allocs", "1000000/s")}}})
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "203.0.113.7:4242"
	w := &discard{h: http.Header{}}
	h.ServeHTTP(w, r)
	if got := testing.AllocsPerRun(1000, func() { h.ServeHTTP(w, r) }); got > 3 {
		t.Errorf("allocations per request = %v, want ≤ 3", got)
	}
	if w.h.Get("RateLimit") == "" {
		t.Errorf("no RateLimit field written")
	}
}
