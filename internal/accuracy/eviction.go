package accuracy

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
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
// actors, as they do per shard in a large store at its cap, and the least
// MaxBytes (to within 1%) with room for c.Rooms states of l under keys
// like c's, beside the share of the ledgers of evicted states, found by
// filling twin stores (the store counts the chunks it allocates, not
// each state).
func EvictionStore(l sluice.Limit, c EvictionCase) NewStore {
	prefix := "actor-"
	if c.Light > 0 {
		prefix = "attacker-"
	}
	lo, hi := int64(1024), int64(1024)
	for room(l, prefix, hi, c.Rooms) < c.Rooms {
		lo, hi = hi, 2*hi
	}
	for hi-lo > hi/100 {
		if mid := lo + (hi-lo)/2; room(l, prefix, mid, c.Rooms) < c.Rooms {
			lo = mid
		} else {
			hi = mid
		}
	}
	return Memory(memory.Config{Shards: 1, SweepInterval: -1, MaxBytes: hi})
}

// room returns how many states of l, under keys of prefix, a one-shard
// memory store of maxBytes holds before it first evicts one, up to most.
func room(l sluice.Limit, prefix string, maxBytes int64, most int) int {
	s := memory.New(memory.Config{Shards: 1, SweepInterval: -1, MaxBytes: maxBytes})
	defer s.Close()
	r := sluice.Request{Limits: []sluice.Limit{l}, Cost: l.MaxBurst(), Now: Start}
	for n := 0; n < most; n++ {
		r.Key = prefix + strconv.Itoa(n)
		if _, err := s.Decide(context.Background(), r); err != nil || s.Len() <= n {
			return n
		}
	}
	return most
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
