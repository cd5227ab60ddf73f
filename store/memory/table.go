package memory

import (
	"math"
	"math/bits"
	"time"
	"unsafe"

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

// A table holds the states of one kind of limit in one shard.
//
// States of a fixed size (every algorithm but the sliding log) live in
// numbered slots, in chunks (see slab.go): a one-word state (GCRA) in
// first and ones, a 48-byte slot that holds its key's bytes too (a longer
// key's are in long), so that a lookup reads the slot where a key kept
// apart cost a second cache miss; a larger one in many, words int64s per
// slot beside its key. A freed slot is zeroed and kept in free for the next
// insert. Slots are found through index, an open-addressing hash table
// keyed by the hash of the key that also chose the shard, so the key is
// hashed once per request. So a GCRA state with a key of up to 39 bytes
// costs about 16 bytes of index and a 48-byte slot, and Decide updates
// it in place without allocating. Sliding logs, whose size follows the
// limit's Rate, live in logs, by name.
type table struct {
	kind  kind
	words int          // words per slot; 0 for sliding logs
	limit sluice.Limit // the limit of the latest insert, to judge evictions

	index index
	first []oneWord                 // the first chunk of slots when words is 1
	ones  []*[1 << oneShift]oneWord // the others, full
	long  map[uint32]string         // the keys of ones longer than inlineKey
	many  []manyChunk               // chunks of the slots when words is more
	shift uint8                     // log2 of the slots of a full chunk of many
	n     int                       // slots handed out, used or freed
	free  []uint32

	logs map[string][]int64

	sk    *sketch // the summaries of evicted states; nil until one is evicted
	bytes int64   // what t counts against MaxBytes: see slab.go
}

// oneWord is a slot of a one-word state and its key: 48 bytes, with no
// pointer for the garbage collector to scan. (64-byte slots, one cache
// line each, measured no faster at 1M keys, and took 14 bytes more per
// key.)
type oneWord struct {
	state [1]int64
	n     uint8 // the key's length, or longKey when the key is in long
	key   [inlineKey]byte
}

// oneWordBytes is the size of a oneWord.
const oneWordBytes = int64(unsafe.Sizeof(oneWord{}))

// inlineKey is the longest key a oneWord holds: a namespace and action of
// 15 bytes ("sluice:default:") with an IPv4 address, or an IPv6 one of up
// to 24 characters, fit.
const inlineKey = 39

// longKey is the oneWord.n of a key kept in table.long.
const longKey = 0xff

func newTable(l sluice.Limit) *table {
	t := &table{kind: kindOf(&l), limit: l}
	if l.Algorithm == sluice.SlidingLog {
		t.logs = make(map[string][]int64)
	} else {
		t.words = algorithm.Words(l)
		t.shift = chunkShift(t.slotBytes())
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

// slots returns the number of slots t has handed out, used or free.
func (t *table) slots() int { return t.n }

// slot returns the state in slot i.
func (t *table) slot(i uint32) []int64 {
	if t.words == 1 {
		return t.one(i).state[:]
	}
	c, j := i>>t.shift, int(i&(1<<t.shift-1))*t.words
	return t.many[c].states[j : j+t.words : j+t.words]
}

// key returns the key of slot i.
func (t *table) key(i uint32) string {
	if t.words == 1 {
		e := t.one(i)
		if e.n == longKey {
			return t.long[i]
		}
		// The slot's own bytes, not a copy: valid until the slot is
		// reused, which no caller outlives (see each).
		return unsafe.String(&e.key[0], int(e.n))
	}
	return t.many[i>>t.shift].keys[i&(1<<t.shift-1)]
}

// charge writes to s, the fresh state of a key missing from t, what the
// sketch charges it under l: its name is key (needed only by a staggered
// window) and its hash h. It requires that t has a sketch.
func (t *table) charge(l sluice.Limit, s []int64, key string, h uint64) {
	t.sk.charge(l, s, key, tagOf(h))
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
		t.logs[cloneKey(key)] = fitted // key may be the caller's scratch
		delta = t.keyBytes(key, len(fitted)) - t.keyBytes(key, len(s))
		t.bytes += delta
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
	tag := tagOf(h)
	for p := x.home(tag); ; p = (p + 1) & x.mask {
		e := x.pos[p]
		if e == 0 {
			return -1
		}
		if uint32(e>>32) == tag {
			if k := t.key(uint32(e) - 1); len(k) == len(prefix)+len(key) && k[:len(prefix)] == prefix && k[len(prefix):] == key {
				return int(p)
			}
		}
	}
}

// lookup returns the fixed-size state of prefix+key, whose hash is h, in
// place. Like lookupOne, it finds each candidate's chunk once.
func (t *table) lookup(prefix, key string, h uint64) (s []int64, ok bool) {
	if t.words == 1 {
		if w, ok := t.lookupOne(prefix, key, h); ok {
			return w.state[:], true
		}
		return nil, false
	}
	x := &t.index
	if x.n == 0 {
		return nil, false
	}
	tag, mask := tagOf(h), uint32(1)<<t.shift-1
	for p := x.home(tag); ; p = (p + 1) & x.mask {
		e := x.pos[p]
		if e == 0 {
			return nil, false
		}
		if uint32(e>>32) != tag {
			continue
		}
		i := uint32(e) - 1
		c, o := &t.many[i>>t.shift], int(i&mask)
		if k := c.keys[o]; len(k) == len(prefix)+len(key) && k[:len(prefix)] == prefix && k[len(prefix):] == key {
			j := o * t.words
			return c.states[j : j+t.words : j+t.words], true
		}
	}
}

// lookupOne is lookup for a table of one-word states (GCRA), the hottest
// path of the store: it finds each candidate's slot once, and returns it.
func (t *table) lookupOne(prefix, key string, h uint64) (*oneWord, bool) {
	x := &t.index
	if x.n == 0 {
		return nil, false
	}
	tag := tagOf(h)
	for p := x.home(tag); ; p = (p + 1) & x.mask {
		e := x.pos[p]
		if e == 0 {
			return nil, false
		}
		if uint32(e>>32) != tag {
			continue
		}
		i := uint32(e) - 1
		w := t.one(i)
		var k string
		if w.n == longKey {
			k = t.long[i]
		} else {
			k = unsafe.String(&w.key[0], int(w.n))
		}
		if len(k) == len(prefix)+len(key) && k[:len(prefix)] == prefix && k[len(prefix):] == key {
			return w, true
		}
	}
}

// insert stores a copy of s as the state of key, whose hash is h, and
// returns the bytes it adds to what t counts. key must not be in t; it
// may be a view of scratch space (insert copies what it keeps). A new
// slot grows t by no more than room bytes where it can choose (see grow).
func (t *table) insert(key string, h uint64, s []int64, room int64) int64 {
	before := t.bytes
	t.bytes += t.keyBytes(key, len(s))
	if t.logs != nil {
		t.logs[cloneKey(key)] = append([]int64(nil), s...)
		return t.bytes - before
	}
	i := t.newSlot(room)
	copy(t.slot(i), s)
	if t.words == 1 {
		e := t.one(i)
		if len(key) <= inlineKey {
			e.n = uint8(copy(e.key[:], key))
		} else {
			if t.long == nil {
				t.long = make(map[uint32]string)
			}
			e.n, t.long[i] = longKey, cloneKey(key)
		}
	} else {
		t.many[i>>t.shift].keys[i&(1<<t.shift-1)] = cloneKey(key)
	}
	positions := len(t.index.pos)
	t.index.add(tagOf(h), i)
	t.bytes += 8 * int64(len(t.index.pos)-positions)
	return t.bytes - before
}

// remove forgets key, whose hash is h and whose state is s, and returns
// the bytes it takes off what t counts.
func (t *table) remove(key string, h uint64, s []int64) int64 {
	before := t.bytes
	if t.logs != nil {
		delete(t.logs, key)
		t.bytes -= t.keyBytes(key, len(s))
		return before - t.bytes
	}
	p := find(t, "", key, h)
	if p < 0 {
		return 0
	}
	t.bytes -= t.keyBytes(key, len(s))
	i := t.index.slot(p)
	t.index.del(uint64(p))
	clear(t.slot(i))
	if t.words == 1 {
		e := t.one(i)
		if e.n == longKey {
			delete(t.long, i)
		}
		e.n = 0 // the bytes stay until the slot is reused: see key
	} else {
		t.many[i>>t.shift].keys[i&(1<<t.shift-1)] = ""
	}
	t.freeSlot(i)
	return before - t.bytes
}

// each calls fn for the states of t, starting at a position chosen by
// start, until fn returns false. A key fn gets may be the slot's own
// bytes (see key): fn may keep it while it inserts nothing into t. The hash fn gets stands for the key's
// in find, insert and remove (it keeps only the bits the index uses). fn
// may remove the state it is given; states moved by that removal may then
// be skipped or seen twice, which sweeps and samples tolerate.
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
	for visited := 0; visited < len(x.pos); {
		if e := x.pos[p]; e != 0 {
			i := uint32(e) - 1
			if !fn(t.key(i), e&^(1<<32-1), t.slot(i)) {
				return
			}
			if moved := x.pos[p]; moved != 0 && moved != e {
				continue // fn removed it and a later entry moved in: visit it
			}
		}
		p = (p + 1) & x.mask
		visited++
	}
}

// compact rebuilds t's index and slots when most of their room is unused,
// lets go of the room a burst of actors that went idle held, and returns
// the change in what t counts.
func (t *table) compact() int64 {
	if t.logs != nil {
		return 0 // a log's slice is freed with its entry; Go map slots stay
	}
	n, slots := t.len(), t.slots()
	if slots < 1024 || n > slots/4 {
		return 0
	}
	old := *t
	t.index, t.first, t.ones, t.long, t.many, t.n, t.free, t.bytes = index{}, nil, nil, nil, nil, 0, nil, 0
	old.each(0, func(key string, h uint64, s []int64) bool {
		t.insert(key, h, s, math.MaxInt64)
		return true
	})
	return t.bytes - old.bytes
}

// An index is an open-addressing hash table with linear probing from a
// key's hash to its slot. Each position holds a tag, 32 bits of the hash,
// and the slot plus one (0 marks a free position) in one word, so a probe
// reads one cache line. It keeps between 3/8 and 3/4 of its positions
// used: probes stay short (2.5 positions on average for a key present, at
// the fullest).
type index struct {
	pos   []uint64
	mask  uint64
	shift uint8
	n     int
}

// tagOf returns the bits of a key's hash that the index keeps: the high
// half, as the low bits chose the shard.
func tagOf(h uint64) uint32 { return uint32(h >> 32) }

// home is where the probe for tag starts (Fibonacci hashing).
func (x *index) home(tag uint32) uint64 { return (uint64(tag) * 0x9e3779b97f4a7c15) >> x.shift }

// slot returns the slot at position p.
func (x *index) slot(p int) uint32 { return uint32(x.pos[p]) - 1 }

func (x *index) add(tag uint32, slot uint32) {
	if 4*(x.n+1) > 3*len(x.pos) {
		x.grow()
	}
	p := x.home(tag)
	for x.pos[p] != 0 {
		p = (p + 1) & x.mask
	}
	x.pos[p] = uint64(tag)<<32 | uint64(slot+1)
	x.n++
}

func (x *index) grow() {
	size := max(2*len(x.pos), 16)
	old := *x
	x.pos = make([]uint64, size)
	x.mask, x.shift, x.n = uint64(size-1), uint8(64-bits.TrailingZeros(uint(size))), 0
	for _, e := range old.pos {
		if e != 0 {
			x.add(uint32(e>>32), uint32(e)-1)
		}
	}
}

// del empties position p and shifts back the entries after it that
// probed past it, so that no probe meets a hole before its entry.
func (x *index) del(p uint64) {
	for q := (p + 1) & x.mask; x.pos[q] != 0; q = (q + 1) & x.mask {
		home := x.home(uint32(x.pos[q] >> 32))
		// Move q to p unless its home lies cyclically in (p, q].
		if (q-home)&x.mask >= (q-p)&x.mask {
			x.pos[p] = x.pos[q]
			p = q
		}
	}
	x.pos[p] = 0
	x.n--
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
