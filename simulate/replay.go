package simulate

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/server/forwardauth"
	"github.com/sluicehq/sluice/server/rules"
	"github.com/sluicehq/sluice/simulate/accesslog"
	"github.com/sluicehq/sluice/store/memory"
)

// DefaultUserHeader is the header a log line's user is sent in (as an
// authenticating proxy such as oauth2-proxy or Traefik's ForwardAuth
// would set it), for a key part "header:X-Forwarded-User".
const DefaultUserHeader = "X-Forwarded-User"

// A Route applies a named rule to the requests whose URI starts with
// PathPrefix, as a proxy's location with auth_request does: a request
// takes the routes of the longest prefix it matches, so that with routes
// "web" and "login=/login" the sign-ins are checked by login only and
// everything else by web. Routes without a prefix match every request.
type Route struct {
	Rule       string
	PathPrefix string
}

// ParseRoute reads "RULE" or "RULE=/path/prefix".
func ParseRoute(s string) (Route, error) {
	rule, prefix, _ := strings.Cut(s, "=")
	if rule == "" || (prefix != "" && !strings.HasPrefix(prefix, "/")) {
		return Route{}, fmt.Errorf("rule %q: want NAME or NAME=/path/prefix", s)
	}
	return Route{Rule: rule, PathPrefix: prefix}, nil
}

// Config configures a Replayer. The zero value of each field but Rules
// means its default.
type Config struct {
	// Rules is the configuration to replay through, as sluice serve
	// would load it. Required. Its store section is not used: a replay
	// decides on a memory store of its own, with the file's memory cap
	// when it names the memory store, so it never touches a shared one.
	Rules *config.Config
	// Routes choose which named rules each request is checked against.
	// Default: forward_auth.rule when set, else every named rule.
	Routes []Route
	// UserHeader is the header a line's user is sent in. Default
	// DefaultUserHeader.
	UserHeader string
	// TopKeys is how many keys the report lists per rule. Default 20.
	TopKeys int
	// Sketch is how many keys the heavy-hitter sketch of each path
	// prefix's traffic holds (that of each rule's denied keys, a
	// quarter). Default 4096, less with more than 16 rules (their
	// sketches share 65,536 keys, at least 256 each).
	Sketch int
	// NoRates skips the distributions of requests per key per window of
	// each limit (RuleReport.Rates, then empty), which the JSON and HTML
	// reports show and the text report does not: they take 6% of the CPU
	// of a replay of the sample's rules.
	NoRates bool
}

// A Replayer decides access log entries as sluice serve would have,
// through a server.Service of the configuration and its forward-auth
// endpoint's Check, at the entries' own times, and tallies the result
// per rule. Create Replayers with NewReplayer and Close them; a Replayer
// is used by one goroutine, in the order of the entries.
type Replayer struct {
	svc    *server.Service
	store  *memory.Store
	fa     *forwardauth.Handler
	now    atomic.Int64 // the current entry's time, the service's clock
	routes []*ruleStats
	paths  []*routeStats // the routes' rules by prefix, longest first
	cur    *ruleStats    // the rule being checked, to which bans count
	req    *http.Request
	proxy  string // RemoteAddr: the trusted proxy that asks
	user   string
	needs  needs
	byAddr bool         // forward-auth's Caller is a function of the client's address alone
	addrs  *addrCache   // made by the first Decide
	seed   maphash.Seed // of the rules' sketches
	res    rules.Result // the engine's answer to the last check, its statuses reused
	errs   int64
	first  error
	// tallyWords is what is left of the words the routes' rate tables
	// may hold (maxTallyWords, shared by a replay's workers).
	tallyWords int
}

// needs says which headers the forward-auth key reads, beside the
// client's address: only those are set, sparing each request the
// strings of the others.
type needs struct {
	uri, method, host, agent, referer, user bool
}

