package httplimit

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// Defaults of AdaptiveConfig.
const (
	// DefaultAdaptiveSite is the length of the network whose subnets an
	// AdaptivePrefix counts when AdaptiveConfig.Site is zero: a /48, the
	// block a site (a business, a hosting customer) commonly holds.
	DefaultAdaptiveSite = 48
	// DefaultAdaptiveSubnets is how many subnets of one site get a key of
	// their own within a Window when AdaptiveConfig.Subnets is zero.
	DefaultAdaptiveSubnets = 4
)

// AdaptiveConfig configures an AdaptivePrefix. The zero value means
// defaults.
type AdaptiveConfig struct {
	// ClientIP finds client addresses. Default: the connection's address.
	ClientIP *ClientIP
	// Subnet is the length of the network an IPv6 client is keyed by
	// while its site is quiet. Default DefaultIPv6Prefix (64): one host
	// owns a /64, and a narrower key would give it a fresh allowance per
	// address.
	Subnet int
	// Site is the length of the wider network whose subnets are counted,
	// shorter than Subnet. Default DefaultAdaptiveSite (48).
	Site int
	// Subnets is how many subnets of one site get a key of their own
	// within Window; the site's other subnets share the site's key. At
	// most sluice.MaxLogRate. Default DefaultAdaptiveSubnets (4).
	Subnets int
	// Window is how long a subnet keeps its own key once it got one, and
	// the window in which a site hands out at most Subnets of them.
	// Default one hour.
	Window time.Duration
	// Namespace prefixes the AdaptivePrefix's own keys in the store.
	// Default "sluice".
	Namespace string
	// Clock returns the time the grants are judged at. Default nil: the
	// store's clock.
	Clock func() time.Time
}

// An AdaptivePrefix keys IPv4 clients by address and IPv6 clients by
// their subnet (a /64), unless their site (the /48 holding it) is
// rotating through subnets: then by the site.
//
// # Model
//
// A site hands out at most Subnets grants within any Window (counted
// exactly, by a sliding log); a subnet that holds a grant, from its first
// request until Window later, is keyed by itself; any other subnet of the
// site asks for a grant, and if the site has none left it is keyed by
// the site, whose allowance all such subnets share. So:
//
//   - an attacker rotating through the addresses of one /64 gets that
//     /64's allowance, as with the fixed /64 (the key is never narrower);
//   - an attacker rotating through fresh /64s of one /48 gets at most
//     Subnets+1 allowances at any time, Subnets /64s' and the /48's,
//     where the fixed /64 would give it 65,536;
//   - two subnets of different sites never share a key: an unrelated
//     client never pays for the attacker.
//
// The price is paid inside the attacked site only: while it has no
// grant left, each of its subnets that holds none (one that arrives
// during the attack, or whose grant ended) shares the site's allowance
// with the attacker's rotations; a subnet that holds one keeps its own
// key until the grant ends. A site whose subnets are many clients (an
// ISP that delegates a /56 to each home) pays that price whenever more
// than Subnets of them are active within a Window: give it a larger
// Subnets, or key it by a fixed prefix (ClientIP, IPPrefix).
//
// # State and cost
//
// Grants live in the store, so every process sharing it agrees: per
// subnet, one GCRA state marking its grant (safe to forget: a forgotten
// grant is asked for again); per site, a sliding log of at most Subnets
// times (not safe to forget: a store that forgot it charges it
// conservatively, so the site's subnets share its key). A flood of
// fresh /64s of one site writes at most Subnets grants per Window; a
// flood of sites writes one log and at most Subnets grants each, all of
// it bounded by the store's own cap and expiring after Window. An IPv6
// request costs one Peek of its subnet's grant; a subnet without one, a
// take on its site's log, and one on its grant when it gets one. A
// store failure keys the client by its subnet, as the fixed prefix does.
//
// Keys are prefixes in CIDR notation ("2001:db8:1:2::/64",
// "2001:db8:1::/48", "203.0.113.7/32").
//
// Create one with NewAdaptivePrefix; it is safe for concurrent use.
type AdaptivePrefix struct {
	client       *ClientIP
	subnet, site int
	grants       *sluice.Limiter // per subnet: its grant, denied while it holds one
	sites        *sluice.Limiter // per site: the grants handed out within Window
	granted      atomic.Int64
	shared       atomic.Int64
}

