package bench

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
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

const floorShards = 64

type floorGCRA struct {
	seed     maphash.Seed
	shards   [floorShards]floorShard
	interval int64 // ns between events
	tau      int64 // ns a key's arrival time may run ahead of now
	now      func() time.Time
	clock    atomic.Int64 // ns since start
	start    time.Time
	stop     chan struct{}
}

type floorShard struct {
	mu  sync.Mutex
	tat map[string]int64
	_   [40]byte // a cache line each
}

func newFloorGCRA(l memLimit, now func() time.Time) (memTaker, error) {
	interval := int64(l.Period) / int64(l.Rate)
	f := &floorGCRA{
		seed: maphash.MakeSeed(), interval: interval, tau: interval * int64(l.Burst-1),
		now: now, start: time.Now(), stop: make(chan struct{}),
	}
	for i := range f.shards {
		f.shards[i].tat = make(map[string]int64)
	}
	if now == nil {
		go f.tick()
	} else {
		f.start = now()
	}
	return f, nil
}

// tick refreshes the coarse clock every millisecond until close.
func (f *floorGCRA) tick() {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			f.clock.Store(int64(time.Since(f.start)))
		case <-f.stop:
			return
		}
	}
}

func (f *floorGCRA) take(_ context.Context, key string) (bool, error) {
	var now int64
	if f.now != nil {
		now = int64(f.now().Sub(f.start))
	} else {
		now = f.clock.Load()
	}
	sh := &f.shards[maphash.String(f.seed, key)%floorShards]
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

func (f *floorGCRA) close() {
	if f.now == nil {
		close(f.stop)
	}
}
