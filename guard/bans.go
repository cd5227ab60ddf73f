package guard

import (
	"container/heap"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// Bounds of a BanSet.
const (
	// DefaultMaxBans is how many bans a BanSet holds when its Max is zero.
	DefaultMaxBans = 100_000
	// MaxBanKey is the longest key a ban keeps as it is: a longer one is
	// kept as "sha256:" and its digest, so that no key can make a ban
	// large. Lookups hash a long key the same way.
	MaxBanKey = 256
	// maxReason bounds the reason a ban keeps.
	maxReason = 256
)

// Errors of bans.
var (
	// ErrBansFull means a BanSet at its capacity could make no room for a
	// ban: a ban of a key that is no address with the keys' share full,
	// or of an address with the addresses' share full of bans that no
	// coarsening within its bounds can merge. It wraps
	// sluice.ErrStoreFull. The actor is still limited by its rules.
	ErrBansFull = fmt.Errorf("%w: bans at capacity", sluice.ErrStoreFull)
	// ErrNotBanned means a lift named a ban that is not in force.
	ErrNotBanned = errors.New("guard: no such ban")
)

// A BanSet holds the bans in force and answers, for an actor, the ban
// that covers it: the ban of its key, or of any network that contains
// its address. It is what every Registry enforces from, in the memory of
// each process: a lookup costs no round trip and cannot fail, and no
// eviction of rate states can touch it.
//
// A key that is an address or a network in CIDR notation ("203.0.113.7",
// "2001:db8::/64", "::ffff:198.51.100.0/120") is a network ban, kept
// masked and in canonical form (an IPv4-mapped IPv6 address as IPv4, no
// zone), matched by prefix; any other key is matched as it is.
//
// # Capacity
//
// A BanSet holds at most Max bans (see BanLimits): MaxKeys of them bans
// of other keys, the rest bans of addresses and networks, so that a
// flood of bans of one kind (usernames, which cannot merge) never leaves
// the other without room. Lapsed bans are dropped as room is needed (and
// by List). A ban of another key beyond its share is refused with
// ErrBansFull. A ban of an address or network beyond its share makes
// room by coarsening, which merges the bans of one jail within one
// network into one ban of that network, lasting as long as the longest
// of them: an attack from many addresses of one network bans the
// network, and no ban in force is ever dropped. The set merges, of the
// networks where a merge is possible, the narrowest: its own network's
// bans with the new ban, or bans elsewhere, the new ban then held as it
// is. The networks are the new ban's /30, /28, /26, /24 (IPv4) or /64,
// /60, /56, /52, /48 (IPv6), and wider ones up to CoarsenIPv4 and
// CoarsenIPv6 (by default /24 and /48), never wider, and never one that
// holds an address of the list given to Spare (the allow list): the
// offenders around an allow-listed address merge into the smaller
// networks beside it. So an address ban is refused only when its share
// holds bans of that many distinct /24s (or /48s) with nothing left to
// merge; Stats counts refusals of both kinds. Each merged ban tells how
// much it covers beyond its offenders (Ban.Collateral).
//
// The bans are bounded by Max, the coarsening groups by the number of
// steps between a ban's length and the bound (at most 5 by default) per
// ban, so a flood of bans of any kind costs at most about 800 bytes per
// ban held (measured: 766 for IPv4 bans each alone in its /24, 520 for
// bans of addresses side by side, 659 and 473 for IPv6 /64s).
//
// The zero value is an empty set with the default limits, ready to use.
// A BanSet is safe for concurrent use; lookups take a read lock.
type BanSet struct {
	// BanLimits bound the set. Set them before first use.
	BanLimits

	mu     sync.RWMutex
	keys   map[string][]Ban       // bans of other keys, by key
	nets   map[netip.Prefix][]Ban // bans of networks, by network
	lens   [2][129]int            // network bans per family and length
	groups map[group][]netip.Prefix
	pairs  [2][]map[group]struct{} // per step: the groups of two bans or more
	steps  [2][]int                // the coarsening steps, narrowest first
	expiry banHeap
	n      int // bans held
	nKeys  int // of them, bans of other keys

	count       atomic.Int64 // n, for the lock-free empty check
	changes     atomic.Int64 // bans put and dropped
	coarsened   atomic.Int64
	refused     atomic.Int64
	refusedKeys atomic.Int64
	collateral  [2]atomic.Int64      // per family, of the bans held
	spare       atomic.Pointer[List] // never covered by a coarsening

	lapsed lapsedLog // the bans dropped as lapsed, when tracked

	refusals map[BanID]*atomic.Int64 // of the bans held that refused a request
}

// A BanID names a ban: its jail and its key, in canonical form (as
// BanKey writes it).
type BanID struct {
	Jail, Key string
}

// CountRefusals counts n requests refused by the ban of jail and key
// (read as Put reads it), if the set holds it: the guard counts each
// request a ban refuses, so that an operator sees what each ban does.
// A ban's count lasts as long as the ban, whatever replaces it in place
// (a longer ban of the same jail and key), and the bans merged into a
// network ban at capacity add theirs to it.
func (s *BanSet) CountRefusals(jail, key string, n int64) {
	id := BanID{jail, parseBanKey(key).key}
	s.mu.RLock()
	c := s.refusals[id]
	s.mu.RUnlock()
	if c == nil {
		s.mu.Lock()
		c = s.counter(id)
		s.mu.Unlock()
	}
	if c != nil {
		c.Add(n)
	}
}

// counter returns the refusal counter of the ban id, made on first use;
// nil when the set holds no such ban. It requires s.mu.
func (s *BanSet) counter(id BanID) *atomic.Int64 {
	if c := s.refusals[id]; c != nil {
		return c
	}
	if s.find(parseBanKey(id.Key), id.Jail) < 0 {
		return nil
	}
	if s.refusals == nil {
		s.refusals = map[BanID]*atomic.Int64{}
	}
	c := new(atomic.Int64)
	s.refusals[id] = c
	return c
}

// RefusalsOf returns the requests the ban of jail and key (read as Put
// reads it) refused, while the set holds it.
func (s *BanSet) RefusalsOf(jail, key string) int64 {
	id := BanID{jail, parseBanKey(key).key}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if c := s.refusals[id]; c != nil {
		return c.Load()
	}
	return 0
}

// Refusals returns the requests each ban held refused, of the bans that
// refused any (see CountRefusals).
func (s *BanSet) Refusals() map[BanID]int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[BanID]int64, len(s.refusals))
	for id, c := range s.refusals {
		out[id] = c.Load()
	}
	return out
}