// needsOf returns the headers that the key parts of fa read.
func needsOf(fa config.ForwardAuth, userHeader string) needs {
	var n needs
	for _, part := range fa.Key {
		switch part {
		case "uri", "path":
			n.uri = true
		case "method":
			n.method = true
		case "host":
			n.host = true
		}
		name, ok := strings.CutPrefix(part, "header:")
		switch name = http.CanonicalHeaderKey(name); {
		case !ok:
		case name == "User-Agent":
			n.agent = true
		case name == "Referer":
			n.referer = true
		case name == userHeader:
			n.user = true
		}
	}
	return n
}

// addrCacheSize is the slots of an addrCache: on the benchmark's day of
// 85,000 Zipf clients 2^14 find 80% of requests' addresses (2^16 found
// 87%, but their Callers, 10 MiB a worker, missed the caches: a replay
// of the sample's rules on two workers took 3.97 µs of CPU a line with
// 2^16, 3.55 with 2^14, 3.89 without Callers, medians of six runs).
const addrCacheSize = 1 << 14

// addrCache keeps recent client addresses as strings, so that a
// returning client costs no allocation, and, when the forward-auth key
// is the client's address alone, the Caller forward-auth found for each,
// so that a returning client costs no parse: a direct-mapped table of
// fixed size, whatever the number of clients. The addresses, compared
// on every line, are kept apart from the larger Callers.
type addrCache struct {
	seed    maphash.Seed
	addrs   [addrCacheSize]string
	known   [addrCacheSize]bool // callers[i] is that of addrs[i]
	callers [addrCacheSize]forwardauth.Caller
}

// get returns the slot of the address b, b's string in it.
func (c *addrCache) get(b []byte) int {
	i := int(maphash.Bytes(c.seed, b) & (addrCacheSize - 1))
	if c.addrs[i] != string(b) {
		c.addrs[i], c.known[i] = string(b), false
	}
	return i
}

// at returns slot i, the address a in it: a worker's cache takes the
// slots of the partitioner's (see clientAddr). a replaces an equal
// string too, so that the next line of the client compares pointers,
// not bytes out of the cache, once the partitioner made a new string of
// the address (its slot was another address's for a while).
func (c *addrCache) at(a string, i int) int {
	if c.addrs[i] != a {
		c.known[i] = false
	}
	c.addrs[i] = a
	return i
}

// NewReplayer builds the service of c.Rules on a memory store of its own.
func NewReplayer(ctx context.Context, c Config) (*Replayer, error) {
	return newReplayer(ctx, c, maphash.MakeSeed(), 1)
}

// newReplayer is NewReplayer, with the seed of the rules' distinct-key
// sketches (workers share it, so that their sketches merge), on a store
// of 1/share of the memory cap (the workers of a replay share it).
func newReplayer(ctx context.Context, c Config, seed maphash.Seed, share int64) (*Replayer, error) {
	if c.Rules == nil {
		return nil, errors.New("simulate: no rules")
	}
	rc := *c.Rules
	// Nothing leaves the process: no telemetry export, no admin API.
	rc.Telemetry, rc.Admin = config.Telemetry{}, config.Admin{}
	r := &Replayer{user: c.UserHeader, tallyWords: maxTallyWords / int(max(share, 1)), seed: seed}
	if r.user == "" {
		r.user = DefaultUserHeader
	}
	r.user = http.CanonicalHeaderKey(r.user)
	r.needs = needsOf(rc.ForwardAuth, r.user)
	clock := func() time.Time { return time.Unix(0, r.now.Load()) }
	// One shard: a Replayer's store is decided by one goroutine, so more
	// shards would buy no parallelism, only more tables, indexes and
	// growing chunks for the caches to hold (the default 64 shards cost
	// a replay of the sample's rules 7-9% more CPU a line). Decisions do
	// not depend on the shards until the store is full: then which
	// states it evicts does.
	mc := memory.Config{Clock: clock, Shards: 1}
	if rc.Store.Type == config.StoreMemory {
		mc.MaxBytes = rc.Store.Memory.MaxBytes
	}
	if share > 1 && mc.MaxBytes >= 0 {
		mc.MaxBytes = cmp.Or(mc.MaxBytes, memory.DefaultMaxBytes) / share
	}
	r.store = memory.New(mc)
	svc, err := server.NewService(ctx, &rc, server.Options{
		Logger: slog.New(slog.DiscardHandler), Store: r.store, Clock: clock, OnBan: r.onBan, Unmetered: true,
	})
	if err != nil {
		r.store.Close()
		return nil, err
	}
	r.svc, r.fa = svc, svc.ForwardAuth()
	r.byAddr = r.fa.ByAddress()
	if err := r.route(c, &rc, seed); err != nil {
		r.Close()
		return nil, err
	}
	r.proxy = "127.0.0.1:1"
	if tp := rc.ForwardAuth.TrustedProxies; len(tp) > 0 {
		r.proxy = tp[0].Addr().String() + ":1"
		if tp[0].Addr().Is6() {
			r.proxy = "[" + tp[0].Addr().String() + "]:1"
		}
	}
	r.req = &http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/v1/auth"}, Header: http.Header{}, RemoteAddr: r.proxy}
	return r, nil
}

