package httpapi

import (
	"errors"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/jsonhttp"
)

// LoginRequest is the body of POST /v1/login/begin, /v1/login/fail and
// /v1/login/succeed: one login attempt, by a named login of the
// configuration.
type LoginRequest struct {
	// Login names the login rule.
	Login string `json:"login"`
	// User is what the client typed as its username, any bytes.
	User string `json:"user"`
	// Address is the client's IP address.
	Address string `json:"address"`
	// CaptchaSolved reports, for begin, that the client solved a CAPTCHA
	// the application demanded.
	CaptchaSolved bool `json:"captcha_solved,omitempty"`
	// Ticket is, for fail and succeed, the ticket begin answered.
	Ticket string `json:"ticket,omitempty"`
}

// LoginResponse is the answer to POST /v1/login/begin.
type LoginResponse struct {
	// Allowed reports whether the application may check the password.
	// When false, answer as for a wrong password, or with 429 and
	// retry_after, the same whether the account exists or not.
	Allowed bool `json:"allowed"`
	// Ticket is, when allowed, what fail or succeed must send back: the
	// attempt's reserved failure, settled once.
	Ticket string `json:"ticket,omitempty"`
	// Delay is how many seconds to wait before answering the client: the
	// progressive delay for its recent failures.
	Delay float64 `json:"delay"`
	// RetryAfter is, when not allowed, how many seconds until the attempt
	// would be allowed without a CAPTCHA; 0 for a refusal that does not
	// lapse (the deny list).
	RetryAfter float64 `json:"retry_after"`
	// Captcha reports that the application should demand a CAPTCHA.
	Captcha bool `json:"captcha,omitempty"`
	// KnownGood reports that the address logged in to this account
	// before.
	KnownGood bool `json:"known_good,omitempty"`
	// Reason says which rule decided, for logs: never show it to the
	// person logging in.
	Reason string `json:"reason,omitempty"`
}

// SettleResponse is the answer to POST /v1/login/fail and succeed.
type SettleResponse struct {
	// Duplicate reports that the ticket was settled before: nothing was
	// done again.
	Duplicate bool `json:"duplicate,omitempty"`
	// Banned reports, for a failure, that it made the login's jail ban
	// the address; BanSeconds is how long for.
	Banned     bool    `json:"banned,omitempty"`
	BanSeconds float64 `json:"ban_seconds,omitempty"`
}

// loginOf checks what every login call requires, and returns the login
// and the attempt's try.
func (h *Handler) loginOf(req LoginRequest) (*guard.Login, guard.Try, *apiError) {
	l := h.logins[req.Login]
	if l == nil {
		names := make([]string, 0, len(h.logins))
		for n := range h.logins {
			names = append(names, n)
		}
		slices.Sort(names)
		return nil, guard.Try{}, badRequest("unknown login %q (want one of %s)", req.Login, strings.Join(names, ", "))
	}
	ip, err := netip.ParseAddr(req.Address)
	if err != nil {
		return nil, guard.Try{}, badRequest("address %q is not an IP address", req.Address)
	}
	return l, guard.Try{IP: ip, Username: req.User, CaptchaSolved: req.CaptchaSolved}, nil
}

func (h *Handler) loginBegin(w http.ResponseWriter, r *http.Request) *apiError {
	var req LoginRequest
	if err := h.decode(w, r, &req); err != nil {
		return err
	}
	l, try, aerr := h.loginOf(req)
	if aerr != nil {
		return aerr
	}
	a, err := l.Begin(r.Context(), try)
	if err != nil {
		return h.engineError(r, req.Login, err)
	}
	jsonhttp.Write(w, http.StatusOK, NewLoginResponse(a))
	return nil
}

// NewLoginResponse renders an attempt as the API answers it.
func NewLoginResponse(a *guard.Attempt) LoginResponse {
	resp := LoginResponse{Allowed: a.Allowed, Delay: Seconds(a.Delay), RetryAfter: Seconds(a.RetryAfter),
		Captcha: a.Captcha, KnownGood: a.KnownGood, Reason: a.Reason}
	if a.Allowed {
		resp.Ticket = a.Ticket().String()
	}
	return resp
}

// loginSettle serves fail (failed) and succeed.
func (h *Handler) loginSettle(failed bool) func(http.ResponseWriter, *http.Request) *apiError {
	return func(w http.ResponseWriter, r *http.Request) *apiError {
		var req LoginRequest
		if err := h.decode(w, r, &req); err != nil {
			return err
		}
		l, try, aerr := h.loginOf(req)
		if aerr != nil {
			return aerr
		}
		st, err := l.Settle(r.Context(), try, req.Ticket, failed)
		if errors.Is(err, sluice.ErrInvalidRequest) {
			return badRequest("%v", err)
		} else if err != nil {
			return h.engineError(r, req.Login, err)
		}
		resp := SettleResponse{Duplicate: st.Duplicate, Banned: st.Banned}
		if st.Banned {
			resp.BanSeconds = Seconds(st.Ban.Until.Sub(st.Ban.Since))
		}
		jsonhttp.Write(w, http.StatusOK, resp)
		return nil
	}
}
