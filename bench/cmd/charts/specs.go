package main

import "github.com/sluicehq/sluice/bench/internal/results"

// spec defines one chart: the results file it reads (by the flag that
// names it), the unit it shows, the scenarios along its X axis and the
// implementations in each.
type spec struct {
	name                  string // output file, without .svg
	source                string // flag naming the results file
	title, xlabel, ylabel string
	unit                  string  // unit of the bars
	stack                 string  // unit stacked on the bars, or ""
	groups                []label // scenario → label on the X axis
	series                []impl  // implementation → label in the legend
	notes                 []string
}

// label names a scenario of the results as the chart shows it.
type label struct{ key, text string }

// impl names an implementation of the results as the chart shows it, and
// says whether it is sluice's (highlighted) or a peer's.
type impl struct {
	key, text string
	ours      bool
}

func ours(key, text string) impl { return impl{key, text, true} }
func peer(key, text string) impl { return impl{key, text, false} }

// sources are the flags naming results files, with the files
// docs/benchmarks.md and docs/service.md quote, relative to the
// repository's root.
var sources = []struct{ flag, file, usage string }{
	{"memory", "docs/results/bench-memory-floor-20261126T092700Z.txt", "BenchmarkMemory results: raw output or run.sh's report"},
	{"redis", "docs/results/bench-redis-20261126T070213Z.txt", "BenchmarkRedis results"},
	{"memcached", "docs/results/bench-memcached-20261126T073530Z.txt", "BenchmarkMemcached results"},
	{"service", "docs/results/service-envoy-ratelimit-floors-20261126T0451Z.jsonl", "service comparison runs (JSON lines)"},
}

// memoryImpls are the implementations of the memory store's comparison.
var memoryImpls = []impl{
	ours("sluice-gcra", "sluice (GCRA)"),
	peer("x-time-rate", "x/time/rate, mutex map"),
	peer("x-time-rate-syncmap", "x/time/rate, sync.Map"),
	peer("sethvargo", "sethvargo/go-limiter"),
	peer("ulule", "ulule/limiter"),
	peer("throttled", "throttled"),
}

// memoryGroups returns the four traffic patterns of BenchmarkMemory with
// keys.
func memoryGroups(keys string) []label {
	var ls []label
	for _, traffic := range []string{"admit", "deny"} {
		for _, run := range []string{"serial", "parallel"} {
			ls = append(ls, label{"Memory/keys=" + keys + "/traffic=" + traffic + "/run=" + run, traffic + ", " + run})
		}
	}
	return ls
}

const unlikeNote = "† admitted a different amount than sluice: not the same work"

// specs are the headline charts, in the order docs/benchmarks.md shows them.
var specs = []spec{{
	name: "memory-hot", source: "memory",
	title:  "Memory store, one hot key: time per decision",
	xlabel: "traffic, goroutines (serial: one; parallel: one per core)",
	ylabel: "ns per decision (median; lower is better)",
	unit:   "ns/op", groups: memoryGroups("hot"), series: memoryImpls,
	notes: []string{unlikeNote},
}, {
	name: "memory-1m", source: "memory",
	title:  "Memory store, 1M keys: time per decision",
	xlabel: "traffic, goroutines (serial: one; parallel: one per core)",
	ylabel: "ns per decision (median; lower is better)",
	unit:   "ns/op", groups: memoryGroups("1M"), series: memoryImpls,
	notes: []string{unlikeNote},
}, {
	name: "memory-bytes", source: "memory",
	title:  "Memory store, 1M keys: memory per key",
	xlabel: "limit per key (every key used once before measuring)",
	ylabel: "bytes per key, key included (lower is better)",
	unit:   "B/key", series: memoryImpls,
	groups: []label{
		{"Memory/keys=1M/traffic=admit/run=serial", "100/s (admit runs)"},
		{"Memory/keys=1M/traffic=deny/run=serial", "1/h (deny runs)"},
	},
}, {
	name: "redis", source: "redis",
	title:  "Redis store, 64 goroutines: decisions per second",
	xlabel: "keys",
	ylabel: "decisions/s (median; higher is better)",
	unit:   "decisions/s", groups: redisGroups, series: redisImpls,
	notes: []string{unlikeNote},
}, {
	name: "redis-cpu", source: "redis",
	title:  "Redis store, 64 goroutines: Redis's CPU per decision",
	xlabel: "keys",
	ylabel: "µs of Redis CPU per decision (median; lower is better)",
	unit:   "redis-µs/op", groups: redisGroups, series: redisImpls,
	notes: []string{unlikeNote},
}, {
	name: "memcached", source: "memcached",
	title:  "memcached store, 64 goroutines: time per decision",
	xlabel: "keys",
	ylabel: "ns per decision (median; lower is better)",
	unit:   "ns/op",
	groups: []label{
		{"Memcached/keys=hot/run=parallel64", "one hot key"},
		{"Memcached/keys=100k/run=parallel64", "100k keys"},
	},
	series: []impl{
		ours("sluice-sliding", "sluice (sliding window)"),
		ours("sluice-fixed", "sluice (fixed window)"),
		peer("gomemcache-seeds-sliding", "gomemcache add+incr+get_multi"),
		peer("gomemcache-seeds-fixed", "gomemcache add+incr"),
		peer("gomemcache-incr", "gomemcache incr loop (floor)"),
	},
	notes: []string{unlikeNote},
}, {
	name: "service-cpu", source: "service",
	title:  "sluice serve vs envoyproxy/ratelimit: CPU per decision",
	xlabel: "requests in flight (gRPC, 10,000 addresses)",
	ylabel: "µs of CPU per decision (median of runs)",
	unit:   results.ServerMicrosPerOp, stack: results.RedisMicrosPerOp,
	groups: []label{{"grpc-keys-c16", "16 in flight"}, {"grpc-keys-c64", "64 in flight"}},
	series: []impl{
		ours("sr", "sluice serve, Redis"),
		ours("sm", "sluice serve, memory store"),
		peer("rl", "envoyproxy/ratelimit, Redis"),
		peer("echo-redis", "gRPC echo + one INCR, Redis (floor)"),
		peer("echo", "gRPC echo (floor)"),
	},
	notes: []string{"each bar: the server's CPU; its lighter top: Redis's CPU"},
}}

var redisGroups = []label{
	{"Redis/keys=hot/run=parallel64", "one hot key"},
	{"Redis/keys=100k/run=parallel64", "100k keys"},
}

var redisImpls = []impl{
	ours("sluice-gcra", "sluice (GCRA)"),
	peer("redis_rate", "go-redis/redis_rate"),
	peer("redis-benchmark-P16", "redis-benchmark -P 16 (floor)"),
}
