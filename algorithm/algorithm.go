// Package algorithm holds the rate-limiting algorithms of sluice as pure
// functions: state, time and cost in; decision (and, for a take, new state)
// out. They read no clock and do no I/O, so every store applies exactly the
// same semantics, and the Redis Lua scripts are checked against them.
//
// # State
//
// Every algorithm keeps its per-key state in a slice of Words(l) int64
// words, and the all-zero state is the empty state (a fresh actor). Times
// are Unix nanoseconds. The layouts are:
//
//	GCRA                 [tat]                          8 bytes
//	FixedWindow          [window index, count]          16 bytes
//	SlidingWindow        [newest bucket index, c0..cG]  8·(G+2) bytes
//	ApproxSlidingWindow  same as SlidingWindow
//	SlidingLog           [next slot, t0..tN-1]          8·(N+1) bytes
//
// # Time going backwards
//
// A now earlier than the time a state was last written (clocks stepped
// back, goroutines that read the clock and were scheduled late, servers
// with skewed clocks) never admits more than the same requests would have
// been admitted at the later time: each algorithm treats it as the latest
// time it has seen, or counts the future events as present.
//
// # Staggered fixed windows
//
// A Staggered FixedWindow starts its windows at Offset(l, key) past the
// epoch. Callers pass now - Offset(l, key) (and at - Offset(l, key)) as the
// time; Take and Decide do this when given the key.
//
// # Summaries of forgotten states
//
// A store with bounded memory that must forget a state before it is back
// to empty keeps a summary of it instead ([Summarize]), a form that does
// not depend on the key, folded with other actors' ([Join]) into a few
// shared cells; when the actor returns, it is charged from the meet of
// its cells ([Meet], [Charge]) with a state at least as spent as the one
// forgotten, so forgetting never hands back allowance. The argument, per
// algorithm, is in summary.go.
package algorithm

import (
	"time"

	"github.com/sluicehq/sluice"
)

// Words returns the number of int64 words of state l keeps per key.
func Words(l sluice.Limit) int {
	switch l.Algorithm {
	case sluice.FixedWindow:
		return 2
	case sluice.SlidingWindow, sluice.ApproxSlidingWindow:
		return l.BucketCount() + 2
	case sluice.SlidingLog:
		return l.Rate + 1
	}
	return 1
}

// Check returns the decision a take of cost at now would get, without
// changing s. Its Remaining is what would be left after the take; when
// denied, what is left now. Decision.Time is left for the store to set.
//
// s must hold Words(l) words; l must be valid and cost must be between 1
// and l.MaxBurst() (see sluice.Request.Validate).
func Check(l sluice.Limit, s []int64, now int64, cost int) sluice.Decision {
	var d sluice.Decision
	check(&l, s, now, cost, &d)
	return d
}

// check is Check, in place: it writes the decision's Limit, Allowed,
// Remaining, ResetAfter and RetryAfter to d, and nothing else. (Built
// and returned by value by each algorithm, then by Check, a Decision was
// zeroed and copied three times: a hot key's fixed window took 115 ns of
// CPU through the memory store's Bound, 91 in place; a GCRA and sliding
// window policy 244 and 209.)
func check(l *sluice.Limit, s []int64, now int64, cost int, d *sluice.Decision) {
	switch l.Algorithm {
	case sluice.FixedWindow:
		fixedCheck(l, s, now, cost, d)
	case sluice.SlidingWindow, sluice.ApproxSlidingWindow:
		slidingCheck(l, s, now, cost, d)
	case sluice.SlidingLog:
		logCheck(l, s, now, cost, d)
	default:
		GCRA(l, s[0], now, cost, d)
	}
}

// Commit consumes cost at now: it applies a take that Check allowed.
func Commit(l sluice.Limit, s []int64, now int64, cost int) { commit(&l, s, now, cost) }

// commit is Commit, of the limit l points to.
func commit(l *sluice.Limit, s []int64, now int64, cost int) {
	switch l.Algorithm {
	case sluice.FixedWindow:
		fixedCommit(l, s, now, cost)
	case sluice.SlidingWindow, sluice.ApproxSlidingWindow:
		slidingCommit(l, s, now, cost)
	case sluice.SlidingLog:
		logCommit(l, s, now, cost)
	default:
		s[0] = gcraCommit(l, s[0], now, cost)
	}
}

