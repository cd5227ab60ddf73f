package forwardauth_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/testing/storefault"
	"github.com/sluicehq/sluice/server/forwardauth"
	"github.com/sluicehq/sluice/server/rules"
)

// t0 is the time of every decision: no allowance refills during a test.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// baseConfig has a rule for forward-auth, a shadow rule, a proxy it
// trusts, and allow and deny lists.
const baseConfig = `rules:
  - name: api
    limits: ["2/min"]
  - name: trial
    limits: ["1/min"]
    shadow: true
forward_auth:
  rule: api
  trusted_proxies: [10.0.0.0/8]
guard:
  allow: [192.0.2.0/24]
  deny: [198.51.100.0/24]
`

// newHandler returns the forward-auth endpoint of the configuration
// text, over a store that fails on demand, with the guard of its lists.
func newHandler(t testing.TB, text string) (*forwardauth.Handler, *storefault.Store) {
	t.Helper()
	c, err := config.Parse("test.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	var allow, deny guard.List
	for _, e := range c.Guard.Allow {
		allow.Add(e)
	}
	for _, e := range c.Guard.Deny {
		deny.Add(e)
	}
	store := storefault.New(t)
	e, err := rules.New(rules.Config{Store: store, Rules: c.Rules, Clock: func() time.Time { return t0 },
		Guard: guard.NewGuard(guard.GuardConfig{Allow: &allow, Deny: &deny})})
	if err != nil {
		t.Fatal(err)
	}
	h, err := forwardauth.New(c.ForwardAuth, e, nil, store, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return h, store
}

// req is a request a proxy sends: from client (an address), with the
// query and the headers, written "Name: value".
type req struct {
	client  string
	query   string
	headers []string
}

// serve sends r to h and returns the answer.
func serve(h http.Handler, r req) *httptest.ResponseRecorder {
	hr := httptest.NewRequest(http.MethodGet, "/v1/auth"+r.query, nil)
	hr.RemoteAddr = netip.AddrPortFrom(netip.MustParseAddr(r.client), 41000).String()
	for _, kv := range r.headers {
		k, v, _ := strings.Cut(kv, ": ")
		hr.Header.Add(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, hr)
	return w
}

// times returns n copies of r.
func times(n int, r req) []req {
	out := make([]req, n)
	for i := range out {
		out[i] = r
	}
	return out
}

// from returns a request of client for each of clients.
func from(clients ...string) []req {
	out := make([]req, len(clients))
	for i, c := range clients {
		out[i] = req{client: c}
	}
	return out
}

// TestHandler sends each case's requests to a fresh endpoint and checks
// the answer to the last: its status and the headers named.
func TestHandler(t *testing.T) {
	const client = "203.0.113.7"
	proxied := func(xff string) req { return req{client: "10.0.0.1", headers: []string{"X-Forwarded-For: " + xff}} }
	tests := []struct {
		name    string
		config  string // default baseConfig
		deny    string // an entry added to the deny list
		reqs    []req
		want    int
		headers []string // "Name: value" of the last answer; "Name: " for any value
	}{
		{name: "allowed", reqs: from(client), want: 200,
			headers: []string{`RateLimit-Policy: "api";q=2;w=60`, `RateLimit: "api";r=1;t=30`}},
		{name: "over the limit", reqs: times(3, req{client: client}), want: 429,
			headers: []string{"Retry-After: 30", "Content-Type: application/problem+json"}},
		{name: "deny_status 403 asked", reqs: times(3, req{client: client, query: "?deny_status=403"}), want: 403,
			headers: []string{"Retry-After: 30"}},
		{name: "deny_status 403 configured", config: strings.Replace(baseConfig, "  rule: api\n", "  rule: api\n  deny_status: 403\n", 1),
			reqs: times(3, req{client: client}), want: 403},
		{name: "deny_status of another code", reqs: []req{{client: client, query: "?deny_status=500"}}, want: 400},
		{name: "an unknown rule", reqs: []req{{client: client, query: "?rule=nope"}}, want: 400},
		{name: "no rule named", config: strings.Replace(baseConfig, "  rule: api\n", "", 1), reqs: from(client), want: 400},
		{name: "a shadow rule would deny", reqs: times(2, req{client: client, query: "?rule=trial"}), want: 200,
			headers: []string{"X-Sluice-Shadowed: true"}},
		{name: "the allow list", reqs: from("192.0.2.9", "192.0.2.9", "192.0.2.9"), want: 200,
			headers: []string{"X-Sluice-Exempt: allow-list"}},
		{name: "the deny list", reqs: from("198.51.100.1"), want: 403},
		{name: "the deny list, forwarded", reqs: []req{proxied("198.51.100.1")}, want: 403},
		{name: "a trusted proxy's clients apart", reqs: []req{proxied("203.0.113.1"), proxied("203.0.113.2"), proxied("203.0.113.3")}, want: 200},
		{name: "a trusted proxy's client counted", reqs: []req{proxied("203.0.113.1"), proxied("203.0.113.1"), proxied("203.0.113.1")}, want: 429},
		{name: "a forged hop from an untrusted client", reqs: []req{
			{client: client, headers: []string{"X-Forwarded-For: 203.0.113.1"}},
			{client: client, headers: []string{"X-Forwarded-For: 203.0.113.2"}},
			{client: client, headers: []string{"X-Forwarded-For: 192.0.2.9"}},
		}, want: 429},
		{name: "malformed hops share one key", reqs: []req{proxied("nope"), proxied("not an address"), proxied("300.1.1.1")}, want: 429},
		{name: "IPv6 by its /64", reqs: from("2001:db8::1", "2001:db8::2", "2001:db8::ffff:3"), want: 429},
		{name: "IPv6 networks apart", reqs: from("2001:db8::1", "2001:db8:0:1::1", "2001:db8:0:2::1"), want: 200},
		{name: "IPv6 by its /56", config: strings.Replace(baseConfig, "  rule: api\n", "  rule: api\n  ipv6_prefix: 56\n", 1),
			reqs: from("2001:db8::1", "2001:db8:0:1::1", "2001:db8:0:2::1"), want: 429},
		{name: "key parts apart", config: strings.Replace(baseConfig, "  rule: api\n", "  rule: api\n  key: [ip, method, \"header:X-Tenant\"]\n", 1),
			reqs: []req{
				{client: client, headers: []string{"X-Tenant: a"}},
				{client: client, headers: []string{"X-Tenant: a"}},
				{client: client, headers: []string{"X-Tenant: b"}},
				{client: client, headers: []string{"X-Tenant: a", "X-Original-Method: POST"}},
			}, want: 200},
		{name: "key parts counted", config: strings.Replace(baseConfig, "  rule: api\n", "  rule: api\n  key: [\"header:X-Tenant\"]\n", 1),
			reqs: []req{
				{client: "203.0.113.1", headers: []string{"X-Tenant: a"}},
				{client: "203.0.113.2", headers: []string{"X-Tenant: a"}},
				{client: "203.0.113.3", headers: []string{"X-Tenant: a"}},
			}, want: 429},
		{name: "a key on the deny list", config: strings.Replace(baseConfig, "  rule: api\n", "  rule: api\n  key: [\"header:X-Tenant\"]\n", 1),
			deny: "key:mallory",
			reqs: []req{{client: client, headers: []string{"X-Tenant: mallory"}}}, want: 403},
		{name: "an unknown login", reqs: []req{{client: client, query: "?login=nope"}}, want: 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := cmpOr(tt.config, baseConfig)
			if tt.deny != "" {
				text = strings.Replace(text, "deny: [", "deny: ["+strconv.Quote(tt.deny)+", ", 1)
			}
			h, _ := newHandler(t, text)
			var w *httptest.ResponseRecorder
			for _, r := range tt.reqs {
				w = serve(h, r)
			}
			if w.Code != tt.want {
				t.Errorf("status = %d %s, want %d", w.Code, w.Body, tt.want)
			}
			for _, kv := range tt.headers {
				k, v, _ := strings.Cut(kv, ": ")
				if got := w.Header().Get(k); got != v && (v != "" || got == "") {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestHandlerStoreFailure: a store that fails is 503, the request's
// body saying to try again; the same store back is an answer again.
func TestHandlerStoreFailure(t *testing.T) {
	h, store := newHandler(t, baseConfig)
	for _, tt := range []struct {
		fail bool
		want int
	}{{true, 503}, {false, 200}} {
		store.SetFail(tt.fail)
		w := serve(h, req{client: "203.0.113.7"})
		if body, _ := io.ReadAll(w.Body); w.Code != tt.want || tt.fail && !strings.Contains(string(body), "try again") {
			t.Errorf("store failing %v: %d %s, want %d", tt.fail, w.Code, body, tt.want)
		}
	}
}

// TestDecide decides as ServeHTTP would, about the caller Caller
// derives: the client, and a descriptor keyed by the client's network.
func TestDecide(t *testing.T) {
	h, _ := newHandler(t, baseConfig)
	var res rules.Result
	for i, client := range []string{"203.0.113.7", "2001:db8::5"} {
		r := httptest.NewRequest(http.MethodGet, "/v1/auth", nil)
		r.RemoteAddr = netip.AddrPortFrom(netip.MustParseAddr(client), 1).String()
		c := h.Caller(r)
		err := h.Decide(r.Context(), c, "api", &res)
		want := []string{"203.0.113.7", "2001:db8::/64"}[i]
		if err != nil || !res.Allowed || len(res.Statuses) != 1 || c.Desc.Actor.Key != want || c.Client != netip.MustParseAddr(client) {
			t.Errorf("Decide(%s) = %+v, %v about %+v; want allowed, of %s", client, res, err, c, want)
		}
	}
}

// FuzzHandler sends requests of any forwarding header and key header:
// the answer is a status the package documents, never a panic.
func FuzzHandler(f *testing.F) {
	f.Add("203.0.113.1, 10.0.0.2", "alice", "/x?y")
	f.Add("[2001:db8::1]:80", "\xff", "")
	f.Add(strings.Repeat("1.2.3.4, ", 100), strings.Repeat("k", 300), "%zz")
	c := strings.Replace(baseConfig, "  rule: api\n", "  rule: api\n  key: [ip, path, \"header:X-Tenant\"]\n", 1)
	h, _ := newHandler(f, c)
	f.Fuzz(func(t *testing.T, xff, tenant, uri string) {
		w := serve(h, req{client: "10.1.2.3", headers: []string{
			"X-Forwarded-For: " + xff, "X-Tenant: " + tenant, "X-Original-URI: " + uri}})
		if w.Code != 200 && w.Code != 403 && w.Code != 429 {
			t.Errorf("X-Forwarded-For %q, X-Tenant %q, URI %q: %d %s", xff, tenant, uri, w.Code, w.Body)
		}
	})
}
