package memory

import (
	"math"
	"slices"
	"time"
	"unique"
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
// first and ones, a 40-byte slot; a larger one in many, its words after
// a 32-byte head. Either slot holds its key's bytes too (a longer key's
// are in long), so that a lookup reads the slot where a key kept apart
// cost more cache misses (a fixed window's decision on a million keys
// took 1.3 µs with its key in a string of its own, against 0.7 for a
// one-word GCRA state). A slot keeps its key's Prefix (the namespace and
// action most keys of a table share) as a number into prefixes, and only
// the rest of the key's bytes. A freed slot is zeroed and kept in free
// for the next insert. Slots are found through index, an open-addressing
// hash table keyed by the hash of the key that also chose the shard, so
// the key is hashed once per request. So a GCRA state whose key, less
// its prefix, is up to 30 bytes costs a 40-byte slot and 5 to 11 bytes
// of index (a fixed window's, a 48-byte slot), and Decide updates it in
// place without allocating.
// Sliding logs, whose size follows the limit's Rate, live in logs, by
// name, with the number of their prefix in a word after the state.
//
// Every state's key keeps the number of its Prefix in prefixes (0 for a
// prefix t does not number): the partition of t that its ledger, should
// the state be evicted, belongs to. The keys of one Prefix, one rule or
// limiter, are remembered apart from every other's (see ledger).
type table struct {
	kind  kind
	words int          // words per slot; 0 for sliding logs
	limit sluice.Limit // the limit of the latest insert, to judge evictions

	index    index
	hash     func(prefix, key string) uint64 // the store's, to hash a key again (see index)
	first    []oneWord                       // the first chunk of slots when words is 1
	ones     []*[1 << oneShift]oneWord       // the others, full
	long     map[uint32]string               // the keys, less their prefix, of ones longer than inlineKey
	prefixes []string                        // the prefixes of one-word keys, by number less one
	prefixAt map[string]uint8                // prefixes by number less one, once there are more than scanPrefixes
	lastPre  uint8                           // the number, plus one, of the prefix lookupOne found last; 0 for none
	many     [][]int64                       // chunks of the slots when words is more: a head, then the state
	shift    uint8                           // log2 of the slots of a full chunk of many
	n        int                             // slots handed out, used or freed
	free     []uint32

	logs map[string][]int64 // by name: the state, then its prefix's number

	ledgers []*ledger // of the partitions whose states t evicted: see ledger
	bytes   int64     // what t counts against MaxBytes: see slab.go
}

// oneWord is a slot of a one-word state and its key: 40 bytes, with no
// pointer for the garbage collector to scan. (64-byte slots, one cache
// line each, measured no faster at 1M keys, and took 14 bytes more per
// key.)
type oneWord struct {
	state [1]int64
	keyHead
}

// A keyHead is the key of a slot: the number of its prefix and the rest
// of its bytes, up to inlineKey of them, or a mark that t.long keeps
// them. A slot of a state larger than a word starts with one, in its
// first headWords words.
type keyHead struct {
	n   uint8 // the length of the key less its prefix, or longKey when that is in long
	pre uint8 // the number of the key's prefix in prefixes, plus one; 0 for none
	key [inlineKey]byte
}

const (
	// oneWordBytes is the size of a oneWord.
	oneWordBytes = int64(unsafe.Sizeof(oneWord{}))
	// headWords is the words of a keyHead.
	headWords = int(unsafe.Sizeof(keyHead{})) / 8
)

const (
	// inlineKey is the longest key, less its prefix, a oneWord holds: an
	// IPv4 address, an IPv6 /64 network ("2001:db8:85a3:8d3::/64") or
	// most whole IPv6 addresses fit.
	inlineKey = 30
	// longKey is the keyHead.n of a key kept in table.long.
	longKey = 0xff
	// maxPrefixes is how many prefixes a table numbers; the keys of
	// others are kept whole.
	maxPrefixes = 255
	// scanPrefixes is how many prefixes a table finds by scanning them;
	// beyond, by a map (a store of hundreds of rules scanned hundreds on
	// every insert).
	scanPrefixes = 8
	// maxPrefixLen is the longest prefix a table numbers.
	maxPrefixLen = 64
	// prefixEntry is what a numbered prefix counts beside its bytes: its
	// string header, room to grow, and its entry in prefixAt (a string
	// header and a byte, in a map's slot and control byte).
	prefixEntry = 56
)

func newTable(l sluice.Limit, hash func(prefix, key string) uint64) *table {
	t := &table{kind: kindOf(&l), limit: l, hash: hash}
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
	j := t.manyAt(i) + headWords
	return t.many[i>>t.shift][j : j+t.words : j+t.words]
}

// manyAt returns where slot i of a table of states larger than a word
// starts in its chunk, in words.
func (t *table) manyAt(i uint32) int {
	return int(i&(1<<t.shift-1)) * (headWords + t.words)
}

// keyAt returns the key of slot i.
func (t *table) keyAt(i uint32) *keyHead {
	if t.words == 1 {
		return &t.one(i).keyHead
	}
	return (*keyHead)(unsafe.Pointer(&t.many[i>>t.shift][t.manyAt(i)]))
}

// parts returns the key of slot i in two parts: the prefix t numbered
// ("" if none) and the rest. The rest may be the slot's own bytes, not a
// copy: valid until the slot is reused.
func (t *table) parts(i uint32) (prefix, rest string) {
	return t.headParts(t.keyAt(i), i)
}

// split returns the name of a state kept whole in two parts: the prefix
// numbered pre ("" for 0), which the name starts with, and the rest.
func (t *table) split(pre uint8, name string) (prefix, rest string) {
	if pre == 0 {
		return "", name
	}
	prefix = t.prefixes[pre-1]
	return prefix, name[len(prefix):]
}

// headParts is parts of the slot numbered i, whose key is w.
func (t *table) headParts(w *keyHead, i uint32) (prefix, rest string) {
	if w.pre != 0 {
		prefix = t.prefixes[w.pre-1]
	}
	if w.n == longKey {
		return prefix, t.long[i]
	}
	return prefix, unsafe.String(&w.key[0], int(w.n))
}

// sameName reports whether a+b == c+d, without joining them.
func sameName(a, b, c, d string) bool {
	switch {
	case len(a)+len(b) != len(c)+len(d):
		return false
	case len(a) == len(c):
		return a == c && b == d
	case len(a) < len(c):
		a, b, c, d = c, d, a, b
	}
	n := len(a) - len(c) // a is c and n bytes of d
	return a[:len(c)] == c && a[len(c):] == d[:n] && b == d[n:]
}

// get returns the state of key, whose hash is h, for l, in place: key is
// a state's name, its prefix the first pre bytes (which lookupOne tells
// by number, before the index and the slot arrive). A sliding log kept
// for another Rate is fitted to l first; delta is then the change in its
// counted bytes.
func (t *table) get(key string, pre int, h uint64, l sluice.Limit) (s []int64, ok bool, delta int64) {
	if t.logs == nil {
		s, ok = t.lookup(key[:pre], key[pre:], h)
		return s, ok, 0
	}
	s, ok = t.logs[key]
	if !ok {
		return nil, false, 0
	}
	num := s[len(s)-1] // the number of its prefix
	s = s[:len(s)-1]
	if len(s) != algorithm.Words(l) {
		fitted := append(algorithm.Fit(l, s), num)
		t.logs[cloneKey(key)] = fitted // key may be the caller's scratch
		delta = t.logBytes(len(key), len(fitted)-1) - t.logBytes(len(key), len(s))
		t.bytes += delta
		s = fitted[:len(fitted)-1]
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
		if x.matches(e, tag) {
			if a, b := t.parts(x.slotOf(e)); sameName(a, b, prefix, key) {
				return int(p)
			}
		}
	}
}

// lookup returns the fixed-size state of prefix+key, whose hash is h, in
// place.
func (t *table) lookup(prefix, key string, h uint64) (s []int64, ok bool) {
	if t.words == 1 {
		if w, ok := t.lookupOne(prefix, key, h); ok {
			return w.state[:], true
		}
		return nil, false
	}
	if p := find(t, prefix, key, h); p >= 0 {
		return t.slot(t.index.slot(p)), true
	}
	return nil, false
}

// lookupOne is lookup for a table of one-word states (GCRA), the hottest
// path of the store: it finds each candidate's slot once, and returns it.
// A key whose prefix is the one t found last is told by its number and
// the rest of its bytes: the prefix is compared before the probe, while
// the index and the slot are still on their way from memory, and not
// again once they arrive.
func (t *table) lookupOne(prefix, key string, h uint64) (*oneWord, bool) {
	x := &t.index
	if x.n == 0 {
		return nil, false
	}
	pre := t.lastPre
	if pre != 0 && t.prefixes[pre-1] != prefix {
		pre = 0
	}
	tag := tagOf(h)
	for p := x.home(tag); ; p = (p + 1) & x.mask {
		e := x.pos[p]
		if e == 0 {
			return nil, false
		}
		if !x.matches(e, tag) {
			continue
		}
		i := x.slotOf(e)
		w := t.one(i)
		if w.pre == pre && pre != 0 && int(w.n) == len(key) && len(key) <= inlineKey {
			if unsafe.String(&w.key[0], len(key)) == key {
				return w, true
			}
			continue // prefix+key is stored once, and this is another key of its prefix
		}
		if a, b := t.headParts(&w.keyHead, i); sameName(a, b, prefix, key) {
			if w.pre != 0 && len(a) == len(prefix) {
				t.lastPre = w.pre // a is prefix
			}
			return w, true
		}
	}
}

// insert stores a copy of s as the state of prefix+key, whose hash is h,
// and returns the bytes it adds to what t counts. The key must not be in
// t; both parts may be views of scratch space (insert copies what it
// keeps). A new slot grows t by no more than room bytes where it can
// choose (see grow).
func (t *table) insert(prefix, key string, h uint64, s []int64, room int64) int64 {
	before := t.bytes
	pre := t.prefixNumber(prefix)
	if t.logs != nil {
		t.bytes += t.logBytes(len(prefix)+len(key), len(s))
		t.logs[joinKey(prefix, key)] = append(append(make([]int64, 0, len(s)+1), s...), int64(pre))
		return t.bytes - before
	}
	i := t.newSlot(room)
	copy(t.slot(i), s)
	t.setKey(t.keyAt(i), i, pre, prefix, key)
	positions := len(t.index.pos)
	t.indexAdd(tagOf(h), i)
	t.bytes += indexEntry * int64(len(t.index.pos)-positions)
	return t.bytes - before
}

// setKey writes prefix+key into w, the key of slot i, whose prefix t
// numbers pre (0: none), and counts what it keeps apart: the rest of the
// key, if longer than inlineKey.
func (t *table) setKey(w *keyHead, i uint32, pre uint8, prefix, key string) {
	if w.pre = pre; w.pre != 0 {
		prefix = ""
	}
	if len(prefix)+len(key) <= inlineKey {
		n := copy(w.key[:], prefix)
		w.n = uint8(n + copy(w.key[n:], key))
		return
	}
	if t.long == nil {
		t.long = make(map[uint32]string)
	}
	w.n, t.long[i] = longKey, joinKey(prefix, key)
	t.bytes += allocSize(int64(len(prefix)+len(key))) + longEntry
}

// prefixNumber returns the number, plus one, of prefix among t's
// prefixes, adding it if there is room, or 0 if it has none.
func (t *table) prefixNumber(prefix string) uint8 {
	j, known := t.prefixIndex(prefix)
	switch {
	case known:
		return uint8(j + 1)
	case j < 0:
		return 0
	}
	// The canonical copy: a Bound's prefix is one too (see Store.Bind), so
	// that lookupOne tells the prefix it found last by its address.
	t.prefixes = append(t.prefixes, unique.Make(prefix).Value())
	t.bytes += allocSize(int64(len(prefix))) + prefixEntry
	switch {
	case len(t.prefixes) == scanPrefixes+1:
		t.prefixAt = make(map[string]uint8, maxPrefixes)
		for i, p := range t.prefixes {
			t.prefixAt[p] = uint8(i)
		}
	case t.prefixAt != nil:
		t.prefixAt[t.prefixes[j]] = uint8(j)
	}
	return uint8(len(t.prefixes))
}

// prefixIndex returns where prefix is or would go in t's prefixes, and
// whether it is there: -1 if t does not number it (empty, too long, or
// no room left).
func (t *table) prefixIndex(prefix string) (int, bool) {
	if prefix == "" || len(prefix) > maxPrefixLen {
		return -1, false
	}
	if t.prefixAt != nil {
		if j, ok := t.prefixAt[prefix]; ok {
			return int(j), true
		}
	} else if j := slices.Index(t.prefixes, prefix); j >= 0 {
		return j, true
	}
	if len(t.prefixes) == maxPrefixes {
		return -1, false
	}
	return len(t.prefixes), false
}

// headBytes returns what setKey counts for prefix+key.
func (t *table) headBytes(prefix, key string) int64 {
	if j, _ := t.prefixIndex(prefix); j < 0 {
		if len(prefix)+len(key) > inlineKey {
			return allocSize(int64(len(prefix)+len(key))) + longEntry
		}
		return 0
	}
	if len(key) > inlineKey {
		return allocSize(int64(len(key))) + longEntry
	}
	return 0
}

// prefixBytes returns what numbering prefix adds to t's count: its bytes
// and entry, if t would number it for the first time.
func (t *table) newPrefixBytes(prefix string) int64 {
	if j, known := t.prefixIndex(prefix); j >= 0 && !known {
		return allocSize(int64(len(prefix))) + prefixEntry
	}
	return 0
}

// remove forgets prefix+key, whose hash is h and whose state is s, and
// returns the bytes it takes off what t counts. (For sliding logs, kept by
// whole name, a non-empty prefix costs joining the name.)
func (t *table) remove(prefix, key string, h uint64, s []int64) int64 {
	before := t.bytes
	if t.logs != nil {
		if prefix != "" {
			key = prefix + key
		}
		delete(t.logs, key)
		t.bytes -= t.logBytes(len(key), len(s))
		return before - t.bytes
	}
	p := find(t, prefix, key, h)
	if p < 0 {
		return 0
	}
	i := t.index.slot(p)
	t.indexDel(uint64(p))
	clear(t.slot(i))
	w := t.keyAt(i)
	if w.n == longKey {
		t.bytes -= allocSize(int64(len(t.long[i]))) + longEntry
		delete(t.long, i)
	}
	w.n, w.pre = 0, 0 // the bytes stay until the slot is reused: see parts
	t.freeSlot(i)
	return before - t.bytes
}

// each calls fn for the states of t, starting at a position chosen by
// start, until fn returns false. fn gets a state's key in two parts, as
// parts returns them (the prefix "" where t does not number it): valid
// until the slot is reused, which fn may not outlive.
// Not joining them spares each visit a copy that, waiting on the slot's
// cache miss, would keep the next visits' misses from overlapping. fn may
// remove the state it is given (hashing its key: the index keeps too few
// bits of it); states moved by that removal may then be skipped or seen
// twice, which sweeps and samples tolerate.
func (t *table) each(start uint64, fn func(prefix, key string, s []int64) bool) {
	if t.logs != nil {
		for k, s := range t.logs { // Go's map order is random already
			prefix, rest := t.split(uint8(s[len(s)-1]), k)
			if !fn(prefix, rest, s[:len(s)-1]) {
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
			i := x.slotOf(e)
			prefix, key := t.parts(i)
			if !fn(prefix, key, t.slot(i)) {
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

// compact rebuilds t's index and slots when at most one in sparse of
// their slots is used, lets go of the room a burst of actors that went
// idle (or were evicted) held, and returns the change in what t counts.
func (t *table) compact(sparse int) int64 {
	if t.logs != nil {
		return 0 // a log's slice is freed with its entry; Go map slots stay
	}
	n, slots := t.len(), t.slots()
	if slots < 1024 || n > slots/sparse {
		return 0
	}
	old := *t
	t.index, t.first, t.ones, t.long, t.many, t.n, t.free = index{}, nil, nil, nil, nil, 0, nil
	t.bytes = t.prefixBytes()
	for _, e := range old.index.pos {
		if e != 0 {
			i := old.index.slotOf(e)
			prefix, rest := old.parts(i)
			t.insert(prefix, rest, t.hash(prefix, rest), old.slot(i), math.MaxInt64)
		}
	}
	return t.bytes - old.bytes
}

// prefixBytes returns what t's numbered prefixes count.
func (t *table) prefixBytes() int64 {
	var n int64
	for _, p := range t.prefixes {
		n += allocSize(int64(len(p))) + prefixEntry
	}
	return n
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
