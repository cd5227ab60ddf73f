package algorithm

import (
	"time"

	"github.com/sluicehq/sluice"
)

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
	d.Limit = *l
	if next := GCRAAt(t, t*int64(l.MaxBurst()), tat, now, cost, d); d.Allowed {
		return next
	}
	return tat
}

// GCRAAt is GCRA given its limit's interval t (Limit.Interval) and
// tolerance tau (t·Limit.MaxBurst), for a caller that decides many
// requests under one limit and keeps both: it spares each decision a
// division. It writes Allowed, Remaining, ResetAfter and RetryAfter, not
// Limit or Time, and returns the tat an allowed take leaves, which the
// caller keeps only if d.Allowed. cost must be between 1 and the limit's
// MaxBurst.
//
// It is small enough for the compiler to inline, and it divides only when
// a whole unit remains: a caller deciding a key whose tat is still on its
// way from memory (a million keys, most of them out of every cache) does
// not also wait for a call and a division that depend on it. That, and
// the memory store's bound setting the Limit and Time before its lock,
// cut 14% of a denied decision on a million random keys
// (BenchmarkMemory/keys=1M/traffic=deny, docs/benchmarks.md).
func GCRAAt(t, tau, tat, now int64, cost int, d *sluice.Decision) int64 {
	base := max(tat, now)
	next := base + int64(cost)*t
	reset, retry := next-now, int64(0) // both ≥ 0: base ≥ now, cost ≥ 1
	if reset > tau {
		// Denied. At next-tau, max(tat, t')+n·T-t' = tau exactly: the
		// earliest instant the take fits.
		reset, retry = base-now, reset-tau
	}
	left := tau - reset // now+tau-next if allowed, now+tau-base if not
	if left >= t {
		left /= t
	} else {
		left = 0 // none (a denied take of 1 always)
	}
	d.Allowed = retry == 0
	d.Remaining = int(left)
	d.ResetAfter = time.Duration(reset)
	d.RetryAfter = time.Duration(retry)
	return next
}

// GCRATake decides a take of cost at now by GCRA with no decision to
// build (GCRAAt's divides, for what remains): the emission interval t
// and tolerance tau as GCRAAt takes them, and the key's tat. It reports
// whether the take is allowed, and the tat it leaves if so.
func GCRATake(t, tau, tat, now int64, cost int) (next int64, allowed bool) {
	next = max(tat, now) + int64(cost)*t
	return next, next-now <= tau
}

// gcraCommit returns the tat a take of cost at now leaves: GCRATake's,
// tat as it was if GCRA denies the take.
func gcraCommit(l *sluice.Limit, tat, now int64, cost int) int64 {
	t := int64(l.Interval())
	if next, ok := GCRATake(t, t*int64(l.MaxBurst()), tat, now, cost); ok {
		return next
	}
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
