// Package simulate replays access logs through a rules file, deciding
// every logged request exactly as sluice serve would have decided it
// through forward-auth, and reports what each rule would have done: the
// engine of "sluice simulate" (see docs/simulate.md).
//
// # How
//
// A [Replayer] builds a server.Service of the configuration on a memory
// store of its own, whose clock is the time of the entry being replayed,
// and sends each entry through the forward-auth endpoint's Check
// (server/forwardauth) as the proxy that logged it would have asked:
// from a trusted proxy's address, the client appended to the
// X-Forwarded-For it came with, the original method, URI, host and the
// headers the log kept. The rules engine, the guard, the jails and the
// bans are serve's own; nothing is re-implemented.
//
// [Run] reads the logs with package simulate/accesslog (parsed on every
// core), decides them, and returns a [Report]: per rule the requests, would-deny, bans, distinct
// keys (HyperLogLog), first and last denial, the keys denied most and the
// share of traffic from keys ever denied (Space-Saving sketches), a time
// series and, per limit, the distribution of requests per key per window.
// With Options.Compare, it replays a second rule set on the same requests
// and reports how they differ. [Report.WriteText], [Report.WriteHTML] and
// encoding/json write it.
//
// # Workers
//
// When forward-auth's key holds the client's address, Run decides on
// one worker per processor (Options.Workers), each a Replayer of its own
// (its own Service, memory store and clock) that decides the clients of
// a share of the networks, in log order: IPv4 clients by address, IPv6
// ones by /48 (or ipv6_prefix when shorter), found behind the trusted
// proxies as forward-auth finds them. Every state, jail and ban a
// decision reads is then one client network's, so the split replay
// decides every request as a replay in log order does; the workers'
// tallies merge at the end. Keys that clients share (a user header, a
// path alone), and -compare, replay on one worker.
//
// # Bounds
//
// Memory depends on the active keys, not on the log: the store's states,
// sketches of fixed size, a series of fixed length, and the keys of one
// window per limit (at most 2^20).
package simulate
