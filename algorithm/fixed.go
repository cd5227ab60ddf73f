package algorithm

import "github.com/sluicehq/sluice"

// Fixed window: state [window index, count]. The window of time t is
// ⌊t/Period⌋; a take of n is allowed iff count + n ≤ Rate in the current
// window. A window that is not the newest seen (now went backwards) counts
// as the newest, so stepping the clock back never reopens an old window.
//
// Semantics and error bound: at most Rate per aligned window, but up to
// 2·Rate in a window of length Period that straddles a boundary (Rate at
// the end of one window, Rate at the start of the next). Memory: 16 bytes.

// fixedCheck is check for a fixed window.
func fixedCheck(l *sluice.Limit, s []int64, now int64, cost int, d *sluice.Decision) {
	w := int64(l.Period)
	idx, count := floorDiv(now, w), s[1]
	if idx > s[0] {
		count = 0
	} else {
		idx = s[0]
	}
	rate, n := int64(l.Rate), int64(cost)
	end := (idx + 1) * w
	d.Limit, d.ResetAfter = *l, dur(end-now)
	if count+n <= rate {
		d.Allowed, d.Remaining, d.RetryAfter = true, int(rate-count-n), 0
		return
	}
	d.Allowed, d.Remaining, d.RetryAfter = false, int(max(rate-count, 0)), dur(end-now)
}

func fixedCommit(l *sluice.Limit, s []int64, now int64, cost int) {
	if idx := floorDiv(now, int64(l.Period)); idx > s[0] {
		s[0], s[1] = idx, 0
	}
	s[1] += int64(cost)
}

// fixedRefund gives back only within the window the take was counted in:
// a take seen at an older time may have been counted in an older window.
func fixedRefund(l sluice.Limit, s []int64, at int64, cost int) {
	if floorDiv(at, int64(l.Period)) == s[0] {
		s[1] = max(s[1]-int64(cost), 0)
	}
}
