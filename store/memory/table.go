package memory

import (
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// kind is what Limit.StateID hashes: limits of one kind share their
// states. Comparing kinds is cheaper than hashing a StateID per request.
type kind struct {
	alg       sluice.Algorithm
	staggered bool
	buckets   int32
	period    time.Duration
}

func kindOf(l sluice.Limit) kind {
	k := kind{alg: l.Algorithm, period: l.Period}
	switch l.Algorithm {
	case sluice.FixedWindow:
		k.staggered = l.Staggered
	case sluice.SlidingWindow, sluice.ApproxSlidingWindow:
		k.buckets = int32(l.BucketCount())
	}
	return k
}

// entryOverhead is what the store counts against MaxBytes for one state
// besides its key bytes and its words: the map slot (string header and
// slot index, or slice header), its control byte and the map's spare
// capacity. It is an estimate, checked against runtime.MemStats by
// BenchmarkBytesPerKey.
const entryOverhead = 40

// A table holds the states of one kind of limit in one shard.
//
// States of a fixed size (every algorithm but the sliding log) live in
// slab, words int64s each, found through index; a freed slot is zeroed
// and kept in free for the next insert. This keeps a GCRA state at one
// map slot plus 8 bytes, and lets Decide update a state in place, without
// the allocation a map assignment of a string(bytes) key would make.
// Sliding logs, whose size follows the limit's Rate, live in logs.
type table struct {
	kind  kind
	words int          // words per slab slot; 0 for sliding logs
	limit sluice.Limit // the limit of the latest insert, to judge evictions

	index map[string]uint32
	slab  []int64
	free  []uint32

	logs map[string][]int64
}

func newTable(l sluice.Limit) *table {
	t := &table{kind: kindOf(l), limit: l}
	if l.Algorithm == sluice.SlidingLog {
		t.logs = make(map[string][]int64)
	} else {
		t.words = algorithm.Words(l)
		t.index = make(map[string]uint32)
	}
	return t
}

// len returns the number of states t holds.
func (t *table) len() int {
	if t.logs != nil {
		return len(t.logs)
	}
	return len(t.index)
}

// slot returns the state in slab slot i.
func (t *table) slot(i uint32) []int64 {
	j := int(i) * t.words
	return t.slab[j : j+t.words : j+t.words]
}

// get returns key's state for l, in place. A sliding log kept for another
// Rate is fitted to l first; delta is then the change in its counted bytes.
func (t *table) get(key []byte, l sluice.Limit) (s []int64, ok bool, delta int64) {
	if t.logs == nil {
		i, ok := t.index[string(key)]
		if !ok {
			return nil, false, 0
		}
		return t.slot(i), true, 0
	}
	s, ok = t.logs[string(key)]
	if ok && len(s) != algorithm.Words(l) {
		fitted := algorithm.Fit(l, s)
		t.logs[string(key)] = fitted
		delta = 8 * int64(len(fitted)-len(s))
		s = fitted
	}
	return s, ok, delta
}

// insert stores a copy of s as key's state and returns the bytes it counts.
func (t *table) insert(key string, s []int64) int64 {
	if t.logs != nil {
		t.logs[key] = append([]int64(nil), s...)
		return entryBytes(key, len(s))
	}
	var i uint32
	if n := len(t.free); n > 0 {
		i, t.free = t.free[n-1], t.free[:n-1]
	} else {
		i = uint32(len(t.slab) / t.words)
		t.slab = append(t.slab, make([]int64, t.words)...)
	}
	copy(t.slot(i), s)
	t.index[key] = i
	return entryBytes(key, t.words)
}

// remove forgets key, whose state is s, and returns the bytes it counted.
func (t *table) remove(key string, s []int64) int64 {
	if t.logs != nil {
		delete(t.logs, key)
		return entryBytes(key, len(s))
	}
	i := t.index[key]
	delete(t.index, key)
	clear(t.slot(i))
	t.free = append(t.free, i)
	return entryBytes(key, t.words)
}

// each calls fn for the states of t, from a random starting point (Go's
// map iteration order), until fn returns false. fn may remove the state
// it is given.
func (t *table) each(fn func(key string, s []int64) bool) {
	if t.logs != nil {
		for k, s := range t.logs {
			if !fn(k, s) {
				return
			}
		}
		return
	}
	for k, i := range t.index {
		if !fn(k, t.slot(i)) {
			return
		}
	}
}

// compact rebuilds t's map and slab when most of their room is unused:
// Go maps never shrink, and a burst of actors that went idle should not
// hold its memory for ever.
func (t *table) compact() {
	n := t.len()
	if t.logs != nil {
		return // a log's slice is freed with its entry; its map slots stay
	}
	slots := len(t.slab) / t.words
	if slots < 1024 || n > slots/4 {
		return
	}
	index := make(map[string]uint32, n)
	slab := make([]int64, 0, n*t.words)
	for k, i := range t.index {
		index[k] = uint32(len(slab) / t.words)
		slab = append(slab, t.slot(i)...)
	}
	t.index, t.slab, t.free = index, slab, nil
}

func entryBytes(key string, words int) int64 {
	return int64(len(key)) + entryOverhead + 8*int64(words)
}

// idle reports whether state s of kind k is back to empty at t and will
// stay so: every decision from t on is a fresh key's, so the state can be
// dropped. It errs on the side of keeping: a staggered window is kept a
// whole period longer, as its offset is unknown here.
func idle(k kind, s []int64, t int64) bool {
	p := int64(k.period)
	switch k.alg {
	case sluice.GCRA:
		return s[0] <= t
	case sluice.FixedWindow:
		return s[1] == 0 || (s[0]+2)*p <= t
	case sluice.SlidingWindow, sluice.ApproxSlidingWindow:
		g := int64(k.buckets)
		b := (p + g - 1) / g
		if (s[0]+g+1)*b <= t {
			return true
		}
		for _, c := range s[1:] {
			if c != 0 {
				return false
			}
		}
		return true
	case sluice.SlidingLog:
		n := int64(len(s) - 1)
		newest := s[1+(s[0]+n-1)%n]
		return newest == 0 || newest+p <= t
	}
	return false
}
