package forwardauth

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/jsonhttp"
	"github.com/sluicehq/sluice/internal/ratelimitheader"
)

// A Login is a login rule whose attempts forward-auth begins, for
// requests that name it (?login=NAME).
type Login struct {
	*guard.Login
	// MaxHold is the longest the endpoint holds a request for its delay
	// before answering; a longer delay, or one while MaxHeld requests
	// are held, is only told (X-Sluice-Delay). Negative: never hold.
	MaxHold time.Duration
}

// MaxHeld bounds the requests the endpoint holds for their delay at
// once: beyond it, it answers at once and tells the delay, so that a
// flood of attempts holds no more than MaxHeld goroutines and sockets.
const MaxHeld = 1024

// The headers of a login's answer, for the proxy to pass on to the
// application (nginx: auth_request_set).
const (
	// UserHeader carries the username the client typed, set by the proxy.
	UserHeader = "X-Sluice-User"
	// TicketHeader carries the attempt's ticket, for /v1/login/fail or
	// succeed.
	TicketHeader = "X-Sluice-Ticket"
	// DelayHeader carries the seconds of delay not served by holding.
	DelayHeader = "X-Sluice-Delay"
	// CaptchaHeader is "true" when the application should demand a
	// CAPTCHA.
	CaptchaHeader = "X-Sluice-Captcha"
	// KnownGoodHeader is "true" when the address logged in to the
	// account before.
	KnownGoodHeader = "X-Sluice-Known-Good"
	// ExemptHeader is "allow-list" on an answer of every kind when the
	// guard exempted the client: nothing was counted.
	ExemptHeader = "X-Sluice-Exempt"
)

// login begins an attempt of the login named name for r, and answers it:
// 200 with the ticket after holding the delay, or a refusal.
func (h *Handler) login(w http.ResponseWriter, r *http.Request, name string, denyStatus int) {
	l, ok := h.logins[name]
	if !ok {
		jsonhttp.Error(w, http.StatusBadRequest, fmt.Sprintf("unknown login %q", name))
		return
	}
	ip, known := h.ip.Addr(r)
	if !known {
		jsonhttp.Error(w, http.StatusBadRequest, "the client's address is unknown: the request did not come through a trusted proxy (forward_auth.trusted_proxies)")
		return
	}
	try := guard.Try{IP: ip, Username: r.Header.Get(UserHeader), CaptchaSolved: r.Header.Get(CaptchaHeader) == "solved"}
	a, err := l.Begin(r.Context(), try)
	if err != nil {
		h.failed(w, r, "login "+name, err)
		return
	}
	if a.Captcha {
		w.Header().Set(CaptchaHeader, "true")
	}
	if !a.Allowed {
		h.refuseLogin(w, a, denyStatus)
		return
	}
	if a.KnownGood {
		w.Header().Set(KnownGoodHeader, "true")
	}
	if a.Guard == guard.Exempt {
		w.Header().Set(ExemptHeader, a.Guard.String())
	}
	w.Header().Set(TicketHeader, a.Ticket().String())
	if left := h.hold(r, a.Delay, l.MaxHold); left > 0 {
		w.Header().Set(DelayHeader, strconv.FormatFloat(left.Seconds(), 'f', 3, 64))
	}
	w.WriteHeader(http.StatusOK)
}

// refuseLogin answers an attempt the login refused: by a list or a ban
// (403, the same whatever the password), or by its limits (denyStatus,
// with Retry-After).
func (h *Handler) refuseLogin(w http.ResponseWriter, a *guard.Attempt, denyStatus int) {
	switch {
	case a.Guard != guard.Pass: // as for every other door
		guard.WriteRefusal(w, guard.Verdict{Action: a.Guard, Left: a.RetryAfter})
		return
	case a.RetryAfter <= 0:
		guard.WriteRefusal(w, guard.Verdict{Action: guard.Refuse})
		return
	}
	httplimit.WriteProblem(w, httplimit.Problem{
		Type: httplimit.ProblemType, Title: "Too Many Requests", Status: denyStatus,
		Detail: fmt.Sprintf("Too many failed logins; retry after %d s.", max(ratelimitheader.CeilSeconds(a.RetryAfter), 1)),
	}, a.RetryAfter)
}

// hold waits out delay, at most maxHold and while fewer than MaxHeld
// requests are held, or until r is cancelled; it returns what is left.
func (h *Handler) hold(r *http.Request, delay, maxHold time.Duration) time.Duration {
	d := min(delay, maxHold)
	if d <= 0 {
		return delay
	}
	select {
	case h.held <- struct{}{}:
		defer func() { <-h.held }()
	default:
		return delay // too many held: tell, do not hold
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return delay - d
	case <-r.Context().Done():
		return delay
	}
}
