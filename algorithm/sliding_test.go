package algorithm

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestSlidingSteps holds slidingView and slidingResetAfter, which step a
// bucket's slot along with the bucket, to the same sums found by the
// slot of each bucket (one division each), on random states of windows
// of 1 to 60 buckets, at times before, within and long after them: the
// slots wrap around at every place.
func TestSlidingSteps(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, g := range []int{1, 2, 3, 10, 60} {
		for _, alg := range []sluice.Algorithm{sluice.SlidingWindow, sluice.ApproxSlidingWindow} {
			l := sluice.Limit{Rate: 100, Period: time.Minute, Algorithm: alg, Buckets: g}
			b := bucketWidth(l)
			for range 2000 {
				s := make([]int64, g+2)
				s[0] = rng.Int64N(1000) - 500 // the newest bucket's number, of either sign
				for i := 1; i < len(s); i++ {
					if rng.IntN(3) > 0 {
						s[i] = rng.Int64N(5)
					}
				}
				now := s[0]*b + rng.Int64N(int64(g+3)*b) - b
				c, full, old := slidingView(l, s, now)
				wc, wfull, wold := viewBySlot(l, s, now)
				if c != wc || full != wfull || old != wold {
					t.Fatalf("g %d, state %v, at %d: view (%d, %d, %d), want (%d, %d, %d)", g, s, now, c, full, old, wc, wfull, wold)
				}
				for _, taken := range []bool{true, false} {
					if got, want := slidingResetAfter(l, s, now, taken), resetAfterBySlot(l, s, now, taken); got != want {
						t.Fatalf("g %d, state %v, at %d, taken %v: reset after %d, want %d", g, s, now, taken, got, want)
					}
				}
			}
		}
	}
}

// viewBySlot is slidingView, finding each bucket's slot anew.
func viewBySlot(l sluice.Limit, s []int64, t int64) (c, full, old int64) {
	g, b := int64(l.BucketCount()), bucketWidth(l)
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

// resetAfterBySlot is slidingResetAfter, finding each bucket's slot anew.
func resetAfterBySlot(l sluice.Limit, s []int64, now int64, taken bool) int64 {
	g, b := int64(l.BucketCount()), bucketWidth(l)
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
