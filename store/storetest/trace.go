package storetest

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// policies are the differential cases: every algorithm alone, with a few
// bucket counts, and two multi-limit policies.
var policies = [][]sluice.Limit{
	{gcra}, {gcraBurst}, {gcraSlow},
	{fixed}, {staggered},
	{sliding}, {sliding1}, {sliding4},
	{approx}, {approx1}, {approx4},
	{slidingLog}, {log1},
	{gcra, {Rate: 20, Period: time.Minute}, {Rate: 3, Period: time.Second, Algorithm: sluice.FixedWindow}},
	{
		{Rate: 5, Period: time.Second, Algorithm: sluice.SlidingLog},
		{Rate: 20, Period: time.Minute, Algorithm: sluice.ApproxSlidingWindow, Buckets: 6},
		staggered,
	},
}

// traceSteps is the length of each differential trace.
const traceSteps = 300

// testDifferential runs a random trace per policy through the store and
// the reference, which must agree on every take and peek.
func testDifferential(t *testing.T, s *suite) {
	for i, limits := range policies {
		t.Run(policyName(limits), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 0x5eed))
			runTrace(t, s.sub(t), rng, limits, traceSteps)
		})
	}
}

// A taken is an allowed take that a trace may refund later.
type taken struct {
	key  string
	at   time.Time // its Decision.Time
	cost int
}

// runTrace sends steps random requests on two keys: takes of random cost,
// peeks, refunds of earlier allowed takes (at their Decision.Time),
// resets, inserts of penalties and rewards, with time stepping forward on a microsecond grid, sometimes
// jumping past every period and sometimes stepping back.
func runTrace(t *testing.T, s *suite, rng *rand.Rand, limits []sluice.Limit, steps int) {
	t.Helper()
	var takes []taken
	interval, longest, burst := limits[0].Period/time.Duration(limits[0].Rate), time.Duration(0), limits[0].MaxBurst()
	for _, l := range limits {
		interval = min(interval, l.Period/time.Duration(l.Rate))
		longest = max(longest, l.Period)
		burst = min(burst, l.MaxBurst())
	}
	now := t0
	for range steps {
		switch x := rng.IntN(100); {
		case x < 4:
			now = now.Add(-micros(rng, longest))
		case x < 8:
			now = now.Add(micros(rng, 2*longest))
		default:
			now = now.Add(micros(rng, 2*interval))
		}
		key := []string{"a", "b"}[rng.IntN(2)]
		cost := 1
		if rng.IntN(4) == 0 {
			cost = 1 + rng.IntN(burst)
		}
		switch x := rng.IntN(100); {
		case x < 12 && len(takes) > 0:
			j := rng.IntN(len(takes))
			tk := takes[j]
			takes = append(takes[:j], takes[j+1:]...)
			s.do(t, refund(tk.key, now, tk.at, tk.cost, limits...))
		case x < 15:
			s.do(t, resetKey(key, now, limits...))
		case x < 20:
			s.do(t, insert(key, now, cost*(1-2*rng.IntN(2)), limits...))
		case x < 30:
			s.do(t, peek(key, now, cost, limits...))
		default:
			if d := s.do(t, take(key, now, cost, limits...)); d.Allowed {
				takes = append(takes, taken{key, d.Time, cost})
			}
		}
	}
}

// micros returns a random duration in [0, d], in whole microseconds.
func micros(rng *rand.Rand, d time.Duration) time.Duration {
	return time.Duration(rng.Int64N(int64(d/time.Microsecond)+1)) * time.Microsecond
}

// policyName names a subtest after its limits, without the slashes that
// would split the subtest name.
func policyName(limits []sluice.Limit) string {
	names := make([]string, len(limits))
	for i, l := range limits {
		names[i] = strings.NewReplacer("/", "per", " ", "_").Replace(l.String())
	}
	return strings.Join(names, "+")
}
