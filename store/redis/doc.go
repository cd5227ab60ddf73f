// Package redis is a [sluice.Store] that keeps limiter state in Redis, so
// that every process of a fleet shares it.
//
// Each decision is one call of one Lua script (EVALSHA; the script is
// sent again with EVAL when the server answers NOSCRIPT): one network
// round trip, atomic on the server, for every algorithm of package
// algorithm (GCRA, fixed window, strict and approximate sliding window
// counters, sliding log), for every operation (take of cost n, peek,
// refund, reset) and for a multi-limit policy, decided all-or-nothing. A
// refund or a reset answers, from the same call, what a peek just after
// it would get, as sluice.Store asks.
// Differential tests check the script against package algorithm on
// thousands of random traces.
//
// # Time
//
// Time comes from the Redis server (TIME) unless a request carries its
// own Now, so application servers with skewed clocks agree. The script
// works in microseconds, because Redis's Lua keeps numbers in doubles: a
// Unix time in nanoseconds is not exact there, in microseconds it is
// until the year 2255. Limits whose interval, period and sub-window width
// are not whole microseconds are rounded up to one, which can only make
// them stricter.
//
// # Keys
//
// One key per limit of a policy per actor, named by [Key]: a hash tag
// first, derived from the actor's name, so that Redis Cluster keeps all of
// an actor's keys on one slot whatever bytes the name holds, then the name
// (or its SHA-256 when longer than 256 bytes) and the limit's StateID.
// Each write sets the key to expire when its state is back to empty (plus
// Config.TTLSlack), so idle actors cost nothing. A key holding something
// the script did not write fails the request with an error wrapping
// sluice.ErrCorruptState; nothing is written.
//
// # Clients
//
// The Store runs on rueidis by default, or on a go-redis client the
// caller already holds (Config.GoRedis). Both support a single server,
// Redis Cluster and Sentinel. rueidis pipelines concurrent calls over
// shared connections (auto-pipelining), so that many goroutines share
// round trips; in a measurement of EVALSHA of a GCRA script from 64
// goroutines on loopback it did about twice the throughput of go-redis
// with a connection pool, with 3 allocations per call instead of 14 (see
// docs/redis.md). [Store.DecideBatch] decides many keys in one pipelined
// round trip on either client; its takes and peeks under GCRA limits and
// fixed windows go in one script call per server (per hash slot on a
// Cluster), which cost Redis 11% less CPU per decision than a call each
// in batches of 3, and 28% less in batches of 16 (BenchmarkDecideBatch).
// Concurrent calls of Decide form such batches too: while Config.InFlight
// calls are on their way, further takes and peeks queue and go together
// when one comes back.
//
// # Failures
//
// A Store returns errors wrapping sluice.ErrStore when Redis is slow or
// gone; wrap it in package store/fallback for timeouts, a circuit breaker
// and a fail-open, fail-closed or local fallback policy.
//
// # Leases
//
// A Store is a sluice.LeaseStore: the leases of a concurrency limit on one
// key are a sorted set (LeaseKey) of lease IDs scored by their expiry in
// microseconds, and each acquire, release or extend is one call of the
// script lease.lua — expired leases dropped, the live ones counted, the
// lease added, removed or renewed, atomically, at the server's TIME: one
// round trip each. See docs/concurrency.md.
package redis
