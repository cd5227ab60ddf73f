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
// same state, or for a sliding log, units moved later). So the state the
// actor is charged with on its return is ≥ H ≥ E, and the induction goes
// on. The charge errs towards denial only: an actor is charged with the
// most spent state of the actors that share its cells.
//
// The order holds for requests at or after the newest time summarised,
// and a fixed window that ended before the time Join is given counts as
// empty: a request whose time went back before them (other actors' later
// requests reached the store first) is judged as at that newest time, as
// package algorithm treats a time that went back, and may see a window
// that ended before then as empty, as it would see a state a store
// dropped once idle.

// logSummaryBuckets is the number of buckets a sliding log's summary
// counts its units in: a unit is moved at most Period/16 later.
const logSummaryBuckets = 16

// SummaryWords returns the number of int64 words of a summary of l's
// states. It depends only on l's StateID: the summaries of every Rate and
// Burst of one kind of limit can be joined.
//
//	GCRA                 [tat]                                1
//	FixedWindow          [window end, count]                  2
//	SlidingWindow        as the state: [newest bucket, c0..cG]  G+2
//	ApproxSlidingWindow  as SlidingWindow
//	SlidingLog           [newest time, c0..c16]               18
//
// The all-zero summary is the summary of the empty state.
func SummaryWords(l sluice.Limit) int {
	switch l.Algorithm {
	case sluice.FixedWindow:
		return 2
	case sluice.SlidingWindow, sluice.ApproxSlidingWindow:
		return l.BucketCount() + 2
	case sluice.SlidingLog:
		return logSummaryBuckets + 2
	}
	return 1
}

// Summarize writes to dst the summary of state s of key under l. dst must
// hold SummaryWords(l) words. A sliding log may hold any number of
// timestamps (its Rate when it was written).
func Summarize(l sluice.Limit, dst, s []int64, key string) {
	switch l.Algorithm {
	case sluice.FixedWindow:
		fixedSummarize(l, dst, s, key)
	case sluice.SlidingLog:
		logSummarize(l, dst, s)
	default:
		copy(dst, s)
	}
}

