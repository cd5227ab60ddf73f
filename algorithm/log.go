package algorithm

import "github.com/sluicehq/sluice"

// Sliding log: state [next slot, t0..tN-1], a ring of N = Rate timestamps
// of admitted units, non-decreasing from the next slot (the oldest) round
// to the slot before it (the newest); 0 marks an empty slot. A unit taken
// at t is recorded at max(t, newest), so a clock stepped back records the
// later time and the log stays sorted.
//
// Semantics: a take of n at t is allowed iff the recorded units with time
// in (t-Period, t] (or later) number at most Rate-n. Exact: never more than
// Rate units in any window of length Period, never fewer than the exact
// sliding window would admit. Memory: 8·(Rate+1) bytes.

// logAt returns the k-th oldest slot's timestamp.
func logAt(s []int64, k int) *int64 {
	n := len(s) - 1
	return &s[1+(int(s[0])+k)%n]
}

// logFirstLive returns the ring position (0 = oldest) of the oldest unit
// still inside the window ending at now.
func logFirstLive(l *sluice.Limit, s []int64, now int64) int {
	n := len(s) - 1
	since := now - int64(l.Period)
	lo, hi := 0, n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if ts := *logAt(s, mid); ts != 0 && ts > since {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// logCheck is check for a sliding log.
func logCheck(l *sluice.Limit, s []int64, now int64, cost int, d *sluice.Decision) {
	n := l.Rate
	first := logFirstLive(l, s, now)
	live := n - first
	newest := *logAt(s, n-1)
	d.Limit = *l
	if live+cost <= n {
		d.Allowed, d.RetryAfter = true, 0
		d.Remaining = n - live - cost
		d.ResetAfter = dur(max(now, newest) + int64(l.Period) - now)
		return
	}
	d.Allowed = false
	d.Remaining = n - live
	d.ResetAfter = dur(newest + int64(l.Period) - now)
	// The take fits once the (live+cost-n) oldest live units expire.
	expire := *logAt(s, first+live+cost-n-1)
	d.RetryAfter = dur(expire + int64(l.Period) - now)
}

func logCommit(l *sluice.Limit, s []int64, now int64, cost int) {
	n := l.Rate
	ts := max(now, *logAt(s, n-1))
	for k := range cost {
		*logAt(s, k) = ts
	}
	s[0] = int64((int(s[0]) + cost) % n)
}

// logRefund removes up to cost units recorded at or after at, the oldest
// first, and closes the gap by moving the older units up.
func logRefund(l sluice.Limit, s []int64, at int64, cost int) {
	n := l.Rate
	k := 0
	for k < n && (*logAt(s, k) == 0 || *logAt(s, k) < at) {
		k++
	}
	m := min(cost, n-k)
	for i := k + m - 1; i >= m; i-- {
		*logAt(s, i) = *logAt(s, i-m)
	}
	for i := range m {
		*logAt(s, i) = 0
	}
}
