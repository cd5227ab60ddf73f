package memory

import (
	"math/bits"
	"strings"
)

// Slots live in chunks, not in one slice grown by doubling: a doubling
// slice holds up to twice the room it uses, briefly three times while it
// copies, and neither was counted. A table's first chunk grows by half
// until it is full-size (so that a small store fills its cap); later
// chunks are allocated full-size, and only when no freed slot is left.
// What a table counts against MaxBytes (its bytes) is the memory it
// holds: every chunk, used or not, with room in the free list for each of
// its slots, its index, and the bytes of the keys it keeps apart, by Go's
// allocation size classes.
const (
	// oneShift sets the slots of a full chunk of oneWord slots: 512, 24
	// KiB. A store wastes at most a chunk per table.
	oneShift = 9
	oneMask  = 1<<oneShift - 1
	// chunkBytes is about the size of a full chunk of larger slots.
	chunkBytes = 32 << 10
	// firstSlots is the slots of a table's first allocation.
	firstSlots = 8
	// longEntry is what a key kept in table.long counts beside its
	// bytes: a map slot of 24 bytes at 7/8 load, and room to grow.
	longEntry = 56
	// logEntry is what a sliding log counts beside its key's and its
	// timestamps' allocations: a map slot of 40 bytes at 7/8 load, and
	// room to grow.
	logEntry = 96
	// slotKey is the bytes of a key's string header in a keys chunk.
	slotKey = 16
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

// slotBytes is the bytes of one slot of t, its key's header included.
func (t *table) slotBytes() int64 {
	if t.words == 1 {
		return oneWordBytes
	}
	return 8*int64(t.words) + slotKey
}

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
	switch n := len(t.keys); n {
	case 0:
		return 0
	case 1:
		return len(t.keys[0])
	default:
		return n * t.fullSlots()
	}
}

// chunkCost returns the bytes a chunk of n slots of t takes, with their
// room in the free list.
func (t *table) chunkCost(n int) int64 {
	free := int64(n) * slotFree
	if t.words == 1 {
		return allocSize(int64(n)*oneWordBytes) + free
	}
	return allocSize(int64(n)*8*int64(t.words)) + allocSize(int64(n)*slotKey) + free
}

// growth returns the bytes t must allocate for one more slot: none while
// a freed or unused slot is left.
func (t *table) growth() int64 {
	if len(t.free) > 0 || t.n < t.capSlots() {
		return 0
	}
	if first := t.capSlots(); first < t.fullSlots() && t.chunks() <= 1 {
		return t.chunkCost(first+1) - t.chunkCost(first)
	}
	return t.chunkCost(t.fullSlots())
}

func (t *table) chunks() int {
	if t.words == 1 {
		return min(len(t.first), 1) + len(t.ones)
	}
	return len(t.keys)
}

// grow adds slots to t, no more than room bytes' worth where it can
// choose (its first chunk grows by half, at least by one slot), and
// returns the bytes it allocated.
func (t *table) grow(room int64) int64 {
	first, full := t.capSlots(), t.fullSlots()
	if t.chunks() > 1 || first == full {
		t.addChunk(full, -1)
		return t.chunkCost(full)
	}
	n := min(full, max(firstSlots, first+first/2))
	for n > first+1 && t.chunkCost(n)-t.chunkCost(first) > room {
		n = first + (n-first)/2
	}
	t.addChunk(n, 0)
	return t.chunkCost(n) - t.chunkCost(first)
}

// addChunk adds a chunk of n slots, or with at >= 0 replaces chunk at
// with one of n slots holding its slots.
func (t *table) addChunk(n, at int) {
	if t.words == 1 {
		if at == 0 {
			t.first = append(make([]oneWord, 0, n), t.first...)[:n]
		} else {
			t.ones = append(t.ones, new([1 << oneShift]oneWord))
		}
		return
	}
	k, s := make([]string, n), make([]int64, n*t.words)
	if at >= 0 && at < len(t.keys) {
		copy(k, t.keys[at])
		copy(s, t.slab[at])
		t.keys[at], t.slab[at] = k, s
	} else {
		t.keys, t.slab = append(t.keys, k), append(t.slab, s)
	}
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

// keyBytes returns what the key of a state of t counts apart from its
// slot: its bytes, when t keeps them apart, and its map entry.
func (t *table) keyBytes(key string, words int) int64 {
	switch {
	case t.logs != nil:
		return allocSize(int64(len(key))) + allocSize(8*int64(words)) + logEntry
	case t.words > 1:
		return allocSize(int64(len(key)))
	case len(key) > inlineKey:
		return allocSize(int64(len(key))) + longEntry
	}
	return 0
}

// need returns the bytes an insert of key into t adds: its key's, a
// slot's growth, the index's growth.
func (t *table) need(key string, words int) int64 {
	n := t.keyBytes(key, words)
	if t.logs != nil {
		return n
	}
	if x := &t.index; 4*(x.n+1) > 3*len(x.pos) {
		n += 8 * int64(max(len(x.pos), 8))
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
