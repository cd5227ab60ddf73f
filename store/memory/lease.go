package memory

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice"
)

// leaseShare is the share of MaxBytes the leases may count, apart from
// the states and the sketches: an eighth.
const leaseShare = 8

// leaseShardCount is the number of independently locked parts of the
// lease tables.
const leaseShardCount = 64

// Counted sizes: a table with its first place and a name of up to
// leaseNameInline bytes, and its map entry; each further place of a
// table, beside its lease's ID.
const (
	leaseTableBytes = int64(unsafe.Sizeof(leaseTable{})) + 24
	leaseSlotBytes  = 40
)

// leaseNameInline is the longest table name kept inside the table, rather
// than in a string of its own: a table found on a large store (100k keys)
// cost a cache miss more for its name and one for its first place, beyond
// the table's own, when each had its own allocation.
const leaseNameInline = 48

// tableBytes returns what a table named by n bytes counts, with its
// first place.
func tableBytes(n int) int64 {
	if n <= leaseNameInline {
		return leaseTableBytes
	}
	return leaseTableBytes + int64(n)
}

// leaseShards holds the lease tables of a Store, apart from its rate
// states (a table emptied by releases is kept until a sweep, so that a
// key whose holders come and go does not allocate a table each time): a
// live lease is never evicted to make room (forgetting it would admit
// one more holder than the limit), so when the leases' share of MaxBytes
// is spent a new lease is refused (LeaseDecision.Full) until others are
// released or expire. Tables whose leases have all expired are dropped as
// the shard is used: after sweepPerTable calls per table it holds, a
// call sweeps the shard, so dead tables cost amortised O(1).
type leaseShards struct {
	seed     maphash.Seed
	shards   []leaseShard
	max      int64 // MaxBytes / leaseShare
	bytes    atomic.Int64
	lastFull atomic.Int64 // time of the last sweep of every shard, Unix ns
}

// fullSweepEvery is how often, at most, a full store sweeps every shard
// for expired leases before it refuses a lease: so a store full of
// expired leases refuses for at most that long, and a flood of acquires
// on a store full of live ones costs one sweep per interval, not one per
// acquire.
const fullSweepEvery = 100 * time.Millisecond

type leaseShard struct {
	mu sync.Mutex
	// tables holds the tables by the hash of their name, those of one
	// hash (a collision, of chance: the seed is secret) chained by next:
	// one hash per call, for the shard and the table.
	tables map[uint64]*leaseTable
	n      int // tables
	calls  int // since the last sweep
	_      [40]byte
}

var (
	_ sluice.LeaseStore = (*Store)(nil)
	_ sluice.LeaseRefs  = (*Store)(nil)
)

// LeaseBytes returns what the store's leases count against their share of
// MaxBytes (an eighth, on top of the states' and sketches' share).
func (s *Store) LeaseBytes() int64 { return s.leases.bytes.Load() }

// Acquire grants a lease; see sluice.LeaseStore. It refuses a new lease,
// with Full set, when the leases' share of MaxBytes is spent.
func (s *Store) Acquire(_ context.Context, r sluice.LeaseRequest) (sluice.LeaseDecision, error) {
	return s.lease(&r, opAcquire)
}

// Release ends a lease; see sluice.LeaseStore.
func (s *Store) Release(_ context.Context, r sluice.LeaseRequest) (sluice.LeaseDecision, error) {
	return s.lease(&r, opRelease)
}

// Extend renews a live lease; see sluice.LeaseStore.
func (s *Store) Extend(_ context.Context, r sluice.LeaseRequest) (sluice.LeaseDecision, error) {
	return s.lease(&r, opExtend)
}

// AcquireRef grants a lease with no ID; see sluice.LeaseRefs. A request
// that fails validation is refused.
func (s *Store) AcquireRef(prefix, key string, limit, ceiling int, ttl time.Duration) (ref sluice.LeaseRef, g sluice.LeaseGrant) {
	if !sluice.ValidLease(limit, ceiling, ttl) {
		return ref, g
	}
	if ceiling == 0 {
		ceiling = limit
	}
	g.Now = s.now(ttl >= coarseGrains*s.clk.res)
	for retry := true; ; retry = false {
		sh, t := s.leases.lockTable(prefix, key, g.Now, opAcquire, 0)
		if t != nil {
			t.limit = limit
			t.reclaim(s, g.Now)
			if i := t.acquire(s, "", ceiling, g.Now+int64(ttl), &g); i >= 0 {
				ref = sluice.LeaseRef{Table: t, Slot: i, Gen: t.slots[i].gen}
			}
			g.InUse = int32(t.live)
		} else {
			g.Outcome = sluice.LeaseFull
		}
		sh.mu.Unlock()
		if g.Outcome != sluice.LeaseFull || !retry || !s.leases.sweepAll(g.Now) {
			return ref, g
		}
		g.Outcome = sluice.LeaseRefused
	}
}

