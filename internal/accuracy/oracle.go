package accuracy

import (
	"fmt"
	"math/bits"
	"sort"

	"github.com/sluicehq/sluice"
)

// An oracle is the brute-force reference of one algorithm's semantics for
// one actor. It is told every take the store under test admitted, at its
// effective time (see Measure), and answers whether a take of cost at
// effective time e would be admitted by the semantics it models. Effective
// times never decrease from one call to the next.
type oracle interface {
	allows(e int64, cost int) bool
	admit(e int64, cost int)
}

// newOracle returns the reference for l's algorithm, for key:
//
//   - GCRA: a token bucket of MaxBurst tokens refilled at exactly Rate per
//     Period, simulated take by take in exact integer arithmetic;
//   - FixedWindow: the units admitted in the aligned window holding e
//     (shifted by key's offset when Staggered), counted directly;
//   - SlidingWindow, ApproxSlidingWindow and SlidingLog: the exact sliding
//     window, "at most Rate units in (e-Period, e]", counted directly.
//
// The approximate sliding window is judged against the exact one on
// purpose: the report shows how far its approximation strays.
func newOracle(l sluice.Limit, key string) (oracle, error) {
	switch l.Algorithm {
	case sluice.GCRA:
		b, p := uint64(l.MaxBurst()), uint64(l.Period)
		if hi, lo := bits.Mul64(b, p); hi != 0 || lo > 1<<62 {
			return nil, fmt.Errorf("%w: %v is too deep for the token bucket oracle", sluice.ErrInvalidLimit, l)
		}
		return &bucketOracle{rate: int64(l.Rate), per: int64(l.Period), depth: int64(b * p), level: int64(b * p)}, nil
	case sluice.FixedWindow:
		return &fixedOracle{l: l, key: key}, nil
	}
	return &windowOracle{rate: l.Rate, period: int64(l.Period)}, nil
}

// bucketOracle is a token bucket. One token is worth per units of level;
// the bucket holds depth = Burst·per units and gains rate units every
// nanosecond, so it refills Rate tokens per Period with no rounding.
type bucketOracle struct {
	rate, per   int64
	depth       int64
	level, last int64 // level at time last; full before the first take
}

func (o *bucketOracle) at(e int64) int64 {
	if e <= o.last {
		return o.level
	}
	dt := e - o.last
	if dt > (o.depth-o.level)/o.rate {
		return o.depth // full, and dt·rate might overflow
	}
	return o.level + dt*o.rate
}

func (o *bucketOracle) allows(e int64, cost int) bool {
	return o.at(e) >= int64(cost)*o.per
}

func (o *bucketOracle) admit(e int64, cost int) {
	o.level = o.at(e) - int64(cost)*o.per
	o.last = max(o.last, e)
}

// units is the sorted list of the effective times of admitted units, one
// entry per unit of cost.
type units []int64

func (u *units) add(e int64, cost int) {
	for range cost {
		*u = append(*u, e)
	}
}

// since returns how many units are later than t.
func (u units) since(t int64) int {
	return len(u) - sort.Search(len(u), func(i int) bool { return u[i] > t })
}

// in returns how many units lie in [from, to).
func (u units) in(from, to int64) int {
	return u.since(from-1) - u.since(to-1)
}

// windowOracle is the exact sliding window: at most rate units in any
// window (e-period, e].
type windowOracle struct {
	rate   int
	period int64
	units  units
}

func (o *windowOracle) allows(e int64, cost int) bool {
	return o.units.since(e-o.period)+cost <= o.rate
}

func (o *windowOracle) admit(e int64, cost int) { o.units.add(e, cost) }

// fixedOracle counts units per aligned window: at most Rate in the window
// holding e.
type fixedOracle struct {
	l     sluice.Limit
	key   string
	units units
}

func (o *fixedOracle) allows(e int64, cost int) bool {
	return o.units.since(windowStart(o.l, o.key, e)-1)+cost <= o.l.Rate
}

