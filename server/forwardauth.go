package server

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

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
	gate  *gate
	named map[string]bool // the named rules
}

func newForwardAuth(c *config.Config, api *Server, st *state) (*forwardAuth, error) {
	fa := &forwardAuth{
		c:     c.ForwardAuth,
		ip:    &httplimit.ClientIP{TrustedProxies: c.ForwardAuth.TrustedProxies},
		api:   api,
		gate:  st.gate,
		named: map[string]bool{},
	}
	for _, r := range c.Rules {
		fa.named[r.Name] = true
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

	// The guard judges the client's address, not the key: the lists see
	// both, bans and strikes the address, for every rule.
	ipKey := unknownClient
	ip, known := fa.ip.Addr(r)
	if known {
		ipKey = ip.String()
	}
	key := fa.key(r, ipKey)
	switch fa.gate.listed(ip, key) {
	case rules.Exempt:
		w.Header().Set("X-Sluice-Exempt", "allow-list")
		w.WriteHeader(http.StatusOK)
		return
	case rules.Refuse:
		s.log.InfoContext(r.Context(), "forward-auth: denied by list", "ip", ipKey)
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	if known {
		if left, banned := fa.gate.banned(r.Context(), ipKey); banned {
			w.Header().Set("Retry-After", strconv.FormatInt(max(ratelimitheader.CeilSeconds(left), 1), 10))
			http.Error(w, "banned", http.StatusForbidden)
			return
		}
	}

	res, err := fa.api.Engine().Check(r.Context(), rules.Request{Domain: rule, Descriptors: []rules.Descriptor{rules.Key(key)}, SkipGuard: true})
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
	if known {
		fa.gate.strike(r.Context(), rule, ipKey)
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
