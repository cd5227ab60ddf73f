package simulate

import (
	"hash/maphash"
	"math"
	"math/bits"
	"slices"
	"sort"
)

// A topKeys is the Space-Saving heavy-hitter sketch (Metwally, Agrawal
// and El Abbadi, 2005): it counts the keys of a stream in a fixed number
// of counters. A key not counted takes the counter of the least count,
// inheriting it as its possible overcount (err). Every key counted more
// than total/capacity times holds a counter, and a counter's count
// overstates its key's by at most its err. A sketch of a route's traffic
// counts each request once for every rule the route asks (its columns),
// and each counter counts beside, per rule, the key's denials since it
// took it, so that the share of traffic from denied keys can be read off
// the heavy hitters: the rules of a route see the same keys, and one
// sketch spares each further rule its lookup.
//
// Keys are found by a 64-bit hash of the seed (keys whose hashes
// collide, about n²/2^65 of n keys, would share a counter), so that a
// caller that hashed a key already does not hash it again.
//
// The zero value is not usable; newTopKeys returns one. Not safe for
// concurrent use.
type topKeys struct {
	seed  maphash.Seed
	idx   map[uint64]*counter // key's hash to its counter
	heap  counterHeap
	cap   int
	cols  int // the rules whose denials each counter counts
	total int64
}

// A counter is a key's estimated count, its possible overcount, and
// what it counts beside for each column of its sketch.
type counter struct {
	key        string
	hash       uint64
	count, err int64
	pos        int      // its position in the heap
	den        []denial // one per column of the sketch
}

// A denial is what a counter counts of one rule's denials of its key:
// the requests from the first denial on, and the count before it.
type denial struct {
	afterDenial  int64 // requests from the first denial on (that included)
	beforeDenial int64 // the count when first denied (overstated by err)
	everDenied   bool
}

// A counterHeap is the sketch's counters, least counted first, each
// beside its count: a sift compares the counts of a slot's children
// without loading their counters, which a sketch of thousands of keys
// keeps out of the cache (BenchmarkTopKeys: 62.7 ns an add when the
// counts were read through the pointers, 59.1 now).
type counterHeap []heapSlot

// A heapSlot is a counter of the heap and its count, equal to c.count.
type heapSlot struct {
	count int64
	c     *counter
}

// newTopKeys returns a sketch of capacity counters, each counting the
// denials of cols rules (0: none, a sketch of counts alone).
func newTopKeys(capacity, cols int, seed maphash.Seed) *topKeys {
	return &topKeys{seed: seed, idx: make(map[uint64]*counter, capacity), cap: capacity, cols: cols}
}

// add counts one request of key, and returns its counter, as addHashed.
func (t *topKeys) add(key string) *counter {
	return t.addHashed(maphash.String(t.seed, key), key)
}

// addHashed counts one request of key, whose hash of the sketch's seed is
// h, and returns its counter, whose columns the request's rules then
// tell (valid until the next add).
func (t *topKeys) addHashed(h uint64, key string) *counter {
	t.total++
	c, ok := t.idx[h]
	if !ok {
		if len(t.heap) < t.cap {
			c = &counter{key: key, hash: h, pos: len(t.heap), den: make([]denial, t.cols)}
			t.heap = append(t.heap, heapSlot{c: c})
			t.up(c.pos)
		} else { // replace the least counted key
			c = t.heap[0].c
			delete(t.idx, c.hash)
			c.key, c.hash, c.err = key, h, c.count
			clear(c.den)
		}
		t.idx[h] = c
	}
	c.count++
	t.heap[c.pos].count = c.count
	t.down(c.pos)
	return c
}

// tell counts, in column col, whether the request c counted last was
// denied.
func (c *counter) tell(col int, denied bool) {
	d := &c.den[col]
	if denied && !d.everDenied {
		d.everDenied, d.beforeDenial = true, c.count-1
	}
	if d.everDenied {
		d.afterDenial++
	}
}