// merge adds the tallies of o, the Replayer of another worker of the
// same replay (its clients' requests), and its failed checks.
func (r *Replayer) merge(o *Replayer) {
	for k, rs := range r.routes {
		rs.merge(o.routes[k])
	}
	for k, p := range r.paths {
		p.merge(o.paths[k])
	}
	r.errs += o.errs
	if r.first == nil {
		r.first = o.first
	}
}

// route sets the rules that entries are checked against.
func (r *Replayer) route(c Config, rc *config.Config, seed maphash.Seed) error {
	routes := c.Routes
	if len(routes) == 0 && rc.ForwardAuth.Rule != "" {
		routes = []Route{{Rule: rc.ForwardAuth.Rule}}
	}
	if len(routes) == 0 {
		for _, nr := range rc.Rules {
			routes = append(routes, Route{Rule: nr.Name})
		}
	}
	if len(routes) == 0 {
		return errors.New("simulate: the configuration has no named rules (forward-auth, and so simulate, applies named rules, not descriptor domains)")
	}
	engine := r.svc.Engine()
	top, sketch := c.sizes(len(routes))
	byPrefix := map[string][]*ruleStats{}
	for _, rt := range routes {
		if !engine.IsNamed(rt.Rule) {
			return fmt.Errorf("simulate: unknown rule %q (want a named rule of the configuration: %s)", rt.Rule, strings.Join(namedRules(rc), ", "))
		}
		rs := newRuleStats(rt, engine.Rule(rt.Rule), top, sketch, seed)
		r.routes = append(r.routes, rs)
		byPrefix[rt.PathPrefix] = append(byPrefix[rt.PathPrefix], rs)
	}
	for prefix, rss := range byPrefix {
		r.paths = append(r.paths, newRouteStats(prefix, rss, sketch, seed, !c.NoRates, &r.tallyWords))
	}
	slices.SortFunc(r.paths, func(a, b *routeStats) int { // the same order in every worker, for merging
		return cmp.Or(cmp.Compare(len(b.prefix), len(a.prefix)), strings.Compare(a.prefix, b.prefix))
	})
	return nil
}

func namedRules(c *config.Config) []string {
	var names []string
	for _, nr := range c.Rules {
		names = append(names, nr.Name)
	}
	return names
}

func (r *Replayer) onBan(guard.Ban) {
	if r.cur != nil {
		r.cur.Bans++
	}
}

// Decide checks e against the rule of each route it takes (those of the
// longest matching prefix), as forward-auth
// would have been asked by the proxy that logged it, at e's time.
func (r *Replayer) Decide(ctx context.Context, e *accesslog.Entry) {
	r.decide(ctx, e, r.cache().get(e.Addr))
}

