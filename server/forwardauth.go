package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/httplimit"
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
}

func newForwardAuth(c *config.Config, api *Server, st *state) (*forwardAuth, error) {
	fa := &forwardAuth{
		c:     c.ForwardAuth,
		ip:    &httplimit.ClientIP{TrustedProxies: c.ForwardAuth.TrustedProxies},
		api:   api,
		st:    st,
		jails: map[string][]string{},
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
	ru := fa.api.rules[rule]
	if ru == nil {
		writeError(w, http.StatusBadRequest, "unknown rule "+strconv.Quote(rule)+" (want one of "+fa.api.names+")")
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
			w.Header().Set("Retry-After", strconv.FormatInt(max(ceilSeconds(left), 1), 10))
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

	d, err := ru.lim.Allow(r.Context(), key)
	if err != nil {
		e := fa.api.limiterError(r, ru, err)
		writeError(w, e.status, e.msg)
		return
	}
	ru.fields.write(w.Header(), d)
	if d.Allowed {
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
