package memory

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// leaseShare is the share of MaxBytes the leases may count, apart from
// the states and the sketches: an eighth.
const leaseShare = 8

// leaseShardCount is the number of independently locked parts of the
// lease tables.
const leaseShardCount = 64

// Counted sizes: a table's map entry, key and header, and one place of a
// table beside its lease's ID.
const (
	leaseTableBytes = 96
	leaseSlotBytes  = 40
)

// leaseShards holds the lease tables of a Store, apart from its rate
// states (a table emptied by releases is kept until a sweep, so that a
// key whose holders come and go does not allocate a table each time): a
// live lease is never evicted to make room (forgetting it would admit
// one more holder than the limit), so when the leases' share of MaxBytes
// is spent a new lease is refused (LeaseDecision.Full) until others are
// released or expire. Tables whose leases have all expired are dropped as
// the shard is used: after as many calls as it holds tables, a call
// sweeps the shard, so dead tables cost amortised O(1).
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
// that fails validation is a denial.
func (s *Store) AcquireRef(r sluice.LeaseRequest) (sluice.LeaseDecision, sluice.LeaseRef) {
	r.ID = "-" // named by its ref, not by an ID
	if err := r.Validate("acquire"); err != nil {
		return sluice.LeaseDecision{Limit: r.Limit}, sluice.LeaseRef{}
	}
	now := s.leaseNow(&r, opAcquire)
	ref := sluice.LeaseRef{Slot: -1}
	d := s.leaseOnce(&r, opAcquire, now, &ref)
	if d.Full && s.leases.sweepAll(now) {
		d = s.leaseOnce(&r, opAcquire, now, &ref)
	}
	return d, ref
}

// ReleaseRef ends the lease of ref; see sluice.LeaseRefs.
func (s *Store) ReleaseRef(ref sluice.LeaseRef) bool {
	t, i := s.lockRef(ref)
	if t == nil {
		return false
	}
	if i >= 0 {
		t.free(s, i)
	}
	t.sh.mu.Unlock()
	return i >= 0
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
	d := s.leaseOnce(r, op, now, nil)
	if d.Full && s.leases.sweepAll(now) {
		d = s.leaseOnce(r, op, now, nil)
	}
	return d, nil
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
		sh.calls = sh.n + 16 // due
		sh.sweep(ls, now, true)
		sh.mu.Unlock()
	}
	return true
}