// lapsedLog keeps, up to max, the bans a BanSet dropped as lapsed, for
// Lapsed; max 0 keeps none.
type lapsedLog struct {
	max  int
	bans []Ban
	lost int64 // lapsed bans not kept, the log being full
}

// A group is the bans of one jail within one network of a coarsening
// step: what that step merges.
type group struct {
	jail string
	net  netip.Prefix
}

// BanStats are a BanSet's counts.
type BanStats struct {
	// Bans is how many bans the set holds, lapsed ones not yet dropped
	// included; Max its capacity. Keys and MaxKeys are the same for the
	// bans of keys that are no address, a share of them.
	Bans, Max, Keys, MaxKeys int
	// Coarsened counts bans merged into a network ban at capacity.
	// Refused counts bans of addresses and networks refused with
	// ErrBansFull, RefusedKeys bans of other keys.
	Coarsened, Refused, RefusedKeys int64
	// CollateralIPv4 and CollateralIPv6 sum the Collateral of the bans
	// held: addresses, and /64s, banned beyond the offenders.
	CollateralIPv4, CollateralIPv6 int64
	// Changes counts the bans put and dropped: a reader that sees it
	// move knows the set changed.
	Changes int64
}

// Stats returns the set's counts.
func (s *BanSet) Stats() BanStats {
	s.mu.RLock()
	keys := s.nKeys
	s.mu.RUnlock()
	return BanStats{Bans: int(s.count.Load()), Max: s.max(), Keys: keys, MaxKeys: s.maxKeys(),
		Coarsened: s.coarsened.Load(), Refused: s.refused.Load(), RefusedKeys: s.refusedKeys.Load(),
		CollateralIPv4: s.collateral[0].Load(), CollateralIPv6: s.collateral[1].Load(), Changes: s.changes.Load()}
}

