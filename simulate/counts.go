package simulate

import "math/bits"

// A countTable counts keys by their 64-bit hash in columns: open
// addressing with linear probing over one array of slots, at most half
// full. A slot is the key's hash (0: empty), a word its owner keeps
// beside it (a rateCounts keeps the time of the key's latest request),
// and one 32-bit count per column, two to a word, so that a key's counts
// are in the cache line of its first probe. A replay counts every
// request in one table per route (the rate distributions), most of them
// cache misses on a day's keys: a Go map of the same keys reads a
// control word and then a slot, two lines apart (replacing the maps took
// a replay of the sample's rules from 3.8 to 3.4 µs of CPU a line), and a
// table per column as many lines (one per period of the sample's limits,
// four; see rateCounts).
//
// Hashes are the keys: a key whose hash is 0 is counted as 1's.
type countTable struct {
	stride int      // words per slot
	words  []uint64 // a power of two of slots of stride words, or none
	shift  uint8    // 64 less log2 of the slots
	n      int      // keys held
}

// minCountSlots is the slots of a table's first array, and what a table
// that held many keys shrinks back to (see reset).
const minCountSlots = 64

// newCountTable returns an empty table of cols columns.
func newCountTable(cols int) countTable { return countTable{stride: 2 + (cols+1)/2} }

// slot returns the slot of h, adding it, its words zero but its hash, if
// h is not held and add is set (isNew then says so); nil if h is not held
// and add is not set. The slot is valid until the next add.
func (t *countTable) slot(h uint64, add bool) (s []uint64, isNew bool) {
	h = max(h, 1)
	if add && 2*(t.n+1) > t.slots() {
		t.grow()
	}
	if t.words == nil {
		return nil, false
	}
	mask := uint64(t.slots() - 1)
	for i := t.home(h); ; i = (i + 1) & mask {
		s := t.words[int(i)*t.stride : int(i+1)*t.stride : int(i+1)*t.stride]
		switch s[0] {
		case h:
			return s, false
		case 0:
			if !add {
				return nil, false
			}
			s[0] = h
			t.n++
			return s, true
		}
	}
}

// count returns the count of column col of slot s.
func count(s []uint64, col int) int32 { return int32(s[2+col/2] >> (32 * (col % 2))) }

// setCount sets the count of column col of slot s to n.
func setCount(s []uint64, col int, n int32) {
	sh := 32 * (col % 2)
	w := &s[2+col/2]
	*w = *w&^(0xffffffff<<sh) | uint64(uint32(n))<<sh
}

// slots returns the number of slots of t.
func (t *countTable) slots() int { return len(t.words) / t.stride }

// grow doubles the slots, placing the keys anew.
func (t *countTable) grow() {
	old := t.words
	n := max(2*t.slots(), minCountSlots)
	t.words = make([]uint64, n*t.stride)
	t.shift = uint8(64 - bits.TrailingZeros(uint(n)))
	mask := uint64(n - 1)
	for s := range t.each(old) {
		i := t.home(s[0])
		for t.words[int(i)*t.stride] != 0 {
			i = (i + 1) & mask
		}
		copy(t.words[int(i)*t.stride:], s)
	}
}

// home returns the first slot to probe for h: its top bits after a
// multiplication that mixes them all in, so that hashes alike in some
// bits do not crowd the same slots.
func (t *countTable) home(h uint64) uint64 {
	return (h * 0x9e3779b97f4a7c15) >> t.shift
}

// each yields the slots held in words, an array of t's layout.
func (t *countTable) each(words []uint64) func(func([]uint64) bool) {
	return func(yield func([]uint64) bool) {
		for i := 0; i < len(words); i += t.stride {
			if s := words[i : i+t.stride : i+t.stride]; s[0] != 0 && !yield(s) {
				return
			}
		}
	}
}

// reset empties t: a table of many slots lets them go (a window of many
// keys need not keep its room through the quieter ones after it).
func (t *countTable) reset() {
	if t.slots() > 4096 {
		t.words = nil
	} else {
		clear(t.words)
	}
	t.n = 0
}
