package bench

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/httprate"
	"github.com/sethvargo/go-limiter/httplimit"
	"github.com/sethvargo/go-limiter/memorystore"

	"github.com/sluicehq/sluice"
	sluicehttp "github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/store/memory"
)

// httpImpl is one rate-limiting middleware under comparison, keyed by the
// connection's address.
type httpImpl struct {
	name string
	// wrap returns next limited to rate per period per client address.
	wrap func(b *testing.B, rate int, period time.Duration, next http.Handler) http.Handler
}

var httpImpls = []httpImpl{
	{"sluice", func(b *testing.B, rate int, period time.Duration, next http.Handler) http.Handler {
		store := memory.New(memory.Config{})
		b.Cleanup(func() { _ = store.Close() })
		lim, err := sluice.New(store, sluice.Config{Limits: []sluice.Limit{{Rate: rate, Period: period}}})
		if err != nil {
			b.Fatal(err)
		}
		m, err := sluicehttp.New(sluicehttp.Config{Rules: []sluicehttp.Rule{{Limiter: lim}}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		return m.Handler(next)
	}},
	{"go-chi-httprate", func(b *testing.B, rate int, period time.Duration, next http.Handler) http.Handler {
		return httprate.LimitBy(rate, period, func(r *http.Request) (string, error) {
			ap, err := netip.ParseAddrPort(r.RemoteAddr)
			return ap.Addr().String(), err
		})(next)
	}},
	{"sethvargo-httplimit", func(b *testing.B, rate int, period time.Duration, next http.Handler) http.Handler {
		store, err := memorystore.New(&memorystore.Config{Tokens: uint64(rate), Interval: period})
		if err != nil {
			b.Fatal(err)
		}
		m, err := httplimit.NewMiddleware(store, httplimit.IPKeyFunc())
		if err != nil {
			b.Fatal(err)
		}
		return m.Handle(next)
	}},
}

// httpWriter discards the response and counts admitted requests; it keeps
// one header map so that only the middleware's allocations count.
type httpWriter struct {
	h        http.Header
	code     int
	admitted int
}

func (w *httpWriter) Header() http.Header         { return w.h }
func (w *httpWriter) Write(b []byte) (int, error) { w.WriteHeader(http.StatusOK); return len(b), nil }
func (w *httpWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *httpWriter) reset() {
	if w.code == http.StatusOK {
		w.admitted++
	}
	w.code = 0
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })

// httpRequests returns n GET requests from n distinct client addresses.
func httpRequests(n int) []*http.Request {
	rs := make([]*http.Request, n)
	for i := range rs {
		r, _ := http.NewRequest(http.MethodGet, "http://example.com/api", nil)
		r.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:4242", i>>16&255, i>>8&255, i&255)
		rs[i] = r
	}
	return rs
}

// BenchmarkHTTPMiddleware measures each middleware's cost per request,
// serial and on every core, with one client (keys=hot) or 10,000 clients
// in turn (keys=10k), under a limit nothing reaches (traffic=admit) or one
// every client already spent (traffic=deny: 1 an hour, used before the
// timer starts). Subtract BenchmarkHTTPBare for the overhead.
func BenchmarkHTTPMiddleware(b *testing.B) {
	for _, keys := range []int{1, 10_000} {
		for _, traffic := range []string{"admit", "deny"} {
			for _, impl := range httpImpls {
				for _, parallel := range []bool{false, true} {
					name := fmt.Sprintf("keys=%s/traffic=%s/impl=%s/run=%s", keyName(keys), traffic, impl.name, runName(parallel))
					b.Run(name, func(b *testing.B) { benchHTTP(b, impl, keys, traffic, parallel, okHandler) })
				}
			}
		}
	}
}

// BenchmarkHTTPBare is the handler without middleware, the baseline of
// BenchmarkHTTPMiddleware.
func BenchmarkHTTPBare(b *testing.B) {
	for _, parallel := range []bool{false, true} {
		b.Run("run="+runName(parallel), func(b *testing.B) {
			benchHTTP(b, httpImpl{name: "bare", wrap: func(_ *testing.B, _ int, _ time.Duration, next http.Handler) http.Handler { return next }}, 1, "admit", parallel, okHandler)
		})
	}
}

func keyName(n int) string {
	if n == 1 {
		return "hot"
	}
	return fmt.Sprintf("%dk", n/1000)
}

func runName(parallel bool) string {
	if parallel {
		return "parallel"
	}
	return "serial"
}

func benchHTTP(b *testing.B, impl httpImpl, keys int, traffic string, parallel bool, next http.Handler) {
	rate, period := 1_000_000_000, time.Minute
	if traffic == "deny" {
		rate, period = 1, time.Hour
	}
	h := impl.wrap(b, rate, period, next)
	rs := httpRequests(keys)
	if traffic == "deny" {
		w := &httpWriter{h: http.Header{}}
		for _, r := range rs {
			h.ServeHTTP(w, r)
			w.reset()
		}
	}
	var admitted atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	if !parallel {
		w := &httpWriter{h: http.Header{}}
		for i := 0; b.Loop(); i++ {
			h.ServeHTTP(w, rs[i%keys])
			w.reset()
		}
		admitted.Add(int64(w.admitted))
	} else {
		var seq atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			w := &httpWriter{h: http.Header{}}
			i := int(seq.Add(1)) * 7919
			for pb.Next() {
				h.ServeHTTP(w, rs[i%keys])
				w.reset()
				i++
			}
			admitted.Add(int64(w.admitted))
		})
	}
	b.StopTimer()
	got := float64(admitted.Load()) / float64(b.N)
	b.ReportMetric(got, "admitted/op")
	if traffic == "admit" && got != 1 || traffic == "deny" && got > 0.01 {
		b.Errorf("%s admitted %.4f of the requests, want %s", impl.name, got, map[string]string{"admit": "all", "deny": "none"}[traffic])
	}
}
