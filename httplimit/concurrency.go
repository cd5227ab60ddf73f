package httplimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/httpstatus"
	"github.com/sluicehq/sluice/internal/logthrottle"
)

// ConcurrencyProblemType is the problem type of a request refused because
// too many are in flight.
const ConcurrencyProblemType = "https://sluice.dev/problems/concurrency"

// ConcurrencyConfig configures a ConcurrencyLimit. The zero value of every
// field but Limiter means its default.
type ConcurrencyConfig struct {
	// Limiter holds the limit per key, the store of the leases, the
	// shares of the classes and the adaptive limit. Required.
	Limiter *sluice.Concurrency
	// Key derives the key whose requests in flight are limited. Default
	// nil: one key for every request, "all" (a limit for the handler as
	// a whole); use ClientIP for one per client.
	Key Keyer
	// Class gives a request's priority class. Default nil: ClassDefault
	// for every request. Do not trust a class the client states unless a
	// proxy you run sets it (ClassFromHeader).
	Class func(*http.Request) sluice.Class
	// Wait is how long a request may wait for a place, first in first
	// out among this process's waiters of its key and class, before it is
	// refused. Default 0: refused at once.
	Wait time.Duration
	// Dropped reports the response statuses that tell the adaptive limit
	// the request failed from overload. Default: 503 and 504.
	Dropped func(status int) bool
	// Status is the status of a refusal by the limit per key. Default
	// 429 Too Many Requests; a refusal by the adaptive limit (load
	// shedding) is always 503 Service Unavailable.
	Status int
	// Failure is what happens when the store fails, as in Config:
	// sluice.FailOpen (the default) or FailClosed.
	Failure sluice.FailurePolicy
	// Logger receives store failures (Warn), at most ten lines at once
	// and one a second after. Default slog.Default().
	Logger *slog.Logger
}

// A ConcurrencyLimit is middleware that limits how many requests per key
// are in flight at once: each request holds a lease of the Limiter while
// the handler runs (extended while it outlives half the lease's TTL), and
// releases it when the handler returns. A request refused gets a problem
// details answer with Retry-After when the store knows when a place
// frees. Create one with NewConcurrencyLimit; it is safe for concurrent
// use.
type ConcurrencyLimit struct {
	c   ConcurrencyConfig
	log *slog.Logger
}

// NewConcurrencyLimit returns the middleware of c.
func NewConcurrencyLimit(c ConcurrencyConfig) (*ConcurrencyLimit, error) {
	if c.Limiter == nil {
		return nil, fmt.Errorf("%w: httplimit: no concurrency limiter", sluice.ErrInvalidRequest)
	}
	if err := c.Failure.CheckOpenClosed(); err != nil {
		return nil, fmt.Errorf("httplimit: %w", err)
	}
	if c.Key == nil {
		c.Key = KeyFunc(func(*http.Request) (string, bool) { return "all", true })
	}
	if c.Class == nil {
		c.Class = func(*http.Request) sluice.Class { return sluice.ClassDefault }
	}
	if c.Dropped == nil {
		c.Dropped = func(s int) bool { return s == http.StatusServiceUnavailable || s == http.StatusGatewayTimeout }
	}
	if c.Status == 0 {
		c.Status = http.StatusTooManyRequests
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return &ConcurrencyLimit{c: c, log: slog.New(logthrottle.New(c.Logger.Handler(), logthrottle.Config{}))}, nil
}

// ClassFromHeader returns a Class function that reads the class from the
// request header name ("critical", "default", "sheddable"), and gives
// ClassDefault when it is absent or unknown. Use it only behind a proxy
// that sets or strips the header: a client must not promote itself.
func ClassFromHeader(name string) func(*http.Request) sluice.Class {
	return func(r *http.Request) sluice.Class {
		c, err := sluice.ParseClass(r.Header.Get(name))
		if err != nil {
			return sluice.ClassDefault
		}
		return c
	}
}

// Handler wraps next: each request holds a place while next serves it.
func (m *ConcurrencyLimit) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := m.c.Key.Key(r)
		if !ok {
			next.ServeHTTP(w, r) // no key: not limited, as for the rate rules
			return
		}
		l, err := m.acquire(r.Context(), key, m.c.Class(r))
		switch {
		case err != nil:
			m.storeFailed(r, err)
			if m.c.Failure == sluice.FailClosed {
				WriteProblem(w, Problem{Status: http.StatusServiceUnavailable, Detail: "the limiter's store failed"}, time.Second)
				return
			}
			next.ServeHTTP(w, r)
		case !l.Allowed:
			m.refuse(w, l)
		default:
			m.serve(w, r, next, l)
		}
	})
}

func (m *ConcurrencyLimit) acquire(ctx context.Context, key string, cl sluice.Class) (*sluice.Lease, error) {
	if m.c.Wait <= 0 {
		return m.c.Limiter.Acquire(ctx, key, cl)
	}
	ctx, cancel := context.WithTimeout(ctx, m.c.Wait)
	defer cancel()
	l, err := m.c.Limiter.Wait(ctx, key, cl)
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		err = nil // not a store failure
	}
	return l, err
}

// serve runs next holding l, and releases it after: on a context of its
// own, so that a client that went away does not leave the lease to
// expire.
func (m *ConcurrencyLimit) serve(w http.ResponseWriter, r *http.Request, next http.Handler, l *sluice.Lease) {
	stop := l.KeepAlive(context.WithoutCancel(r.Context()))
	sw := &httpstatus.Writer{ResponseWriter: w}
	defer func() {
		stop()
		if m.c.Dropped(sw.Code()) {
			l.Drop()
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
		defer cancel()
		if err := l.Release(ctx); err != nil {
			m.storeFailed(r, err)
		}
	}()
	next.ServeHTTP(sw.Wrap(), r)
}

func (m *ConcurrencyLimit) refuse(w http.ResponseWriter, l *sluice.Lease) {
	p := Problem{Type: ConcurrencyProblemType, Status: m.c.Status,
		Detail: fmt.Sprintf("%d of %d requests in flight; retry later", l.InUse, l.Limit)}
	if l.Adaptive {
		p.Status, p.Detail = http.StatusServiceUnavailable, "the server is shedding load; retry later"
	}
	p.Title = http.StatusText(p.Status)
	retry := l.RetryAfter
	if retry <= 0 {
		retry = time.Second
	}
	WriteProblem(w, p, retry)
}

func (m *ConcurrencyLimit) storeFailed(r *http.Request, err error) {
	m.log.LogAttrs(r.Context(), slog.LevelWarn, "httplimit: concurrency store failed",
		slog.String("path", r.URL.Path), slog.Any("error", err))
}
