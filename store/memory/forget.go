package memory

import "github.com/sluicehq/sluice"

// A grower makes room for a ledger to grow.
type grower interface {
	// grow grows g, judged from t on, and reports whether it did.
	grow(g *ledger, t int64) bool
}

// forget evicts the state s of the key named name, of partition part of
// tb, whose hash is h, judged at t: a state not back to empty is
// remembered first, in the ledger of its partition. It requires sh.mu.
func (sh *shard) forget(tb *table, part uint8, name string, h uint64, s []int64, t int64) {
	if !idle(tb.kind, s, t) {
		g := tb.ledgerOf(part)
		if g == nil {
			g = newLedger(tb.kind, tb.limit, part, 1, t)
			tb.ledgers = append(tb.ledgers, g)
			sh.countLedger(g.bytes())
			sh.share(g, 0, t)
		}
		g.add(s, name, fingerprint(h), t, sh)
	}
	sh.drop(tb, "", name, h, s)
}

// grow doubles ledger g of the shard, or grows it to what the shard's
// share of the ledgers' budget leaves; when that leaves nothing, it first
// halves the shard's largest ledger if that is more than twice the size
// of g, so that each partition gets its share and a flood of one
// partition's keys shrinks only its own ledger. It requires sh.mu.
func (sh *shard) grow(g *ledger, t int64) bool {
	sh.share(g, g.bytes(), t)
	if fit := g.n + int((sh.store.ledgerBudget-sh.ledgerBytes)/g.bucketBytes()); fit > g.n {
		sh.resizeLedger(g, min(2*g.n, fit), t)
		return true
	}
	return false
}

// share halves the shard's largest ledger other than g, while it counts
// more than twice what g does and the shard's ledgers need more than
// their budget for need bytes more, judged from t on.
func (sh *shard) share(g *ledger, need int64, t int64) {
	for sh.ledgerBytes+need > sh.store.ledgerBudget {
		big := sh.largestLedger(g)
		if big == nil || big.n < 2 || big.bytes() <= 2*g.bytes() {
			return
		}
		sh.resizeLedger(big, big.n/2, t)
	}
}

// largestLedger returns the ledger of the shard, other than g, that
// counts the most bytes, or nil.
func (sh *shard) largestLedger(g *ledger) *ledger {
	var big *ledger
	for _, tb := range sh.tables {
		for _, o := range tb.ledgers {
			if o != g && (big == nil || o.bytes() > big.bytes()) {
				big = o
			}
		}
	}
	return big
}

// resizeLedger resizes g to m buckets, judged from t on, and counts the
// change.
func (sh *shard) resizeLedger(g *ledger, m int, t int64) {
	before := g.bytes()
	g.resize(m, t)
	sh.countLedger(g.bytes() - before)
}

// countLedger adds d to the bytes the shard's ledgers count.
func (sh *shard) countLedger(d int64) {
	sh.ledgerBytes += d
	sh.store.ledgerBytes.Add(d)
}

// sweepLedgers empties what lapsed by t in tb's ledgers and lets go of
// those left empty. It requires sh.mu.
func (sh *shard) sweepLedgers(tb *table, t int64) {
	kept := tb.ledgers[:0]
	for _, g := range tb.ledgers {
		if g.sweep(t) {
			sh.countLedger(-g.bytes())
			continue
		}
		kept = append(kept, g)
	}
	clear(tb.ledgers[len(kept):])
	tb.ledgers = kept
	if len(kept) == 0 {
		tb.ledgers = nil
	}
}

// ledgerOf returns t's ledger of partition part, or nil.
func (t *table) ledgerOf(part uint8) *ledger {
	for _, g := range t.ledgers {
		if g.part == part {
			return g
		}
	}
	return nil
}

// partOf returns the partition of t that the keys of prefix belong to:
// the number of prefix if t numbers it, 0 if t cannot number it. It
// reports false if t would number it but has not: t never held a state
// of it, and has nothing of it to remember.
func (t *table) partOf(prefix string) (uint8, bool) {
	j, known := t.prefixIndex(prefix)
	switch {
	case known:
		return uint8(j + 1), true
	case j < 0:
		return 0, true
	}
	return 0, false
}

// recall writes to s, the fresh state under l of prefix+key, named name,
// whose hash is h and which t does not hold, what t's ledger of its
// partition remembers of it at now: its own entry, or, unless own, what
// the ledger's cells charge. It reports whether the key was not told
// apart and the cells hold something (see ledger.recall).
func (t *table) recall(l sluice.Limit, s []int64, prefix, name string, h uint64, own bool, now int64) bool {
	part, ok := t.partOf(prefix)
	if !ok {
		return false
	}
	if g := t.ledgerOf(part); g != nil {
		return g.recall(l, s, name, fingerprint(h), own, now)
	}
	return false
}

// forgetKey drops what t's ledgers remember of the key prefix+key, whose
// hash is h: the key was reset.
func (t *table) forgetKey(prefix string, h uint64) {
	if part, ok := t.partOf(prefix); ok {
		if g := t.ledgerOf(part); g != nil {
			g.forget(fingerprint(h))
		}
	}
}
