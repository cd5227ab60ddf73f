package simulate

import "math/bits"

// A countTable counts keys by their 64-bit hash: open addressing with
// linear probing over one array of (hash, count) slots, at most half
// full, so that a key's count is in the cache line of its first probe. A
// replay counts every request of every limit in one (the rate
// distributions), most of them cache misses on a day's keys: a Go map
// of the same keys reads a control word and then a slot, two lines
// apart (replacing the maps took a replay of the sample's rules from
// 3.8 to 3.4 µs of CPU a line).
//
// Hashes are the keys: a key whose hash is 0 is counted as 1's. The
// zero value is an empty table.
type countTable struct {
	slots []countSlot // a power of two of them, or none
	shift uint8       // 64 less log2(len(slots))
	n     int         // keys held
}

type countSlot struct {
	h uint64 // 0: empty
	n int32
}

// minCountSlots is the size of a table's first array, and what a table
// that held many keys shrinks back to (see reset).
const minCountSlots = 64

// add counts one of h, and reports whether it counted it. If only is
// set, it counts only a key held already, and reports false for a new
// one without adding it.
func (t *countTable) add(h uint64, only bool) (counted bool) {
	h = max(h, 1)
	if 2*(t.n+1) > len(t.slots) && !only {
		t.grow()
	}
	mask := uint64(len(t.slots) - 1)
	for i := t.home(h); len(t.slots) > 0; i = (i + 1) & mask {
		s := &t.slots[i]
		switch s.h {
		case h:
			s.n++
			return true
		case 0:
			if only {
				return false
			}
			s.h, s.n = h, 1
			t.n++
			return true
		}
	}
	return false
}

// grow doubles the slots, placing the keys anew.
func (t *countTable) grow() {
	old := t.slots
	t.slots = make([]countSlot, max(2*len(old), minCountSlots))
	t.shift = uint8(64 - bits.TrailingZeros(uint(len(t.slots))))
	mask := uint64(len(t.slots) - 1)
	for _, s := range old {
		if s.h == 0 {
			continue
		}
		i := t.home(s.h)
		for t.slots[i].h != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}

// home returns the first slot to probe for h: its top bits after a
// multiplication that mixes them all in, so that hashes alike in some
// bits do not crowd the same slots.
func (t *countTable) home(h uint64) uint64 {
	return (h * 0x9e3779b97f4a7c15) >> t.shift
}

// each calls f with the count of every key held.
func (t *countTable) each(f func(n int32)) {
	for _, s := range t.slots {
		if s.h != 0 {
			f(s.n)
		}
	}
}

// reset empties t: a table of many slots lets them go (a window of many
// keys need not keep its room through the quieter ones after it).
func (t *countTable) reset() {
	if len(t.slots) > 4096 {
		t.slots = nil
	} else {
		clear(t.slots)
	}
	t.n = 0
}
