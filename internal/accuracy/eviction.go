package accuracy

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/store/memory"
)

// An EvictionCase loads a memory store past its cap: Actors actors, each
// offered Mult times its limit (Poisson arrivals of cost 1) for two
// Periods, into a store with room for Rooms states. With Light above
// zero, the actors are attackers among light users who arrive at Light
// per second and take once each, as Attack builds; the light users
// compete for room but are not judged.
type EvictionCase struct {
	Actors int
	Mult   float64
	Rooms  int
	Light  float64
}

// String names the case as the report's "case" column does:
// "1000 at 2x into 500", "8 at 3x among 5/s light, into 64".
func (c EvictionCase) String() string {
	s := fmt.Sprintf("%d at %gx", c.Actors, c.Mult)
	if c.Light > 0 {
		s += fmt.Sprintf(" among %g/s light,", c.Light)
	}
	return s + " into " + strconv.Itoa(c.Rooms)
}

// EvictionCases returns the cases of the report: a crowd twice the room at
// twice its limit, a crowd twenty times the room, a crowd at ten times
// its limit, and a few attackers among a stream of light users.
func EvictionCases() []EvictionCase {
	return []EvictionCase{
		{Actors: 1000, Mult: 2, Rooms: 500},
		{Actors: 10000, Mult: 2, Rooms: 500},
		{Actors: 1000, Mult: 10, Rooms: 500},
		{Actors: 8, Mult: 3, Rooms: 64, Light: 5},
	}
}

// EvictionLimits returns the limits RunEviction measures: rate per minute
// under each algorithm, the fixed window also staggered, the sliding
// window counters with 10 buckets.
func EvictionLimits(rate int) []sluice.Limit {
	base := sluice.Limit{Rate: rate, Period: time.Minute}
	with := func(a sluice.Algorithm, staggered bool) sluice.Limit {
		l := base
		l.Algorithm, l.Staggered = a, staggered
		return l
	}
	return []sluice.Limit{
		base,
		with(sluice.FixedWindow, false),
		with(sluice.FixedWindow, true),
		with(sluice.SlidingWindow, false),
		with(sluice.ApproxSlidingWindow, false),
		with(sluice.SlidingLog, false),
	}
}

// EvictionStore returns the memory store RunEviction measures c in for
// limit l: one shard, so that its cap and its eviction act on one set of
// actors, as they do per shard in a large store at its cap, and a
// MaxBytes that leaves room for c.Rooms states of l and their keys beside
// the eighth of MaxBytes a memory store keeps for the summaries of the
// states it evicts (see memory.Config).
func EvictionStore(l sluice.Limit, c EvictionCase) NewStore {
	key := len("actor-") + len(strconv.Itoa(c.Actors-1))
	if c.Light > 0 {
		key = len("attacker-") + len(strconv.Itoa(c.Actors-1))
	}
	room := int64(c.Rooms) * stateBytes(l, key)
	return Memory(memory.Config{Shards: 1, SweepInterval: -1, MaxBytes: room * 8 / 7})
}

// stateBytes is what a memory store counts for one state of l under a
// key of n bytes, by memory.Config's documentation: the key, 8 bytes per
// word of state and 48 bytes (80 in all for a GCRA state and a 24-byte
// key).
func stateBytes(l sluice.Limit, n int) int64 {
	return int64(n) + 48 + 8*int64(algorithm.Words(l))
}

// RunEviction measures every limit on every case, each in a fresh store
// from EvictionStore, on traces generated from seed; it also runs each
// trace through Direct, the algorithm with unbounded memory, and records
// what it admits in Result.Exact. The results are in the order of limits,
// then cases.
//
// A store that forgets actors part way through their allowance admits
// takes the algorithm denies (OverExact) and windows over the stated
// bound (OverBound); one that remembers them conservatively denies takes
// the algorithm allows (UnderExact). Eviction samples the store's hash
// table from a random place, so figures vary a little from run to run.
func RunEviction(ctx context.Context, limits []sluice.Limit, cases []EvictionCase, seed uint64) ([]Result, error) {
	var out []Result
	for _, l := range limits {
		for _, c := range cases {
			if err := ctx.Err(); err != nil {
				return out, err
			}
			tr := evictionTrace(l, c, seed)
			r, err := measureIn(ctx, EvictionStore(l, c), l, tr)
			if err != nil {
				return out, err
			}
			exact, err := measureIn(ctx, Direct, l, tr)
			if err != nil {
				return out, err
			}
			r.Exact = exact.Admitted
			out = append(out, r)
		}
	}
	return out, nil
}

func evictionTrace(l sluice.Limit, c EvictionCase, seed uint64) Trace {
	d := 2 * int64(l.Period)
	var tr Trace
	if c.Light > 0 {
		tr = Attack(l, c.Actors, seed, c.Mult, c.Light, d)
	} else {
		tr = Crowd(l, c.Actors, seed, c.Mult, d)
	}
	tr.Name = c.String()
	return tr
}
