package algorithm

import (
	"github.com/sluicehq/sluice"
)

// # Summaries of forgotten states
//
// A store with bounded memory must at times forget (evict) an actor's
// state before it is back to empty. Handing that actor a fresh state when
// it returns would give back what it had spent. Instead the store keeps a
// summary: the state in a form that does not depend on the key, folded
// with Join into a few cells that many forgotten actors share (a
// count-min sketch whose cells hold states rather than counts). An actor
// the store no longer holds is charged with Charge from the Meet of its
// cells.
//
// Why that never admits what the exact state would deny. Write A ≥ B when
// state A is at least as spent as B: at every time from the newest either
// holds on, A admits no take that B denies, and committing one take to
// both keeps A ≥ B (each algorithm's order, and why its Take keeps it,
// is stated beside its functions below). Let E be the exact state of the
// takes the store admitted to an actor, and H the state the store holds
// for it. While the actor is held, H ≥ E is kept by every take. When it
// is evicted, its summary is joined into every cell its key maps to, and
// Join yields a summary no smaller, component by component (per window or
// bucket), than either input; so each of those cells is then, and stays
// through later joins, no smaller than the actor's latest summary, and
// so is their component-wise minimum, Meet. Charge is monotone in its
// summary, and rebuilds from the actor's own summary a state ≥ H (the
// same state for GCRA and the fixed window; for the sliding window
// counters and the sliding log, the same units, some moved later). So
// the state the actor is charged with on its return is ≥ H ≥ E, and the
// induction goes on. The charge errs towards denial only: an actor is
// charged with the most spent state of the actors that share its cells.
// The argument is about takes; Refund on a charged state removes units
// no older than the refunded take, which may be units summarised from
// other actors, and never more than its cost.
//
// The order holds for requests at or after the newest time summarised,
// and a fixed window that ended before the time Join is given counts as
// empty: a request whose time went back before them (other actors' later
// requests reached the store first) is judged as at that newest time, as
// package algorithm treats a time that went back, and may see a window
// that ended before then as empty, as it would see a state a store
// dropped once idle.

// summaryBuckets is the most buckets (but one or two for alignment) the
// summary of a sliding log or of a sliding window counter counts units
// in: a unit is summarised as if taken up to a quarter of a Period later.
// Fewer, wider buckets lose precision; more make cells larger, so fewer
// fit a store's memory and more actors share each. Measured with 1,000
// sliding logs at twice their limit evicted from room for 500, the store
// admitted 41% of what the algorithm alone does with 16 buckets, 52% with
// 8, 60% with 4, 66% with 2 and 62% with 1: 4 keeps most of the gain and
// moves a unit less than 2 does.
const summaryBuckets = 4

// SummaryWords returns the number of int64 words of a summary of l's
// states. It depends only on l's StateID: the summaries of every Rate and
// Burst of one kind of limit can be joined.
//
//	GCRA                 [tat]                                   1
//	FixedWindow          [first window end, last, count]         3
//	SlidingWindow        [newest bucket, n coarse counts]        n+1 ≤ 7
//	ApproxSlidingWindow  as SlidingWindow
//	SlidingLog           [newest time, 5 coarse counts]          6
//
// The all-zero summary is the summary of the empty state.
func SummaryWords(l sluice.Limit) int {
	switch l.Algorithm {
	case sluice.FixedWindow:
		return 3
	case sluice.SlidingWindow, sluice.ApproxSlidingWindow, sluice.SlidingLog:
		n, _ := coarse(l)
		return int(n) + 1
	}
	return 1
}

// SummaryGrain returns the grain of the first word of l's summaries: for
// a sliding log, the width in nanoseconds of the coarse buckets it counts
// units in; 1 for every other limit. A sliding log's summary whose newest
// time moves later within its grain, to at most the grain's last
// nanosecond, still charges no less (its units are charged no earlier,
// and the log's order does not depend on its newest time), so a store may
// keep newest/grain and charge newest as the grain's end.
func SummaryGrain(l sluice.Limit) int64 {
	if l.Algorithm != sluice.SlidingLog {
		return 1
	}
	_, w := coarse(l)
	return w
}

