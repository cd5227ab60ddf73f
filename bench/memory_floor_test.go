package bench

import (
	"context"
	"hash/maphash"
	"sync"
	"time"
)

// floorGCRAImpl is the memory comparison's floor, not a peer: the least a
// keyed GCRA limiter shared by goroutines can do per decision. One
// maphash of the key picks one of 64 maps of theoretical arrival times,
// each under its own mutex; the time is a coarse clock read from an
// atomic that a goroutine refreshes every millisecond (as sluice's memory
// store does), and the decision is GCRA's arithmetic on integers. It has
// nothing a limiter needs beyond that: no validation, no long-key
// hashing, no details in its decision (remaining, retry after), no
// memory bound or eviction, no expiry of idle keys. A sluice figure
// close to it is as cheap as the work allows; bench/cmd/ratio shows it
// beside the peers (its name starts with "floor") and never takes it
// for the fastest peer.
var floorGCRAImpl = memImpl{
	name:       "floor-gcra",
	clock:      "a coarse monotonic clock in an atomic, refreshed every 1 ms by a goroutine",
	injectable: true,
	model:      "gcra",
	new:        newFloorGCRA,
}

const gcraShards = 64

type floorGCRA struct {
	floorClock
	seed     maphash.Seed
	shards   [gcraShards]gcraShard
	interval int64            // ns between events
	tau      int64            // ns a key's arrival time may run ahead of now
	nowFunc  func() time.Time // the time of each request, if set
}

type gcraShard struct {
	mu  sync.Mutex
	tat map[string]int64
	_   [40]byte // a cache line each
}

func newFloorGCRA(l memLimit, now func() time.Time) (memTaker, error) {
	interval := int64(l.Period) / int64(l.Rate)
	f := &floorGCRA{seed: maphash.MakeSeed(), interval: interval, tau: interval * int64(l.Burst-1), nowFunc: now}
	for i := range f.shards {
		f.shards[i].tat = make(map[string]int64)
	}
	if now == nil {
		f.start()
	}
	return f, nil
}

func (f *floorGCRA) take(_ context.Context, key string) (bool, error) {
	now := f.now.Load()
	if f.nowFunc != nil {
		now = f.nowFunc().UnixNano()
	}
	sh := &f.shards[maphash.String(f.seed, key)%gcraShards]
	sh.mu.Lock()
	tat, ok := sh.tat[key]
	if !ok || tat < now {
		tat = now
	}
	allowed := tat-now <= f.tau
	if allowed {
		sh.tat[key] = tat + f.interval
	}
	sh.mu.Unlock()
	return allowed, nil
}
