package memory

import (
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// sketchShare is the share of MaxBytes kept for sketches: 1/8. The
// states get the rest.
const sketchShare = 8

// sketchRows is the number of cells each key maps to in a sketch.
const sketchRows = 2

// sketchMul are the multipliers that map a key's tag to its cell in each
// row (multiplicative hashing, like the index's home, with other odd
// constants so that rows and index spread keys independently).
var sketchMul = [sketchRows]uint64{0xbf58476d1ce4e5b9, 0x94d049bb133111eb}

// A sketch remembers, conservatively, the states a table evicted before
// they were back to empty, so that an evicted actor that returns is not
// handed a fresh allowance. It is a count-min sketch whose cells hold
// summaries of states (package algorithm): sketchRows rows of width
// cells, a key mapping to one cell per row by its tag. Evicting a state
// joins its summary into the key's cells; a key missing from the table
// is charged from the meet of its cells, which is never less spent than
// its own evicted state (see algorithm.Summarize): forgetting never
// over-admits. It errs the other way: a key is charged with the most
// spent state among the keys that share both its cells, and a key reset
// or never seen is charged too if its cells are, until the states joined
// there lapse.
//
// A table gets its sketch on its first eviction of a state that is not
// back to empty; until then a missing key costs one nil check. The
// sketches of a shard share the shard's part of MaxBytes/sketchShare,
// evenly: when another table of the shard needs one, the others fold to
// half their width (joining neighbouring cells, which keeps them
// conservative) until they fit or their width is odd. A sketch keeps at
// least one cell per row, which a tiny MaxBytes may not hold.
type sketch struct {
	limit sluice.Limit // a limit of the table's kind: the summaries' form
	words int          // words per cell
	width int          // cells per row
	cells []int64      // sketchRows rows of width cells of words words
	sum   []int64      // scratch: the summary being joined or met
}

func newSketch(l sluice.Limit, budget int64) *sketch {
	k := &sketch{limit: l, words: algorithm.SummaryWords(l)}
	k.width = max(int((budget/8-int64(k.words))/int64(sketchRows*k.words)), 1)
	if k.width > 1 {
		k.width &^= 1 // even, so that it can fold
	}
	k.cells = make([]int64, sketchRows*k.width*k.words)
	k.sum = make([]int64, k.words)
	return k
}

// bytes is the memory k counts.
func (k *sketch) bytes() int64 { return int64(len(k.cells)+len(k.sum)) * 8 }

// cell returns the cell of tag in row: the row's hash of tag, 32 bits,
// scaled to the width (so halving an even width maps cells 2i and 2i+1
// to i).
func (k *sketch) cell(row int, tag uint32) []int64 {
	x := uint64(tag) * sketchMul[row] >> 32
	i := int(x * uint64(k.width) >> 32)
	j := (row*k.width + i) * k.words
	return k.cells[j : j+k.words : j+k.words]
}

// add joins the summary of state s of key, whose tag is tag, into its
// cells, judged from t on.
func (k *sketch) add(s []int64, key string, tag uint32, t int64) {
	algorithm.Summarize(k.limit, k.sum, s, key)
	for row := range sketchRows {
		algorithm.Join(k.limit, k.cell(row, tag), k.sum, t)
	}
}

// charge writes to s, the fresh state of key under l, the state the
// meet of key's cells stands for.
func (k *sketch) charge(l sluice.Limit, s []int64, key string, tag uint32) {
	copy(k.sum, k.cell(0, tag))
	for row := 1; row < sketchRows; row++ {
		algorithm.Meet(k.limit, k.sum, k.cell(row, tag))
	}
	algorithm.Charge(l, s, k.sum, key)
}

// fold halves k's width if it is even, joining each pair of neighbouring
// cells (the two that one cell of the halved width stands for), judged
// from t on, and returns the bytes it freed.
func (k *sketch) fold(t int64) int64 {
	if k.width%2 != 0 {
		return 0
	}
	w, n := k.width/2, k.words
	for row := range sketchRows {
		for i := range w {
			src := (row*k.width + 2*i) * n
			dst := (row*w + i) * n
			// dst ≤ src: writing dst never overwrites a cell not yet read.
			copy(k.cells[dst:dst+n], k.cells[src:src+n])
			algorithm.Join(k.limit, k.cells[dst:dst+n], k.cells[src+n:src+2*n], t)
		}
	}
	before := k.bytes()
	k.width = w
	k.cells = append([]int64(nil), k.cells[:sketchRows*w*n]...)
	return before - k.bytes()
}

// forget evicts the state s of key, whose hash is h, from tb, judged at
// t: a state not back to empty is joined into tb's sketch first. It
// requires sh.mu.
func (sh *shard) forget(tb *table, key string, h uint64, s []int64, t int64) {
	if !idle(tb.kind, s, t) {
		if tb.sk == nil {
			sh.newSketch(tb, t)
		}
		tb.sk.add(s, key, tagOf(h), t)
	}
	sh.drop(tb, "", key, h, s)
}

// newSketch gives tb a sketch, its share of the shard's sketch budget,
// folding the shard's other sketches to theirs.
func (sh *shard) newSketch(tb *table, t int64) {
	n := int64(1)
	for _, o := range sh.tables {
		if o.sk != nil {
			n++
		}
	}
	budget := sh.store.sketchBudget / n
	for _, o := range sh.tables {
		for o.sk != nil && o.sk.bytes() > budget && o.sk.width%2 == 0 {
			sh.store.sketchBytes.Add(-o.sk.fold(t))
		}
	}
	tb.sk = newSketch(tb.limit, budget)
	sh.store.sketchBytes.Add(tb.sk.bytes())
}

// lapsed reports whether every cell of k is back to empty at t, and will
// stay so: the sketch then charges nothing and can go.
func (k *sketch) lapsed(kd kind, t int64) bool {
	p := int64(kd.period)
	for j := 0; j < len(k.cells); j += k.words {
		c := k.cells[j : j+k.words]
		switch kd.alg {
		case sluice.FixedWindow: // [first window end, last, count]
			if c[2] != 0 && c[1] > t {
				return false
			}
		case sluice.SlidingLog: // [newest time, counts]
			if c[0] != 0 && c[0]+p > t {
				return false
			}
		default: // the state's own form
			if !idle(kd, c, t) {
				return false
			}
		}
	}
	return true
}