// Summarize writes to dst the summary of state s of key under l. dst must
// hold SummaryWords(l) words. A sliding log may hold any number of
// timestamps (its Rate when it was written).
func Summarize(l sluice.Limit, dst, s []int64, key string) {
	switch l.Algorithm {
	case sluice.FixedWindow:
		fixedSummarize(l, dst, s, key)
	case sluice.SlidingWindow, sluice.ApproxSlidingWindow:
		slidingSummarize(l, dst, s)
	case sluice.SlidingLog:
		logSummarize(l, dst, s)
	default:
		dst[0] = s[0]
	}
}

// Join folds summary src into dst, so that dst is at least as spent as
// both. Judged from time t on: a fixed window that ended by t counts as
// empty.
func Join(l sluice.Limit, dst, src []int64, t int64) {
	switch l.Algorithm {
	case sluice.FixedWindow:
		fixedJoin(l, dst, src, t)
	case sluice.SlidingWindow, sluice.ApproxSlidingWindow, sluice.SlidingLog:
		coarseJoin(l, dst, src)
	default:
		dst[0] = max(dst[0], src[0])
	}
}

// Meet narrows summary dst to what it and src both vouch for: if each is
// at least as spent as some summary E, so is the result.
func Meet(l sluice.Limit, dst, src []int64) {
	switch l.Algorithm {
	case sluice.FixedWindow:
		fixedMeet(dst, src)
	case sluice.SlidingWindow, sluice.ApproxSlidingWindow, sluice.SlidingLog:
		coarseMeet(l, dst, src)
	default:
		dst[0] = min(dst[0], src[0])
	}
}

// Charge writes to s, of Words(l) words, the state of key under l that
// summary sum stands for: at least as spent as the state of any actor
// whose summary sum is at least.
func Charge(l sluice.Limit, s, sum []int64, key string) {
	switch l.Algorithm {
	case sluice.FixedWindow:
		fixedCharge(l, s, sum, key)
	case sluice.SlidingWindow, sluice.ApproxSlidingWindow:
		slidingCharge(l, s, sum)
	case sluice.SlidingLog:
		logCharge(l, s, sum)
	default:
		s[0] = sum[0]
	}
}

// GCRA: the summary is the state, tat. A ≥ B iff tat_A ≥ tat_B: a larger
// tat admits less at every time (max(tat, now) + n·T - now ≤ B·T is
// monotone in tat), and a commit maps a larger tat to a larger one
// (max(tat, now) + n·T). Join is max, Meet is min, Charge the identity.

// Fixed window: the state [window index, count] counts in the key's own
// windows, which a Staggered limit offsets by key. (i, c) ≥ (i', c') iff
// i ≥ i' and c ≥ c': at a time in window n the count is c if n ≤ i, else
// 0, so each count bounds the other's; a commit makes (n, cost) if n > i,
// else (i, c+cost), which keeps the order. The summary is [lo, hi, count]:
// the absolute ends of the windows summarised, (index+1)·Period +
// Offset(l, key), lie in [lo, hi], and none counted more than count. It
// stands for each summarised state: Join keeps the larger count and an
// interval that holds both (less the ends a window that ended by t had:
// its count no longer applies), Meet the smaller count and the
// intersection (a key in both cells has its end in both). Charge gives
// key its own window whose end is the first at or after lo, if hi-lo <
// Period (the key's windows end a Period apart, so that is the one its
// summary held, if any: none if that end is past hi); else the window
// holding hi-1, which is no earlier than any window ending by hi.

func fixedSummarize(l sluice.Limit, dst, s []int64, key string) {
	if s[1] == 0 {
		clear(dst)
		return
	}
	end := (s[0]+1)*int64(l.Period) + Offset(l, key)
	dst[0], dst[1], dst[2] = end, end, s[1]
}

