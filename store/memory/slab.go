package memory

import (
	"math/bits"
	"strings"
)

// Slots live in chunks, not in one slice grown by doubling: a doubling
// slice holds up to twice the room it uses, briefly three times while it
// copies, and neither was counted. A chunk starts small and grows by half
// until it is full-size, by no more than the room left under the cap, so
// that a store fills its cap; only the last chunk of a table is ever
// short, and a copy never exceeds a chunk. (One-word slots differ: their
// first chunk grows so, the others are whole arrays.) What a table
// counts against MaxBytes (its bytes) is the memory it holds: every
// chunk, used or not, with room in the free list for each of its slots,
// its index, and the bytes of the keys it keeps apart, by Go's
// allocation size classes.
const (
	// oneShift sets the slots of a full chunk of oneWord slots: 1024, 40
	// KiB, whole pages (a 20 KiB chunk would round up to 24). A store
	// wastes at most a chunk per table.
	oneShift = 10
	oneMask  = 1<<oneShift - 1
	// chunkBytes is about the size of a full chunk of larger slots. Large,
	// so that a table of a million keys has few chunks, whose headers
	// stay in the cache: with 32 KiB, about 64 chunks a shard, the header
	// loaded between the index and the slot cost 8-12% of a decision on a
	// million random keys of a sliding window counter.
	chunkBytes = 1 << 20
	// firstSlots is the slots of a table's first allocation.
	firstSlots = 8
	// longEntry is what a key kept in table.long counts beside its
	// bytes: a map slot of 24 bytes at 7/8 load, and room to grow.
	longEntry = 56
	// logEntry is what a sliding log counts beside its key's and its
	// timestamps' allocations: a map slot of 40 bytes at 7/8 load, and
	// room to grow.
	logEntry = 96
	// slotFree is the bytes of a slot's entry in the free list.
	slotFree = 4
)

// allocSize returns at least the bytes Go allocates for an object of n
// bytes: small sizes round up to a size class, spaced 16 bytes apart up
// to 128, then no more than an eighth of the next power of two up to 2
// KiB, and a quarter beyond; large ones to whole 8 KiB pages.
func allocSize(n int64) int64 {
	step := int64(16)
	switch l := bits.Len64(uint64(n - 1)); {
	case n <= 0:
		return 0
	case n > 32<<10:
		step = 8 << 10
	case n > 2048:
		step = 1 << (l - 2)
	case n > 128:
		step = 1 << (l - 3)
	}
	return (n + step - 1) &^ (step - 1)
}

// slotBytes is the bytes of one slot of t, its key's head included.
func (t *table) slotBytes() int64 {
	if t.words == 1 {
		return oneWordBytes
	}
	return 8 * int64(headWords+t.words)
}

// chunkSlots returns the slots of the chunk c of many.
func (t *table) chunkSlots(c []int64) int { return len(c) / (headWords + t.words) }

// fullSlots is the number of slots of a full chunk of t.
func (t *table) fullSlots() int {
	if t.words == 1 {
		return 1 << oneShift
	}
	return 1 << t.shift
}

// chunkShift returns the log2 of the slots of a full chunk of slots of
// slotBytes bytes: about chunkBytes, at least one slot.
func chunkShift(slotBytes int64) uint8 {
	return uint8(max(bits.Len64(uint64(chunkBytes/slotBytes))-1, 0))
}

// capSlots returns the number of slots t's chunks hold, used or not.
func (t *table) capSlots() int {
	if t.words == 1 {
		return len(t.first) + len(t.ones)<<oneShift
	}
	if n := len(t.many); n > 0 {
		return (n-1)*t.fullSlots() + t.chunkSlots(t.many[n-1])
	}
	return 0
}

// lastSlots returns the slots of the chunk t grows: its last, or 0 when
// it needs a new one (none yet, or the last is full and new ones are
// whole arrays).
func (t *table) lastSlots() int {
	switch {
	case t.words == 1:
		return len(t.first) // later chunks are whole
	case len(t.many) > 0 && t.chunkSlots(t.many[len(t.many)-1]) < t.fullSlots():
		return t.chunkSlots(t.many[len(t.many)-1])
	}
	return 0
}

