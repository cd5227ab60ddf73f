package guard

import (
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// Defaults and bounds of BanLimits.
const (
	// DefaultCoarsenIPv4 and DefaultCoarsenIPv6 are the widest networks a
	// BanSet merges address bans into when BanLimits leaves them zero:
	// a /24, the block one customer of a network most often holds, and a
	// /48, the block of one site.
	DefaultCoarsenIPv4, DefaultCoarsenIPv6 = 24, 48
	// MinCoarsenIPv4 and MinCoarsenIPv6 are the widest bounds a
	// BanLimits may set: wider ones are read as these.
	MinCoarsenIPv4, MinCoarsenIPv6 = 8, 16
)

// coarsening lists, narrowest first, per family, the networks a BanSet
// at capacity may merge address bans into, up to its bound: small steps
// up to a /24 (IPv4) and from a /64 (the unit one customer holds) to a
// /48 (IPv6), so that a merge bans few beyond its offenders and can
// work around an allow-listed address, then wider ones.
var coarsening = [2][]int{{30, 28, 26, 24, 16, 8}, {64, 60, 56, 52, 48, 32, 16}}

// unitBits is, per family, the length of what Ban.Collateral counts: an
// address for IPv4, a /64 for IPv6.
var unitBits = [2]int{32, 64}

// BanLimits bound a BanSet. The zero value of each field means its
// default.
type BanLimits struct {
	// Max bounds the bans held, of every kind. Default DefaultMaxBans.
	Max int
	// MaxKeys bounds the bans of keys that are no address or network
	// (usernames, API keys), which cannot merge: their share of Max.
	// Bans of addresses and networks have the rest. At most Max-1.
	// Default Max/2.
	MaxKeys int
	// CoarsenIPv4 and CoarsenIPv6 are the lengths of the widest networks
	// the set merges address bans into at capacity: 8 to 32 (32: never)
	// and 16 to 128. Default DefaultCoarsenIPv4 (/24) and
	// DefaultCoarsenIPv6 (/48).
	CoarsenIPv4, CoarsenIPv6 int
}

func (l BanLimits) max() int {
	if l.Max > 0 {
		return l.Max
	}
	return DefaultMaxBans
}

func (l BanLimits) maxKeys() int {
	if l.MaxKeys > 0 {
		return min(l.MaxKeys, l.max()-1)
	}
	return l.max() / 2
}

// bound returns the length of the widest network of family fam that
// bans merge into.
func (l BanLimits) bound(fam int) int {
	v, def, widest, host := l.CoarsenIPv4, DefaultCoarsenIPv4, MinCoarsenIPv4, 32
	if fam == 1 {
		v, def, widest, host = l.CoarsenIPv6, DefaultCoarsenIPv6, MinCoarsenIPv6, 128
	}
	if v == 0 {
		return def
	}
	return min(max(v, widest), host)
}

// stepsOf returns the coarsening steps of family fam, narrowest first:
// those of coarsening narrower than the bound, and the bound. It
// requires s.mu.
func (s *BanSet) stepsOf(fam int) []int {
	if s.steps[fam] == nil {
		bound := s.bound(fam)
		for _, bits := range coarsening[fam] {
			if bits > bound {
				s.steps[fam] = append(s.steps[fam], bits)
			}
		}
		s.steps[fam] = append(s.steps[fam], bound)
		s.pairs[fam] = make([]map[group]struct{}, len(s.steps[fam]))
	}
	return s.steps[fam]
}

// width returns the log2 of how many units (addresses for IPv4, /64s
// for IPv6) a network of family fam and length bits holds.
func width(fam, bits int) int { return unitBits[fam] - min(bits, unitBits[fam]) }

// joinGroups and leaveGroups keep the coarsening groups of a network
// ban of jail up to date, and the groups that hold two bans or more.
// They require s.mu.
func (s *BanSet) joinGroups(jail string, p netip.Prefix) {
	fam := family(p)
	for i, bits := range s.stepsOf(fam) {
		if bits >= p.Bits() {
			continue
		}
		if s.groups == nil {
			s.groups = map[group][]netip.Prefix{}
		}
		g := group{jail, netip.PrefixFrom(p.Addr(), bits).Masked()}
		s.groups[g] = append(s.groups[g], p)
		if len(s.groups[g]) == 2 {
			if s.pairs[fam][i] == nil {
				s.pairs[fam][i] = map[group]struct{}{}
			}
			s.pairs[fam][i][g] = struct{}{}
		}
	}
}

func (s *BanSet) leaveGroups(jail string, p netip.Prefix) {
	fam := family(p)
	for i, bits := range s.stepsOf(fam) {
		if bits >= p.Bits() {
			continue
		}
		g := group{jail, netip.PrefixFrom(p.Addr(), bits).Masked()}
		members := s.groups[g]
		if j := slices.Index(members, p); j >= 0 {
			members = slices.Delete(members, j, j+1)
		}
		if len(members) < 2 {
			delete(s.pairs[fam][i], g)
		}
		if len(members) == 0 {
			delete(s.groups, g)
		} else {
			s.groups[g] = members
		}
	}
}

// spared reports whether net holds an address the set must not
// coarsen bans over.
func (s *BanSet) spared(net netip.Prefix) bool {
	l := s.spare.Load()
	return l != nil && l.Overlaps(net)
}

// makeRoom records b, of key k, whose share is full: a key is refused;
// a ban of its jail that covers it as long stands for it; a network ban
// absorbs the bans of its jail within it, if any; else an
// address or network is merged with bans of its jail in the narrowest
// network that holds any, unless bans elsewhere merge into a narrower
// network, which makes room for b as it is. It returns the ban recorded
// and the merge, or refuses b. It requires s.mu.
func (s *BanSet) makeRoom(b Ban, k banKey) (Ban, Merge, error) {
	if !k.net.IsValid() {
		s.refusedKeys.Add(1)
		return b, Merge{}, fmt.Errorf("%w: guard: %d bans of keys, no room for %q in jail %q", ErrBansFull, s.nKeys, b.Key, b.Jail)
	}
	if c, ok := s.longestOver(b.Jail, k.net, b.Since); ok && !c.Until.Before(b.Until) && c.Key != b.Key {
		// A ban of its jail covers b as long already, as when a replica
		// learns of a ban that was since merged: b merges into it, and
		// changes nothing, its collateral included.
		return c, Merge{Into: c}, nil
	}
	if in := s.within(b.Jail, k.net); len(in) > 0 {
		out, merged := s.coarsen(b.Jail, k.net, in, &b)
		return out, Merge{Into: out, Merged: merged}, nil
	}
	own, members, ownOK := s.ownNet(b.Jail, k.net)
	limit := 129 // wider than any network: without a network of its own, any merge will do
	if ownOK {
		limit = width(family(own), own.Bits())
	}
	if c, ok := s.pairBelow(limit); ok {
		into, merged := s.coarsen(c.jail, c.net, c.members, nil)
		s.set(k, b)
		return b, Merge{Into: into, Merged: merged}, nil
	}
	if ownOK {
		out, merged := s.coarsen(b.Jail, own, members, &b)
		return out, Merge{Into: out, Merged: merged}, nil
	}
	s.refused.Add(1)
	return b, Merge{}, fmt.Errorf("%w: guard: %d bans of addresses, none to merge within /%d and /%d, no room for %q in jail %q",
		ErrBansFull, s.n-s.nKeys, s.bound(0), s.bound(1), b.Key, b.Jail)
}

// within returns the networks of jail's bans held within net, narrower
// than it: from the group of the narrowest step that holds net, or, for
// a network wider than every step (an admin's), from every network ban.
// It requires s.mu.
func (s *BanSet) within(jail string, net netip.Prefix) []netip.Prefix {
	in := func(p netip.Prefix) bool { return p.Bits() > net.Bits() && net.Contains(p.Addr()) }
	steps := s.stepsOf(family(net))
	if i := slices.IndexFunc(steps, func(bits int) bool { return bits <= net.Bits() }); i >= 0 {
		g := group{jail, netip.PrefixFrom(net.Addr(), steps[i]).Masked()}
		return slices.DeleteFunc(slices.Clone(s.groups[g]), func(p netip.Prefix) bool { return !in(p) })
	}
	var out []netip.Prefix
	for p, bans := range s.nets {
		if in(p) && slices.ContainsFunc(bans, func(b Ban) bool { return b.Jail == jail }) {
			out = append(out, p)
		}
	}
	return out
}

// ownNet returns the narrowest network, at least as wide as p, that
// jail may merge a ban of p into, with the bans of jail within it: one
// it bans already, or one it holds other bans in, of a step or, where a
// step's network holds a spared address, of a length between that step
// and the narrower one. It requires s.mu.
func (s *BanSet) ownNet(jail string, p netip.Prefix) (netip.Prefix, []netip.Prefix, bool) {
	narrower := p.Bits() + 1
	for _, bits := range s.stepsOf(family(p)) {
		if bits > p.Bits() {
			continue
		}
		net := netip.PrefixFrom(p.Addr(), bits).Masked()
		members := s.groups[group{jail, net}]
		switch {
		case net != p && s.find(banKey{net: net}, jail) >= 0:
			return net, members, true // covered already: merging widens nothing
		case net != p && s.spared(net):
			// Every wider network holds the spared address too.
			return s.split(jail, net, p, narrower)
		case len(members) > 0:
			return net, members, true
		}
		narrower = bits
	}
	return netip.Prefix{}, nil, false
}

// split returns, for p in the group of jail at net, a network of a step
// that holds a spared address, the widest network that holds p and
// another ban of the group and no spared address, of a length between
// net's and narrower (both excluded), with the group's bans within it.
// It requires s.mu.
func (s *BanSet) split(jail string, net, p netip.Prefix, narrower int) (netip.Prefix, []netip.Prefix, bool) {
	for bits := net.Bits() + 1; bits < narrower && bits <= p.Bits(); bits++ {
		q := netip.PrefixFrom(p.Addr(), bits).Masked()
		if s.spared(q) {
			continue
		}
		var in []netip.Prefix
		for _, m := range s.groups[group{jail, net}] {
			if m.Bits() >= q.Bits() && q.Contains(m.Addr()) {
				in = append(in, m)
			}
		}
		if len(in) > 1 || len(in) == 1 && in[0] != p {
			return q, in, true
		}
		return netip.Prefix{}, nil, false // narrower networks hold no more
	}
	return netip.Prefix{}, nil, false
}

// A candidate is a merge the set may make: jail's bans members into net.
type candidate struct {
	jail    string
	net     netip.Prefix
	members []netip.Prefix
}

// pairBelow returns a merge of two bans or more into a network narrower
// than limit (in log2 of units), the narrowest there is, of a step's
// group or, where its network holds a spared address, of a part of it.
// It requires s.mu.
func (s *BanSet) pairBelow(limit int) (candidate, bool) {
	var best candidate
	found := false
	for fam := range 2 {
		narrower := unitBits[fam] + 1
		for i, bits := range s.stepsOf(fam) {
			if width(fam, bits) >= limit {
				break // the steps only widen
			}
			if c, ok := s.pairAt(fam, i, narrower); ok {
				best, found, limit = c, true, width(fam, c.net.Bits())
				break
			}
			narrower = bits
		}
	}
	return best, found
}

// pairAt returns a merge of the groups of two bans or more at step i of
// family fam, whose next narrower step is narrower. It requires s.mu.
func (s *BanSet) pairAt(fam, i, narrower int) (candidate, bool) {
	for g := range s.pairs[fam][i] {
		members := s.groups[g]
		if s.find(banKey{net: g.net}, g.jail) >= 0 || !s.spared(g.net) {
			return candidate{g.jail, g.net, members}, true
		}
		for _, m := range members {
			if q, in, ok := s.split(g.jail, g.net, m, narrower); ok {
				return candidate{g.jail, q, in}, true
			}
		}
	}
	return candidate{}, false
}

// coarsen replaces the bans of jail on members (within net), its ban of
// net itself if any, and b if not nil (a ban not held yet), by one ban
// of net that lasts as long as the longest of them, and returns it with
// the bans it replaced. It requires s.mu.
func (s *BanSet) coarsen(jail string, net netip.Prefix, members []netip.Prefix, b *Ban) (Ban, []Ban) {
	nk := banKey{net: net, key: netString(net)}
	var parts, merged []Ban // what the new ban stands for; the bans it replaces
	if b != nil {
		parts = append(parts, *b)
	}
	if i := s.find(nk, jail); i >= 0 {
		parts = append(parts, s.nets[net][i])
	}
	var refused int64 // by the bans merged
	for _, p := range slices.Clone(members) {
		mk := banKey{net: p, key: netString(p)}
		if i := s.find(mk, jail); i >= 0 && p != net {
			merged = append(merged, s.nets[p][i])
			if c := s.refusals[BanID{jail, mk.key}]; c != nil {
				refused += c.Load()
			}
			s.remove(mk, jail)
		}
	}
	parts = append(parts, merged...)
	out := Ban{Jail: jail, Key: nk.key, Since: parts[0].Since, Until: parts[0].Until, Offences: parts[0].Offences}
	for _, p := range parts[1:] {
		out.Since, out.Until, out.Offences = minTime(out.Since, p.Since), maxTime(out.Until, p.Until), max(out.Offences, p.Offences)
	}
	out.Collateral = collateral(net, parts)
	n := len(merged)
	switch {
	case b != nil && b.Key == nk.key: // b absorbed the bans within it: its reason stands
		out.Reason = b.Reason
	case b != nil:
		n++
		out.Reason = fmt.Sprintf("%d bans in %s merged at capacity; last: %s", len(parts), nk.key, b.Reason)
	default:
		out.Reason = fmt.Sprintf("%d bans in %s merged at capacity", len(parts), nk.key)
	}
	if len(out.Reason) > maxReason {
		out.Reason = out.Reason[:maxReason]
	}
	s.coarsened.Add(int64(n))
	s.set(nk, out)
	if refused > 0 {
		s.counter(BanID{jail, nk.key}).Add(refused)
	}
	return out, merged
}

// collateral returns how many units of net (addresses for IPv4, /64s
// for IPv6) the bans parts, which lie within it, leave out: a network
// ban counts whole, less its own collateral; addresses count once per
// unit; a ban within another of parts counts as counted by it (as when
// a replica learns again of a ban it merged). Never below zero.
func collateral(net netip.Prefix, parts []Ban) int64 {
	fam := family(net)
	unit := unitBits[fam]
	type part struct {
		p          netip.Prefix
		collateral int64
	}
	var ps []part
	for _, b := range parts {
		if p, ok := parseNet(b.Key); ok && net.Overlaps(p) {
			ps = append(ps, part{netip.PrefixFrom(p.Addr(), min(p.Bits(), unit)).Masked(), b.Collateral})
		}
	}
	// Widest first among those that start at one address: a container
	// comes before what it contains.
	slices.SortFunc(ps, func(a, b part) int {
		if c := a.p.Addr().Compare(b.p.Addr()); c != 0 {
			return c
		}
		return a.p.Bits() - b.p.Bits()
	})
	var offenders int64
	var last netip.Prefix // the last part counted
	for _, x := range ps {
		if last.IsValid() && last.Bits() <= x.p.Bits() && last.Contains(x.p.Addr()) {
			continue
		}
		offenders += int64(1)<<width(fam, x.p.Bits()) - x.collateral
		last = x.p
	}
	return max(int64(1)<<width(fam, net.Bits())-offenders, 0)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