func fixedJoin(_ sluice.Limit, dst, src []int64, t int64) {
	switch {
	case src[2] == 0 || src[1] <= t:
	case dst[2] == 0 || dst[1] <= t:
		copy(dst, src)
	default:
		dst[0] = max(min(dst[0], src[0]), t+1)
		dst[1], dst[2] = max(dst[1], src[1]), max(dst[2], src[2])
	}
}

func fixedMeet(dst, src []int64) {
	lo, hi := max(dst[0], src[0]), min(dst[1], src[1])
	if src[2] == 0 || dst[2] == 0 || lo > hi {
		clear(dst)
		return
	}
	dst[0], dst[1], dst[2] = lo, hi, min(dst[2], src[2])
}

func fixedCharge(l sluice.Limit, s, sum []int64, key string) {
	s[0], s[1] = 0, 0
	if sum[2] == 0 {
		return
	}
	p, off := int64(l.Period), Offset(l, key)
	end := sum[1] // the window holding hi-1, if the interval is wide
	if sum[1]-sum[0] < p {
		r := (off - sum[0]) % p
		if r < 0 {
			r += p
		}
		end = sum[0] + r // the key's first window end at or after lo
		if end > sum[1] {
			return // the key was in none of the windows summarised
		}
	}
	s[0] = floorDiv(end-1-off, p)
	s[1] = sum[2]
}

// Sliding window counters and sliding logs keep more than a cell should
// hold (G+1 counters, Rate timestamps), so both are summarised coarsely:
// the summary [newest, counts] keeps the newest bucket index (of the
// counter) or time (of the log), and counts the units in coarse buckets
// aligned to the epoch, w wide (w buckets of the counter, w nanoseconds
// of the log), in a ring of n (see coarse) that reaches back a whole
// Period. Charge puts the units of coarse bucket j as late as they could
// have been, at min((j+1)·w-1, newest), which moves no unit earlier.
// Join keeps the newer newest and the larger count of each coarse bucket,
// Meet the older newest and the smaller count: with larger counts and a
// newer newest, no unit of the charged state lies earlier.
//
// The order on sliding window counters: A ≥ B iff A's newest bucket is
// no older than B's and, from every bucket k that A's window can still
// reach (k ≥ newest-G), A holds at least as many units in buckets k and
// newer as B (suffix sums). At a time in bucket c no older than A's
// newest, both count buckets c-G..c: the strict count is the suffix sum
// from c-G, the approximate one (1-w)·S(c-G+1) + w·S(c-G) with w in
// [0, 1], so A's dominates. A commit adds the cost to bucket max(c,
// newest), no older in A than in B, so every suffix sum grows at least as
// much in A. Moving units to later buckets only raises suffix sums.
//
// The order on sliding logs: A ≥ B iff for every x, A holds at least as
// many units later than x as B (capped at Rate, as the ring is). A take
// counts the units later than now-Period, so A admits less; a commit adds
// the cost at max(now, newest), and A's newest is no earlier than B's, so
// every count grows at least as much in A. Moving units later only raises
// these counts; units older than the ring reaches are older than
// newest-Period, so dead from newest on.

// coarse returns the ring size n and the width w of the coarse buckets of
// l's summary: for a sliding log w is in nanoseconds, and n-1 buckets
// span the Period; for a sliding window counter w is in its buckets, and
// n buckets hold every bucket of its ring (G+1 of them).
func coarse(l sluice.Limit) (n, w int64) {
	if l.Algorithm == sluice.SlidingLog {
		return summaryBuckets + 1, (int64(l.Period) + summaryBuckets - 1) / summaryBuckets
	}
	g := int64(l.BucketCount())
	w = (g + summaryBuckets - 1) / summaryBuckets
	return g/w + 2, w
}

// countAt returns the count of bucket i in the ring of s (slots 1..g+1)
// whose newest bucket is top: 0 outside [top-g, top].
func countAt(s []int64, top, g, i int64) int64 {
	if i > top || i < top-g {
		return 0
	}
	return s[slot(g, i)]
}

