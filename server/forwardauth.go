package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/ratelimitheader"
	"github.com/sluicehq/sluice/server/rules"
)

// forwardAuth is GET /v1/auth for one configuration: nginx auth_request,
// Traefik ForwardAuth and Caddy forward_auth ask it about the request
// they are about to pass on, described by their headers.
type forwardAuth struct {
	c     config.ForwardAuth
	ip    *httplimit.ClientIP
	api   *Server
	st    *state
	jails map[string][]string // rule → jails counting its denials
	named map[string]bool     // the named rules
}

func newForwardAuth(c *config.Config, api *Server, st *state) (*forwardAuth, error) {
	fa := &forwardAuth{
		c:     c.ForwardAuth,
		ip:    &httplimit.ClientIP{TrustedProxies: c.ForwardAuth.TrustedProxies},
		api:   api,
		st:    st,
		jails: map[string][]string{},
		named: map[string]bool{},
	}
	for _, r := range c.Rules {
		fa.named[r.Name] = true
	}
	for _, j := range c.Guard.Jails {
		for _, r := range j.Rules {
			fa.jails[r] = append(fa.jails[r], j.Name)
		}
	}
	return fa, nil
}

// The headers proxies describe the original request with.
var (
	uriHeaders    = []string{"X-Original-URI", "X-Forwarded-Uri", "X-Original-Url"}
	methodHeaders = []string{"X-Original-Method", "X-Forwarded-Method"}
	hostHeaders   = []string{"X-Forwarded-Host", "X-Original-Host"}
)

// unknownClient is the key part of requests whose client address cannot
// be derived (a malformed forwarding header): they share one key, so a
// forged header buys no fresh allowance.
const unknownClient = "unknown"

// serveAuth answers a proxy: 200 lets the request through, the deny
// status (429, or 403 for nginx) refuses it with Retry-After and the
// RateLimit fields, 403 refuses a denied or banned address, 503 a rule
// that fails closed while the store is down. Any method is accepted:
// proxies send GET, or the original request's method with no body.
func (s *Service) serveAuth(w http.ResponseWriter, r *http.Request) {
	fa := s.state.Load().auth
	q := r.URL.Query()
	rule := fa.c.Rule
	if v := q.Get("rule"); v != "" {
		rule = v
	}
	if !fa.named[rule] {
		writeError(w, http.StatusBadRequest, "unknown rule "+strconv.Quote(rule)+" (forward-auth applies the named rules of the configuration)")
		return
	}
	denyStatus := fa.c.DenyStatus
	switch v := q.Get("deny_status"); v {
	case "":
	case "403", "429":
		denyStatus, _ = strconv.Atoi(v)
	default:
		writeError(w, http.StatusBadRequest, "deny_status must be 403 or 429")
		return
	}

	ipKey := unknownClient
	if ip, ok := fa.ip.Addr(r); ok {
		ipKey = ip.String()
		switch {
		case fa.st.allow.Contains(ip):
			w.Header().Set("X-Sluice-Exempt", "allow-list")
			w.WriteHeader(http.StatusOK)
			return
		case fa.st.deny.Contains(ip):
			s.log.InfoContext(r.Context(), "forward-auth: denied by list", "ip", ipKey)
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		if left, banned := s.banned(r.Context(), fa.st, ipKey); banned {
			w.Header().Set("Retry-After", strconv.FormatInt(max(ratelimitheader.CeilSeconds(left), 1), 10))
			http.Error(w, "banned", http.StatusForbidden)
			return
		}
	}
	key := fa.key(r, ipKey)
	if fa.st.allow.ContainsKey(key) {
		w.Header().Set("X-Sluice-Exempt", "allow-list")
		w.WriteHeader(http.StatusOK)
		return
	}
	if fa.st.deny.ContainsKey(key) {
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}

	res, err := fa.api.Engine().Check(r.Context(), rules.Request{Domain: rule, Descriptors: []rules.Descriptor{rules.Key(key)}})
	if err != nil {
		s.authError(w, r, rule, err)
		return
	}
	st := res.Statuses[0]
	if st.Rule != nil {
		st.Rule.SetHeaders(w.Header(), st.Decision)
	}
	if res.Allowed {
		if st.Shadowed {
			w.Header().Set("X-Sluice-Shadowed", "true")
		}
		w.WriteHeader(http.StatusOK)
		return
	}
	if ipKey != unknownClient {
		for _, name := range fa.jails[rule] {
			j := fa.st.jails[name]
			if _, _, err := j.Fail(r.Context(), ipKey, "denials under rule "+rule); err != nil {
				s.log.WarnContext(r.Context(), "forward-auth: jail not told", "jail", name, "err", err)
			}
		}
	}
	http.Error(w, "rate limited", denyStatus)
}

// authError answers a check that failed: the store failed under a
// fail-closed rule (503), or the request was impossible (400).
func (s *Service) authError(w http.ResponseWriter, r *http.Request, rule string, err error) {
	switch {
	case errors.Is(err, sluice.ErrInvalidRequest), errors.Is(err, sluice.ErrCostExceedsBurst):
		writeError(w, http.StatusBadRequest, err.Error())
	case r.Context().Err() != nil:
		writeError(w, http.StatusServiceUnavailable, "request cancelled")
	default:
		s.log.ErrorContext(r.Context(), "forward-auth: store failed", "rule", rule, "err", err)
		writeError(w, http.StatusServiceUnavailable, "the store failed to decide; try again")
	}
}

// banned reports whether key is banned in any jail, and for how long.
// A store failure is logged and does not ban: the rule's limits still
// apply, under its own failure policy.
func (s *Service) banned(ctx context.Context, st *state, key string) (left time.Duration, banned bool) {
	for name, j := range st.jails {
		l, b, err := j.Banned(ctx, key)
		if err != nil {
			s.log.WarnContext(ctx, "forward-auth: jail not checked", "jail", name, "err", err)
			continue
		}
		if b && l > left {
			left, banned = l, true
		}
	}
	return left, banned
}

// key builds the key of a request from the configured parts, joined by
// '|'.
func (fa *forwardAuth) key(r *http.Request, ip string) string {
	if len(fa.c.Key) == 1 && fa.c.Key[0] == "ip" {
		return ip
	}
	var b strings.Builder
	for i, part := range fa.c.Key {
		if i > 0 {
			b.WriteByte('|')
		}
		switch part {
		case "ip":
			b.WriteString(ip)
		case "method":
			b.WriteString(first(r, methodHeaders, r.Method))
		case "uri":
			b.WriteString(first(r, uriHeaders, ""))
		case "path":
			u := first(r, uriHeaders, "")
			if i := strings.IndexAny(u, "?#"); i >= 0 {
				u = u[:i]
			}
			b.WriteString(u)
		case "host":
			b.WriteString(first(r, hostHeaders, r.Host))
		default:
			if h, ok := strings.CutPrefix(part, "header:"); ok {
				b.WriteString(r.Header.Get(h))
			}
		}
	}
	return b.String()
}

// first returns the value of the first of headers that r has, or def.
func first(r *http.Request, headers []string, def string) string {
	for _, h := range headers {
		if v := r.Header.Get(h); v != "" {
			return v
		}
	}
	return def
}
