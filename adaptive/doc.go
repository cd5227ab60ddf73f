// Package adaptive holds concurrency limits that find themselves from
// observed latency, for sluice.ConcurrencyConfig.Adaptive: the limit of a
// process is treated as a TCP congestion window, grown while requests
// complete quickly and shrunk when latency rises or requests fail from
// overload (the design of Netflix's concurrency-limits and of Envoy's
// adaptive concurrency filter, implemented here from their published
// descriptions).
//
// # Algorithms
//
// [AIMD] (additive increase, multiplicative decrease) adds one to the
// limit per limit's worth of requests that complete within Timeout while
// at least half the limit is in use (one per round trip, as TCP does), and multiplies the limit by Backoff (0.9) for
// each request that is dropped or takes longer than Timeout. It needs a
// latency threshold and finds the largest concurrency that stays under it.
//
// [Vegas] estimates the queue the limit builds, as TCP Vegas does:
//
//	queue = limit × (1 − rttNoLoad / rtt)
//
// where rttNoLoad is the smallest latency seen lately (re-measured every
// ProbeEvery samples, after halving the limit to drain the queue, so
// that a slower backend is not mistaken for a queue forever). The limit grows by one while the queue is below Alpha
// (3) and shrinks by one above Beta (6), so it settles a few requests
// above the concurrency at which latency starts to rise; a dropped
// request multiplies it by Backoff. It needs no threshold.
//
// A cut happens once per round trip: the samples of requests that started
// before the last cut report the congestion that cut answered, and leave
// the limit as it is (as TCP halves its window once per round trip, not
// once per lost packet).
//
// Both ignore samples taken while less than half the limit was in use: an
// idle process learns nothing about its capacity, and a limit must not
// grow without bound while traffic is light.
//
// # Scope
//
// A limit is per process: each process of a fleet finds its own, as each
// backend's capacity is its own. The limits here are safe for concurrent
// use; their zero values are not usable (use NewAIMD, NewVegas).
// Convergence is tested on a simulated server whose latency rises with
// load, in simulated time (see the tests and docs/concurrency.md).
package adaptive
