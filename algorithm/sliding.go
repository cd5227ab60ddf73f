package algorithm

import (
	"math"

	"github.com/sluicehq/sluice"
)

// Sliding window counter: state [newest bucket index, c0..cG], a ring of
// G+1 counters of width b = ⌈Period/G⌉, G = l.BucketCount(). Bucket i
// counts the events taken in [i·b, (i+1)·b) and lives in ring slot
// i mod (G+1). At time t in bucket c, the window (t-Period, t] covers
// buckets c-G+1..c fully and bucket c-G (the oldest) in part.
//
// SlidingWindow (strict) counts the oldest bucket in full: the counted
// span is at least the window, so it never admits more than Rate in any
// window of length Period, and may under-admit by up to the events of one
// bucket (it forgets an event between Period and Period+b after it).
//
// ApproxSlidingWindow weights the oldest bucket by the fraction of it
// still inside the window, assuming its events were spread evenly. In a
// window of length Period it admits at most Rate plus the count of one
// bucket: about Rate·(1+1/G) when traffic is spread, and less than 2·Rate
// in the worst case, when a whole Rate sat at the end of one bucket.
//
// A now in a bucket older than the newest seen counts as the newest
// bucket, so stepping the clock back never forgets events. Memory:
// 8·(G+2) bytes.

// A win is what a sliding window's decision needs of its limit, found
// once a decision: its G buckets of width b, its period and rate, and
// whether it counts its oldest bucket in full (strict). Each count of a
// bisection found them anew, a division among them, and a denied hot key
// took twice as long.
type win struct {
	g, b, period int64
	rate         float64
	strict       bool
}

func winOf(l *sluice.Limit) win {
	g := int64(l.BucketCount())
	return win{g: g, b: (int64(l.Period) + g - 1) / g, period: int64(l.Period), rate: float64(l.Rate), strict: l.Algorithm == sluice.SlidingWindow}
}

// view is what the counters say at time t: the bucket c that t counts
// as, the sum of the fully counted buckets, and the oldest, partly
// covered bucket's count.
func (w win) view(s []int64, t int64) (c, full, old int64) {
	g := w.g
	newest := s[0]
	c = max(floorDiv(t, w.b), newest)
	from := max(c-g, newest-g)
	k := slot(g, from) // bucket i's slot, stepped with i: one division, not one a bucket
	for i := from; i <= newest; i++ {
		if i == c-g {
			old = s[k]
		} else {
			full += s[k]
		}
		if k++; k > int(g)+1 {
			k = 1
		}
	}
	return c, full, old
}

func slot(g, i int64) int {
	m := i % (g + 1)
	if m < 0 {
		m += g + 1
	}
	return 1 + int(m)
}

// count is the number of events the window (t-Period, t] holds by the
// limit's mode, given view's answer.
func (w win) count(c, full, old, t int64) float64 {
	if w.strict || old == 0 {
		return float64(full + old)
	}
	overlap := min(max((c-w.g+1)*w.b-(t-w.period), 0), w.b)
	return float64(full) + float64(old)*float64(overlap)/float64(w.b)
}

// slidingCheck is check for a sliding window, exact or approximate.
func slidingCheck(l *sluice.Limit, s []int64, now int64, cost int, d *sluice.Decision) {
	w := winOf(l)
	c, full, old := w.view(s, now)
	count := w.count(c, full, old, now)
	n := float64(cost)
	d.Limit = *l
	if count+n <= w.rate {
		d.Allowed, d.RetryAfter = true, 0
		d.ResetAfter = dur(w.resetAfter(s, c, now, true))
		d.Remaining = int(math.Floor(w.rate - count - n))
		return
	}
	d.Allowed = false
	d.Remaining = int(max(math.Floor(w.rate-count), 0))
	d.ResetAfter = dur(w.resetAfter(s, c, now, false))
	d.RetryAfter = dur(w.retryAt(s, now, cost, c, full, old) - now)
}