// ReleaseRef ends the lease of ref; see sluice.LeaseRefs. It frees ref's
// place whether or not its lease expired (expired, it is still ref's
// grant), and leaves the table's other expired leases to the next
// acquire.
func (s *Store) ReleaseRef(ref sluice.LeaseRef) bool {
	t, _ := ref.Table.(*leaseTable)
	if t == nil {
		return false
	}
	now := s.now(true)
	t.sh.mu.Lock()
	i := ref.Slot
	live := !t.dropped && i >= 0 && i < len(t.slots) && t.slots[i].gen == ref.Gen && t.slots[i].exp != 0
	if live {
		live = t.slots[i].exp > now
		t.free(s, i)
	}
	t.sh.mu.Unlock()
	return live
}

// ExtendRef renews the live lease of ref; see sluice.LeaseRefs.
func (s *Store) ExtendRef(ref sluice.LeaseRef, ttl time.Duration) (time.Time, bool) {
	if ttl < sluice.MinLeaseTTL || ttl > sluice.MaxLeaseTTL {
		return time.Time{}, false
	}
	t, i := s.lockRef(ref)
	if t == nil {
		return time.Time{}, false
	}
	defer t.sh.mu.Unlock()
	if i < 0 {
		return time.Time{}, false
	}
	return time.Unix(0, t.extend(i, s.now(true)+int64(ttl))), true
}

// NameRef gives the live lease of ref an ID; see sluice.LeaseRefs.
func (s *Store) NameRef(ref sluice.LeaseRef, id string) bool {
	if len(id) == 0 || len(id) > sluice.MaxLeaseIDLen {
		return false
	}
	t, i := s.lockRef(ref)
	if t == nil {
		return false
	}
	defer t.sh.mu.Unlock()
	if i < 0 {
		return false
	}
	sl := &t.slots[i]
	s.leases.bytes.Add(int64(len(id) - len(sl.id)))
	sl.id = id
	return true
}

// lockRef finds the table of ref and, if there is one, locks its shard,
// drops its expired leases, and returns it with the index of ref's slot
// if ref's lease is live, -1 otherwise. The caller unlocks t.sh.mu.
func (s *Store) lockRef(ref sluice.LeaseRef) (*leaseTable, int) {
	t, _ := ref.Table.(*leaseTable)
	if t == nil {
		return nil, -1
	}
	now := s.now(true)
	t.sh.mu.Lock()
	if t.dropped {
		return t, -1
	}
	t.reclaim(s, now)
	i := ref.Slot
	if i < 0 || i >= len(t.slots) || t.slots[i].gen != ref.Gen || t.slots[i].exp == 0 {
		return t, -1
	}
	return t, i
}

// The ops of lease.
const (
	opAcquire = iota
	opRelease
	opExtend
)

var opNames = [...]string{"acquire", "release", "extend"}

func (s *Store) lease(r *sluice.LeaseRequest, op int) (sluice.LeaseDecision, error) {
	if err := r.Validate(opNames[op]); err != nil {
		return sluice.LeaseDecision{}, err
	}
	now := s.leaseNow(r, op)
	g := s.leaseOnce(r, op, now)
	if g.Outcome == sluice.LeaseFull && s.leases.sweepAll(now) {
		g = s.leaseOnce(r, op, now)
	}
	return g.Decision(r.Limit), nil
}

// leaseNow returns r's time: r.Now, or the store's clock, coarse (see
// Config.Resolution) for a release and for leases of ten resolutions or
// more: a lease may end up to a resolution early.
func (s *Store) leaseNow(r *sluice.LeaseRequest, op int) int64 {
	if !r.Now.IsZero() {
		return r.Now.UnixNano()
	}
	return s.now(op == opRelease || r.TTL >= coarseGrains*s.clk.res)
}

