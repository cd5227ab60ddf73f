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

// slidingView is what the counters say at time t: the bucket c that t
// counts as, the sum of the fully counted buckets, and the oldest,
// partly covered bucket's count.
func slidingView(l sluice.Limit, s []int64, t int64) (c, full, old int64) {
	g := int64(l.BucketCount())
	b := bucketWidth(l)
	newest := s[0]
	c = max(floorDiv(t, b), newest)
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

func bucketWidth(l sluice.Limit) int64 {
	g := int64(l.BucketCount())
	return (int64(l.Period) + g - 1) / g
}

func slot(g, i int64) int {
	m := i % (g + 1)
	if m < 0 {
		m += g + 1
	}
	return 1 + int(m)
}

// slidingCount is the number of events the window (t-Period, t] holds by
// the limit's mode, given slidingView's answer.
func slidingCount(l sluice.Limit, c, full, old, t int64) float64 {
	if l.Algorithm == sluice.SlidingWindow || old == 0 {
		return float64(full + old)
	}
	b := bucketWidth(l)
	overlap := min(max((c-int64(l.BucketCount())+1)*b-(t-int64(l.Period)), 0), b)
	return float64(full) + float64(old)*float64(overlap)/float64(b)
}

func slidingCheck(l sluice.Limit, s []int64, now int64, cost int) sluice.Decision {
	c, full, old := slidingView(l, s, now)
	count := slidingCount(l, c, full, old, now)
	rate, n := float64(l.Rate), float64(cost)
	d := sluice.Decision{Limit: l}
	if count+n <= rate {
		d.Allowed = true
		d.ResetAfter = dur(slidingResetAfter(l, s, now, true))
		d.Remaining = int(math.Floor(rate - count - n))
		return d
	}
	d.Remaining = int(max(math.Floor(rate-count), 0))
	d.ResetAfter = dur(slidingResetAfter(l, s, now, false))
	d.RetryAfter = dur(slidingRetryAt(l, s, now, cost) - now)
	return d
}

// slidingResetAfter is how long until the newest non-empty bucket (after
// a take, the current one) leaves the window.
func slidingResetAfter(l sluice.Limit, s []int64, now int64, taken bool) int64 {
	g, b := int64(l.BucketCount()), bucketWidth(l)
	c, _, _ := slidingView(l, s, now)
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
	return (newest+g+1)*b - now
}

// slidingRetryAt returns the earliest time from now at which a take of
// cost fits, if nothing else is taken meanwhile. The count only falls as
// time passes, so it walks forward bucket by bucket, keeping full and old
// up to date in O(1) per step, and within the first bucket where the take
// can fit, finds the instant by bisection on the same count Check uses.
func slidingRetryAt(l sluice.Limit, s []int64, now int64, cost int) int64 {
	g, b := int64(l.BucketCount()), bucketWidth(l)
	rate := float64(l.Rate)
	newest := s[0]
	cnt := func(i int64) int64 {
		if i < newest-g || i > newest {
			return 0
		}
		return s[slot(g, i)]
	}
	fits := func(c, full, old, t int64) bool {
		return slidingCount(l, c, full, old, t)+float64(cost) <= rate
	}
	c, full, old := slidingView(l, s, now)
	for t := now; ; {
		end := (c + 1) * b // first instant of the next bucket
		if fits(c, full, old, end-1) {
			if l.Algorithm == sluice.SlidingWindow || old == 0 {
				return t // the count is the same at every instant of the bucket (see slidingCount): no search
			}
			lo, hi := t, end-1 // fits(hi); find the least t that fits
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

func slidingCommit(l sluice.Limit, s []int64, now int64, cost int) {
	g := int64(l.BucketCount())
	cur := floorDiv(now, bucketWidth(l))
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
	g := int64(l.BucketCount())
	left := int64(cost)
	for i := max(floorDiv(at, bucketWidth(l)), s[0]-g); i <= s[0] && left > 0; i++ {
		k := slot(g, i)
		n := min(s[k], left)
		s[k] -= n
		left -= n
	}
}
