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
	"github.com/sluicehq/sluice/wire"
)

// loginOf checks what every login call requires, and returns the login
// and the attempt's try.
func (h *Handler) loginOf(req wire.LoginRequest) (*guard.Login, guard.Try, *apiError) {
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
	var req wire.LoginRequest
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
func NewLoginResponse(a *guard.Attempt) wire.LoginResponse {
	resp := wire.LoginResponse{Allowed: a.Allowed, Delay: wire.Seconds(a.Delay), RetryAfter: wire.Seconds(a.RetryAfter),
		Captcha: a.Captcha, KnownGood: a.KnownGood, Reason: a.Reason}
	if a.Guard != guard.Pass {
		resp.Guard = a.Guard.String()
	}
	if a.Allowed {
		resp.Ticket = a.Ticket().String()
	}
	return resp
}

// loginSettle serves fail and succeed, which end ends the attempt with:
// (*guard.Login).Fail or Succeed.
func (h *Handler) loginSettle(end guard.Ending) func(http.ResponseWriter, *http.Request) *apiError {
	return func(w http.ResponseWriter, r *http.Request) *apiError {
		var req wire.LoginRequest
		if err := h.decode(w, r, &req); err != nil {
			return err
		}
		l, try, aerr := h.loginOf(req)
		if aerr != nil {
			return aerr
		}
		st, err := end(l, r.Context(), try, req.Ticket)
		if errors.Is(err, sluice.ErrInvalidRequest) {
			return badRequest("%v", err)
		} else if err != nil {
			return h.engineError(r, req.Login, err)
		}
		resp := wire.SettleResponse{Duplicate: st.Duplicate, Banned: st.Banned}
		if st.Banned {
			resp.BanSeconds = wire.Seconds(st.Ban.Until.Sub(st.Ban.Since))
		}
		jsonhttp.Write(w, http.StatusOK, resp)
		return nil
	}
}
