package algorithm

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestSlidingSteps holds win.view and win.resetAfter, which step a
// bucket's slot along with the bucket, to the same sums found by the
// slot of each bucket (one division each), on random states of windows
// of 1 to 60 buckets, at times before, within and long after them: the
// slots wrap around at every place.
func TestSlidingSteps(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, g := range []int{1, 2, 3, 10, 60} {
		for _, alg := range []sluice.Algorithm{sluice.SlidingWindow, sluice.ApproxSlidingWindow} {
			l := sluice.Limit{Rate: 100, Period: time.Minute, Algorithm: alg, Buckets: g}
			w := winOf(&l)
			b := w.b
			for range 2000 {
				s := make([]int64, g+2)
				s[0] = rng.Int64N(1000) - 500 // the newest bucket's number, of either sign
				for i := 1; i < len(s); i++ {
					if rng.IntN(3) > 0 {
						s[i] = rng.Int64N(5)
					}
				}
				now := s[0]*b + rng.Int64N(int64(g+3)*b) - b
				c, full, old := w.view(s, now)
				wc, wfull, wold := viewBySlot(l, s, now)
				if c != wc || full != wfull || old != wold {
					t.Fatalf("g %d, state %v, at %d: view (%d, %d, %d), want (%d, %d, %d)", g, s, now, c, full, old, wc, wfull, wold)
				}
				for _, taken := range []bool{true, false} {
					if got, want := w.resetAfter(s, c, now, taken), resetAfterBySlot(l, s, now, taken); got != want {
						t.Fatalf("g %d, state %v, at %d, taken %v: reset after %d, want %d", g, s, now, taken, got, want)
					}
				}
			}
		}
	}
}

// viewBySlot is win.view, finding each bucket's slot anew.
func viewBySlot(l sluice.Limit, s []int64, t int64) (c, full, old int64) {
	w := winOf(&l)
	g, b := w.g, w.b
	newest := s[0]
	c = max(floorDiv(t, b), newest)
	for i := max(c-g, newest-g); i <= newest; i++ {
		if i == c-g {
			old = s[slot(g, i)]
		} else {
			full += s[slot(g, i)]
		}
	}
	return c, full, old
}

// resetAfterBySlot is win.resetAfter, finding each bucket's slot anew.
func resetAfterBySlot(l sluice.Limit, s []int64, now int64, taken bool) int64 {
	w := winOf(&l)
	g, b := w.g, w.b
	c, _, _ := viewBySlot(l, s, now)
	newest := int64(math.MinInt64)
	if taken {
		newest = c
	} else {
		for i := s[0]; i >= max(s[0]-g, c-g); i-- {
			if s[slot(g, i)] != 0 {
				newest = i
				break
			}
		}
	}
	if newest == math.MinInt64 {
		return 0
	}
	return (newest+g+1)*b - now
}

// TestSlidingMeets checks that where win.meets puts the instant an
// approximate window's oldest bucket has fallen enough for a take is
// within 2 ns of the instant the count allows it, found by bisection over
// the bucket, for periods from a millisecond to a day: so that
// win.retryAt bisects a few nanoseconds, not a whole bucket.
func TestSlidingMeets(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	tested := 0
	for i := range 20000 {
		l := sluice.Limit{Rate: 1 + rng.IntN(5000), Period: time.Duration(1+rng.Int64N(86400_000)) * time.Millisecond,
			Algorithm: sluice.ApproxSlidingWindow, Buckets: 1 + rng.IntN(60)}
		w := winOf(&l)
		b := w.b
		c := 1_700_000_000_000_000_000/b + rng.Int64N(1000)
		cost := 1 + rng.IntN(l.Rate)
		full := rng.Int64N(int64(l.Rate - cost + 1)) // a take fits once the oldest bucket is gone
		old := int64(l.Rate-cost) - full + 1 + rng.Int64N(int64(l.Rate)+1)
		fits := func(t int64) bool { return w.count(c, full, old, t)+float64(cost) <= float64(l.Rate) }
		lo, hi := c*b, (c+1)*b-1
		if !fits(hi) || fits(lo) {
			continue // the count meets the rate outside this bucket
		}
		tested++
		for lo < hi {
			mid := lo + (hi-lo)/2
			if fits(mid) {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		if m := w.meets(c, full, old, cost); m < lo-2 || m > lo+2 {
			t.Fatalf("case %d (%v, %d buckets; full %d, old %d, cost %d): meets at %d, the count fits from %d", i, l, l.Buckets, full, old, cost, m, lo)
		}
	}
	if tested < 10000 {
		t.Fatalf("%d cases met the rate within their bucket: want most of 20000", tested)
	}
}
