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
// spares that key. With tidy, it also lets go of sketches whose every
// cell has lapsed and of tables left empty with no sketch, and compacts
// sparse tables, which moves states, so only the sweeper tidies.
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
		if tidy && tb.sk != nil && tb.sk.lapsed(tb.kind, t) {
			sh.store.sketchBytes.Add(-tb.sk.bytes())
			tb.sk = nil
		}
		switch {
		case !tidy:
			kept = append(kept, tb)
		case tb.len() > 0 || tb.sk != nil: // a sketch still charges
			tb.compact()
			kept = append(kept, tb)
		}
	}
	clear(sh.tables[len(kept):])
	sh.tables = kept
	sh.added = 0
}

// makeRoom evicts states of this shard until need more bytes fit under
// the states' share of MaxBytes. It never evicts the states of the
// request being decided (sh.key). It fails, with ErrStoreFull, only if
// need alone is more than that share. It requires sh.mu.
//
// The cap is global but eviction is local to the shard that needs room:
// keys are spread evenly over shards, so each shard evicts in proportion
// to the new keys it receives. A shard that holds nothing it may evict
// (nothing but the request's own states) lets the store run over the cap
// by need: the next insert into a shard that can evict brings it back, so
// the store exceeds its cap by at most one key's states per shard.
func (sh *shard) makeRoom(need int64) error {
	total, limit := &sh.store.bytes, sh.store.stateCap
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
	for total.Load()+need > limit && sh.evict(t) {
	}
	return nil
}

// evict drops, from a random sample of the shard's states, those idle at
// t or, if none is, the one whose eviction costs least (see cost), into
// its table's sketch. It reports whether it dropped any.
func (sh *shard) evict(t int64) bool {
	if len(sh.tables) == 0 {
		return false
	}
	var (
		best      *table
		bestKey   string
		bestHash  uint64
		bestState []int64
		bestCost  float64
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
			if c := cost(tb, key, s, t); best == nil || c < bestCost {
				best, bestKey, bestHash, bestState, bestCost = tb, key, h, s, c
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
	sh.forget(best, bestKey, bestHash, bestState, t)
	return true
}

// cost returns how much evicting state s at t may cost: the sketch then
// charges its spend to every key that shares its cells, until it lapses.
// Less is better: a state with allowance left costs less the more it has,
// (-1 to 0, by the fraction of the burst left); a state over its limit
// costs more the longer it stays there (its retry-after, in periods).
func cost(tb *table, key string, s []int64, t int64) float64 {
	l := tb.limit
	if len(s) != algorithm.Words(l) {
		s = algorithm.Fit(l, s) // a log last inserted under another Rate
	}
	d := algorithm.Check(l, s, t-algorithm.Offset(l, key), 1)
	if d.Allowed {
		return -float64(d.Remaining+1) / float64(l.MaxBurst())
	}
	return float64(d.RetryAfter) / float64(l.Period)
}

// next returns a pseudo-random number (xorshift64*): the eviction sample
// starts at a random table. It requires sh.mu.
func (sh *shard) next() uint64 {
	sh.rng ^= sh.rng >> 12
	sh.rng ^= sh.rng << 25
	sh.rng ^= sh.rng >> 27
	return sh.rng * 2685821657736338717
}
