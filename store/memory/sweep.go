package memory

import (
	"slices"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice"
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
// spares that key. With tidy, it also empties what lapsed in the ledgers
// and lets go of those left empty and of tables left empty with no
// ledger, and compacts sparse tables, which moves states, so only the
// sweeper tidies.
// It requires sh.mu.
func (sh *shard) sweep(t int64, tidy bool) {
	kept := sh.tables[:0]
	for _, tb := range sh.tables {
		tb.each(0, func(prefix, key string, s []int64) bool {
			if !tidy && sameName(prefix, key, "", sh.name()) {
				return true // the request in progress holds this state
			}
			if idle(tb.kind, s, t) {
				sh.drop(tb, prefix, key, sh.store.hash(prefix, key), s)
			}
			return true
		})
		if tidy {
			sh.sweepLedgers(tb, t)
		}
		switch {
		case !tidy:
			kept = append(kept, tb)
		case tb.len() > 0 || tb.ledgers != nil: // a ledger still charges
			sh.store.bytes.Add(tb.compact(4))
			kept = append(kept, tb)
		default: // its chunks and index go with it
			sh.store.bytes.Add(-tb.bytes)
		}
	}
	clear(sh.tables[len(kept):])
	sh.tables = kept
	sh.added = 0
}

// makeRoom evicts states of this shard until the states of key missing
// from the tables of sh.tabs (see sh.missing) fit under the states'
// share of MaxBytes. It never evicts the states of the request being
// decided (sh.key). It fails, with ErrStoreFull, only if those states
// alone need more than that share. It requires sh.mu.
//
// The cap is global but eviction is local to the shard that needs room:
// keys are spread evenly over shards, so each shard evicts in proportion
// to the new keys it receives. Eviction frees a slot, which a later
// insert into the same table reuses, but not the slot's memory: when no
// eviction frees room the insert can use (the shard holds nothing else
// of its tables, or only the request's own states), the insert goes
// ahead, and the store runs over its cap by at most a chunk of slots per
// table, which the sweeper's compaction of sparse tables gives back.
func (sh *shard) makeRoom(key string, limits []sluice.Limit) error {
	total, limit := &sh.store.bytes, sh.store.stateCap
	need := sh.need(key, limits)
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
		need = sh.need(key, limits)
	}
	for over := total.Load() + need - limit; over > 0; {
		if !sh.evict(t) {
			break
		}
		need = sh.need(key, limits)
		next := total.Load() + need - limit
		if next >= over && (sh.compactOthers() || sh.evictFrom(sh.logTables(), t)) {
			// The room is held by free slots of other tables, which their
			// evictions left behind and compacting gave back; or else an
			// evicted log gave back its own.
			next = total.Load() + need - limit
		}
		if next >= over {
			break // that freed nothing the insert can use
		}
		over = next
	}
	return nil
}

// compactOthers compacts the shard's tables that the request does not
// use (see sh.tabs) and whose slots are at most half used, and reports
// whether that freed any room. Eviction frees a slot, not its chunk: a
// table whose states other kinds' inserts evicted keeps their room until
// it is compacted, which costs one pass over its states, paid for by the
// half of them that went. It requires sh.mu.
func (sh *shard) compactOthers() bool {
	freed := false
	for _, tb := range sh.tables {
		if slices.Contains(sh.tabs, tb) {
			continue
		}
		if d := tb.compact(2); d < 0 {
			sh.store.bytes.Add(d)
			freed = true
		}
	}
	return freed
}

// logTables returns the shard's tables of sliding logs, whose evictions
// free their memory at once. It requires sh.mu.
func (sh *shard) logTables() []*table {
	sh.tgt = sh.tgt[:0]
	for _, tb := range sh.tables {
		if tb.logs != nil {
			sh.tgt = append(sh.tgt, tb)
		}
	}
	return sh.tgt
}

// need returns the bytes the states of key (sh.name(), its first sh.pre
// bytes its Prefix) missing from the tables of sh.tabs add when inserted.
// It requires sh.mu.
func (sh *shard) need(key string, limits []sluice.Limit) int64 {
	var n int64
	for i, t := range sh.tabs {
		if sh.missing[i] {
			n += t.need(key[:sh.pre], key[sh.pre:], algorithm.Words(limits[i]))
		}
	}
	return n
}

// targets returns the tables of sh.tabs that need a new slot for the
// request's missing states and have none free: evicting from them frees
// a slot the insert reuses, where evicting elsewhere frees no memory.
func (sh *shard) targets() []*table {
	sh.tgt = sh.tgt[:0]
	for i, t := range sh.tabs {
		if sh.missing[i] && t.logs == nil && t.growth() > 0 {
			sh.tgt = append(sh.tgt, t)
		}
	}
	return sh.tgt
}

// evict drops, from a random sample of the states of the tables that
// need a slot (see targets), or if they hold none it may drop, of every
// table of the shard, those idle at t or, if none is, the one whose
// eviction costs least (see cost), into its table's ledger. It reports
// whether it dropped any.
func (sh *shard) evict(t int64) bool {
	if tg := sh.targets(); len(tg) > 0 && sh.evictFrom(tg, t) {
		return true
	}
	return sh.evictFrom(sh.tables, t)
}

// evictFrom is evict over the states of tables.
func (sh *shard) evictFrom(tables []*table, t int64) bool {
	if len(tables) == 0 {
		return false
	}
	var (
		best      *table
		bestState []int64
		bestCost  float64
		bestPart  uint8
		dropped   bool
		seen      int
	)
	start := int(sh.next() % uint64(len(tables)))
	quota := max(sampleSize/len(tables), 1)
	for j := range tables {
		tb := tables[(start+j)%len(tables)]
		taken := 0
		tb.each(sh.next(), func(prefix, key string, s []int64) bool {
			if taken >= quota || seen >= sampleSize {
				return false
			}
			taken++
			seen++
			if sameName(prefix, key, "", sh.name()) {
				return true // the request being decided
			}
			if idle(tb.kind, s, t) {
				sh.drop(tb, prefix, key, sh.store.hash(prefix, key), s)
				dropped = true
				return true
			}
			if c := cost(tb, prefix, key, s, t); best == nil || c < bestCost {
				// A copy: each's key is valid only during the call.
				sh.best = append(append(sh.best[:0], prefix...), key...)
				best, bestState, bestCost = tb, s, c
				bestPart, _ = tb.partOf(prefix) // prefix is one tb numbers, or ""
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
	bestKey := unsafe.String(unsafe.SliceData(sh.best), len(sh.best))
	sh.forget(best, bestPart, bestKey, sh.store.hash("", bestKey), bestState, t)
	return true
}

// cost returns how much evicting state s of prefix+key at t may cost:
// its ledger remembers it until it lapses, and if the ledger must fold it
// into its cells, they charge its spend to every key of its rule that
// shares them. Less is better: a state with allowance left costs less
// the more it has, (-1 to 0, by the fraction of the burst left); a state
// over its limit costs more the longer it stays there (its retry-after,
// in periods).
func cost(tb *table, prefix, key string, s []int64, t int64) float64 {
	l := tb.limit
	if len(s) != algorithm.Words(l) {
		s = algorithm.Fit(l, s) // a log last inserted under another Rate
	}
	if prefix != "" && l.Staggered {
		key = prefix + key // the offset hashes the whole name
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