// chunkCost returns the bytes a chunk of n slots of t takes, with their
// room in the free list.
func (t *table) chunkCost(n int) int64 {
	free := int64(n) * slotFree
	if t.words == 1 {
		return allocSize(int64(n)*oneWordBytes) + free
	}
	return allocSize(int64(n)*t.slotBytes()) + free
}

// growth returns the bytes t must allocate for one more slot: none while
// a freed or unused slot is left.
func (t *table) growth() int64 {
	if len(t.free) > 0 || t.n < t.capSlots() {
		return 0
	}
	if t.words == 1 && len(t.first) == t.fullSlots() {
		return t.chunkCost(t.fullSlots()) // a whole array
	}
	last := t.lastSlots()
	return t.chunkCost(last+1) - t.chunkCost(last)
}

// grow adds slots to t, no more than room bytes' worth where it can
// choose (a chunk grows by half, at least by one slot), and returns the
// bytes it allocated.
func (t *table) grow(room int64) int64 {
	full := t.fullSlots()
	if t.words == 1 && len(t.first) == full {
		t.ones = append(t.ones, new([1 << oneShift]oneWord))
		return t.chunkCost(full)
	}
	last := t.lastSlots()
	n := min(full, max(firstSlots, last+last/2))
	for n > last+1 && t.chunkCost(n)-t.chunkCost(last) > room {
		n = last + (n-last)/2
	}
	t.resize(n, last == 0)
	return t.chunkCost(n) - t.chunkCost(last)
}

// resize makes the chunk t grows hold n slots, copying its slots, or
// with fresh adds a chunk of n slots.
func (t *table) resize(n int, fresh bool) {
	if t.words == 1 {
		t.first = append(make([]oneWord, 0, n), t.first...)[:n]
		return
	}
	c := make([]int64, n*(headWords+t.words))
	if fresh {
		t.many = append(t.many, c)
		return
	}
	last := &t.many[len(t.many)-1]
	copy(c, *last)
	*last = c
}

// one returns slot i of a table of one-word states: in the first chunk,
// or in a full one. (Full chunks are arrays, reached through a pointer:
// on a million random keys, the header of a slice per chunk, loaded
// between the index and the slot, cost 5-8% of a decision.)
func (t *table) one(i uint32) *oneWord {
	if i < 1<<oneShift {
		return &t.first[i]
	}
	return &t.ones[i>>oneShift-1][i&oneMask]
}

// logBytes returns what a sliding log of words words, whose key is of n
// bytes, counts: its key, its state and a word for its prefix's number,
// and its map entry. (The key of a state in a slot: see setKey.)
func (t *table) logBytes(n, words int) int64 {
	return allocSize(int64(n)) + allocSize(8*int64(words+1)) + logEntry
}

// need returns the bytes an insert of prefix+key into t adds: its key's,
// a slot's growth, the index's growth.
func (t *table) need(prefix, key string, words int) int64 {
	n := t.newPrefixBytes(prefix)
	if t.logs != nil {
		return n + t.logBytes(len(prefix)+len(key), words)
	}
	n += t.headBytes(prefix, key)
	if x := &t.index; 4*(x.n+1) > 3*len(x.pos) {
		n += indexEntry * int64(max(len(x.pos), 16))
	}
	return n + t.growth()
}

// newSlot returns a slot for a new state: a freed one, or a new one,
// growing t by no more than room bytes where it can choose. It adds what
// it allocated to t.bytes.
func (t *table) newSlot(room int64) uint32 {
	if n := len(t.free); n > 0 {
		i := t.free[n-1]
		t.free = t.free[:n-1]
		return i
	}
	if t.n == t.capSlots() {
		t.bytes += t.grow(room)
	}
	t.n++
	return uint32(t.n - 1)
}

// freeSlot puts slot i on the free list, which never holds room for more
// than t's slots (counted with the chunks).
func (t *table) freeSlot(i uint32) {
	if len(t.free) == cap(t.free) {
		t.free = append(make([]uint32, 0, min(max(2*cap(t.free), firstSlots), t.capSlots())), t.free...)
	}
	t.free = append(t.free, i)
}

// cloneKey returns key as a string t may keep: the caller's may be a
// view of scratch space.
func cloneKey(key string) string { return strings.Clone(key) }

// joinKey returns prefix+key as a string t may keep: a copy even where
// prefix is empty.
func joinKey(prefix, key string) string {
	if prefix == "" {
		return cloneKey(key)
	}
	return prefix + key
}
