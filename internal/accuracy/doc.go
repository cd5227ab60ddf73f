// Package accuracy measures how exactly each rate-limiting algorithm of
// sluice keeps its promise, by replaying adversarial traces through a
// store and judging every decision with a brute-force oracle of the
// algorithm's semantics. `go test -v ./internal/accuracy` and
// `sluice accuracy` print the resulting table.
//
// # Method
//
// A [Trace] is a sequence of takes, each with an actor, a time and a
// cost, applied in order to a [sluice.Store] by [Measure]. For every
// actor, the oracle keeps the full list of units the store admitted and
// answers, by counting them directly, whether the algorithm's semantics
// admit the next take. The oracles share no code with package algorithm:
//
//   - GCRA: a token bucket of Burst tokens refilled at exactly Rate per
//     Period, simulated take by take in integer arithmetic;
//   - fixed window (and staggered): the units admitted in the aligned
//     window holding the take, with the window offset of a staggered
//     limit computed from its documented definition (FNV-1a of the key);
//   - sliding window (strict and approximate) and sliding log: the exact
//     sliding window, at most Rate units in (t-Period, t].
//
// The approximate sliding window is judged against the exact window, not
// against its own weighting: the table shows how far it strays from it.
//
// A take's effective time is the later of its own time and the latest
// time of an admitted take of the same actor. Package algorithm promises
// that a time which goes backwards (late goroutines, clocks stepped back)
// never admits more than the same take at the latest time seen; so the
// oracle decides at the effective time, and windows are measured over
// effective times. A store that decides at the request's own time when it
// went backwards (GCRA and the sliding log do) is stricter than its
// oracle, which shows as under-admission, never as over-admission.
//
// # Traces
//
// [Traces] builds, for a limit of Rate per Period and one actor:
//
//   - boundary-burst: the classic fixed-window trace, for 100/min one take at 0 s, 100
//     at 59.9 s and 100 at 60.1 s, placed 50 ms before a fixed-window
//     boundary (an attacker reads it off the reset time), so the bursts
//     straddle the next one;
//   - jitter-5ms, jitter-6s: Poisson traffic at twice the rate whose times
//     are read up to 5 ms or Period/10 before the take reaches the store;
//   - step-back-1s, step-back-1m: Poisson traffic at twice the rate whose
//     clock steps back by one second, or by a whole Period, halfway;
//   - poisson-0.5x, poisson-1x, poisson-3x: Poisson traffic at half, once
//     and three times the rate, for 20 Periods;
//   - cost-1..5-2x: Poisson traffic at twice the rate of takes costing 1
//     to 5 units.
//
// Every trace is generated from a seed and is the same on every run.
//
// # Stores
//
// [Direct] applies package algorithm to states in a map: the algorithms
// alone. [Memory] runs the same traces through store/memory, which must
// give the same figures, decision for decision, while under its cap.
// [RunEviction] then loads a small memory store past its cap
// ([EvictionCases]): crowds of 1,000 and 10,000 actors at twice their
// limit, and 1,000 at ten times it, into room for 500 states, and
// attackers among a stream of light users. It judges each decision
// against the algorithm itself with unbounded memory (OverExact,
// UnderExact) as well as against the oracle: a store that forgets an
// actor part way through its allowance over-admits; one that charges
// forgotten actors conservatively under-admits.
//
// # The table
//
// One row per algorithm and trace, the limit being 100/min:
//
//   - admitted: takes allowed out of takes applied;
//   - max in window: the most units admitted to one actor in any window
//     of length Period, found by an exact sweep over the admitted times;
//   - at request times: the same, over the times the requests carried
//     rather than their effective times. It differs only when times go
//     backwards; nothing is promised on it, and it shows what a time that
//     went back costs: a late take counts in the newest window or bucket,
//     so in the window of its own time it can be one too many;
//   - limit: the Rate;
//   - bound: what the algorithm's documentation promises for any window
//     of length Period: Burst + Rate - 1 for GCRA (Burst + d/T over an
//     interval of length d), 2·Rate for the fixed window, Rate for the
//     strict sliding window and the sliding log, under 2·Rate for the
//     approximate sliding window;
//   - over-admitted: takes the store allowed that the oracle denies;
//   - under-admitted: takes the store denied that the oracle allows.
//     Both are counted against the store's own history, so one early
//     denial that is made up later counts once and does not cascade;
//   - over bound: windows (for GCRA, intervals of every length) holding
//     more than the stated bound; for the approximate window the finer
//     bound Rate plus the units of the oldest, partly covered bucket;
//   - store full: takes failed with ErrStoreFull (counted as denied),
//     shown only when some are.
//
// The eviction table ([WriteEvictionTable]) shows, per limit and case,
// the takes admitted, what the algorithm alone admits on the same trace
// (Result.Exact), OverExact and UnderExact, the most in a window, the
// bound and the units over it.
//
// [Result.Check] states what each algorithm promises of these columns,
// and the tests hold every row to it.
package accuracy
