// Package forwardauth is sluice serve's forward-auth endpoint, GET
// /v1/auth: nginx's auth_request, Traefik's ForwardAuth and Caddy's
// forward_auth ask it about the request they are about to pass on,
// described by their headers, and pass it on when it answers 200.
//
// The client's address comes from the connection, or, behind trusted
// proxies, from the X-Forwarded-For hops they appended (see
// httplimit.ClientIP); a client that cannot be told (a malformed
// forwarding header) shares one key, "unknown", so a forged header buys
// no fresh allowance. IPv6 clients are keyed by their network (a /64 by
// default, forward_auth.ipv6_prefix), so that one client cannot rotate
// through the addresses of its network for a fresh allowance each; or,
// with forward_auth.ipv6_adaptive, by its /64 while its /48 is quiet, and
// by the /48 once that /48 rotates through more /64s within an hour than
// a few (httplimit.AdaptivePrefix): never narrower than the /64, and a
// /48 gets at most five /64s' allowances where the fixed /64 gives it
// 65,536.
//
// The request is decided by the rules engine, as every API of the
// service: the guard judges the client's address and the key (allow
// list, deny list, bans), then the rule's limits; each take they deny
// counts in the jails of the rule.
//
// # Answers
//
//	200  allowed (X-Sluice-Exempt: allow-list when the allow list said so,
//	     X-Sluice-Shadowed: true when a shadow rule would have denied)
//	429  over the limit (or 403 with deny_status 403, for nginx), with
//	     Retry-After and the RateLimit fields
//	403  refused by the deny list, or banned (with Retry-After)
//	400  an unknown rule or deny_status, or no rule where several could apply
//	503  the store failed under a rule that fails closed
//
// # Logins
//
// With ?login=NAME the endpoint begins an attempt of the login rule NAME
// (config.Login) instead: the address as above, the username from the
// X-Sluice-User header the proxy sets (with CAPTCHA solved when
// X-Sluice-Captcha is "solved"). Allowed, it holds the request for the
// attempt's progressive delay (at most the login's max_hold, and for at
// most MaxHeld requests at once; what it did not hold is told in
// X-Sluice-Delay) and answers 200 with X-Sluice-Ticket, which the proxy
// passes to the application, and which the application sends back to
// POST /v1/login/fail or /v1/login/succeed once it has checked the
// password. Refused, it answers like a denial: 429 (or deny_status) with
// Retry-After over the limits, 403 on the deny list or a ban; with
// X-Sluice-Captcha: true when a solved CAPTCHA would let it through.
package forwardauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/jsonhttp"
	"github.com/sluicehq/sluice/internal/ratelimitheader"
	"github.com/sluicehq/sluice/server/rules"
)

// UnknownClient is the key part of requests whose client address cannot
// be derived: they share one key.
const UnknownClient = "unknown"

// A Handler is GET /v1/auth for one configuration. Create Handlers with
// New; a Handler is safe for concurrent use.
type Handler struct {
	c        config.ForwardAuth
	parts    []keyPart // c.Key, compiled; nil when the key is the address alone
	ip       *httplimit.ClientIP
	adaptive *httplimit.AdaptivePrefix // with IPv6Adaptive: the ip key
	engine   *rules.Engine
	log      *slog.Logger
	logins   map[string]Login
	held     chan struct{} // a slot per request held for its delay
}