// merge adds the counters of o, a sketch of another stream, and keeps
// the cap highest counts. A replay merges the sketches of its workers,
// whose keys are disjoint (each client is decided by one worker); a key
// counted in both has its counts added. The guarantee holds for the
// merged stream: the counts of the counters sum to its length, so fewer
// than cap of them exceed total/cap, and every key counted more than
// that is among the kept.
func (t *topKeys) merge(o *topKeys) {
	t.total += o.total
	for _, s := range o.heap {
		c := s.c
		m, ok := t.idx[c.hash]
		if !ok {
			cc := *c
			cc.den = slices.Clone(c.den)
			t.idx[c.hash] = &cc
			t.heap = append(t.heap, heapSlot{c: &cc})
			continue
		}
		m.count, m.err = m.count+c.count, m.err+c.err
		for i := range m.den {
			md, cd := &m.den[i], &c.den[i]
			md.afterDenial += cd.afterDenial
			md.everDenied = md.everDenied || cd.everDenied
			if md.everDenied {
				md.beforeDenial = m.count - md.afterDenial
			}
		}
	}
	sort.Slice(t.heap, func(i, j int) bool {
		a, b := t.heap[i].c, t.heap[j].c
		if a.count != b.count {
			return a.count > b.count
		}
		return a.key < b.key
	})
	for _, s := range t.heap[min(t.cap, len(t.heap)):] {
		delete(t.idx, s.c.hash)
	}
	t.heap = t.heap[:min(t.cap, len(t.heap))]
	slices.Reverse(t.heap) // ascending counts: a min-heap
	for i := range t.heap {
		s := &t.heap[i]
		s.count, s.c.pos = s.c.count, i
	}
}

// up moves the new counter at i up to its place (its count of 0 is the
// least), keeping the counters' positions right.
func (t *topKeys) up(i int) {
	h := t.heap
	for i > 0 {
		p := (i - 1) / 2
		if h[p].count <= h[i].count {
			break
		}
		h[i], h[p] = h[p], h[i]
		h[i].c.pos, h[p].c.pos = i, p
		i = p
	}
}

// down restores the heap after the count at i grew, keeping the
// counters' positions right.
func (t *topKeys) down(i int) {
	h := t.heap
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r].count < h[l].count {
			m = r
		}
		if h[i].count <= h[m].count {
			return
		}
		h[i], h[m] = h[m], h[i]
		h[i].c.pos, h[m].c.pos = i, m
		i = m
	}
}

// top returns the n counters of highest count, by by (count or denied),
// highest first.
func (t *topKeys) top(n int, by func(*counter) int64) []counter {
	out := make([]counter, 0, len(t.heap))
	for _, s := range t.heap {
		if by(s.c) > 0 {
			out = append(out, *s.c)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if by(&out[i]) != by(&out[j]) {
			return by(&out[i]) > by(&out[j])
		}
		return out[i].key < out[j].key
	})
	return out[:min(n, len(out))]
}

// deniedShare estimates the requests of keys ever denied by the rule of
// column col, over the counters held: the requests of each from its
// first denial on, and the estimated requests before it less their
// possible overcount. It is a lower bound; keys with fewer requests than
// total/cap may be missing.
func (t *topKeys) deniedShare(col int) int64 {
	var n int64
	for _, s := range t.heap {
		if d := &s.c.den[col]; d.everDenied {
			n += d.afterDenial + max(d.beforeDenial-s.c.err, 0)
		}
	}
	return n
}

// A distinct estimates how many distinct keys it saw: HyperLogLog
// (Flajolet et al.) with 2^12 registers, about 1.6% standard error in
// 4 KiB. The zero value is not usable; newDistinct returns one.
type distinct struct {
	seed maphash.Seed
	reg  [1 << 12]uint8
}

func newDistinct(seed maphash.Seed) *distinct { return &distinct{seed: seed} }

func (d *distinct) add(key string) { d.addHashed(maphash.String(d.seed, key)) }

// addHashed is add of a key whose hash of the sketch's seed is h.
func (d *distinct) addHashed(h uint64) {
	i := h >> (64 - 12)
	rank := uint8(bits.LeadingZeros64(h<<12|1<<11)) + 1
	if rank > d.reg[i] {
		d.reg[i] = rank
	}
}

// merge adds the keys of o, of the same seed: the union's registers are
// the larger of each.
func (d *distinct) merge(o *distinct) {
	for i, r := range o.reg {
		d.reg[i] = max(d.reg[i], r)
	}
}

// count returns the estimate, with the small-range correction.
func (d *distinct) count() int64 {
	const m = float64(len(d.reg))
	sum, zeros := 0.0, 0
	for _, r := range d.reg {
		sum += math.Ldexp(1, -int(r))
		if r == 0 {
			zeros++
		}
	}
	est := 0.7213 / (1 + 1.079/m) * m * m / sum
	if est <= 2.5*m && zeros > 0 {
		est = m * math.Log(m/float64(zeros))
	}
	return int64(math.Round(est))
}