// sweepAll drops the expired leases of every shard, unless it did less
// than fullSweepEvery ago, and reports whether it did.
func (ls *leaseShards) sweepAll(now int64) bool {
	last := ls.lastFull.Load()
	if now-last < int64(fullSweepEvery) || !ls.lastFull.CompareAndSwap(last, now) {
		return false
	}
	for i := range ls.shards {
		sh := &ls.shards[i]
		sh.mu.Lock()
		sh.calls = sweepPerTable*sh.n + sweepMinCalls // due
		sh.sweep(ls, now, true)
		sh.mu.Unlock()
	}
	return true
}

// leaseOnce applies op to r's table at now, and returns the decision:
// LeaseGranted for a release or an extension of a live lease, and Until
// 0 for a release.
func (s *Store) leaseOnce(r *sluice.LeaseRequest, op int, now int64) sluice.LeaseGrant {
	g := sluice.LeaseGrant{Now: now}
	sh, t := s.leases.lockTable(r.Prefix, r.Key, now, op, len(r.ID))
	defer sh.mu.Unlock()
	if t == nil {
		if op == opAcquire {
			g.Outcome = sluice.LeaseFull
		}
		return g
	}
	t.limit = r.Limit
	t.reclaim(s, now)
	switch op {
	case opAcquire:
		t.acquire(s, r.ID, r.EffectiveCeiling(), now+int64(r.TTL), &g)
	case opRelease:
		if i := t.find(r.ID); i >= 0 {
			g.Outcome = sluice.LeaseGranted
			t.free(s, i)
		}
	case opExtend:
		if i := t.find(r.ID); i >= 0 {
			g.Outcome, g.Until = sluice.LeaseGranted, t.extend(i, now+int64(r.TTL))
		}
	}
	g.InUse = int32(t.live)
	return g
}

// lockTable locks the shard of prefix+key's table, sweeps it (see
// sweep), and returns it with the table, marked used. For an acquire it
// makes the table if there is none, for a first lease whose ID is idLen
// bytes, unless the leases' share of MaxBytes has no room for it: then
// the table is nil, as it is for other ops when there is none. The
// caller unlocks sh.mu.
func (ls *leaseShards) lockTable(prefix, key string, now int64, op, idLen int) (sh *leaseShard, t *leaseTable) {
	h := ls.hash(prefix, key)
	sh = &ls.shards[h%leaseShardCount]
	sh.mu.Lock()
	sh.sweep(ls, now, false)
	t = sh.tables[h]
	for t != nil && !t.named(prefix, key) {
		t = t.next
	}
	switch {
	case t != nil:
	case op != opAcquire:
		return sh, nil
	case !ls.fits(tableBytes(len(prefix)+len(key)) + int64(idLen)):
		return sh, nil
	default:
		t = sh.add(ls, h, prefix, key)
	}
	t.used = true
	return sh, t
}

// hash returns the hash of a table's name, prefix+key: the prefix's and
// the key's, each seeded, mixed. Hashing them apart costs two short
// hashes but no copy into one buffer (whose bytes, just written, the
// hash would read back in wider words than they were written in: a
// stall of the store forwarding that cost more than the hash).
func (ls *leaseShards) hash(prefix, key string) uint64 {
	hp := maphash.String(ls.seed, prefix)
	return maphash.String(ls.seed, key) ^ (hp*0x9e3779b97f4a7c15 + uint64(len(prefix)))
}

// named reports whether t is the table of prefix+key.
func (t *leaseTable) named(prefix, key string) bool {
	return len(t.name) == len(prefix)+len(key) && t.name[:len(prefix)] == prefix && t.name[len(prefix):] == key
}

// fits reports whether need more bytes stay within the leases' share of
// MaxBytes.
func (ls *leaseShards) fits(need int64) bool {
	return ls.bytes.Load()+need <= ls.max
}

// init readies ls for a store of maxBytes.
func (ls *leaseShards) init(maxBytes int64) {
	ls.seed = maphash.MakeSeed()
	ls.shards = make([]leaseShard, leaseShardCount)
	ls.max = maxBytes / leaseShare
}

