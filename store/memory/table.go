package memory

import (
	"math/bits"
	"strings"
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

func kindOf(l *sluice.Limit) kind {
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
// besides its key bytes and its words: its index positions, the key's
// string header and allocation rounding, spare slab room. It is an
// estimate, measured by BenchmarkBytesPerKey (56 bytes beyond the key for
// a GCRA state among a million).
const entryOverhead = 48

// A table holds the states of one kind of limit in one shard.
//
// States of a fixed size (every algorithm but the sliding log) live in
// slab, words int64s per slot, with the slot's key in keys; a freed slot
// is zeroed and kept in free for the next insert. They are found through
// index, an open-addressing hash table keyed by the 64-bit hash of the key
// that also chose the shard, so the key is hashed once per request. So a
// GCRA state costs about 21 bytes of index, a string header and one word,
// and Decide updates it in place without allocating. Sliding logs, whose
// size follows the limit's Rate, live in logs, by name.
type table struct {
	kind  kind
	words int          // words per slab slot; 0 for sliding logs
	limit sluice.Limit // the limit of the latest insert, to judge evictions

	index index
	keys  []string
	slab  []int64
	free  []uint32

	logs map[string][]int64
}

func newTable(l sluice.Limit) *table {
	t := &table{kind: kindOf(&l), limit: l}
	if l.Algorithm == sluice.SlidingLog {
		t.logs = make(map[string][]int64)
	} else {
		t.words = algorithm.Words(l)
	}
	return t
}

// len returns the number of states t holds.
func (t *table) len() int {
	if t.logs != nil {
		return len(t.logs)
	}
	return t.index.n
}

// slot returns the state in slab slot i.
func (t *table) slot(i uint32) []int64 {
	j := int(i) * t.words
	return t.slab[j : j+t.words : j+t.words]
}

// get returns the state of key, whose hash is h, for l, in place. A
// sliding log kept for another Rate is fitted to l first; delta is then
// the change in its counted bytes.
func (t *table) get(key string, h uint64, l sluice.Limit) (s []int64, ok bool, delta int64) {
	if t.logs == nil {
		s, ok = t.lookup("", key, h)
		return s, ok, 0
	}
	s, ok = t.logs[key]
	if ok && len(s) != algorithm.Words(l) {
		fitted := algorithm.Fit(l, s)
		t.logs[strings.Clone(key)] = fitted // key may be the caller's scratch
		delta = 8 * int64(len(fitted)-len(s))
		s = fitted
	}
	return s, ok, delta
}

// find returns the index position of prefix+key, whose hash is h, or -1.
// The name comes in two parts so that a request's need not be built.
func find(t *table, prefix, key string, h uint64) int {
	x := &t.index
	if x.n == 0 {
		return -1
	}
	for p := x.home(h); ; p = (p + 1) & x.mask {
		slot := x.slots[p]
		if slot == 0 {
			return -1
		}
		if x.hashes[p] == h {
			if k := t.keys[slot-1]; len(k) == len(prefix)+len(key) && k[:len(prefix)] == prefix && k[len(prefix):] == key {
				return int(p)
			}
		}
	}
}

// lookup returns the fixed-size state of prefix+key, whose hash is h, in
// place.
func (t *table) lookup(prefix, key string, h uint64) (s []int64, ok bool) {
	if p := find(t, prefix, key, h); p >= 0 {
		return t.slot(t.index.slots[p] - 1), true
	}
	return nil, false
}

// insert stores a copy of s as the state of key, whose hash is h, and
// returns the bytes it counts. key must not be in t.
func (t *table) insert(key string, h uint64, s []int64) int64 {
	if t.logs != nil {
		t.logs[key] = append([]int64(nil), s...)
		return entryBytes(key, len(s))
	}
	var i uint32
	if n := len(t.free); n > 0 {
		i, t.free = t.free[n-1], t.free[:n-1]
	} else {
		i = uint32(len(t.keys))
		t.keys = append(t.keys, "")
		t.slab = append(t.slab, make([]int64, t.words)...)
	}
	copy(t.slot(i), s)
	t.keys[i] = key
	t.index.add(h, i+1)
	return entryBytes(key, t.words)
}

// remove forgets key, whose hash is h and whose state is s, and returns
// the bytes it counted.
func (t *table) remove(key string, h uint64, s []int64) int64 {
	if t.logs != nil {
		delete(t.logs, key)
		return entryBytes(key, len(s))
	}
	p := find(t, "", key, h)
	if p < 0 {
		return 0
	}
	i := t.index.slots[p] - 1
	t.index.del(uint64(p))
	clear(t.slot(i))
	t.keys[i] = ""
	t.free = append(t.free, i)
	return entryBytes(key, t.words)
}

// each calls fn for the states of t, starting at a position chosen by
// start, until fn returns false. fn may remove the state it is given;
// states moved by that removal may then be skipped or seen twice, which
// sweeps and samples tolerate.
func (t *table) each(start uint64, fn func(key string, h uint64, s []int64) bool) {
	if t.logs != nil {
		for k, s := range t.logs { // Go's map order is random already
			if !fn(k, 0, s) {
				return
			}
		}
		return
	}
	x := &t.index
	if x.n == 0 {
		return
	}
	p := start & x.mask
	for visited := 0; visited < len(x.slots); {
		if slot := x.slots[p]; slot != 0 {
			if !fn(t.keys[slot-1], x.hashes[p], t.slot(slot-1)) {
				return
			}
			if moved := x.slots[p]; moved != 0 && moved != slot {
				continue // fn removed it and a later entry moved in: visit it
			}
		}
		p = (p + 1) & x.mask
		visited++
	}
}

// compact rebuilds t's index and slab when most of their room is unused,
// and lets go of the room a burst of actors that went idle held.
func (t *table) compact() {
	if t.logs != nil {
		return // a log's slice is freed with its entry; Go map slots stay
	}
	n, slots := t.len(), len(t.keys)
	if slots < 1024 || n > slots/4 {
		return
	}
	old := *t
	t.index, t.keys, t.slab, t.free = index{}, make([]string, 0, n), make([]int64, 0, n*t.words), nil
	old.each(0, func(key string, h uint64, s []int64) bool {
		t.insert(key, h, s)
		return true
	})
}

// An index is an open-addressing hash table with linear probing from a
// 64-bit hash to a slab slot plus one (0 marks a free position). It keeps
// between 3/8 and 3/4 of its positions used, 12 bytes each: probes stay
// short (2.5 positions on average for a key present, at the fullest).
type index struct {
	hashes []uint64
	slots  []uint32
	mask   uint64
	shift  uint8
	n      int
}

// home is where the probe for h starts. The low bits of h chose the
// shard, so all of it is mixed in (Fibonacci hashing).
func (x *index) home(h uint64) uint64 { return (h * 0x9e3779b97f4a7c15) >> x.shift }

func (x *index) add(h uint64, slot uint32) {
	if 4*(x.n+1) > 3*len(x.slots) {
		x.grow()
	}
	p := x.home(h)
	for x.slots[p] != 0 {
		p = (p + 1) & x.mask
	}
	x.hashes[p], x.slots[p] = h, slot
	x.n++
}

func (x *index) grow() {
	size := max(2*len(x.slots), 16)
	old := *x
	x.hashes, x.slots = make([]uint64, size), make([]uint32, size)
	x.mask, x.shift, x.n = uint64(size-1), uint8(64-bits.TrailingZeros(uint(size))), 0
	for p, slot := range old.slots {
		if slot != 0 {
			x.add(old.hashes[p], slot)
		}
	}
}

// del empties position p and shifts back the entries after it that
// probed past it, so that no probe meets a hole before its entry.
func (x *index) del(p uint64) {
	for q := (p + 1) & x.mask; x.slots[q] != 0; q = (q + 1) & x.mask {
		home := x.home(x.hashes[q])
		// Move q to p unless its home lies cyclically in (p, q].
		if (q-home)&x.mask >= (q-p)&x.mask {
			x.hashes[p], x.slots[p] = x.hashes[q], x.slots[q]
			p = q
		}
	}
	x.hashes[p], x.slots[p] = 0, 0
	x.n--
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