var _ KeyAppender = (*AdaptivePrefix)(nil)

// NewAdaptivePrefix returns an AdaptivePrefix keeping its state in store.
// The error wraps sluice.ErrInvalidRequest for a Config out of range.
func NewAdaptivePrefix(store sluice.Store, c AdaptiveConfig) (*AdaptivePrefix, error) {
	if c.ClientIP == nil {
		c.ClientIP = &ClientIP{}
	}
	c.Subnet = defaultInt(c.Subnet, DefaultIPv6Prefix)
	c.Site = defaultInt(c.Site, DefaultAdaptiveSite)
	c.Subnets = defaultInt(c.Subnets, DefaultAdaptiveSubnets)
	if c.Window <= 0 {
		c.Window = time.Hour
	}
	switch {
	case c.Subnet > 128 || c.Site < 1 || c.Site >= c.Subnet:
		return nil, fmt.Errorf("%w: httplimit: adaptive site /%d and subnet /%d must be IPv6 prefix lengths, the site the shorter", sluice.ErrInvalidRequest, c.Site, c.Subnet)
	case c.Subnets < 1 || c.Subnets > sluice.MaxLogRate:
		return nil, fmt.Errorf("%w: httplimit: adaptive subnets %d must be 1 to %d", sluice.ErrInvalidRequest, c.Subnets, sluice.MaxLogRate)
	}
	a := &AdaptivePrefix{client: c.ClientIP, subnet: c.Subnet, site: c.Site}
	var err error
	if a.grants, err = sluice.New(store, sluice.Config{Limits: []sluice.Limit{sluice.Every(c.Window)},
		Action: "adaptive-grant", Namespace: c.Namespace, Clock: c.Clock, SafeToForget: true}); err != nil {
		return nil, err
	}
	if a.sites, err = sluice.New(store, sluice.Config{Limits: []sluice.Limit{{Rate: c.Subnets, Period: c.Window, Algorithm: sluice.SlidingLog}},
		Action: "adaptive-site", Namespace: c.Namespace, Clock: c.Clock}); err != nil {
		return nil, err
	}
	return a, nil
}

func defaultInt(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// Key returns the request's key: an IPv4 address as a /32, an IPv6
// address as its subnet or its site (see AdaptivePrefix).
func (a *AdaptivePrefix) Key(r *http.Request) (string, bool) { return keyString(a, r) }

// AppendKey appends the request's key, as Key returns it, to dst.
func (a *AdaptivePrefix) AppendKey(dst []byte, r *http.Request) ([]byte, bool) {
	ip, ok := a.client.Addr(r)
	if !ok {
		return dst, false
	}
	if ip.Is4() {
		return appendPrefix(dst, ip, 32), true
	}
	return append(dst, a.KeyOf(r.Context(), ip)...), true
}

// KeyOf returns the key of a client at address ip, as Key does for a
// request: what a caller that found the client's address already (a
// forward-auth endpoint) asks. Subnets that get a grant take it here.
func (a *AdaptivePrefix) KeyOf(ctx context.Context, ip netip.Addr) string {
	ip = ip.Unmap().WithZone("")
	if !ip.Is6() {
		return prefixKey(ip, ip.BitLen())
	}
	sub := prefixKey(ip, a.subnet)
	if d, err := a.grants.Peek(ctx, sub); err != nil || !d.Allowed && !d.Estimated {
		return sub // it holds a grant, or the store failed: keyed as by a fixed prefix
	}
	site := prefixKey(ip, a.site)
	d, err := a.sites.Allow(ctx, site)
	if err != nil {
		return sub
	}
	if !d.Allowed {
		a.shared.Add(1)
		return site
	}
	// Should this take fail, the subnet asks again at its next request,
	// at the cost of another of the site's grants: the safe direction.
	_, _ = a.grants.Admit(ctx, sub)
	a.granted.Add(1)
	return sub
}

// AdaptiveStats are an AdaptivePrefix's counts, for an operator to see
// whether sites are keyed as one.
type AdaptiveStats struct {
	// Granted counts the grants subnets took: keys of their own.
	Granted int64
	// Shared counts the requests keyed by their site, their site having
	// no grant left.
	Shared int64
}

// Stats returns the counts of a since it was made.
func (a *AdaptivePrefix) Stats() AdaptiveStats {
	return AdaptiveStats{Granted: a.granted.Load(), Shared: a.shared.Load()}
}