func (o *fixedOracle) admit(e int64, cost int) { o.units.add(e, cost) }

// sweep calls f for every distinct time end in u (sorted) with the number
// of units in the window (end-period, end]. The most units in any window
// of length period is the most f sees: a window holding the most can
// always slide right until it ends at a unit.
func sweep(u units, period int64, f func(end int64, count int)) {
	lo := 0
	for hi := 0; hi < len(u); hi++ {
		if hi+1 < len(u) && u[hi+1] == u[hi] {
			continue // count every unit at this time
		}
		for u[lo] <= u[hi]-period {
			lo++
		}
		f(u[hi], hi+1-lo)
	}
}

// maxInWindow returns the most units in any window of length period.
func maxInWindow(u units, period int64) int {
	most := 0
	sweep(u, period, func(_ int64, n int) { most = max(most, n) })
	return most
}

// statedBound returns the bound l's documentation states on the units
// admitted in any window of length Period:
//
//   - GCRA: Burst + ⌊(Period-1ns)/T⌋, from "at most B + d/T in any
//     interval of length d" with T = Interval() (a half-open window of
//     length Period is a closed interval of length Period-1ns);
//   - FixedWindow: 2·Rate;
//   - SlidingWindow and SlidingLog: Rate;
//   - ApproxSlidingWindow: 2·Rate-1 ("less than 2·Rate in the worst
//     case"); boundViolations checks the finer per-window bound.
func statedBound(l sluice.Limit) int {
	switch l.Algorithm {
	case sluice.GCRA:
		return l.MaxBurst() + int((l.Period-1)/l.Interval())
	case sluice.FixedWindow:
		return 2 * l.Rate
	case sluice.ApproxSlidingWindow:
		return 2*l.Rate - 1
	}
	return l.Rate
}

// boundViolations counts where the units one actor was admitted break
// l's stated bounds:
//
//   - GCRA: units u[j] such that some interval [u[i], u[j]] holds more
//     than Burst + (u[j]-u[i])/T units, for every i ≤ j (all lengths d);
//   - FixedWindow: windows of length Period over 2·Rate, and aligned
//     windows over Rate;
//   - SlidingWindow and SlidingLog: windows of length Period over Rate;
//   - ApproxSlidingWindow: windows (end-Period, end] over Rate plus the
//     units of the bucket that is oldest at end (bucket width
//     ⌈Period/Buckets⌉, aligned to the epoch), and over 2·Rate-1.
func boundViolations(l sluice.Limit, key string, u units) int {
	p := int64(l.Period)
	bad := 0
	switch l.Algorithm {
	case sluice.GCRA:
		// [u[i], u[j]] holds at least j-i+1 units. The bound holds iff
		// j-i+1-B ≤ ⌊d/T⌋, iff (j-i+1-B)·T ≤ d, iff g(j)+T-B·T ≤ g(i) with
		// g(k) = k·T - u[k]: keep the least g(i) seen so far.
		t, b := int64(l.Interval()), int64(l.MaxBurst())
		least := int64(0)
		for j := range u {
			g := int64(j)*t - u[j]
			if j == 0 || g < least {
				least = g
			}
			if g+t-b*t > least {
				bad++
			}
		}
	case sluice.FixedWindow:
		sweep(u, p, func(end int64, n int) {
			if n > 2*l.Rate {
				bad++
			}
			if u.in(windowStart(l, key, end), end+1) > l.Rate {
				bad++
			}
		})
	case sluice.ApproxSlidingWindow:
		g := int64(l.BucketCount())
		w := (p + g - 1) / g
		sweep(u, p, func(end int64, n int) {
			oldest := (floorDiv(end, w) - g) * w
			if n > l.Rate+u.in(oldest, oldest+w) || n > 2*l.Rate-1 {
				bad++
			}
		})
	default:
		sweep(u, p, func(_ int64, n int) {
			if n > l.Rate {
				bad++
			}
		})
	}
	return bad
}
