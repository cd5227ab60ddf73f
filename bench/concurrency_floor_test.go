package bench

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// floorLeases is the floor of the concurrency benchmarks, not a peer: the
// least that any limit of leases with an expiry must do per acquire and
// release, so that sluice's cost is shown beside it in the same run. It
// is what sluice's memory store does with everything else taken away:
//
//   - one hash and one map lookup per acquire, in one of 64 shards, each
//     under one mutex that also guards the tables it holds;
//   - a table of ccLimit places per key, each with an expiry, so that a
//     holder that never releases loses its place after the TTL (an
//     acquire takes the first place that is free or expired);
//   - a release by index, under the same lock, with the place's
//     generation, so that a stale release cannot free another's place;
//   - the time from a clock ticking every millisecond (an atomic load),
//     as sluice's memory store reads it for leases of 10 ms or more.
//
// It leaves out what a product needs beyond that: lease IDs, priority
// classes, Retry-After, a bound on memory (tables are never dropped), a
// store interface shared with Redis. It is not product code.
type floorLeases struct {
	floorClock
	seed   maphash.Seed
	ttl    int64
	shards [64]floorShard
}

type floorShard struct {
	mu     sync.Mutex
	tables map[string]*floorTable
	_      [48]byte // one cache line each
}

// A floorTable is one key's places. Guarded by its shard's lock.
type floorTable struct {
	exp [ccLimit]int64 // Unix ns; free when 0 or past
	gen [ccLimit]uint32
}

// newFloorLeases returns the floor's leases of ttl, at the time now
// until its clock starts ticking.
func newFloorLeases(ttl time.Duration, now int64) *floorLeases {
	f := &floorLeases{seed: maphash.MakeSeed(), ttl: int64(ttl)}
	for i := range f.shards {
		f.shards[i].tables = make(map[string]*floorTable)
	}
	f.now.Store(now)
	return f
}

// take acquires a place for key: its shard, table and index, and the
// place's generation; ok false when every place is held.
func (f *floorLeases) take(key string) (sh *floorShard, t *floorTable, i int, gen uint32, ok bool) {
	now := f.now.Load()
	sh = &f.shards[maphash.String(f.seed, key)%uint64(len(f.shards))]
	sh.mu.Lock()
	t = sh.tables[key]
	if t == nil {
		t = new(floorTable)
		sh.tables[key] = t
	}
	for i := range t.exp {
		if t.exp[i] <= now {
			t.exp[i] = now + f.ttl
			t.gen[i]++
			gen = t.gen[i]
			sh.mu.Unlock()
			return sh, t, i, gen, true
		}
	}
	sh.mu.Unlock()
	return nil, nil, 0, 0, false
}

// give releases place i of t if it is still the grant of generation gen.
func (f *floorLeases) give(sh *floorShard, t *floorTable, i int, gen uint32) {
	sh.mu.Lock()
	if t.gen[i] == gen {
		t.exp[i] = 0
	}
	sh.mu.Unlock()
}

func (f *floorLeases) acquire(_ context.Context, key string) (func(context.Context) error, bool, error) {
	sh, t, i, gen, ok := f.take(key)
	if !ok {
		return nil, false, nil
	}
	return func(context.Context) error { f.give(sh, t, i, gen); return nil }, true, nil
}

func (f *floorLeases) hold(_ context.Context, key string, fn func()) (bool, error) {
	sh, t, i, gen, ok := f.take(key)
	if !ok {
		return false, nil
	}
	fn()
	f.give(sh, t, i, gen)
	return true, nil
}

func newFloorImpl(testing.TB, string) (ccSem, *atomic.Int64, func()) {
	f := newFloorLeases(time.Minute, 0)
	f.start()
	return f, nil, f.close
}

// TestFloorLeasesExpire checks the floor's expiry and its stale release:
// a place held past the TTL is granted again, and the first holder's
// late release does not free the second's.
func TestFloorLeasesExpire(t *testing.T) {
	f := newFloorLeases(time.Second, 1e9) // not ticking
	defer f.close()
	var held [ccLimit]func(context.Context) error
	for i := range held {
		release, ok, _ := f.acquire(t.Context(), "k")
		if !ok {
			t.Fatalf("acquire %d refused, want granted", i)
		}
		held[i] = release
	}
	if _, ok, _ := f.acquire(t.Context(), "k"); ok {
		t.Fatal("acquire beyond the limit granted")
	}
	f.now.Store(2e9 + 1) // every lease expired
	late, ok, _ := f.acquire(t.Context(), "k")
	if !ok {
		t.Fatal("acquire after the expiry refused")
	}
	_ = held[0](t.Context()) // stale: must not free late's place
	for i := 1; i < ccLimit; i++ {
		if _, ok, _ := f.acquire(t.Context(), "k"); !ok {
			t.Fatalf("acquire %d after the expiry refused", i)
		}
	}
	if _, ok, _ := f.acquire(t.Context(), "k"); ok {
		t.Fatal("a stale release freed a live place")
	}
	_ = late(t.Context())
}
