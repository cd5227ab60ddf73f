package memory

import "math/bits"

// An index is an open-addressing hash table with linear probing from a
// key's hash to its slot. A position is 32 bits: the slot plus one (0
// marks a free position) in its low slotBits bits, and above them the top
// bits of the key's tag, so that a probe reads one cache line and
// compares a key only where those bits agree. A key's home position is
// the top bits of its tag. The index keeps between 3/8 and 3/4 of its
// positions used: probes stay short (2.5 positions on average for a key
// present, at the fullest), at 5.3 to 10.7 bytes per key.
//
// An entry keeps 32-slotBits bits of its tag. While those hold the home
// (a table of up to about 2^15 slots), the index moves entries on its
// own; past that, it asks its table to hash a moved key again (see
// table.entryTag), which only growing and removing do, never a lookup.
type index struct {
	pos      []uint32
	mask     uint64
	shift    uint8 // 32 less log2(len(pos)): a tag's home is tag>>shift
	slotBits uint8 // the low bits of a position that hold a slot plus one
	n        int
}

// indexEntry is the bytes of a position.
const indexEntry = 4

// tagOf returns the bits of a key's hash that the index keeps: the high
// half, as the low bits chose the shard.
func tagOf(h uint64) uint32 { return uint32(h >> 32) }

// home is where the probe for tag starts.
func (x *index) home(tag uint32) uint64 { return uint64(tag >> x.shift) }

// slotMask is the bits of a position that hold a slot plus one.
func (x *index) slotMask() uint32 { return uint32(1)<<x.slotBits - 1 }

// slotOf returns the slot of the used position e.
func (x *index) slotOf(e uint32) uint32 { return e&x.slotMask() - 1 }

// slot returns the slot at position p.
func (x *index) slot(p int) uint32 { return x.slotOf(x.pos[p]) }

// matches reports whether the used position e may be that of a key whose
// tag is tag: the bits of the tag it keeps agree.
func (x *index) matches(e, tag uint32) bool { return (e^tag)>>x.slotBits == 0 }

// homeBits reports whether a position keeps the bits of its tag that
// choose its home.
func (x *index) homeBits() bool { return x.slotBits <= x.shift }

// put places the position e of a key whose tag is tag at the first free
// position from its home. It requires a free position.
func (x *index) put(tag, e uint32) {
	p := x.home(tag)
	for x.pos[p] != 0 {
		p = (p + 1) & x.mask
	}
	x.pos[p] = e
	x.n++
}

// widen makes every position hold slot numbers up to last, giving up the
// low bits of their tags.
func (x *index) widen(last uint32) {
	old := x.slotMask()
	x.slotBits = uint8(bits.Len32(last + 1))
	m := x.slotMask()
	for p, e := range x.pos {
		if e != 0 {
			x.pos[p] = e&^m | e&old
		}
	}
}

// entryTag returns as much of the tag of the key at the used position e
// as the index needs: the bits it keeps if they hold the home, else the
// key's hashed again.
func (t *table) entryTag(e uint32) uint32 {
	x := &t.index
	if x.homeBits() {
		return e &^ x.slotMask()
	}
	return tagOf(t.hash(t.parts(x.slotOf(e))))
}

// indexAdd adds slot, of a key whose tag is tag, to t's index.
func (t *table) indexAdd(tag, slot uint32) {
	x := &t.index
	if 4*(x.n+1) > 3*len(x.pos) {
		t.indexGrow()
	}
	if slot >= x.slotMask() {
		x.widen(slot)
	}
	x.put(tag, tag&^x.slotMask()|(slot+1))
}

// indexGrow doubles t's index.
func (t *table) indexGrow() {
	old := t.index.pos
	size := max(2*len(old), 16)
	x := &t.index
	x.pos, x.mask, x.n = make([]uint32, size), uint64(size-1), 0
	x.shift = uint8(32 - bits.TrailingZeros(uint(size)))
	for _, e := range old {
		if e != 0 {
			x.put(t.entryTag(e), e)
		}
	}
}

// indexDel empties position p of t's index and shifts back the entries
// after it that probed past it, so that no probe meets a hole before its
// entry. The slots of those entries must still hold their keys.
func (t *table) indexDel(p uint64) {
	x := &t.index
	for q := (p + 1) & x.mask; x.pos[q] != 0; q = (q + 1) & x.mask {
		home := x.home(t.entryTag(x.pos[q]))
		// Move q to p unless its home lies cyclically in (p, q].
		if (q-home)&x.mask >= (q-p)&x.mask {
			x.pos[p] = x.pos[q]
			p = q
		}
	}
	x.pos[p] = 0
	x.n--
}
