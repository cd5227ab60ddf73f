package memory

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// leaseShare is the share of MaxBytes the leases may count, apart from
// the states and the sketches: an eighth.
const leaseShare = 8

// leaseShardCount is the number of independently locked parts of the
// lease tables.
const leaseShardCount = 64

// Counted sizes: a table's map entry, key and header, and one lease's
// entry beside its ID.
const (
	leaseTableBytes = 96
	leaseEntryBytes = 32
)

// leaseShards holds the lease tables of a Store, apart from its rate
// states (a table emptied by releases is kept until a sweep, so that a
// key whose holders come and go does not allocate a table each time): a live lease is never evicted to make room (forgetting it would
// admit one more holder than the limit), so when the leases' share of
// MaxBytes is spent a new lease is refused (LeaseDecision.Full) until
// others are released or expire. Tables whose leases have all expired are
// dropped as the shard is used: after as many calls as it holds tables,
// a call sweeps the shard, so dead tables cost amortised O(1).
type leaseShards struct {
	once     sync.Once
	seed     maphash.Seed
	shards   []leaseShard
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
	mu     sync.Mutex
	tables map[string]*algorithm.LeaseTable
	calls  int // since the last sweep
	_      [40]byte
}

var _ sluice.LeaseStore = (*Store)(nil)

// LeaseBytes returns what the store's leases count against their share of
// MaxBytes (an eighth, on top of the states' and sketches' share).
func (s *Store) LeaseBytes() int64 { return s.leases.bytes.Load() }

// Acquire grants a lease; see sluice.LeaseStore. It refuses a new lease,
// with Full set, when the leases' share of MaxBytes is spent.
func (s *Store) Acquire(_ context.Context, r sluice.LeaseRequest) (sluice.LeaseDecision, error) {
	return s.lease(&r, "acquire")
}

// Release ends a lease; see sluice.LeaseStore.
func (s *Store) Release(_ context.Context, r sluice.LeaseRequest) (sluice.LeaseDecision, error) {
	return s.lease(&r, "release")
}

// Extend renews a live lease; see sluice.LeaseStore.
func (s *Store) Extend(_ context.Context, r sluice.LeaseRequest) (sluice.LeaseDecision, error) {
	return s.lease(&r, "extend")
}

func (s *Store) lease(r *sluice.LeaseRequest, op string) (sluice.LeaseDecision, error) {
	if err := r.Validate(op); err != nil {
		return sluice.LeaseDecision{}, err
	}
	ls := &s.leases
	ls.once.Do(func() {
		ls.seed = maphash.MakeSeed()
		ls.shards = make([]leaseShard, leaseShardCount)
	})
	now := r.Now.UnixNano()
	if r.Now.IsZero() {
		// The coarse clock (see Config.Resolution) for leases of ten
		// resolutions or more: a lease may end up to a resolution early.
		now = s.now(op == "release" || r.TTL >= coarseGrains*s.clk.res)
	}
	d := s.leaseOnce(r, op, now)
	if d.Full && ls.sweepAll(now) {
		d = s.leaseOnce(r, op, now)
	}
	return d, nil
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
		sh.calls = len(sh.tables) + 16 // due
		sh.sweep(ls, now)
		sh.mu.Unlock()
	}
	return true
}

// leaseOnce applies op to r's table at now.
func (s *Store) leaseOnce(r *sluice.LeaseRequest, op string, now int64) sluice.LeaseDecision {
	ls := &s.leases
	var buf [128]byte
	name := append(buf[:0], r.Prefix...) // on the stack unless longer
	name = append(name, r.Key...)
	sh := &ls.shards[maphash.Bytes(ls.seed, name)%leaseShardCount]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.sweep(ls, now)
	t := sh.tables[string(name)] // no allocation for the lookup
	fresh := t == nil
	if fresh {
		t = &algorithm.LeaseTable{}
	}
	before := leaseCount(t)
	d := sluice.LeaseDecision{Limit: r.Limit, Time: time.Unix(0, now)}
	exp := now + int64(r.TTL)
	switch op {
	case "acquire":
		d.Allowed = s.acquire(t, r, now, exp, fresh, len(name), &d)
	case "release":
		d.Allowed = t.Release(r.ID, now)
	case "extend":
		d.Allowed = t.Extend(r.ID, now, exp)
	}
	if d.Allowed && op != "release" {
		d.Expires = time.Unix(0, t.Expires(r.ID))
	}
	d.InUse = len(t.Leases)
	if !d.Allowed && op == "acquire" && d.InUse > 0 {
		d.RetryAfter = time.Duration(t.Earliest() - now)
	}
	delta := leaseCount(t) - before
	if fresh && len(t.Leases) > 0 {
		if sh.tables == nil {
			sh.tables = make(map[string]*algorithm.LeaseTable)
		}
		sh.tables[string(name)] = t
		delta += leaseTableBytes + int64(len(name))
	}
	ls.bytes.Add(delta)
	return d
}

// acquire grants r.ID in t if the ceiling and the leases' share of
// MaxBytes allow it; fresh tells a table the store does not hold yet,
// whose name of nameLen bytes would count too.
func (s *Store) acquire(t *algorithm.LeaseTable, r *sluice.LeaseRequest, now, exp int64, fresh bool, nameLen int, d *sluice.LeaseDecision) bool {
	t.Prune(now)
	if t.Expires(r.ID) == 0 && len(t.Leases) < r.EffectiveCeiling() {
		need := int64(leaseEntryBytes + len(r.ID))
		if fresh {
			need += leaseTableBytes + int64(nameLen)
		}
		if s.leases.bytes.Load()+need > s.maxBytes/leaseShare {
			d.Full = true
			return false
		}
	}
	return t.Acquire(r.ID, r.EffectiveCeiling(), now, exp)
}

// leaseCount returns the counted bytes of t's leases, or 0 for an empty
// table (which is not kept).
func leaseCount(t *algorithm.LeaseTable) int64 {
	var n int64
	for _, l := range t.Leases {
		n += leaseEntryBytes + int64(len(l.ID))
	}
	return n
}

// sweep drops the tables of sh whose leases have all expired at now, once
// every as many calls as sh holds tables.
func (sh *leaseShard) sweep(ls *leaseShards, now int64) {
	sh.calls++
	if sh.calls <= len(sh.tables)+16 {
		return
	}
	sh.calls = 0
	for name, t := range sh.tables {
		if t.Latest() <= now { // every lease expired, or none left
			ls.bytes.Add(-leaseCount(t) - leaseTableBytes - int64(len(name)))
			delete(sh.tables, name)
		}
	}
}