// Take is Check followed, when allowed, by Commit.
func Take(l sluice.Limit, s []int64, now int64, cost int) sluice.Decision {
	d := Check(l, s, now, cost)
	if d.Allowed {
		Commit(l, s, now, cost)
	}
	return d
}

// Refund gives back cost that a take allowed at time at consumed, seen at
// now. Counts that have expired since are not given back, and the state
// never ends up more lenient than if the take had not happened: where the
// exact units taken cannot be told apart from later ones, the oldest units
// no older than at are removed, which leaves the newer ones counting.
func Refund(l sluice.Limit, s []int64, at, now int64, cost int) {
	switch l.Algorithm {
	case sluice.FixedWindow:
		fixedRefund(l, s, at, cost)
	case sluice.SlidingWindow, sluice.ApproxSlidingWindow:
		slidingRefund(l, s, at, cost)
	case sluice.SlidingLog:
		logRefund(l, s, at, cost)
	default:
		s[0] = gcraRefund(l, s[0], now, cost)
	}
}

// Insert counts cost at now whether or not it fits (see sluice.OpInsert):
// a penalty for cost > 0, a reward of -cost for cost < 0. A penalty adds
// to the counts of the windows, which end on their own; under GCRA it
// moves tat on by cost·T, but never past now + 2τ - T (τ = B·T), so that
// the wait for the next unit stays at most τ, the time the bucket takes
// to refill from empty. A reward removes up to -cost units that still
// count at now, the oldest first (Refund from the start of the window:
// the least lenient choice), or moves tat back, never before now.
func Insert(l sluice.Limit, s []int64, now int64, cost int) {
	if cost < 0 {
		Refund(l, s, rewardFrom(l, now), now, -cost)
		return
	}
	if l.Algorithm != sluice.GCRA {
		Commit(l, s, now, cost)
		return
	}
	t := int64(l.Interval())
	tau := t * int64(l.MaxBurst())
	s[0] = min(max(s[0], now)+int64(cost)*t, max(s[0], now+2*tau-t))
}

// rewardFrom is the time from which a reward at now takes units back: the
// oldest that still count.
func rewardFrom(l sluice.Limit, now int64) int64 {
	if l.Algorithm == sluice.FixedWindow {
		return now
	}
	return now - int64(l.Period) + 1
}

// InsertAll inserts cost at now under every limit (see Insert).
// Staggered fixed windows are offset by key.
func InsertAll(limits []sluice.Limit, states [][]int64, key string, now int64, cost int) {
	for i, l := range limits {
		Insert(l, states[i], now-Offset(l, key), cost)
	}
}

// Decide checks a take of cost under every limit, with states[i] holding
// the state of limits[i] for key, and returns the binding decision (see
// sluice.Decision). For op sluice.OpTake it then commits to every state,
// only if every limit allows (all or nothing); for any other op it
// changes nothing. Staggered fixed windows are offset by key.
func Decide(limits []sluice.Limit, states [][]int64, key string, now int64, cost int, op sluice.Op) sluice.Decision {
	if len(limits) == 0 {
		return sluice.Decision{}
	}
	var d sluice.Decision
	check(&limits[0], states[0], now-Offset(limits[0], key), cost, &d)
	for i := 1; i < len(limits); i++ {
		l := &limits[i]
		var di sluice.Decision
		if check(l, states[i], now-Offset(*l, key), cost, &di); di.Binds(d) {
			d = di
		}
	}
	if op == sluice.OpTake && d.Allowed {
		for i := range limits {
			l := &limits[i]
			commit(l, states[i], now-Offset(*l, key), cost)
		}
	}
	return d
}

// RefundAll refunds cost taken at at under every limit (see Refund).
func RefundAll(limits []sluice.Limit, states [][]int64, key string, at, now int64, cost int) {
	for i, l := range limits {
		off := Offset(l, key)
		Refund(l, states[i], at-off, now-off, cost)
	}
}

// Offset returns where a Staggered FixedWindow's windows start for key, in
// [0, Period); zero for every other limit. It is the FNV-1a hash of the key
// modulo the period, so every process and every store agrees on it.
func Offset(l sluice.Limit, key string) int64 {
	if !l.Staggered || l.Algorithm != sluice.FixedWindow {
		return 0
	}
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	return int64(h % uint64(l.Period))
}

// floorDiv returns ⌊a/b⌋ for b > 0, also for negative a.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

func dur(ns int64) time.Duration { return time.Duration(max(ns, 0)) }
