package algorithm

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// t0 is the start of every test trace: a real time, well clear of the
// zero that marks empty state.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

var testLimits = []sluice.Limit{
	{Rate: 10, Period: time.Second},
	{Rate: 5, Period: time.Minute, Burst: 2},
	{Rate: 3, Period: time.Second, Burst: 7},
	{Rate: 10, Period: time.Second, Algorithm: sluice.FixedWindow},
	{Rate: 10, Period: time.Second, Algorithm: sluice.FixedWindow, Staggered: true},
	{Rate: 10, Period: time.Second, Algorithm: sluice.SlidingWindow},
	{Rate: 10, Period: time.Second, Algorithm: sluice.SlidingWindow, Buckets: 1},
	{Rate: 7, Period: time.Second, Algorithm: sluice.SlidingWindow, Buckets: 3},
	{Rate: 10, Period: time.Second, Algorithm: sluice.ApproxSlidingWindow},
	{Rate: 10, Period: time.Second, Algorithm: sluice.ApproxSlidingWindow, Buckets: 1},
	{Rate: 7, Period: time.Second, Algorithm: sluice.ApproxSlidingWindow, Buckets: 3},
	{Rate: 10, Period: time.Second, Algorithm: sluice.SlidingLog},
	{Rate: 1, Period: time.Second, Algorithm: sluice.SlidingLog},
}

// TestRetryAfterExact checks on random traces that a denied take fits at
// exactly now+RetryAfter and not a nanosecond sooner, that peeking changes
// nothing, and that the state survives its codec.
func TestRetryAfterExact(t *testing.T) {
	for _, l := range testLimits {
		t.Run(l.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(l.StateID())))
			s := make([]int64, Words(l))
			now := t0
			for i := range 3000 {
				now += rng.Int64N(int64(l.Period) / int64(l.Rate) * 2)
				if rng.IntN(20) == 0 {
					now -= rng.Int64N(int64(l.Period)) // clock steps back
				}
				cost := 1 + rng.IntN(l.MaxBurst())
				before := slices.Clone(s)
				d := Check(l, s, now, cost)
				if !slices.Equal(before, s) {
					t.Fatalf("step %d: Check changed the state", i)
				}
				if d.Remaining < 0 || d.Remaining > l.MaxBurst() {
					t.Fatalf("step %d: Remaining = %d, out of [0, %d]", i, d.Remaining, l.MaxBurst())
				}
				if d.Allowed != (d.RetryAfter == 0) {
					t.Fatalf("step %d: Allowed = %v with RetryAfter %v", i, d.Allowed, d.RetryAfter)
				}
				if !d.Allowed {
					at := now + int64(d.RetryAfter)
					if got := Check(l, s, at, cost); !got.Allowed {
						t.Fatalf("step %d: denied at now+RetryAfter (%v) for cost %d; state %v", i, d.RetryAfter, cost, s)
					}
					if got := Check(l, s, at-1, cost); got.Allowed && at-1 >= now {
						t.Fatalf("step %d: allowed 1ns before now+RetryAfter (%v)", i, d.RetryAfter)
					}
				}
				if rng.IntN(2) == 0 {
					Commit(l, s, now, cost)
					if !d.Allowed {
						// Undo: only allowed takes are committed.
						copy(s, before)
					}
				}
				got, err := DecodeState(l, AppendState(nil, l, s))
				if err != nil || !slices.Equal(got, s) {
					t.Fatalf("step %d: codec round trip = %v, %v; want %v", i, got, err, s)
				}
			}
		})
	}
}

// TestNoOverAdmissionAfterRefund: take, refund, take again never admits
// more than taking once would have, and a refund restores a full take.
func TestRefund(t *testing.T) {
	for _, l := range testLimits {
		t.Run(l.String(), func(t *testing.T) {
			s := make([]int64, Words(l))
			now := t0
			n := 0
			for Take(l, s, now, 1).Allowed {
				n++
			}
			if n != l.MaxBurst() {
				t.Fatalf("admitted %d at one instant, want %d", n, l.MaxBurst())
			}
			Refund(l, s, now, now, 1)
			if !Take(l, s, now, 1).Allowed {
				t.Fatal("a refunded unit is not admitted again")
			}
			if Take(l, s, now, 1).Allowed {
				t.Fatal("refund gave back more than it took")
			}
		})
	}
}