// Join folds summary src into dst, so that dst is at least as spent as
// both. Judged from time t on: a fixed window that ended by t counts as
// empty.
func Join(l sluice.Limit, dst, src []int64, t int64) {
	switch l.Algorithm {
	case sluice.FixedWindow:
		fixedJoin(l, dst, src, t)
	case sluice.SlidingWindow, sluice.ApproxSlidingWindow:
		dst[0] = joinBuckets(dst, dst[0], src, src[0], int64(l.BucketCount()))
	case sluice.SlidingLog:
		logJoin(l, dst, src)
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
	case sluice.SlidingWindow, sluice.ApproxSlidingWindow:
		dst[0] = meetBuckets(dst, dst[0], src, src[0], int64(l.BucketCount()))
	case sluice.SlidingLog:
		logMeet(l, dst, src)
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
	case sluice.SlidingLog:
		logCharge(l, s, sum)
	default:
		copy(s, sum)
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
// else (i, c+cost), which keeps the order. The summary holds the absolute
// end of the window, (index+1)·Period + Offset(l, key), and the count.
// Charge gives key its own window that holds end-1, which is no earlier
// than the window of any summary with an end no later: so a summary with
// a later end and a larger count charges a more spent state. Join drops a
// window that ended by t (its count no longer applies) and keeps the
// later end and the larger count; Meet, the earlier end and smaller count.

func fixedSummarize(l sluice.Limit, dst, s []int64, key string) {
	if s[1] == 0 {
		dst[0], dst[1] = 0, 0
		return
	}
	dst[0] = (s[0]+1)*int64(l.Period) + Offset(l, key)
	dst[1] = s[1]
}

func fixedJoin(_ sluice.Limit, dst, src []int64, t int64) {
	switch {
	case src[1] == 0 || src[0] <= t:
	case dst[1] == 0 || dst[0] <= t:
		dst[0], dst[1] = src[0], src[1]
	default:
		dst[0], dst[1] = max(dst[0], src[0]), max(dst[1], src[1])
	}
}

func fixedMeet(dst, src []int64) {
	if src[1] == 0 || dst[1] == 0 {
		dst[0], dst[1] = 0, 0
		return
	}
	dst[0], dst[1] = min(dst[0], src[0]), min(dst[1], src[1])
}

func fixedCharge(l sluice.Limit, s, sum []int64, key string) {
	if sum[1] == 0 {
		s[0], s[1] = 0, 0
		return
	}
	s[0] = floorDiv(sum[0]-1-Offset(l, key), int64(l.Period))
	s[1] = sum[1]
}

// Sliding window counters: buckets are aligned to the epoch, so the state
// is its own summary. A ≥ B iff A's newest bucket is no older than B's
// and, from every bucket k that A's window can still reach (k ≥
// newest-G), A holds at least as many units in buckets k and newer as B
// (suffix sums). At a time in bucket c no older than A's newest, both
// count buckets c-G..c: the strict count is the suffix sum from c-G, the
// approximate one (1-w)·S(c-G+1) + w·S(c-G) with w in [0, 1], so A's
// dominates. A commit adds the cost to bucket max(c, newest), no older in
// A than in B, so every suffix sum grows at least as much in A. Join
// aligns both rings to the newer bucket and keeps the larger count of
// each bucket; Meet keeps the smaller count of each bucket under the
// older newest bucket. Both compare bucket by bucket, which implies the
// order on suffix sums.

// countAt returns the count of bucket i in the ring of s (slots 1..g+1)
// whose newest bucket is top: 0 outside [top-g, top].
func countAt(s []int64, top, g, i int64) int64 {
	if i > top || i < top-g {
		return 0
	}
	return s[slot(g, i)]
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

// Sliding log: the state holds the newest Rate units' times, too many for
// a cell. The summary counts the units in logSummaryBuckets+1 buckets of
// width w = ⌈Period/16⌉ aligned to the epoch, the newest being that of
// the newest time n, and keeps n. Charge rebuilds a log whose units of
// bucket k lie at min((k+1)·w-1, n), as late as they could have been,
// keeping the newest Rate; units older than the oldest bucket are older
// than n-Period, so dead from n on. A ≥ B iff for every x, A holds at
// least as many units later than x as B (capped at Rate, as the ring is).
// A take counts the units later than now-Period, so A admits less; a
// commit adds the cost at max(now, newest), and A's newest is no earlier
// than B's, so every count grows at least as much in A. Moving units later
// keeps these counts or raises them, so the rebuilt log is ≥ the log
// summarised. Join keeps the later n and the larger count of each bucket,
// Meet the earlier n and the smaller count: with larger counts and a later
// n, every unit of the rebuilt log lies no earlier.

func logWidth(l sluice.Limit) int64 {
	return (int64(l.Period) + logSummaryBuckets - 1) / logSummaryBuckets
}

func logSummarize(l sluice.Limit, dst, s []int64) {
	clear(dst)
	n := len(s) - 1
	newest := *logAt(s, n-1)
	if newest == 0 {
		return
	}
	g, w := int64(logSummaryBuckets), logWidth(l)
	top := floorDiv(newest, w)
	dst[0] = newest
	for k := n - 1; k >= 0; k-- {
		ts := *logAt(s, k)
		i := floorDiv(ts, w)
		if ts == 0 || i < top-g {
			break // older units are older still
		}
		dst[slot(g, i)]++
	}
}

func logJoin(l sluice.Limit, dst, src []int64) {
	if src[0] == 0 {
		return
	}
	if dst[0] == 0 {
		copy(dst, src)
		return
	}
	g, w := int64(logSummaryBuckets), logWidth(l)
	joinBuckets(dst, floorDiv(dst[0], w), src, floorDiv(src[0], w), g)
	dst[0] = max(dst[0], src[0])
}

func logMeet(l sluice.Limit, dst, src []int64) {
	if src[0] == 0 || dst[0] == 0 {
		clear(dst)
		return
	}
	g, w := int64(logSummaryBuckets), logWidth(l)
	meetBuckets(dst, floorDiv(dst[0], w), src, floorDiv(src[0], w), g)
	dst[0] = min(dst[0], src[0])
}

func logCharge(l sluice.Limit, s, sum []int64) {
	clear(s)
	newest := sum[0]
	if newest == 0 {
		return
	}
	g, w := int64(logSummaryBuckets), logWidth(l)
	top := floorDiv(newest, w)
	// Fill the ring from its newest slot back (slot 0 is the oldest),
	// newest bucket first.
	k := len(s) - 2
	for i := top; i >= top-g && k >= 0; i-- {
		ts := min((i+1)*w-1, newest)
		for c := sum[slot(g, i)]; c > 0 && k >= 0; c-- {
			s[1+k] = ts
			k--
		}
	}
}