// Spare makes the set never coarsen bans into a network that holds an
// address or network of allow (nil: none), which may be edited, or
// replaced by another call, while the set is in use: the guard's allow
// list, so that no merge bans an address the operator trusts.
func (s *BanSet) Spare(allow *List) { s.spare.Store(allow) }

// Fresh returns an empty set with s's limits and spared list.
func (s *BanSet) Fresh() *BanSet {
	n := &BanSet{BanLimits: s.BanLimits}
	n.spare.Store(s.spare.Load())
	return n
}

// A banKey is a ban's key as a BanSet keeps it: a network, or another key.
type banKey struct {
	net netip.Prefix // valid for a network ban
	key string       // the canonical key
}

// parseBanKey returns the canonical form of a ban's key.
func parseBanKey(key string) banKey {
	if p, ok := parseNet(key); ok {
		return banKey{net: p, key: netString(p)}
	}
	return opaqueBanKey(key)
}

// opaqueBanKey is parseBanKey of a key that is no address or network.
func opaqueBanKey(key string) banKey {
	if len(key) > MaxBanKey {
		sum := sha256.Sum256([]byte(key))
		key = "sha256:" + hex.EncodeToString(sum[:])
	}
	return banKey{key: key}
}

// parseNet parses an address or a network, as the bans key them.
func parseNet(s string) (netip.Prefix, bool) {
	if len(s) == 0 || len(s) > 64 {
		return netip.Prefix{}, false
	}
	ok, slash := addrBytes(s)
	if !ok {
		return netip.Prefix{}, false // the common case of a key that is no address costs no parse (a failed one allocates its error)
	}
	if !slash {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, false
		}
		a = a.WithZone("").Unmap() // a zone names a link, not another host
		return netip.PrefixFrom(a, a.BitLen()), true
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, false
	}
	return normalize(p), true
}

// addrBytes reports whether s holds only what an address or a network
// may hold before a zone (hex digits, dots, colons, a slash), and
// whether it holds a slash.
func addrBytes(s string) (ok, slash bool) {
	for i, c := range []byte(s) {
		switch addrByte[c] {
		case 1:
		case 0:
			return false, false
		case 2: // a zone's '%': anything may follow
			return i > 0, slash
		case 3:
			slash = true
		}
	}
	return true, slash
}

// addrByte is 1 for the bytes of an address, 2 for '%' and 3 for '/'.
var addrByte = func() (t [256]uint8) {
	for _, c := range "0123456789abcdefABCDEF.:" {
		t[c] = 1
	}
	t['%'], t['/'] = 2, 3
	return t
}()

// netString writes a network as bans name it: a single address without
// its length.
func netString(p netip.Prefix) string {
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}

func family(p netip.Prefix) int {
	if p.Addr().Is4() {
		return 0
	}
	return 1
}

// Put records b, replacing any ban of the same jail and key, and returns
// the ban as recorded: its key in canonical form, or, at capacity, the
// network ban it was merged into. now is the time lapsed bans are
// judged at (b.Since when zero). The error wraps ErrBansFull when the
// set can make no room, and sluice.ErrInvalidRequest for a ban without
// a key or that has already lapsed.
func (s *BanSet) Put(b Ban, now time.Time) (Ban, error) {
	rec, _, err := s.PutMerged(b, now)
	return rec, err
}

