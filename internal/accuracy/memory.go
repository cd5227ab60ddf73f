package accuracy

import (
	"context"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/store/memory"
)

// Memory returns the NewStore of memory stores configured by c. Without
// the background sweeper (SweepInterval -1), whose real-time ticks would
// make a measurement depend on how long it took, a memory store that is
// under its cap must decide exactly as Direct does.
func Memory(c memory.Config) NewStore {
	return func() (sluice.Store, func(), error) {
		s := memory.New(c)
		return s, func() { s.Close() }, nil
	}
}

// Eviction sizes: a one-shard memory store with room for capStates
// states, so that its cap and its eviction sample act on one set of
// actors, as they do per shard in a large store at its cap.
const (
	capStates = 64
	attackers = 8
	crowd     = 16
	crowdCap  = 6
)

// stateBytes is what a memory store counts for one state of l under a
// key of n bytes: the key, 8 bytes per word and a fixed overhead, 40
// bytes by memory.Config's documentation (72 for a GCRA state and a
// 24-byte key).
func stateBytes(l sluice.Limit, n int) int64 {
	return int64(n) + 40 + 8*int64(algorithm.Words(l))
}

// RunEviction measures every limit of Limits, through a memory store at
// its cap, on two traces generated from seed:
//
//   - evict-attack-8: 8 attackers at 3× the rate among light users who
//     arrive at 5 per second and make one take each (as Filler), for 2
//     Periods, in a store with room for 64 states. The store must make
//     room for light users without forgetting attackers, who are over
//     their limit or close to it. One case escapes: a fixed window's
//     attacker that has taken exactly one unit of a new window is as
//     close to its full allowance as a light user, and may be evicted in
//     its place, which gives it that one unit back;
//   - evict-crowd-16: 16 actors at 2× the rate, for 2 Periods, in a store
//     with room for 6. The store must forget actors part way through
//     their allowance (over-admission) or fail with ErrStoreFull (the
//     "store full" column, shown when not all zero). Nothing is promised
//     beyond never forgetting an actor over its limit.
//
// Eviction samples Go map iteration order, so the figures of the crowd,
// and the rare tie above, vary from run to run.
func RunEviction(ctx context.Context, seed uint64) ([]Result, error) {
	var out []Result
	for _, l := range Limits() {
		p := int64(l.Period)
		for _, tc := range []struct {
			tr    Trace
			rooms int
		}{
			{Attack(l, attackers, seed, 3, 5, 2*p), capStates},
			{Crowd(l, crowd, seed, 2, 2*p), crowdCap},
		} {
			if err := ctx.Err(); err != nil {
				return out, err
			}
			c := memory.Config{Shards: 1, SweepInterval: -1, MaxBytes: int64(tc.rooms) * stateBytes(l, len("attacker-0"))}
			r, err := measureIn(ctx, Memory(c), l, tc.tr)
			if err != nil {
				return out, err
			}
			out = append(out, r)
		}
	}
	return out, nil
}
