package admin

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/memory"
)

// Sign-in attempts with a wrong token (on the login form, or as Bearer or
// Basic credentials) are limited per client address: SignInFailures a
// minute, a burst of as many, counted by sluice's own GCRA on a small
// memory store of the handler's. An address past it gets 429 on every
// request that needs a token until the limit lets it try again, right
// token or wrong: else a guess that succeeds would still be told apart.
// Behind a reverse proxy, every client is the proxy's address.
const (
	// SignInFailures is how many wrong tokens an address may try a
	// minute.
	SignInFailures = 10
	// throttleBytes caps the memory of the counts: at its cap the store
	// forgets the oldest addresses, charged as over the limit.
	throttleBytes = 4 << 20
)

// newThrottle returns the limiter of wrong sign-in attempts.
func newThrottle(clock func() time.Time) (*sluice.Limiter, error) {
	return sluice.New(memory.New(memory.Config{MaxBytes: throttleBytes}), sluice.Config{
		Limits: []sluice.Limit{sluice.PerMinute(SignInFailures)}, Action: "admin-sign-in", Clock: clock})
}

// clientOf returns the address r came from.
func clientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// retryAfter reports whether r's address tried too many wrong tokens,
// and in how many seconds it may try again. A failing store lets it
// through: the token is still checked.
func (h *handler) retryAfter(r *http.Request) (int, bool) {
	d, err := h.throttle.Peek(context.WithoutCancel(r.Context()), clientOf(r))
	if err != nil || d.Allowed {
		return 0, false
	}
	return int(math.Ceil(d.RetryAfter.Seconds())), true
}

// throttled answers 429 when r's address tried too many wrong tokens,
// and reports whether it did.
func (h *handler) throttled(w http.ResponseWriter, r *http.Request) bool {
	secs, ok := h.retryAfter(r)
	if ok {
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf("too many wrong tokens from %s: try again in %d s", clientOf(r), secs))
	}
	return ok
}

// failed counts a wrong token from r's address.
func (h *handler) failed(r *http.Request) {
	_, _ = h.throttle.Admit(context.WithoutCancel(r.Context()), clientOf(r))
}