// resetAfter is how long from now, in bucket c, until the newest
// non-empty bucket (after a take, the current one) leaves the window.
func (w win) resetAfter(s []int64, c, now int64, taken bool) int64 {
	g := w.g
	newest := int64(math.MinInt64)
	if taken {
		newest = c
	} else {
		k := slot(g, s[0])
		for i := s[0]; i >= max(s[0]-g, c-g); i-- {
			if s[k] != 0 {
				newest = i
				break
			}
			if k--; k < 1 {
				k = int(g) + 1
			}
		}
	}
	if newest == math.MinInt64 {
		return 0
	}
	return (newest+g+1)*w.b - now
}

// retryAt returns the earliest time from now, in bucket c whose view is
// full and old, at which a take of cost fits, if nothing else is taken
// meanwhile. The count only falls as time passes, so it walks forward
// bucket by bucket, keeping full and old up to date in O(1) per step,
// and within the first bucket where the take can fit, finds the instant
// by bisection on the same count Check uses, around where the count's
// line meets the rate (see meets): a bisection of the whole bucket took
// 20 to 40 counts, and a hot key denied 750 ns.
func (w win) retryAt(s []int64, now int64, cost int, c, full, old int64) int64 {
	g, b := w.g, w.b
	newest := s[0]
	cnt := func(i int64) int64 {
		if i < newest-g || i > newest {
			return 0
		}
		return s[slot(g, i)]
	}
	fits := func(c, full, old, t int64) bool {
		return w.count(c, full, old, t)+float64(cost) <= w.rate
	}
	for t := now; ; {
		end := (c + 1) * b // first instant of the next bucket
		if fits(c, full, old, end-1) {
			if w.strict || old == 0 {
				return t // the count is the same at every instant of the bucket (see count): no search
			}
			lo, hi := t, end-1 // fits(hi); find the least t that fits
			// Within a few ns of where the count meets the rate (or at
			// lo, when it met it before), unless float rounding put the
			// meeting further off: then the bisection spans what is left.
			m := w.meets(c, full, old, cost)
			if a := min(max(m-2, lo), hi); !fits(c, full, old, a) {
				lo = a + 1
			}
			if z := min(max(m+2, lo), hi); fits(c, full, old, z) {
				hi = z
			}
			for lo < hi {
				mid := lo + (hi-lo)/2
				if fits(c, full, old, mid) {
					hi = mid
				} else {
					lo = mid + 1
				}
			}
			return lo
		}
		c, t = c+1, end
		old = cnt(c - g)
		full -= old
	}
}

// meets returns about when, within bucket c, an approximate window's
// count of full and old (see count) falls to where a take of cost fits:
// the count falls by old/b a nanosecond as the oldest bucket's overlap
// with the window shrinks, so the overlap may be at most
// (Rate-cost-full)·b/old.
func (w win) meets(c, full, old int64, cost int) int64 {
	over := (w.rate - float64(cost) - float64(full)) * float64(w.b) / float64(old)
	over = min(max(math.Floor(over), 0), float64(w.b))
	return (c-w.g+1)*w.b + w.period - int64(over)
}

func slidingCommit(l *sluice.Limit, s []int64, now int64, cost int) {
	w := winOf(l)
	g, cur := w.g, floorDiv(now, w.b)
	if cur > s[0] {
		if cur-s[0] > g {
			clear(s[1:])
		} else {
			for i := s[0] + 1; i <= cur; i++ {
				s[slot(g, i)] = 0
			}
		}
		s[0] = cur
	}
	s[slot(g, s[0])] += int64(cost)
}

// slidingRefund removes cost from the oldest retained buckets no older
// than at's bucket: the take was counted there or, if the clock had gone
// back, in a newer bucket.
func slidingRefund(l sluice.Limit, s []int64, at int64, cost int) {
	w := winOf(&l)
	g, left := w.g, int64(cost)
	for i := max(floorDiv(at, w.b), s[0]-g); i <= s[0] && left > 0; i++ {
		k := slot(g, i)
		n := min(s[k], left)
		s[k] -= n
		left -= n
	}
}
