package memory

import (
	"time"

	"github.com/sluicehq/sluice/algorithm"
)

// sampleSize is how many states an eviction looks at.
const sampleSize = 32

// sweeper drops idle states every interval until Close.
func (s *Store) sweeper(interval time.Duration) {
	defer close(s.done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
			s.sweep()
		}
	}
}

// sweep drops the idle states of every shard, one shard lock at a time.
func (s *Store) sweep() {
	var clock int64
	if s.usesClock.Load() {
		clock = s.now(false)
	}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.sweep(max(sh.hw, clock)-int64(sweepLag), true)
		sh.mu.Unlock()
	}
}

// sweep drops every state that is idle at t. Without tidy, it is called
// by a request in progress, which holds its own states and tables: it
// spares that key. With tidy, it also lets go of empty tables and
// compacts sparse ones, which moves states, so only the sweeper tidies.
// It requires sh.mu.
func (sh *shard) sweep(t int64, tidy bool) {
	kept := sh.tables[:0]
	for _, tb := range sh.tables {
		tb.each(0, func(key string, h uint64, s []int64) bool {
			if !tidy && key == string(sh.key) {
				return true // the request in progress holds this state
			}
			if idle(tb.kind, s, t) {
				sh.drop(tb, key, h, s)
			}
			return true
		})
		switch {
		case !tidy:
			kept = append(kept, tb)
		case tb.len() > 0:
			tb.compact()
			kept = append(kept, tb)
		}
	}
	clear(sh.tables[len(kept):])
	sh.tables = kept
	sh.added = 0
}

// makeRoom evicts states of this shard until need more bytes fit under
// MaxBytes, and fails with ErrStoreFull if it cannot. It never evicts the
// states of the request being decided (sh.key). It requires sh.mu.
//
// The cap is global but eviction is local to the shard that needs room:
// keys are spread evenly over shards, so each shard evicts in proportion
// to the new keys it receives.
func (sh *shard) makeRoom(need int64) error {
	total, limit := &sh.store.bytes, sh.store.maxBytes
	if total.Load()+need <= limit {
		return nil
	}
	if need > limit {
		return errFull(need, limit)
	}
	t := sh.hw - int64(sweepLag)
	// A full sweep costs O(states); run it only once enough inserts have
	// happened since the last one to pay for it.
	if sh.added >= sh.states/4 {
		sh.sweep(t, false)
	}
	for range 64 {
		if total.Load()+need <= limit {
			return nil
		}
		if !sh.evict(t) {
			break
		}
	}
	if total.Load()+need <= limit {
		return nil
	}
	return errFull(need, limit)
}

// evict drops, from a random sample of the shard's states, those idle at
// t or, if none is, the one closest to its full allowance. States over
// their limit are never dropped. It reports whether it dropped any.
func (sh *shard) evict(t int64) bool {
	if len(sh.tables) == 0 {
		return false
	}
	var (
		best      *table
		bestKey   string
		bestHash  uint64
		bestState []int64
		bestScore = -1.0
		dropped   bool
		seen      int
	)
	start := int(sh.next() % uint64(len(sh.tables)))
	quota := max(sampleSize/len(sh.tables), 1)
	for j := range sh.tables {
		tb := sh.tables[(start+j)%len(sh.tables)]
		taken := 0
		tb.each(sh.next(), func(key string, h uint64, s []int64) bool {
			if taken >= quota || seen >= sampleSize {
				return false
			}
			taken++
			seen++
			if key == string(sh.key) {
				return true // the request being decided
			}
			if idle(tb.kind, s, t) {
				sh.drop(tb, key, h, s)
				dropped = true
				return true
			}
			if score := fullness(tb, key, s, t); score > bestScore {
				best, bestKey, bestHash, bestState, bestScore = tb, key, h, s, score
			}
			return true
		})
	}
	if dropped {
		return true
	}
	if best == nil {
		return false
	}
	sh.drop(best, bestKey, bestHash, bestState)
	return true
}

// fullness returns how close state s is to its full allowance at t, in
// (0, 1], or -1 if the actor is over its limit: a take of 1 would be
// denied, so dropping its state would hand it a fresh allowance.
func fullness(tb *table, key string, s []int64, t int64) float64 {
	l := tb.limit
	if len(s) != algorithm.Words(l) {
		s = algorithm.Fit(l, s) // a log last inserted under another Rate
	}
	d := algorithm.Check(l, s, t-algorithm.Offset(l, key), 1)
	if !d.Allowed {
		return -1
	}
	return float64(d.Remaining+1) / float64(l.MaxBurst())
}

// next returns a pseudo-random number (xorshift64*): the eviction sample
// starts at a random table. It requires sh.mu.
func (sh *shard) next() uint64 {
	sh.rng ^= sh.rng >> 12
	sh.rng ^= sh.rng << 25
	sh.rng ^= sh.rng >> 27
	return sh.rng * 2685821657736338717
}