// cache returns the replayer's address cache, made by the first use:
// a replay that decides nothing takes none of its memory.
func (r *Replayer) cache() *addrCache {
	if r.addrs == nil {
		r.addrs = &addrCache{seed: maphash.MakeSeed()}
	}
	return r.addrs
}

// decide is Decide, with e.Addr in slot i of the address cache.
func (r *Replayer) decide(ctx context.Context, e *accesslog.Entry, i int) {
	if r.now.Load() != e.Time {
		// Most lines share their second with the line before (a log's
		// time has no finer grain), and an atomic store waits for every
		// store before it: 3% of a replay of the sample's rules.
		r.now.Store(e.Time)
	}
	for _, rs := range r.routes {
		rs.asked = false
	}
	k := slices.IndexFunc(r.paths, func(p *routeStats) bool { return bytes.HasPrefix(e.URI, []byte(p.prefix)) })
	if k < 0 {
		return
	}
	p := r.paths[k] // the longest prefix e matches
	c := r.caller(e, i)
	key := c.Desc.Actor.Key // once a line: every rule is asked about the same caller
	h := maphash.String(r.seed, key)
	counted := p.count(e.Time, key, h)
	for _, rs := range p.rules {
		r.cur = rs
		err := r.fa.Decide(ctx, c, rs.route.Rule, &r.res)
		r.cur = nil
		if err != nil {
			r.errs++
			if r.first == nil {
				r.first = fmt.Errorf("line %d: %w", e.Line, err)
			}
			continue
		}
		rs.tally(e.Time, key, h, counted, &r.res)
	}
}

// caller returns the Caller forward-auth finds in e, whose address is in
// slot i of the address cache: from the cache when forward-auth's key is
// the client's address alone and e logged no X-Forwarded-For, so that
// the request is the address and nothing else; else from the request e
// describes.
func (r *Replayer) caller(e *accesslog.Entry, i int) forwardauth.Caller {
	c := r.addrs
	if !r.byAddr || len(e.Forwarded) > 0 {
		r.fill(e, c.addrs[i])
		return r.fa.Caller(r.req)
	}
	if !c.known[i] {
		r.fill(e, c.addrs[i])
		c.callers[i], c.known[i] = r.fa.Caller(r.req), true
	}
	return c.callers[i]
}

// fill describes e in the replayer's request as the proxy that logged e
// would have described it to forward-auth: asking from a trusted
// proxy's address, the client appended to the X-Forwarded-For it came
// with, the original method, URI and host, and the headers the log kept.
func (r *Replayer) fill(e *accesslog.Entry, addr string) {
	h := r.req.Header
	xff := addr
	if len(e.Forwarded) > 0 {
		xff = string(e.Forwarded) + ", " + xff
	}
	set(h, "X-Forwarded-For", xff)
	n := &r.needs
	if n.uri {
		set(h, "X-Original-Uri", string(e.URI))
	}
	if n.method {
		set(h, "X-Original-Method", method(e.Method))
	}
	if n.host {
		set(h, "X-Forwarded-Host", string(e.Host))
	}
	if n.agent {
		set(h, "User-Agent", string(e.UserAgent))
	}
	if n.referer {
		set(h, "Referer", string(e.Referer))
	}
	if n.user {
		set(h, r.user, string(e.User))
	}
}

// set sets or deletes (for "") the header k, in canonical form, reusing
// its slice.
func set(h http.Header, k, v string) {
	if v == "" {
		delete(h, k)
		return
	}
	if s := h[k]; len(s) == 1 {
		s[0] = v
		return
	}
	h[k] = []string{v}
}

// method returns m as a string, sparing the common methods an
// allocation.
func method(m []byte) string {
	for _, s := range [...]string{"GET", "POST", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS"} {
		if string(m) == s {
			return s
		}
	}
	return string(m)
}

// Close closes the service and its store.
func (r *Replayer) Close() error {
	return errors.Join(r.svc.Close(), r.store.Close())
}