// New returns the forward-auth endpoint of c over engine and logins,
// logging store failures to log. With c.IPv6Adaptive, the grants of
// IPv6 subnets are kept in store, so that every process sharing it
// agrees.
func New(c config.ForwardAuth, engine *rules.Engine, logins map[string]Login, store sluice.Store, log *slog.Logger) (*Handler, error) {
	h := &Handler{
		c:      c,
		parts:  compileKey(c.Key),
		ip:     &httplimit.ClientIP{TrustedProxies: c.TrustedProxies, IPv6Prefix: c.IPv6Prefix},
		engine: engine,
		log:    log,
		logins: logins,
		held:   make(chan struct{}, MaxHeld),
	}
	if c.IPv6Adaptive {
		var err error
		if h.adaptive, err = httplimit.NewAdaptivePrefix(store, httplimit.AdaptiveConfig{ClientIP: h.ip}); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// The headers proxies describe the original request with.
var (
	uriHeaders    = []string{"X-Original-Uri", "X-Forwarded-Uri", "X-Original-Url"} // canonical: see first
	methodHeaders = []string{"X-Original-Method", "X-Forwarded-Method"}
	hostHeaders   = []string{"X-Forwarded-Host", "X-Original-Host"}
)

// ServeHTTP answers a proxy (see the package documentation). Any method
// is accepted: proxies send GET, or the original request's method with
// no body.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rule, login, denyStatus, ok := h.params(w, r)
	if !ok {
		return
	}
	if login != "" {
		h.login(w, r, login, denyStatus)
		return
	}
	var st [1]rules.Status // on the stack: the engine keeps nothing of it
	res := rules.Result{Statuses: st[:0]}
	if err := h.Decide(r.Context(), h.Caller(r), rule, &res); err != nil {
		h.failed(w, r, rule, err)
		return
	}
	h.answer(w, res, denyStatus)
}

// A Caller is who a request to forward-auth is about, as the rules see
// it: the client's address (invalid when unknown) and the descriptor of
// the key its rules count it under, typed once for every rule it is
// checked against.
type Caller struct {
	Client netip.Addr
	Desc   rules.Descriptor
}

// Caller derives r's caller as ServeHTTP does: the client behind the
// trusted proxies and the configured key (an adaptive IPv6 key takes its
// subnet's grant here).
func (h *Handler) Caller(r *http.Request) Caller {
	var buf [64]byte
	ip, ipKey := h.client(r, buf[:0])
	return Caller{Client: ip, Desc: rules.Key(h.key(r, ipKey))}
}

// ByAddress reports whether a request's Caller is a function of its
// client's address alone, as the proxy gives it (the peer's address and
// X-Forwarded-For): the key is the client's address, not an adaptive
// IPv6 one (whose subnet's grant changes with traffic). A caller that
// asks about many requests, such as sluice simulate, may then reuse the
// Caller of an address it has seen.
func (h *Handler) ByAddress() bool { return h.parts == nil && h.adaptive == nil }

// Decide decides c under the named rule as ServeHTTP does, without
// answering, into res (whose statuses it reuses: see
// rules.Engine.CheckInto). sluice simulate replays access log lines
// through Caller and Decide, so that a replay decides as the service
// would.
func (h *Handler) Decide(ctx context.Context, c Caller, rule string, res *rules.Result) error {
	d := [1]rules.Descriptor{c.Desc} // on the stack: the engine keeps nothing of it
	return h.engine.CheckInto(ctx, rules.Request{Domain: rule, Descriptors: d[:], Client: c.Client}, res)
}

// IPv6Stats returns the counts of the adaptive IPv6 keys (zero without
// forward_auth.ipv6_adaptive), since the Handler was made.
func (h *Handler) IPv6Stats() httplimit.AdaptiveStats {
	if h.adaptive == nil {
		return httplimit.AdaptiveStats{}
	}
	return h.adaptive.Stats()
}

// client returns r's client address (invalid when unknown) and its key,
// appended to buf.
func (h *Handler) client(r *http.Request, buf []byte) (netip.Addr, []byte) {
	ip, known := h.ip.Addr(r)
	if !known {
		return ip, append(buf, UnknownClient...)
	}
	if h.adaptive != nil {
		return ip, append(buf, h.adaptive.KeyOf(r.Context(), ip)...)
	}
	return ip, h.ip.AppendKeyOf(buf, ip)
}

// params reads the rule (or the login) and the deny status of r, or
// answers 400.
func (h *Handler) params(w http.ResponseWriter, r *http.Request) (rule, login string, denyStatus int, ok bool) {
	q := r.URL.Query()
	denyStatus = h.c.DenyStatus
	switch v := q.Get("deny_status"); v {
	case "":
	case "403", "429":
		denyStatus, _ = strconv.Atoi(v)
	default:
		jsonhttp.Error(w, http.StatusBadRequest, "deny_status must be 403 or 429")
		return "", "", 0, false
	}
	if login = q.Get("login"); login != "" {
		return "", login, denyStatus, true
	}
	rule = h.c.Rule
	if v := q.Get("rule"); v != "" {
		rule = v
	}
	if rule == "" {
		jsonhttp.Error(w, http.StatusBadRequest, "which rule? name one with ?rule=NAME, or set forward_auth.rule in the configuration (it defaults only when the file has one rule)")
		return "", "", 0, false
	}
	if !h.engine.IsNamed(rule) {
		jsonhttp.Error(w, http.StatusBadRequest, "unknown rule "+strconv.Quote(rule)+" (forward-auth applies the named rules of the configuration)")
		return "", "", 0, false
	}
	return rule, "", denyStatus, true
}

// answer writes the engine's result for a proxy.
func (h *Handler) answer(w http.ResponseWriter, res rules.Result, denyStatus int) {
	st := res.Statuses[0]
	switch st.Guard {
	case guard.Exempt:
		w.Header().Set(ExemptHeader, st.Guard.String())
		w.WriteHeader(http.StatusOK)
		return
	case guard.Refuse, guard.Banned:
		guard.WriteRefusal(w, guard.Verdict{Action: st.Guard, Left: st.Decision.RetryAfter})
		return
	}
	st.Rule.SetHeaders(w.Header(), st.Decision)
	switch {
	case res.Allowed && st.Shadowed:
		w.Header().Set("X-Sluice-Shadowed", "true")
		fallthrough
	case res.Allowed:
		w.WriteHeader(http.StatusOK)
	default:
		httplimit.WriteProblem(w, httplimit.Problem{
			Type: httplimit.ProblemType, Title: "Too Many Requests", Status: denyStatus,
			Detail:           fmt.Sprintf("Too many requests; retry after %d s.", max(ratelimitheader.CeilSeconds(st.Decision.RetryAfter), 1)),
			ViolatedPolicies: []string{st.Rule.ID},
		}, st.Decision.RetryAfter)
	}
}

// failed answers a check that failed: the store failed under a
// fail-closed rule (503), or the request was impossible (400).
func (h *Handler) failed(w http.ResponseWriter, r *http.Request, rule string, err error) {
	switch {
	case errors.Is(err, sluice.ErrInvalidRequest), errors.Is(err, sluice.ErrCostExceedsBurst):
		jsonhttp.Error(w, http.StatusBadRequest, err.Error())
	case r.Context().Err() != nil:
		jsonhttp.Error(w, http.StatusServiceUnavailable, "request cancelled")
	default:
		h.log.ErrorContext(r.Context(), "forward-auth: store failed", "rule", rule, "err", err)
		jsonhttp.Error(w, http.StatusServiceUnavailable, "the store failed to decide; try again")
	}
}

// key builds the key of a request from the configured parts, joined by
// '|', whose client's key is ip: one allocation, the string.
func (h *Handler) key(r *http.Request, ip []byte) string {
	if h.parts == nil {
		return string(ip)
	}
	var buf [256]byte
	k := buf[:0]
	for i, p := range h.parts {
		if i > 0 {
			k = append(k, '|')
		}
		k = p.appendTo(k, r, ip)
	}
	return string(k)
}

// A keyPart is a part of forward-auth's key (config.ForwardAuth.Key),
// compiled when the configuration is built.
type keyPart struct {
	kind   partKind
	header string // for partHeader: the header's canonical name
}

type partKind uint8

const (
	partIP partKind = iota
	partMethod
	partURI
	partPath
	partHost
	partHeader
)

// compileKey compiles the parts of a key, as config validated them; nil
// for the client's address alone, the default.
func compileKey(parts []string) []keyPart {
	if len(parts) == 0 || len(parts) == 1 && parts[0] == "ip" {
		return nil
	}
	kinds := map[string]partKind{"ip": partIP, "method": partMethod, "uri": partURI, "path": partPath, "host": partHost}
	out := make([]keyPart, len(parts))
	for i, p := range parts {
		k, ok := kinds[p]
		if !ok {
			name, _ := strings.CutPrefix(p, "header:")
			out[i] = keyPart{kind: partHeader, header: http.CanonicalHeaderKey(name)}
			continue
		}
		out[i] = keyPart{kind: k}
	}
	return out
}

// appendTo appends the part of r's key to buf, whose client's address
// key is ip.
func (p keyPart) appendTo(buf []byte, r *http.Request, ip []byte) []byte {
	switch p.kind {
	case partIP:
		return append(buf, ip...)
	case partMethod:
		return append(buf, first(r, methodHeaders, r.Method)...)
	case partURI:
		return append(buf, first(r, uriHeaders, "")...)
	case partPath:
		u := first(r, uriHeaders, "")
		if i := strings.IndexAny(u, "?#"); i >= 0 {
			u = u[:i]
		}
		return append(buf, u...)
	case partHost:
		return append(buf, first(r, hostHeaders, r.Host)...)
	}
	if v := r.Header[p.header]; len(v) > 0 { // the name is canonical already
		return append(buf, v[0]...)
	}
	return buf
}

// first returns the value of the first of headers (canonical names) that
// r has, or def: Header.Get's answer, without canonicalizing a name
// that is canonical already.
func first(r *http.Request, headers []string, def string) string {
	for _, h := range headers {
		if v := r.Header[h]; len(v) > 0 && v[0] != "" {
			return v[0]
		}
	}
	return def
}