// leaseOnce applies op to r's table at now; ref, for an acquire by ref,
// receives the lease's ref.
func (s *Store) leaseOnce(r *sluice.LeaseRequest, op int, now int64, ref *sluice.LeaseRef) sluice.LeaseDecision {
	ls := &s.leases
	var buf [128]byte
	name := append(buf[:0], r.Prefix...) // on the stack unless longer
	name = append(name, r.Key...)
	h := maphash.Bytes(ls.seed, name)
	sh := &ls.shards[h%leaseShardCount]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.sweep(ls, now, false)
	t := sh.tables[h]
	for t != nil && t.name != string(name) { // no allocation for the comparison
		t = t.next
	}
	if t == nil {
		if op != opAcquire {
			return sluice.LeaseDecision{Limit: r.Limit, Time: time.Unix(0, now)}
		}
		if !ls.fits(leaseTableBytes + int64(len(name)) + leaseSlotBytes + int64(len(r.ID))) {
			return sluice.LeaseDecision{Limit: r.Limit, Time: time.Unix(0, now), Full: true}
		}
		t = sh.add(ls, h, string(name))
	}
	t.limit, t.used = r.Limit, true
	t.reclaim(s, now)
	d := sluice.LeaseDecision{Limit: r.Limit, Time: time.Unix(0, now)}
	switch op {
	case opAcquire:
		t.acquire(s, r, now, &d, ref)
	case opRelease:
		if i := t.find(r.ID); i >= 0 {
			d.Allowed = true
			t.free(s, i)
		}
	case opExtend:
		if i := t.find(r.ID); i >= 0 {
			d.Allowed, d.Expires = true, time.Unix(0, t.extend(i, now+int64(r.TTL)))
		}
	}
	d.InUse = t.live
	return d
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

// add makes name's table in sh, under its hash h, and counts it.
func (sh *leaseShard) add(ls *leaseShards, h uint64, name string) *leaseTable {
	if sh.tables == nil {
		sh.tables = make(map[uint64]*leaseTable)
	}
	t := &leaseTable{sh: sh, name: name, hash: h, next: sh.tables[h]}
	sh.tables[h] = t
	sh.n++
	ls.bytes.Add(leaseTableBytes + int64(len(name)))
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
	n := leaseTableBytes + int64(len(t.name)) + int64(len(t.slots))*leaseSlotBytes
	for i := range t.slots {
		n += int64(len(t.slots[i].id))
	}
	ls.bytes.Add(-n)
	t.dropped = true
	sh.n--
}

// sweep drops the tables of sh whose leases have all expired at now and
// that were not used since the last sweep (used or not, if all), once
// every as many calls as sh holds tables.
func (sh *leaseShard) sweep(ls *leaseShards, now int64, all bool) {
	sh.calls++
	if sh.calls <= sh.n+16 {
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
	name   string      // prefix+key
	hash   uint64      // of name
	next   *leaseTable // of the same hash
	slots  []leaseSlot
	vacant []int32 // indexes of free slots
	live   int     // slots held, none expired (after reclaim)
	limit  int     // of the latest request, to report
	// earliest is at most the earliest expiry of a held slot (0 when
	// none is held): until then, no lease can have expired.
	earliest int64
	dropped  bool // swept from its shard
	used     bool // since the last sweep
}

// A leaseSlot is one place of a leaseTable.
type leaseSlot struct {
	exp int64 // Unix ns; live while now < exp; 0 when free
	gen uint64
	id  string // "" for a lease known only by its ref
}

// acquire grants r.ID in t, or renews it if it holds a live lease, if
// fewer than r's ceiling leases are live and the leases' share of
// MaxBytes allows; ref, if not nil, asks for a lease with no ID and
// receives its ref.
func (t *leaseTable) acquire(s *Store, r *sluice.LeaseRequest, now int64, d *sluice.LeaseDecision, ref *sluice.LeaseRef) {
	exp := now + int64(r.TTL)
	if ref == nil {
		if i := t.find(r.ID); i >= 0 {
			t.slots[i].exp = max(t.slots[i].exp, exp)
			d.Allowed, d.Expires = true, time.Unix(0, t.slots[i].exp)
			return
		}
	}
	if t.live >= r.EffectiveCeiling() {
		if t.live > 0 {
			t.earliest = t.scanEarliest()
			d.RetryAfter = time.Duration(t.earliest - now)
		}
		return
	}
	id := r.ID
	if ref != nil {
		id = ""
	}
	need := int64(len(id))
	if len(t.vacant) == 0 {
		need += leaseSlotBytes
	}
	if need > 0 && !s.leases.fits(need) {
		d.Full = true
		return
	}
	s.leases.bytes.Add(need)
	i := t.grant(id, exp)
	d.Allowed, d.Expires = true, time.Unix(0, exp)
	if ref != nil {
		*ref = sluice.LeaseRef{Table: t, Slot: i, Gen: t.slots[i].gen}
	}
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
	if t.earliest == 0 || exp < t.earliest {
		t.earliest = exp
	}
	return i
}

// extend moves the expiry of slot i's lease to exp, and returns it.
func (t *leaseTable) extend(i int, exp int64) int64 {
	t.slots[i].exp = exp
	t.earliest = min(t.earliest, exp) // a lower bound still
	return exp
}

// free ends the lease of slot i, live or expired.
func (t *leaseTable) free(s *Store, i int) {
	sl := &t.slots[i]
	if sl.exp == 0 {
		return
	}
	s.leases.bytes.Add(-int64(len(sl.id)))
	sl.exp, sl.id = 0, ""
	t.vacant = append(t.vacant, int32(i))
	t.live--
	if t.live == 0 {
		t.earliest = 0
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
	t.earliest = t.scanEarliest()
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