// A Merge is what a BanSet at capacity did to make room: it replaced the
// bans Merged, which it no longer holds, by the network ban Into. The
// zero Merge (no Into.Key) is none.
type Merge struct {
	Into   Ban
	Merged []Ban
}

// PutMerged is Put that also returns the merge the set made to make
// room at capacity, if any: into the recorded ban (b merged into its
// network, or a network ban b absorbing the bans within it), or into
// another network ban, b then recorded as it is. A Registry that copies
// the set to a shared store writes Into and deletes Merged there.
func (s *BanSet) PutMerged(b Ban, now time.Time) (Ban, Merge, error) {
	if now.IsZero() {
		now = b.Since
	}
	k := parseBanKey(b.Key)
	switch {
	case b.Key == "":
		return b, Merge{}, fmt.Errorf("%w: guard: a ban needs a key", sluice.ErrInvalidRequest)
	case !b.Until.After(now):
		return b, Merge{}, fmt.Errorf("%w: guard: ban of %q lapsed at %v", sluice.ErrInvalidRequest, b.Key, b.Until)
	}
	b.Key = k.key
	b.Collateral = max(b.Collateral, 0)
	if len(b.Reason) > maxReason {
		b.Reason = b.Reason[:maxReason]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.find(k, b.Jail) < 0 && s.full(k) {
		s.prune(now)
		if s.full(k) {
			return s.makeRoom(b, k)
		}
	}
	s.set(k, b)
	return b, Merge{}, nil
}

// full reports whether the share of bans of k's kind is full. It
// requires s.mu.
func (s *BanSet) full(k banKey) bool {
	if k.net.IsValid() {
		return s.n-s.nKeys >= s.max()-s.maxKeys()
	}
	return s.nKeys >= s.maxKeys()
}

// Get returns jail's ban of key, which is read as Put reads it, lapsed
// or not, and whether the set holds one. Unlike Match, it looks for that
// key alone, not for the networks that contain it.
func (s *BanSet) Get(jail, key string) (Ban, bool) {
	k := parseBanKey(key)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if i := s.find(k, jail); i >= 0 {
		return s.bucket(k)[i], true
	}
	return Ban{}, false
}

// BanKey returns key as a BanSet records it: an address or a network
// masked and in canonical form, a key longer than MaxBanKey as its
// digest, any other key as it is.
func BanKey(key string) string { return parseBanKey(key).key }

// find returns the index of jail's ban in the bans of k, or -1. It
// requires s.mu.
func (s *BanSet) find(k banKey, jail string) int {
	return slices.IndexFunc(s.bucket(k), func(b Ban) bool { return b.Jail == jail })
}

// bucket returns the bans of k. It requires s.mu.
func (s *BanSet) bucket(k banKey) []Ban {
	if k.net.IsValid() {
		return s.nets[k.net]
	}
	return s.keys[k.key]
}

// set records b under k, replacing jail's ban there. It requires s.mu.
func (s *BanSet) set(k banKey, b Ban) {
	bans := s.bucket(k)
	var old Ban // the ban b replaces, if any
	if i := s.find(k, b.Jail); i >= 0 {
		old = bans[i]
		bans[i] = b
	} else {
		bans = append(bans, b)
		s.n++
		s.count.Store(int64(s.n))
		if k.net.IsValid() {
			s.lens[family(k.net)][k.net.Bits()]++
			s.joinGroups(b.Jail, k.net)
		} else {
			s.nKeys++
		}
	}
	if k.net.IsValid() {
		s.collateral[family(k.net)].Add(b.Collateral - old.Collateral)
	}
	if k.net.IsValid() {
		if s.nets == nil {
			s.nets = map[netip.Prefix][]Ban{}
		}
		s.nets[k.net] = bans
	} else {
		if s.keys == nil {
			s.keys = map[string][]Ban{}
		}
		s.keys[k.key] = bans
	}
	s.changes.Add(1)
	heap.Push(&s.expiry, expiring{key: k, jail: b.Jail, until: b.Until})
	if len(s.expiry) > 2*s.n+64 {
		s.rebuildExpiry()
	}
}

// remove drops jail's ban of k and reports whether there was one. It
// requires s.mu.
func (s *BanSet) remove(k banKey, jail string) bool {
	i := s.find(k, jail)
	if i < 0 {
		return false
	}
	gone := s.bucket(k)[i]
	bans := slices.Delete(s.bucket(k), i, i+1)
	switch {
	case k.net.IsValid() && len(bans) == 0:
		delete(s.nets, k.net)
	case k.net.IsValid():
		s.nets[k.net] = bans
	case len(bans) == 0:
		delete(s.keys, k.key)
	default:
		s.keys[k.key] = bans
	}
	if k.net.IsValid() {
		s.lens[family(k.net)][k.net.Bits()]--
		s.leaveGroups(jail, k.net)
		s.collateral[family(k.net)].Add(-gone.Collateral)
	} else {
		s.nKeys--
	}
	delete(s.refusals, BanID{jail, k.key})
	s.changes.Add(1)
	s.n--
	s.count.Store(int64(s.n))
	return true
}

// prune drops the bans that lapsed by now. It requires s.mu.
func (s *BanSet) prune(now time.Time) {
	for len(s.expiry) > 0 && !s.expiry[0].until.After(now) {
		e := heap.Pop(&s.expiry).(expiring)
		if i := s.find(e.key, e.jail); i >= 0 && !s.bucket(e.key)[i].Until.After(now) {
			s.noteLapsed(s.bucket(e.key)[i])
			s.remove(e.key, e.jail)
		}
	}
}

// noteLapsed keeps b, dropped as lapsed, for Lapsed. It requires s.mu.
func (s *BanSet) noteLapsed(b Ban) {
	switch {
	case s.lapsed.max <= 0:
	case len(s.lapsed.bans) < s.lapsed.max:
		s.lapsed.bans = append(s.lapsed.bans, b)
	default:
		s.lapsed.lost++
	}
}

// TrackLapsed makes the set keep the bans it drops as lapsed, at most
// max of them (0 stops), until Lapsed hands them over: whoever drops a
// lapsed ban (a Put at capacity, a List, Lapsed itself), its watcher
// learns of it.
func (s *BanSet) TrackLapsed(max int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lapsed.max = max
	if max <= 0 {
		s.lapsed = lapsedLog{}
	}
}

// Lapsed drops the bans that lapsed by now and returns those dropped as
// lapsed since the last call, by any caller, oldest end first within a
// drop, with how many more were dropped than TrackLapsed let it keep.
// Without TrackLapsed it only drops them.
func (s *BanSet) Lapsed(now time.Time) ([]Ban, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prune(now)
	bans, lost := s.lapsed.bans, s.lapsed.lost
	s.lapsed.bans, s.lapsed.lost = nil, 0
	return bans, lost
}

// rebuildExpiry drops the heap's stale entries (of bans replaced or
// removed since). It requires s.mu.
func (s *BanSet) rebuildExpiry() {
	s.expiry = s.expiry[:0]
	add := func(k banKey, bans []Ban) {
		for _, b := range bans {
			s.expiry = append(s.expiry, expiring{key: k, jail: b.Jail, until: b.Until})
		}
	}
	for p, bans := range s.nets {
		add(banKey{net: p, key: netString(p)}, bans)
	}
	for k, bans := range s.keys {
		add(banKey{key: k}, bans)
	}
	heap.Init(&s.expiry)
}

// Delete drops jail's ban of key, which is read as Put reads it, and
// reports whether there was one.
func (s *BanSet) Delete(jail, key string) bool {
	k := parseBanKey(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.remove(k, jail)
}

// List returns the bans in force at now, by jail and key, and drops
// those that lapsed.
func (s *BanSet) List(now time.Time) []Ban {
	out := s.InForce(now)
	sortBans(out) // unlocked: 100,000 bans take tens of milliseconds
	return out
}

// InForce returns the bans in force at now, in no order, and drops those
// that lapsed: what List returns, without sorting them.
func (s *BanSet) InForce(now time.Time) []Ban {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prune(now)
	out := make([]Ban, 0, s.n)
	for _, bans := range s.nets {
		out = append(out, bans...)
	}
	for _, bans := range s.keys {
		out = append(out, bans...)
	}
	return out
}

// sortBans sorts bans by jail, then key.
func sortBans(bans []Ban) {
	slices.SortFunc(bans, func(a, b Ban) int {
		if c := strings.Compare(a.Jail, b.Jail); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
}

// Match returns the ban of jail (of any jail, when jail is "") in force
// at now that covers key and lasts longest. A key that is an address or
// a network is covered by the bans of every network that contains it;
// another key only by its own bans.
func (s *BanSet) Match(jail, key string, now time.Time) (Ban, bool) {
	return s.matchKey(jail, parseBanKey(key), now)
}

// matchKey is Match of a key already parsed.
func (s *BanSet) matchKey(jail string, k banKey, now time.Time) (Ban, bool) {
	if s.count.Load() == 0 {
		return Ban{}, false
	}
	if k.net.IsValid() {
		return s.matchNet(jail, k.net, now)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return longest(s.keys[k.key], jail, now, Ban{}, false)
}

// MatchAddr returns the ban of jail (of any jail, when jail is "") in
// force at now that covers the address a and lasts longest: the ban of
// a network that contains it.
func (s *BanSet) MatchAddr(jail string, a netip.Addr, now time.Time) (Ban, bool) {
	if s.count.Load() == 0 || !a.IsValid() {
		return Ban{}, false
	}
	a = a.Unmap().WithZone("")
	return s.matchNet(jail, netip.PrefixFrom(a, a.BitLen()), now)
}

// matchActor returns the longest ban in force at now that covers a's key
// or address.
func (s *BanSet) matchActor(a Actor, now time.Time) (Ban, bool) {
	if s.count.Load() == 0 {
		return Ban{}, false
	}
	var best Ban
	found := false
	if a.Key != "" {
		best, found = s.matchKey("", a.banKey(), now)
	}
	if b, ok := s.MatchAddr("", a.Addr, now); ok && (!found || b.Until.After(best.Until)) {
		best, found = b, true
	}
	return best, found
}

// matchNet returns the longest ban of jail in force at now of a network
// that contains p.
func (s *BanSet) matchNet(jail string, p netip.Prefix, now time.Time) (Ban, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.longestOver(jail, p, now)
}

// longestOver is matchNet for a caller that holds s.mu.
func (s *BanSet) longestOver(jail string, p netip.Prefix, now time.Time) (Ban, bool) {
	var best Ban
	found := false
	lens := &s.lens[family(p)]
	for bits := p.Bits(); bits >= 0; bits-- {
		if lens[bits] == 0 {
			continue
		}
		q, _ := p.Addr().Prefix(bits)
		best, found = longest(s.nets[q], jail, now, best, found)
	}
	return best, found
}

// longest returns, of best and the bans of jail in force at now, the one
// that lasts longest.
func longest(bans []Ban, jail string, now time.Time, best Ban, found bool) (Ban, bool) {
	for _, b := range bans {
		if (jail == "" || b.Jail == jail) && b.Until.After(now) && (!found || b.Until.After(best.Until)) {
			best, found = b, true
		}
	}
	return best, found
}

// expiring is a ban in the expiry heap: its key, jail and end.
type expiring struct {
	key   banKey
	jail  string
	until time.Time
}

// banHeap orders bans by end, the soonest first.
type banHeap []expiring

func (h banHeap) Len() int           { return len(h) }
func (h banHeap) Less(i, j int) bool { return h[i].until.Before(h[j].until) }
func (h banHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *banHeap) Push(x any)        { *h = append(*h, x.(expiring)) }
func (h *banHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
