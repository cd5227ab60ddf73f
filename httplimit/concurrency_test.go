package httplimit_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/testing/testserver"
	"github.com/sluicehq/sluice/store/memcached"
	"github.com/sluicehq/sluice/store/memory"
)

// blocking is a handler whose requests wait until release is closed,
// counting those that entered.
type blocking struct {
	entered chan struct{}
	release chan struct{}
	status  int
}

func newBlocking(status int) *blocking {
	return &blocking{entered: make(chan struct{}, 100), release: make(chan struct{}), status: status}
}

func (b *blocking) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	b.entered <- struct{}{}
	<-b.release
	w.WriteHeader(b.status)
}

func newConcurrencyLimit(t *testing.T, lim sluice.ConcurrencyConfig, c httplimit.ConcurrencyConfig) (*sluice.Concurrency, *httplimit.ConcurrencyLimit) {
	t.Helper()
	s := memory.New(memory.Config{SweepInterval: -1})
	t.Cleanup(func() { s.Close() })
	con, err := sluice.NewConcurrency(s, lim)
	if err != nil {
		t.Fatal(err)
	}
	c.Limiter = con
	m, err := httplimit.NewConcurrencyLimit(c)
	if err != nil {
		t.Fatal(err)
	}
	return con, m
}

func serveAsync(h http.Handler, r *http.Request) (*httptest.ResponseRecorder, <-chan struct{}) {
	w := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(w, r)
	}()
	return w, done
}

// TestConcurrencyLimitHTTP: two requests in flight of a limit of 2, the
// third refused with 429 and a problem document; once one ends, the next
// gets through.
func TestConcurrencyLimitHTTP(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		con, m := newConcurrencyLimit(t, sluice.ConcurrencyConfig{Limit: 2, TTL: time.Minute}, httplimit.ConcurrencyConfig{})
		b := newBlocking(http.StatusOK)
		h := m.Handler(b)
		_, done1 := serveAsync(h, httptest.NewRequest("GET", "/", nil))
		_, done2 := serveAsync(h, httptest.NewRequest("GET", "/", nil))
		<-b.entered
		<-b.entered
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		var p httplimit.Problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != 429 || p.Type != httplimit.ConcurrencyProblemType ||
			w.Header().Get("Retry-After") != "60" || !strings.Contains(p.Detail, "2 of 2") {
			t.Errorf("third request: %d %q %s, Retry-After %q; want 429, the problem, Retry-After 60",
				w.Code, w.Header().Get("Content-Type"), w.Body, w.Header().Get("Retry-After"))
		}
		close(b.release)
		<-done1
		<-done2
		var held []*sluice.Lease // both places are free again
		for i := range 2 {
			l, err := con.Acquire(t.Context(), "all", sluice.ClassCritical)
			if err != nil || !l.Allowed {
				t.Fatalf("Acquire %d after the handlers returned = %+v, %v; want granted", i, l, err)
			}
			held = append(held, l)
		}
		for _, l := range held {
			_ = l.Release(t.Context())
		}
		b.release = make(chan struct{})
		close(b.release)
		w = httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		if w.Code != 200 {
			t.Errorf("request after the others ended: %d, want 200", w.Code)
		}
	})
}

// TestConcurrencyLimitWait: with Wait set, a request over the limit waits
// for a place rather than be refused, and one that waits too long is
// refused when its wait ends.
func TestConcurrencyLimitWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, m := newConcurrencyLimit(t, sluice.ConcurrencyConfig{Limit: 1, TTL: time.Minute}, httplimit.ConcurrencyConfig{Wait: 5 * time.Second})
		b := newBlocking(http.StatusOK)
		h := m.Handler(b)
		_, done1 := serveAsync(h, httptest.NewRequest("GET", "/", nil))
		<-b.entered
		w2, done2 := serveAsync(h, httptest.NewRequest("GET", "/", nil))
		synctest.Wait()
		close(b.release) // the first ends: the waiting one goes in
		<-done1
		<-done2
		if w2.Code != 200 {
			t.Errorf("waiting request: %d, want 200", w2.Code)
		}
		b.release = make(chan struct{})
		_, done3 := serveAsync(h, httptest.NewRequest("GET", "/", nil))
		<-b.entered
		<-b.entered // the second's entry
		start := time.Now()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		if w.Code != 429 || time.Since(start) != 5*time.Second {
			t.Errorf("request that waited past Wait: %d after %v, want 429 after 5s", w.Code, time.Since(start))
		}
		close(b.release)
		<-done3
	})
}

// TestConcurrencyLimitClasses: behind a proxy that sets the header, a
// critical request gets the reserve that default ones may not use, and
// an adaptive limit hears of 503s and sheds with 503.
func TestConcurrencyLimitClasses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		aimd, err := adaptive.NewAIMD(adaptive.AIMDConfig{Initial: 10})
		if err != nil {
			t.Fatal(err)
		}
		_, m := newConcurrencyLimit(t, sluice.ConcurrencyConfig{Limit: 5, TTL: time.Minute, Adaptive: aimd},
			httplimit.ConcurrencyConfig{Class: httplimit.ClassFromHeader("Priority-Class")})
		b := newBlocking(http.StatusServiceUnavailable)
		h := m.Handler(b)
		var dones []<-chan struct{}
		for range 4 { // default: below 80% of 5
			_, d := serveAsync(h, httptest.NewRequest("GET", "/", nil))
			dones = append(dones, d)
			<-b.entered
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		if w.Code != 429 {
			t.Errorf("fifth default request: %d, want 429", w.Code)
		}
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Priority-Class", "critical")
		_, d := serveAsync(h, r)
		<-b.entered
		dones = append(dones, d)
		close(b.release) // all answer 503: overload
		for _, d := range dones {
			<-d
		}
		if got := aimd.Limit(); got != 9 {
			t.Errorf("adaptive limit after a round of 503s = %d, want 9 (one cut)", got)
		}
	})
}

// TestConcurrencyLimitStoreDown: a store that cannot be reached fails
// open by default and closed with 503 when asked, logging a bounded
// number of lines.
func TestConcurrencyLimitStoreDown(t *testing.T) {
	port, err := testserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	s, err := memcached.New(memcached.Config{Addrs: []string{"127.0.0.1:" + strconv.Itoa(port)}, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	con, err := sluice.NewConcurrency(s, sluice.ConcurrencyConfig{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{&mu, &logs}, nil))
	for _, tt := range []struct {
		policy sluice.FailurePolicy
		want   int
	}{{sluice.FailOpen, 200}, {sluice.FailClosed, 503}} {
		m, err := httplimit.NewConcurrencyLimit(httplimit.ConcurrencyConfig{Limiter: con, Failure: tt.policy, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
		for range 30 {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
			if w.Code != tt.want {
				t.Fatalf("policy %v: %d, want %d", tt.policy, w.Code, tt.want)
			}
		}
	}
	if _, err := httplimit.NewConcurrencyLimit(httplimit.ConcurrencyConfig{Limiter: con, Failure: sluice.FailLocal}); !errors.Is(err, sluice.ErrInvalidRequest) {
		t.Errorf("NewConcurrencyLimit under FailLocal: %v, want ErrInvalidRequest (it needs store/fallback)", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(logs.String(), "\n"); n == 0 || n > 22 {
		t.Errorf("60 failures logged %d lines, want 1 to 22 (a burst of 10 per middleware)", n)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
