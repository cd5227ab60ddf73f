package memory

import (
	"math/bits"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// ledgerShare is the share of MaxBytes kept for the ledgers of forgotten
// states, in eighths: 3/8. The states get the rest. A GCRA state takes
// about 55 bytes in its table and 9 in a ledger, so that under a flood
// of distinct keys a store remembers, at 256 MiB, about 3 million of them
// in full and 10 million more by fingerprint before it must fold any
// into the shared cells that charge fresh actors (docs/accuracy.md).
const ledgerShare = 3

// An entry's first word holds a fingerprint of its key in its high
// fpBits bits and a value in the low valBits.
const (
	fpBits  = 40
	valBits = 64 - fpBits
	maxVal  = 1<<valBits - 1
	// fpMul is the odd multiplier that gives a fingerprint its second
	// bucket.
	fpMul = 0x9e3779b97f
	// maxBuckets bounds a ledger's buckets, so that a fingerprint times
	// their number fits 64 bits.
	maxBuckets = 1 << (64 - fpBits)
)

// A fp is the fingerprint of a key: fpBits bits of its hash, never 0.
type fp uint64

// A ledger remembers, per key, the states its table evicted before they
// were back to empty, for the keys of one partition of the table (the
// keys of one Prefix: one rule, one limiter), so that an actor that
// returns is charged what it had spent, and nothing that other actors
// spent.
//
// It is a hash table of buckets found by a 40-bit fingerprint of the
// key's hash: each bucket holds a few entries, each the fingerprint and a
// compact encoding of one evicted state (one word for GCRA: its tat,
// rounded up to a 2^22th of its burst's length, a millisecond for an
// hour; two or three words for the others), and
// one cell. An entry goes to the emptier of its fingerprint's two
// buckets. When both are full and the shard's ledger budget leaves no
// room to grow, the entry that lapses first, of those buckets and the new
// one, is folded into the cells of both its buckets, where it is summarised
// as algorithm.Summarize describes: each cell holds the join of the
// summaries folded into it. A key found by fingerprint is charged from its
// own entry, exactly (but for the rounding, which only charges more); a
// key not found is charged from the meet of its two cells, which is at
// least as spent as any state folded there of that key (see
// algorithm.Summarize): it may be charged for other keys' spending, and
// its decision is then an estimate.
//
// A fingerprint is 40 bits of a hash seeded per process, 24 of which no
// key of a shard shares with the shard's index, so that of the keys of a
// ledger of N entries, a key matches another's entry with a chance of
// about N/2^40 (one in 7 million for the 156,000 of a shard of a 256 MiB
// store full of a flood), not one that an attacker can aim at. A fresh
// key that matches is charged that entry's state: less allowance, never
// more. An entry is dropped when its key is back in its table, and when
// it is reset: a key that shares its fingerprint then loses what the
// entry held of it (at that same chance per drop, at most one
// allowance); the cells never lose anything.
//
// A ledger grows by doubling its buckets (entries move by their
// fingerprints, cells are joined where the new buckets overlap the old
// ones), up to what the shard's ledger budget leaves; when the budget is
// spent, a ledger at most half the size of the shard's largest takes
// room from it by halving it: each partition gets a fair share, and a
// flood of one rule's keys folds only that rule's entries into its own
// cells.
type ledger struct {
	kind  kind
	limit sluice.Limit // a limit of the table's kind: the form of the cells
	part  uint8        // the partition: the number of its Prefix in the table, 0 for the unnumbered

	slots int // entries a bucket holds
	ew    int // words of an entry
	cw    int // words of a cell
	bw    int // words of a bucket: slots entries, then the cell
	n     int // buckets
	w     []int64

	base  int64 // the origin of the entries' first values, in their unit
	unit  int64 // GCRA: ns per unit of tat; sliding log: its grain in ns; else 1
	cbits uint  // bits of a packed count (sliding window counters, logs)

	sum, sum2 []int64 // scratch: summaries, in the entries' form or the cells'
	ent       []int64 // scratch: an entry being placed
}

// newLedger returns an empty ledger of n buckets for the states of
// partition part of a table of kind k, whose latest limit is l, judged
// from t on.
func newLedger(k kind, l sluice.Limit, part uint8, n int, t int64) *ledger {
	g := &ledger{kind: k, limit: l, part: part, cw: algorithm.SummaryWords(l), unit: 1}
	switch k.alg {
	case sluice.GCRA:
		g.ew, g.slots = 1, 7 // a bucket of 8 words: one cache line
		g.unit = gcraUnit(l)
	case sluice.FixedWindow:
		g.ew, g.slots = 2, 4
	default: // sliding window counters and logs: their counts packed
		g.cbits = uint(max(bits.Len(uint(2*l.Rate)), 1))
		per := 64 / int(g.cbits)
		g.ew, g.slots = 1+(g.cw-1+per-1)/per, 4
		if k.alg == sluice.SlidingLog {
			g.unit = algorithm.SummaryGrain(l)
		}
	}
	g.bw = g.slots*g.ew + g.cw
	g.n = min(max(n, 1), maxBuckets)
	g.w = make([]int64, g.n*g.bw)
	g.base = g.origin(t)
	g.sum, g.sum2, g.ent = make([]int64, max(g.cw, 2)), make([]int64, max(g.cw, 2)), make([]int64, g.ew)
	return g
}

// gcraUnit returns the unit a ledger of GCRA states of l rounds their
// tats up to: the 2^22th part of its tolerance (under a millisecond for a
// burst an hour long), so that a tat up to four tolerances past the
// ledger's base fits its entry's valBits.
func gcraUnit(l sluice.Limit) int64 {
	return max(int64(l.Interval())*int64(l.MaxBurst())>>(valBits-2), 1)
}

// ledgerFixed is what a ledger counts beside its buckets: the struct and
// its scratch slices.
const ledgerFixed = 256

// bytes is the memory g counts.
func (g *ledger) bytes() int64 { return 8*int64(len(g.w)) + ledgerFixed }

// bucketBytes is the memory a bucket of g counts.
func (g *ledger) bucketBytes() int64 { return 8 * int64(g.bw) }

// homes returns the two buckets of fingerprint f (perhaps the same): the
// top bits of f, and of f times fpMul, scaled to the buckets, so that
// doubling the buckets sends each of them to one of two neighbours.
func (g *ledger) homes(f fp) (int, int) {
	n := uint64(g.n)
	return int(uint64(f) * n >> fpBits), int(uint64(f*fpMul) & (1<<fpBits - 1) * n >> fpBits)
}

// fingerprint returns the fingerprint of a key whose hash is h: its top
// fpBits bits (the low ones chose the shard), never 0 (an empty entry).
func fingerprint(h uint64) fp { return max(fp(h>>valBits), 1) }

func (g *ledger) entry(b, k int) []int64 {
	i := b*g.bw + k*g.ew
	return g.w[i : i+g.ew : i+g.ew]
}

func (g *ledger) cell(b int) []int64 {
	i := b*g.bw + g.slots*g.ew
	return g.w[i : i+g.cw : i+g.cw]
}

func fpOf(e []int64) fp { return fp(uint64(e[0]) >> valBits) }

func valueOf(e []int64) int64 { return e[0] & maxVal }

// first returns the first word of an entry of fingerprint f and value v.
func firstWord(f fp, v int64) int64 { return int64(uint64(f)<<valBits | uint64(v)) }

// find returns the bucket and slot of f's entry, or -1.
func (g *ledger) find(f fp) (int, int) {
	b1, b2 := g.homes(f)
	for _, b := range [2]int{b1, b2} {
		for k := range g.slots {
			if e := g.entry(b, k); e[0] != 0 && fpOf(e) == f {
				return b, k
			}
		}
	}
	return -1, -1
}

// recall writes to s, the fresh state of key under l (zeros), what g
// remembers of the key whose fingerprint is f: its own entry if it has
// one; else, unless own, what its cells charge. It reports whether the
// key is not found and its cells hold something: s was charged from them
// (an estimate) with a state not empty, or, if own, the cells that s was
// not charged from may still charge something at t (the key may have
// been forgotten).
func (g *ledger) recall(l sluice.Limit, s []int64, key string, f fp, own bool, t int64) (shared bool) {
	if b, k := g.find(f); b >= 0 {
		g.decode(g.entry(b, k), g.sum)
		g.charge(l, s, g.sum, key)
		return false
	}
	b1, b2 := g.homes(f)
	copy(g.sum2, g.cell(b1))
	algorithm.Meet(g.limit, g.sum2[:g.cw], g.cell(b2))
	if own {
		return !cellLapsed(g.kind, g.sum2[:g.cw], t)
	}
	algorithm.Charge(l, s, g.sum2[:g.cw], key)
	for _, w := range s {
		if w != 0 {
			return true
		}
	}
	return false
}

// add remembers state s of key, whose fingerprint is f, evicted at t
// before it was back to empty; gr grows g if it must.
func (g *ledger) add(s []int64, key string, f fp, t int64, gr grower) {
	if !g.encode(s, key, f, t, g.ent) {
		g.summarize(s, key)
		g.fold(f, g.sum2[:g.cw], t)
		return
	}
	g.place(g.ent, key, t, gr)
}

// place puts entry e, of key ("" if unknown), into g: joined into the
// entry of its fingerprint, in a free or lapsed slot of its buckets, in a
// bucket of g grown by gr (nil: none), or in the slot of the entry that
// lapses first, which is folded into its cells (e itself if it lapses
// first).
func (g *ledger) place(e []int64, key string, t int64, gr grower) {
	f := fpOf(e)
	for {
		if b, k := g.find(f); b >= 0 {
			g.merge(g.entry(b, k), e, key, t)
			return
		}
		if slot := g.free(f, t); slot != nil {
			copy(slot, e)
			return
		}
		if gr == nil || !gr.grow(g, t) {
			break
		}
	}
	victim := g.victim(f, e)
	g.decode(victim, g.sum)
	g.cellForm(g.sum, g.sum2, "")
	g.fold(fpOf(victim), g.sum2[:g.cw], t)
	if &victim[0] != &e[0] {
		copy(victim, e)
	}
}

// free returns an empty or lapsed slot of f's buckets, from the one with
// more of them, or nil.
func (g *ledger) free(f fp, t int64) []int64 {
	var best []int64
	most := 0
	b1, b2 := g.homes(f)
	for _, b := range [2]int{b1, b2} {
		var first []int64
		n := 0
		for k := range g.slots {
			if e := g.entry(b, k); e[0] == 0 || g.lapse(e) <= t {
				if first == nil {
					first = e
				}
				n++
			}
		}
		if n > most {
			best, most = first, n
		}
	}
	return best
}

// victim returns, of the entries of f's buckets and e, the one that
// lapses first.
func (g *ledger) victim(f fp, e []int64) []int64 {
	best, when := e, g.lapse(e)
	b1, b2 := g.homes(f)
	for _, b := range [2]int{b1, b2} {
		for k := range g.slots {
			if c := g.entry(b, k); g.lapse(c) < when {
				best, when = c, g.lapse(c)
			}
		}
	}
	return best
}

// fold joins summary sum, in the cells' form, of a key whose fingerprint
// is f into both of its cells, judged from t on.
func (g *ledger) fold(f fp, sum []int64, t int64) {
	b1, b2 := g.homes(f)
	algorithm.Join(g.limit, g.cell(b1), sum, t)
	if b2 != b1 {
		algorithm.Join(g.limit, g.cell(b2), sum, t)
	}
}

// forget drops the entry of fingerprint f, if any: the key was reset.
// Its cells keep what was folded into them.
func (g *ledger) forget(f fp) {
	if b, k := g.find(f); b >= 0 {
		clear(g.entry(b, k))
	}
}

// resize rebuilds g with m buckets, judged from t on: each new cell joins
// the old cells whose fingerprints it takes over, and each entry not yet
// lapsed is placed anew (folded into the new cells if it finds no room).
func (g *ledger) resize(m int, t int64) {
	old, on := g.w, g.n
	g.n, g.w = m, make([]int64, m*g.bw)
	oldCell := func(i int) []int64 {
		j := i*g.bw + g.slots*g.ew
		return old[j : j+g.cw]
	}
	for j := range m {
		lo := (uint64(j)<<fpBits + uint64(m) - 1) / uint64(m) // the first fingerprint of bucket j
		hi := (uint64(j+1)<<fpBits+uint64(m)-1)/uint64(m) - 1
		for i := int(lo * uint64(on) >> fpBits); i <= int(hi*uint64(on)>>fpBits); i++ {
			algorithm.Join(g.limit, g.cell(j), oldCell(i), t)
		}
	}
	for i := range on {
		for k := range g.slots {
			j := i*g.bw + k*g.ew
			if e := old[j : j+g.ew : j+g.ew]; e[0] != 0 && g.lapse(e) > t {
				g.place(e, "", t, nil)
			}
		}
	}
}

// sweep empties the entries and cells of g that lapsed by t, and reports
// whether g is then all empty: it charges nothing and can go.
func (g *ledger) sweep(t int64) bool {
	empty := true
	for b := range g.n {
		for k := range g.slots {
			if e := g.entry(b, k); e[0] != 0 {
				if g.lapse(e) > t {
					empty = false
					continue
				}
				clear(e)
			}
		}
		if c := g.cell(b); cellLapsed(g.kind, c, t) {
			clear(c)
		} else {
			empty = false
		}
	}
	return empty
}

// cellLapsed reports whether summary c of kind k charges nothing from t
// on.
func cellLapsed(k kind, c []int64, t int64) bool {
	switch k.alg {
	case sluice.FixedWindow: // [first window end, last, count]
		return c[2] == 0 || c[1] <= t
	case sluice.SlidingLog: // [newest time, counts]
		return c[0] == 0 || c[0]+int64(k.period) <= t
	}
	return idle(k, c, t) // the state's own form, or one like it
}

// The entries' encoding. An entry's first word holds its fingerprint in
// the high fpBits bits and in the low valBits a value relative to g.base, in
// g.unit: GCRA's tat rounded up; the window of a fixed window; the newest
// bucket of a sliding window counter; the coarse bucket of a sliding
// log's newest unit (charged as at the bucket's end, see
// algorithm.SummaryGrain). The rest is a fixed window's count, or the
// counts of a sliding summary, packed in g.cbits each. Decoded, an entry
// is a summary in the entries' form: [tat]; [window, count]; a sliding
// summary (algorithm.Summarize).

// first returns the value of summary sum, in the entries' form, that an
// entry keeps relative to g.base, in g.unit, rounded so that decoding
// charges no less.
func (g *ledger) first(sum []int64) int64 {
	switch g.kind.alg {
	case sluice.GCRA:
		return -floorDiv(-sum[0], g.unit) // ⌈tat/unit⌉
	case sluice.SlidingLog:
		return floorDiv(sum[0], g.unit)
	}
	return sum[0]
}

// origin returns the least value, in g.unit, of a state that is not yet
// idle at a time t or later.
func (g *ledger) origin(t int64) int64 {
	p := int64(g.kind.period)
	switch g.kind.alg {
	case sluice.GCRA:
		return floorDiv(t, g.unit)
	case sluice.FixedWindow:
		return floorDiv(t, p) - 2
	case sluice.SlidingLog:
		return floorDiv(t-p, g.unit) - 1
	}
	gb := int64(g.kind.buckets)
	return floorDiv(t, (p+gb-1)/gb) - gb - 2
}

// lapse returns the time from which entry e charges nothing.
func (g *ledger) lapse(e []int64) int64 {
	x, p := g.base+valueOf(e), int64(g.kind.period)
	switch g.kind.alg {
	case sluice.GCRA:
		return x * g.unit
	case sluice.FixedWindow:
		return (x + 2) * p // a staggered window may end a period later
	case sluice.SlidingLog:
		return (x+1)*g.unit - 1 + p
	}
	gb := int64(g.kind.buckets)
	return (x + gb + 1) * ((p + gb - 1) / gb)
}

// encode writes to dst the entry of state s of key, whose fingerprint is
// f, evicted at t. It reports false if the state does not fit an entry
// (its time too far from g.base, or a count too large), which must then
// be folded into the cells.
func (g *ledger) encode(s []int64, key string, f fp, t int64, dst []int64) bool {
	sum := g.sum
	switch g.kind.alg {
	case sluice.GCRA:
		sum[0] = s[0]
	case sluice.FixedWindow:
		sum[0], sum[1] = s[0], s[1]
	default:
		algorithm.Summarize(g.limit, sum[:g.cw], s, key)
	}
	return g.pack(sum, f, t, dst)
}

// pack writes to dst the entry of summary sum, in the entries' form, of
// fingerprint f, at t; see encode.
func (g *ledger) pack(sum []int64, f fp, t int64, dst []int64) bool {
	x := g.first(sum)
	if x-g.base < 0 || x-g.base > maxVal {
		g.rebase(t)
		if x-g.base < 0 || x-g.base > maxVal {
			return false
		}
	}
	clear(dst)
	dst[0] = firstWord(f, x-g.base)
	switch g.kind.alg {
	case sluice.GCRA:
	case sluice.FixedWindow:
		dst[1] = sum[1]
	default:
		per := 64 / int(g.cbits)
		for i, c := range sum[1:g.cw] {
			if c < 0 || c >= 1<<g.cbits {
				return false
			}
			dst[1+i/per] |= c << (uint(i%per) * g.cbits)
		}
	}
	return true
}

// decode writes to sum the summary, in the entries' form, of entry e.
func (g *ledger) decode(e, sum []int64) {
	x := g.base + valueOf(e)
	switch g.kind.alg {
	case sluice.GCRA:
		sum[0] = x * g.unit
		return
	case sluice.FixedWindow:
		sum[0], sum[1] = x, e[1]
		return
	case sluice.SlidingLog:
		sum[0] = (x+1)*g.unit - 1
	default:
		sum[0] = x
	}
	per, mask := 64/int(g.cbits), int64(1)<<g.cbits-1
	for i := range g.cw - 1 {
		sum[1+i] = e[1+i/per] >> (uint(i%per) * g.cbits) & mask
	}
}

// charge writes to s, a state of key under l, the state that summary
// sum, in the entries' form, stands for.
func (g *ledger) charge(l sluice.Limit, s, sum []int64, key string) {
	switch g.kind.alg {
	case sluice.GCRA:
		s[0] = sum[0]
	case sluice.FixedWindow:
		s[0], s[1] = sum[0], sum[1]
	default:
		algorithm.Charge(l, s, sum[:g.cw], key)
	}
}

// cellForm writes to dst the summary in the cells' form of sum, in the
// entries' form, of key ("" if unknown: a staggered window's end is then
// known only to within its Period).
func (g *ledger) cellForm(sum, dst []int64, key string) {
	if g.kind.alg != sluice.FixedWindow {
		copy(dst[:g.cw], sum)
		return
	}
	p := int64(g.kind.period)
	lo, hi := (sum[0]+1)*p, (sum[0]+1)*p
	switch {
	case key != "":
		lo += algorithm.Offset(g.limit, key)
		hi = lo
	case g.kind.staggered:
		hi += p - 1
	}
	dst[0], dst[1], dst[2] = lo, hi, sum[1]
}

// summarize writes to g.sum2 the summary, in the cells' form, of state s
// of key.
func (g *ledger) summarize(s []int64, key string) {
	algorithm.Summarize(g.limit, g.sum2[:g.cw], s, key)
}

// merge joins entry e, of key ("" if unknown), into entry dst, judged
// from t on; if the join does not fit an entry, it is folded into the
// cells and dst emptied.
func (g *ledger) merge(dst, e []int64, key string, t int64) {
	a, b := g.sum, g.sum2
	g.decode(dst, a)
	g.decode(e, b)
	switch g.kind.alg {
	case sluice.GCRA:
		a[0] = max(a[0], b[0])
	case sluice.FixedWindow:
		if a[0] < b[0] {
			a[0], a[1], b[0], b[1] = b[0], b[1], a[0], a[1]
		}
		// a is the later window; b's count still applies unless its
		// window ended by t.
		if a[0] == b[0] || g.windowEnd(b[0], key) > t {
			a[1] = max(a[1], b[1])
		}
	default:
		algorithm.Join(g.limit, a[:g.cw], b[:g.cw], t)
	}
	f := fpOf(dst)
	if !g.pack(a, f, t, dst) {
		g.cellForm(a, b, "")
		g.fold(f, b[:g.cw], t)
		clear(dst)
	}
}

// windowEnd returns the latest time the fixed window numbered i of key
// ("" if unknown) may end at.
func (g *ledger) windowEnd(i int64, key string) int64 {
	p := int64(g.kind.period)
	switch {
	case key != "":
		return (i+1)*p + algorithm.Offset(g.limit, key)
	case g.kind.staggered:
		return (i + 2) * p
	}
	return (i + 1) * p
}

// rebase moves g.base to the origin of t, dropping the entries that
// lapsed by then, so that values stay within valBits.
func (g *ledger) rebase(t int64) {
	d := g.origin(t) - g.base
	if d <= 0 {
		return
	}
	for b := range g.n {
		for k := range g.slots {
			e := g.entry(b, k)
			if e[0] == 0 {
				continue
			}
			if v := valueOf(e) - d; v < 0 {
				clear(e)
			} else {
				e[0] = firstWord(fpOf(e), v)
			}
		}
	}
	g.base += d
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
