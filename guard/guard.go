package guard

import (
	"context"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
)

// DefaultIPv6Prefix is the length of the network an IPv6 actor is jailed
// under when GuardConfig.IPv6Prefix is zero: a /64, the smallest block an
// ISP hands one customer, all of whose addresses one host may use.
const DefaultIPv6Prefix = 64

// An Actor is who a request is from, as a Guard judges it.
//
// Type an actor once, where its request arrives, with NewActor (or
// UserActor, for a login): the guard, its bans and its jails then read
// what its key is (an address, a network, or an opaque key) from it,
// instead of each parsing the key again. An Actor written as a literal
// works too, at the cost of a parse of its key by each call that needs
// it; an actor's Key must not change once typed.
type Actor struct {
	// Addr is the client's address, when known: the allow and deny
	// lists' networks and the bans of networks are matched against it.
	Addr netip.Addr
	// Key is the key the request's limits count it under (an address, a
	// network such as "2001:db8::/64", a username, an API key, or a key
	// of several parts): the lists' "key:" entries and the bans of keys
	// are matched against it, and the bans of networks too when it is an
	// address or a network.
	Key string

	typed bool         // net holds what Key is
	user  bool         // Key is a login's username
	net   netip.Prefix // Key as a network, when it is an address or a network
}

// NewActor returns the actor whose key is key, typed once: from a client
// at addr, or, when addr is not valid and key is an address, at key.
func NewActor(addr netip.Addr, key string) Actor {
	a := Actor{Addr: addr.Unmap().WithZone(""), Key: key, typed: true}
	a.net, _ = parseNet(key)
	if !a.Addr.IsValid() && a.net.IsValid() && a.net.IsSingleIP() {
		a.Addr = a.net.Addr()
	}
	return a
}

// UserActor returns the actor of a login: the client at addr, trying to
// sign in as username (any bytes), whose key is the username as a Login
// counts it (trimmed, lower case). The deny list's keys and the bans of
// keys judge a username as any key; the allow list's keys never exempt
// one, for an account exempt from a login's limits would be open to a
// botnet.
func UserActor(addr netip.Addr, username string) Actor {
	a := NewActor(addr, normalizeUser(username))
	a.user = true
	return a
}

// banKey returns a's key as the bans key it.
func (a Actor) banKey() banKey {
	switch {
	case !a.typed:
		return parseBanKey(a.Key)
	case a.net.IsValid():
		return banKey{net: a.net} // matched by its network: no name needed
	}
	return opaqueBanKey(a.Key)
}

// Action is what a Guard does with a request.
type Action uint8

const (
	// Pass lets the limits decide.
	Pass Action = iota
	// Exempt allows the request without asking or counting anything: the
	// actor is on the allow list.
	Exempt
	// Refuse denies the request with no time to retry after: the actor
	// is on the deny list.
	Refuse
	// Banned denies the request until the actor's ban ends
	// (Verdict.Ban.Until).
	Banned
)

var actionNames = [...]string{Pass: "pass", Exempt: "allow-list", Refuse: "deny-list", Banned: "banned"}

// String returns how sluice's APIs name the action: "pass",
// "allow-list", "deny-list" or "banned".
func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "Action(" + strconv.Itoa(int(a)) + ")"
}

// A Verdict is a Guard's answer about an actor.
type Verdict struct {
	// Action is what becomes of the request. The zero value is Pass.
	Action Action
	// Ban is, for Banned, the ban that covers the actor and lasts
	// longest.
	Ban Ban
	// Left is, for Banned, how long the ban still lasts (at least 1 ns).
	Left time.Duration
}

// GuardConfig configures a Guard. The zero value of each field means its
// default.
type GuardConfig struct {
	// Allow exempts its addresses, networks and keys from every limit.
	// Default none. It may be edited while the Guard is in use.
	Allow *List
	// Deny refuses its addresses, networks and keys. Default none. It may
	// be edited while the Guard is in use.
	Deny *List
	// Jails are the jails whose registries' bans refuse actors: every
	// ban of those registries is enforced, whichever jail made it.
	// Default none.
	Jails []*Jail
	// Strikes maps the name of a rule to the jails that count its
	// denials as failures (see Strike). Default none.
	Strikes map[string][]*Jail
	// IPv6Prefix is the length of the network an IPv6 actor is jailed
	// under (see JailKey). Default DefaultIPv6Prefix; 128 jails each
	// address on its own.
	IPv6Prefix int
	// Clock returns the time bans are judged at. Default the first
	// jail's Clock, else time.Now.
	Clock func() time.Time
}

