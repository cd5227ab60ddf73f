package algorithm

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// refill is the longest an actor may wait after a penalty under l: the
// time l takes to go from past empty back to a free unit.
func refill(l sluice.Limit) time.Duration {
	switch l.Algorithm {
	case sluice.GCRA:
		return l.Interval() * time.Duration(l.MaxBurst())
	case sluice.SlidingWindow, sluice.ApproxSlidingWindow:
		return l.Period + l.Period/time.Duration(l.BucketCount())
	}
	return l.Period
}

// TestInsertPenaltyBounded inserts penalties on random traces and checks
// that each is counted whether or not it fits (a peek of 1 is denied after
// a penalty of MaxBurst), and that however many pile up, the wait for the
// next unit never exceeds the limit's time to refill from empty, and is
// exact.
func TestInsertPenaltyBounded(t *testing.T) {
	for _, l := range testLimits {
		t.Run(l.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(2, uint64(l.StateID())))
			s := make([]int64, Words(l))
			now := t0
			for i := range 2000 {
				now += rng.Int64N(int64(refill(l)) / 4)
				Insert(l, s, now, 1+rng.IntN(l.MaxBurst()))
				if rng.IntN(3) == 0 {
					Insert(l, s, now, l.MaxBurst())
					if d := Check(l, s, now, 1); d.Allowed {
						t.Fatalf("step %d: allowed just after a penalty of MaxBurst", i)
					}
				}
				d := Check(l, s, now, 1)
				if d.RetryAfter > refill(l) {
					t.Fatalf("step %d: RetryAfter %v after penalties, more than the refill time %v", i, d.RetryAfter, refill(l))
				}
				if !d.Allowed && !Check(l, s, now+int64(d.RetryAfter), 1).Allowed {
					t.Fatalf("step %d: still denied after RetryAfter %v", i, d.RetryAfter)
				}
			}
		})
	}
}

// TestInsertReward checks that a reward gives back what was taken, at
// most: a reward of k after takes of k restores the full allowance, a
// reward of a fresh state changes nothing, and a reward never leaves more
// than MaxBurst remaining.
func TestInsertReward(t *testing.T) {
	for _, l := range testLimits {
		t.Run(l.String(), func(t *testing.T) {
			fresh := make([]int64, Words(l))
			Insert(l, fresh, t0, -l.MaxBurst())
			if !slices.Equal(fresh, make([]int64, Words(l))) {
				t.Fatalf("a reward changed a fresh state to %v", fresh)
			}
			rng := rand.New(rand.NewPCG(3, uint64(l.StateID())))
			for i := range 500 {
				s := make([]int64, Words(l))
				now := t0 + rng.Int64N(int64(l.Period))
				k := 1 + rng.IntN(l.MaxBurst())
				if d := Take(l, s, now, k); !d.Allowed {
					t.Fatalf("step %d: a fresh take of %d denied", i, k)
				}
				Insert(l, s, now, -(k + rng.IntN(3)))
				if d := Check(l, s, now, l.MaxBurst()); !d.Allowed {
					t.Fatalf("step %d: after taking %d and a reward of at least %d, a take of MaxBurst is denied: %+v", i, k, k, d)
				}
				if d := Check(l, s, now, 1); d.Remaining > l.MaxBurst()-1 {
					t.Fatalf("step %d: Remaining %d after a reward, more than the allowance", i, d.Remaining)
				}
			}
		})
	}
}

// TestInsertRewardPartial checks that a reward of j after takes of k gives
// back j units exactly under the limits that count units exactly.
func TestInsertRewardPartial(t *testing.T) {
	for _, l := range []sluice.Limit{
		{Rate: 10, Period: time.Second},
		{Rate: 10, Period: time.Second, Algorithm: sluice.FixedWindow},
		{Rate: 10, Period: time.Second, Algorithm: sluice.SlidingWindow},
		{Rate: 10, Period: time.Second, Algorithm: sluice.SlidingLog},
	} {
		s := make([]int64, Words(l))
		Take(l, s, t0, 8)
		Insert(l, s, t0+1, -3)
		if d := Check(l, s, t0+1, 1); d.Remaining != 4 {
			t.Errorf("%v: Remaining %d after taking 8 of 10 and a reward of 3, want 4", l, d.Remaining)
		}
	}
}
