// Package bench compares sluice with its peers in the same run, on the same
// machine. It is a nested module so that the sluice module never depends on
// the peers: x/time/rate, sethvargo/go-limiter, ulule/limiter, throttled,
// go-redis/redis_rate, go-chi/httprate and the clients of Redis and
// memcached.
//
// The package holds only tests and benchmarks. Run the whole comparison
// with bench/run.sh, which interleaves several passes of every benchmark,
// summarises them with benchstat and prints the ratio sluice/peer per
// scenario (see docs/benchmarks.md).
//
// # Naming
//
// Every comparative benchmark names the implementation in one
// sub-benchmark element, impl=NAME, and the scenario in the others, as
// key=value pairs:
//
//	BenchmarkMemory/keys=hot/traffic=deny/impl=sluice-gcra/run=serial
//	BenchmarkMemory/keys=hot/traffic=deny/impl=x-time-rate/run=serial
//
// Implementations whose name starts with "sluice" are sluice's; the others
// are peers. The ratio program (bench/cmd/ratio) divides the median of each
// sluice implementation by the median of each peer in the same scenario:
// the name without its impl= element.
//
// An implementation whose name starts with "floor" is no peer but a
// measuring stick: the least any implementation must do for the job
// (BenchmarkConcurrency's floor, floorLeases: one map lookup and a table
// of places with expiries under one lock; BenchmarkMemory's floor-gcra:
// one maphash, a map of arrival times under one of 64 locks, a coarse
// clock), run beside the others so that how far sluice is from it is a
// ratio taken in one run. ratio shows floors beside the peers but never
// takes one for the fastest peer; ratio -ours floor gives the floor
// against the peers. The service comparison's floor is a program of its
// own, cmd/rlsecho: a gRPC server of Envoy's rate limit API that decides
// nothing (docs/service.md).
//
// # Admission checks
//
// A rate limiter that admits everything, or nothing, is fast and useless.
// Each benchmark reports admitted/op beside its speed, and TestAdmitted
// checks that every implementation admits the expected count on fixed
// traces, with the known deviations of the peers written down there.
package bench

// Draw the charts of docs/benchmarks.md from the results it quotes.
//go:generate go run ./cmd/charts
