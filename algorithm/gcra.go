package algorithm

import "github.com/sluicehq/sluice"

// GCRA decides a take of cost at now under the generic cell rate
// algorithm: it writes the decision to every field of d but Time, and
// returns the new theoretical arrival time (tat); when denied, the tat it
// was given. The limit and the decision are passed by pointer because
// this is the hottest path of every store, and copying them costs more
// than the arithmetic.
//
// Semantics: a token bucket holding at most B = l.MaxBurst() tokens that
// refills one token every T = l.Interval(), kept as the single time tat at
// which the bucket will be full again. A take of n is allowed iff
// max(tat, now) + n·T - now ≤ B·T. Over any interval of length d it admits
// at most B + d/T events; it never over-admits against that bound, also
// when now goes backwards (max keeps the later tat). Memory: 8 bytes.
func GCRA(l *sluice.Limit, tat, now int64, cost int, d *sluice.Decision) int64 {
	t := int64(l.Interval())
	return GCRAAt(l, t, t*int64(l.MaxBurst()), tat, now, cost, d)
}

// GCRAAt is GCRA given l's interval t (l.Interval()) and tolerance tau
// (t·l.MaxBurst()), for a caller that decides many requests under l and
// keeps them: it spares each decision a division.
func GCRAAt(l *sluice.Limit, t, tau, tat, now int64, cost int, d *sluice.Decision) int64 {
	base := max(tat, now)
	next := base + int64(cost)*t
	d.Limit = *l
	if next-now <= tau {
		d.Allowed = true
		d.Remaining = int((now + tau - next) / t)
		d.ResetAfter = dur(next - now)
		d.RetryAfter = 0
		return next
	}
	d.Allowed = false
	d.Remaining = int(max(now+tau-base, 0) / t)
	d.ResetAfter = dur(base - now)
	// At next-tau, max(tat, t')+n·T-t' = tau exactly: the earliest instant
	// the take fits.
	d.RetryAfter = dur(next - tau - now)
	return tat
}

// gcraRefund moves tat back by cost·T, but not before now: a bucket can
// hold no more than B tokens, and tat ≤ now already means full.
func gcraRefund(l sluice.Limit, tat, now int64, cost int) int64 {
	if tat <= now {
		return tat
	}
	return max(tat-int64(cost)*int64(l.Interval()), now)
}