// A Guard is the abuse policy in front of limits, applied in one order
// by every surface of sluice (Middleware, and every API of sluice serve
// through its rules engine):
//
//  1. the actor's address: on the allow list, it is exempt from
//     everything after; on the deny list, it is refused, with no time
//     to retry after;
//  2. the actor's key, likewise: allow list, then deny list;
//  3. the bans of the jails' registries: an actor whose key is banned, or
//     whose address (or key, when the key is an address or a network)
//     lies in a banned network, is refused until the ban ends;
//  4. the limits.
//
// Allow before deny is the order of rack-attack (safelists, then
// blocklists, then throttles) and of fail2ban (an ignoreip address is
// never banned): an entry on both lists is allowed, and no ban overrides
// the allow list. The address comes before the key because the operator
// knows networks, while a key may be whatever the client sent.
//
// Lookups are in memory: a Guard never waits and never fails. Create
// Guards with NewGuard; a Guard is safe for concurrent use.
type Guard struct {
	allow, deny *List
	bans        []*BanSet // of the jails' registries, each once
	strikes     map[string][]*Jail
	v6          int
	clock       func() time.Time
}

// NewGuard returns the Guard of c.
func NewGuard(c GuardConfig) *Guard {
	g := &Guard{allow: c.Allow, deny: c.Deny, strikes: c.Strikes, v6: c.IPv6Prefix, clock: c.Clock}
	if g.allow == nil {
		g.allow = &List{}
	}
	if g.deny == nil {
		g.deny = &List{}
	}
	if g.v6 <= 0 || g.v6 > 128 {
		g.v6 = DefaultIPv6Prefix
	}
	if g.clock == nil && len(c.Jails) > 0 {
		g.clock = c.Jails[0].c.Clock
	}
	if g.clock == nil {
		g.clock = time.Now
	}
	for _, j := range c.Jails {
		if s := j.Registry().Bans(); !slices.Contains(g.bans, s) {
			g.bans = append(g.bans, s)
		}
	}
	return g
}

// Check judges a, in the Guard's order.
func (g *Guard) Check(a Actor) Verdict {
	switch {
	case a.Addr.IsValid() && g.allow.Contains(a.Addr):
		return Verdict{Action: Exempt}
	case a.Addr.IsValid() && g.deny.Contains(a.Addr):
		return Verdict{Action: Refuse}
	case a.Key != "" && !a.user && g.allow.ContainsKey(a.Key):
		return Verdict{Action: Exempt}
	case a.Key != "" && g.deny.ContainsKey(a.Key):
		return Verdict{Action: Refuse}
	}
	return g.banned(a)
}

// banned returns the Verdict of a's longest ban, or Pass. It reads the
// clock only when a registry holds a ban: most requests meet none, and
// the read was most of their cost.
func (g *Guard) banned(a Actor) Verdict {
	if !g.anyBans() {
		return Verdict{}
	}
	now := g.clock()
	var best Ban
	found := false
	for _, s := range g.bans {
		if b, ok := s.matchActor(a, now); ok && (!found || b.Until.After(best.Until)) {
			best, found = b, true
		}
	}
	if !found {
		return Verdict{}
	}
	return Verdict{Action: Banned, Ban: best, Left: max(best.Until.Sub(now), time.Nanosecond)}
}

// anyBans reports whether a registry of the guard holds a ban (in force
// or lapsed, not yet pruned), lock-free.
func (g *Guard) anyBans() bool {
	for _, s := range g.bans {
		if s.count.Load() != 0 {
			return true
		}
	}
	return false
}

// JailKey returns the key a's failures are counted and banned under: its
// key when that is an address or a network that holds its address (or
// when it has no address); else its address, an IPv6 address as its
// network of the Guard's IPv6Prefix, so that an actor who rotates
// through the addresses of its /64 gains nothing.
func (g *Guard) JailKey(a Actor) string {
	if !a.Addr.IsValid() {
		return a.Key
	}
	addr := a.Addr.Unmap().WithZone("")
	if p := a.banKey().net; p.IsValid() && p.Contains(addr) {
		return a.Key
	}
	if addr.Is6() && g.v6 < 128 {
		p, _ := addr.Prefix(g.v6)
		return p.String()
	}
	return addr.String()
}

// Strike counts d, a denial of a under rule (or a failure it reported),
// as a failure in every jail that counts rule's denials, and returns the
// bans it made. A denial a store at its cap estimated (d.Estimated) is
// not counted, for the actor may have spent nothing: the jails are told
// it was lost (see JailConfig.OnLost). It stops at the first jail that
// fails (its store failed).
func (g *Guard) Strike(ctx context.Context, rule string, a Actor, d sluice.Decision) ([]Ban, error) {
	jails := g.strikes[rule]
	if len(jails) == 0 {
		return nil, nil
	}
	if d.Estimated {
		for _, j := range jails {
			j.Lost(StrikeEstimated)
		}
		return nil, nil
	}
	key := g.JailKey(a)
	var bans []Ban
	for _, j := range jails {
		b, banned, err := j.Fail(ctx, key, "denials under rule "+rule)
		if err != nil {
			return bans, err
		}
		if banned {
			bans = append(bans, b)
		}
	}
	return bans, nil
}

// Counts reports whether some jail counts rule's denials.
func (g *Guard) Counts(rule string) bool { return len(g.strikes[rule]) > 0 }