// add makes the table of prefix+key in sh, under its hash h, and counts
// it.
func (sh *leaseShard) add(ls *leaseShards, h uint64, prefix, key string) *leaseTable {
	if sh.tables == nil {
		sh.tables = make(map[uint64]*leaseTable)
	}
	t := &leaseTable{sh: sh, hash: h, next: sh.tables[h]}
	if n := len(prefix) + len(key); n <= leaseNameInline {
		copy(t.nameBuf[copy(t.nameBuf[:], prefix):], key)
		t.name = unsafe.String(&t.nameBuf[0], n) // never written again
	} else {
		t.name = prefix + key
	}
	t.slots, t.vacant = t.slot0[:0], t.vacant0[:0]
	sh.tables[h] = t
	sh.n++
	ls.bytes.Add(tableBytes(len(t.name)))
	return t
}

// remove forgets t, and uncounts it: refs to it refer to nothing.
func (sh *leaseShard) remove(ls *leaseShards, t *leaseTable) {
	p := sh.tables[t.hash]
	switch {
	case p == t && t.next == nil:
		delete(sh.tables, t.hash)
	case p == t:
		sh.tables[t.hash] = t.next
	default:
		for p.next != t {
			p = p.next
		}
		p.next = t.next
	}
	n := tableBytes(len(t.name)) + int64(max(len(t.slots)-1, 0))*leaseSlotBytes
	for i := range t.slots {
		n += int64(len(t.slots[i].id))
	}
	ls.bytes.Add(-n)
	t.dropped = true
	sh.n--
}

// A shard sweeps once every sweepPerTable calls per table it holds, and
// sweepMinCalls: a sweep walks the shard's tables, which costs as much as
// a few dozen calls on a shard of few tables and a cache miss or more per
// table on a large one. With four calls per table, a table that is used
// at the average rate survives a sweep with odds of 98% (e⁻⁴ that it was
// not used since the last), where with one call per table a third of
// them were dropped and made again by the next acquire.
const (
	sweepPerTable = 4
	sweepMinCalls = 256
)

// sweep drops the tables of sh whose leases have all expired at now and
// that were not used since the last sweep (used or not, if all), once
// every sweepPerTable calls per table sh holds, and sweepMinCalls.
func (sh *leaseShard) sweep(ls *leaseShards, now int64, all bool) {
	sh.calls++
	if sh.calls <= sweepPerTable*sh.n+sweepMinCalls {
		return
	}
	sh.calls = 0
	var dead []*leaseTable
	for _, t := range sh.tables {
		for ; t != nil; t = t.next {
			if (t.used && !all) || t.latest() > now {
				t.used = false // dropped by the next sweep if unused until then
				continue
			}
			dead = append(dead, t)
		}
	}
	for _, t := range dead {
		sh.remove(ls, t)
	}
}

// A leaseTable is the state of one key of a concurrency limit: its
// places, each free or held by one lease until its expiry. A place keeps
// the generation of its latest grant, so that a LeaseRef to an earlier
// grant of the place refers to nothing. Guarded by its shard's lock.
type leaseTable struct {
	sh     *leaseShard
	name   string      // prefix+key, in nameBuf if it fits
	hash   uint64      // of name
	next   *leaseTable // of the same hash
	slots  []leaseSlot // in slot0 until there are two
	vacant []int32     // indexes of free slots; in vacant0 until there are three
	live   int         // slots held, none expired (after reclaim)
	limit  int         // of the latest request, to report
	// earliest is at most the earliest expiry of a held slot (0 when
	// none is held): until then, no lease can have expired. exact
	// reports that it is the earliest, so that a denial tells its
	// Retry-After without a scan of every place: a flood of denials on a
	// full table of many places costs O(1) each, a scan only after a
	// lease ends or moves.
	earliest int64
	exact    bool
	dropped  bool // swept from its shard
	used     bool // since the last sweep

	nameBuf [leaseNameInline]byte
	slot0   [1]leaseSlot
	vacant0 [2]int32
}

// A leaseSlot is one place of a leaseTable.
type leaseSlot struct {
	exp int64 // Unix ns; live while now < exp; 0 when free
	gen uint64
	id  string // "" for a lease known only by its ref
}

