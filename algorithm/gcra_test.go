package algorithm

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestGCRAFields checks every field GCRA writes, and the tat it returns
// (and gcraCommit, Commit's, with no decision), against the definition
// (a take of n is allowed iff max(tat, now) + n·T - now ≤ B·T), on a
// grid of stored tats around now and every cost: GCRAAt computes them
// by a shorter road, so that it inlines.
func TestGCRAFields(t *testing.T) {
	limits := []sluice.Limit{
		{Rate: 1, Period: time.Second},
		{Rate: 10, Period: time.Second},
		{Rate: 3, Period: time.Second, Burst: 7},
		{Rate: 5, Period: time.Minute, Burst: 2},
	}
	now := t0
	for _, l := range limits {
		T, B := int64(l.Interval()), int64(l.MaxBurst())
		for _, tat := range tatGrid(now, T, B) {
			for cost := 1; cost <= int(B); cost++ {
				var d sluice.Decision
				got := GCRA(&l, tat, now, cost, &d)
				want, wantTat := gcraDefinition(l, tat, now, cost)
				if d != want || got != wantTat {
					t.Fatalf("%v: GCRA(tat now%+d, cost %d) = %+v, tat now%+d; want %+v, tat now%+d",
						l, tat-now, cost, d, got-now, want, wantTat-now)
				}
				if c := gcraCommit(&l, tat, now, cost); c != wantTat {
					t.Fatalf("%v: gcraCommit(tat now%+d, cost %d) = now%+d; want now%+d", l, tat-now, cost, c-now, wantTat-now)
				}
				if next, ok := GCRATake(T, T*B, tat, now, cost); ok != want.Allowed || ok && next != wantTat {
					t.Fatalf("%v: GCRATake(tat now%+d, cost %d) = now%+d, %v; want allowed %v, tat now%+d",
						l, tat-now, cost, next-now, ok, want.Allowed, wantTat-now)
				}
			}
		}
	}
}

// tatGrid returns stored tats from well before now (an idle key, or none)
// to past the most a bucket of B units of T may hold, on every half
// interval and a nanosecond either side of each.
func tatGrid(now, T, B int64) []int64 {
	tats := []int64{0}
	for k := -4 * T; k <= (B+3)*T; k += T / 2 {
		tats = append(tats, now+k-1, now+k, now+k+1)
	}
	return tats
}

// gcraDefinition is GCRA as the package documents it, written for
// clarity: the decision of a take of cost at now, and the tat it leaves.
func gcraDefinition(l sluice.Limit, tat, now int64, cost int) (sluice.Decision, int64) {
	T, tau := int64(l.Interval()), int64(l.Interval())*int64(l.MaxBurst())
	base := max(tat, now)
	next := base + int64(cost)*T
	d := sluice.Decision{Limit: l}
	if next-now <= tau {
		d.Allowed = true
		d.Remaining = int((now + tau - next) / T)
		d.ResetAfter = time.Duration(next - now)
		return d, next
	}
	d.Remaining = int(max(now+tau-base, 0) / T)
	d.ResetAfter = time.Duration(base - now)
	d.RetryAfter = time.Duration(next - tau - now) // the earliest instant the take fits
	return d, tat
}