func slidingSummarize(l sluice.Limit, dst, s []int64) {
	clear(dst)
	g := int64(l.BucketCount())
	n, w := coarse(l)
	top := s[0]
	dst[0] = top
	for i := top - g; i <= top; i++ {
		if c := s[slot(g, i)]; c != 0 {
			dst[slot(n-1, floorDiv(i, w))] += c
		}
	}
}

func logSummarize(l sluice.Limit, dst, s []int64) {
	clear(dst)
	size := len(s) - 1 // the Rate it was written under
	newest := *logAt(s, size-1)
	if newest == 0 {
		return
	}
	n, w := coarse(l)
	top := floorDiv(newest, w)
	dst[0] = newest
	for k := size - 1; k >= 0; k-- {
		ts := *logAt(s, k)
		j := floorDiv(ts, w)
		if ts == 0 || j <= top-n {
			break // older units are older still
		}
		dst[slot(n-1, j)]++
	}
}

func coarseJoin(l sluice.Limit, dst, src []int64) {
	n, w := coarse(l)
	joinBuckets(dst, floorDiv(dst[0], w), src, floorDiv(src[0], w), n-1)
	dst[0] = max(dst[0], src[0])
}

func coarseMeet(l sluice.Limit, dst, src []int64) {
	n, w := coarse(l)
	meetBuckets(dst, floorDiv(dst[0], w), src, floorDiv(src[0], w), n-1)
	dst[0] = min(dst[0], src[0])
}

func slidingCharge(l sluice.Limit, s, sum []int64) {
	clear(s)
	g := int64(l.BucketCount())
	n, w := coarse(l)
	top := sum[0]
	s[0] = top
	for j := floorDiv(top, w) - n + 1; j <= floorDiv(top, w); j++ {
		if i := min((j+1)*w-1, top); i >= top-g {
			s[slot(g, i)] += sum[slot(n-1, j)]
		}
	}
}

func logCharge(l sluice.Limit, s, sum []int64) {
	clear(s)
	newest := sum[0]
	if newest == 0 {
		return
	}
	n, w := coarse(l)
	top := floorDiv(newest, w)
	// Fill the ring from its newest slot back (slot 0 is the oldest),
	// newest bucket first, keeping the newest Rate units.
	k := len(s) - 2
	for j := top; j > top-n && k >= 0; j-- {
		ts := min((j+1)*w-1, newest)
		for c := sum[slot(n-1, j)]; c > 0 && k >= 0; c-- {
			s[1+k] = ts
			k--
		}
	}
}

// joinBuckets sets the ring of dst (newest bucket dtop) to the larger
// count of each bucket of dst and src (newest stop), aligned to the newer
// of the two, and returns that newest bucket.
func joinBuckets(dst []int64, dtop int64, src []int64, stop, g int64) int64 {
	top := max(dtop, stop)
	for i := top - g; i <= top; i++ {
		// Each slot is read before it is written: i runs over g+1
		// consecutive buckets, one per slot.
		dst[slot(g, i)] = max(countAt(dst, dtop, g, i), countAt(src, stop, g, i))
	}
	return top
}

// meetBuckets sets the ring of dst to the smaller count of each bucket
// of dst and src, under the older of their newest buckets, and returns
// that bucket. A bucket only one of them still reaches (the other's ring
// moved past it) takes that one's count.
func meetBuckets(dst []int64, dtop int64, src []int64, stop, g int64) int64 {
	top := min(dtop, stop)
	for i := top - g; i <= top; i++ {
		// The summary whose newest bucket is top reaches every i here.
		c := int64(-1)
		if i >= dtop-g {
			c = countAt(dst, dtop, g, i)
		}
		if v := countAt(src, stop, g, i); i >= stop-g && (c < 0 || v < c) {
			c = v
		}
		dst[slot(g, i)] = c
	}
	return top
}