// acquire grants a lease to id in t until exp, or renews id's live
// lease, if fewer than ceiling leases are live and the leases' share of
// MaxBytes allows, and returns its slot, or -1. An empty id asks for a
// lease with no ID, known by its ref.
func (t *leaseTable) acquire(s *Store, id string, ceiling int, exp int64, g *sluice.LeaseGrant) int {
	if id != "" {
		if i := t.find(id); i >= 0 {
			t.setExp(i, max(t.slots[i].exp, exp))
			g.Outcome, g.Until = sluice.LeaseGranted, t.slots[i].exp
			return i
		}
	}
	if t.live >= ceiling {
		if t.live > 0 {
			if !t.exact {
				t.earliest, t.exact = t.scanEarliest(), true
			}
			g.Until = t.earliest
		}
		return -1
	}
	need := int64(len(id))
	if len(t.vacant) == 0 && len(t.slots) > 0 { // a place beyond the first
		need += leaseSlotBytes
	}
	if need > 0 {
		if !s.leases.fits(need) {
			g.Outcome = sluice.LeaseFull
			return -1
		}
		s.leases.bytes.Add(need) // an atomic: only when there is a count to change
	}
	g.Outcome, g.Until = sluice.LeaseGranted, exp
	return t.grant(id, exp)
}

// grant holds a free slot (a new one if none is free) for id until exp,
// and returns its index.
func (t *leaseTable) grant(id string, exp int64) int {
	var i int
	if n := len(t.vacant); n > 0 {
		i, t.vacant = int(t.vacant[n-1]), t.vacant[:n-1]
	} else {
		i = len(t.slots)
		t.slots = append(t.slots, leaseSlot{})
	}
	sl := &t.slots[i]
	sl.exp, sl.id = exp, id
	sl.gen++
	t.live++
	if t.earliest == 0 || exp < t.earliest { // the earliest now, exactly
		t.earliest, t.exact = exp, true
	}
	return i
}

// extend moves the expiry of slot i's lease to exp, and returns it.
func (t *leaseTable) extend(i int, exp int64) int64 {
	t.setExp(i, exp)
	return exp
}

// setExp moves the expiry of slot i's live lease to exp, keeping
// earliest a bound, and exact unless the slot held the earliest expiry
// and it moved later.
func (t *leaseTable) setExp(i int, exp int64) {
	old := t.slots[i].exp
	t.slots[i].exp = exp
	switch {
	case exp < t.earliest:
		t.earliest, t.exact = exp, true
	case old == t.earliest && exp != old:
		t.exact = false
	}
}

// free ends the lease of slot i, live or expired.
func (t *leaseTable) free(s *Store, i int) {
	sl := &t.slots[i]
	if sl.exp == 0 {
		return
	}
	if sl.id != "" {
		s.leases.bytes.Add(-int64(len(sl.id)))
	}
	if sl.exp == t.earliest {
		t.exact = false // perhaps another lease expires then too
	}
	sl.exp, sl.id = 0, ""
	t.vacant = append(t.vacant, int32(i))
	t.live--
	if t.live == 0 {
		t.earliest, t.exact = 0, true
	}
}

// reclaim frees the slots whose leases have expired at now, if any can
// have: a scan only when the earliest expiry has passed.
func (t *leaseTable) reclaim(s *Store, now int64) {
	if t.earliest == 0 || now < t.earliest {
		return
	}
	for i := range t.slots {
		if exp := t.slots[i].exp; exp != 0 && exp <= now {
			t.free(s, i)
		}
	}
	t.earliest, t.exact = t.scanEarliest(), true
}

// scanEarliest returns the earliest expiry of a held slot, or 0.
func (t *leaseTable) scanEarliest() int64 {
	var e int64
	for i := range t.slots {
		if exp := t.slots[i].exp; exp != 0 && (e == 0 || exp < e) {
			e = exp
		}
	}
	return e
}

// find returns the index of the slot that id holds, or -1.
func (t *leaseTable) find(id string) int {
	for i := range t.slots {
		if t.slots[i].exp != 0 && t.slots[i].id == id {
			return i
		}
	}
	return -1
}

// latest returns the latest expiry of t's leases, or 0 when none is
// held: when the whole table can be forgotten.
func (t *leaseTable) latest() int64 {
	var e int64
	for i := range t.slots {
		e = max(e, t.slots[i].exp)
	}
	return e
}
