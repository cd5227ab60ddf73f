// Package memory is the embedded store of sluice: limiter state in the
// memory of one process, for a service that runs on one machine or that
// wants a local limiter in front of a shared one.
//
// # Model
//
// A [Store] applies the algorithms of package algorithm to states kept in
// hash tables, sharded by a hash of the key so that concurrent requests
// for different actors rarely wait on the same lock. A decision on a key
// the store holds allocates nothing. A GCRA state whose Key is up to 30
// bytes takes a 40-byte slot that holds the key too, so a lookup need not
// fetch the key from elsewhere; the slot numbers the key's Prefix, which
// the keys of a limiter share, instead of holding its bytes. With its
// share of the index, it takes about 50 bytes in all (counted as 55
// against MaxBytes), 26 beyond its Prefix+Key, measured over a million
// 24-byte names by BenchmarkBytesPerKey; a longer key's bytes are kept
// apart, and cost a map lookup more per decision.
//
// A [sluice.Limiter] (and the rules engine of sluice serve) decides
// through the store's Bound of its prefix and limits ([Store.Bind]),
// checked once: a take or peek of a key whose states the store holds is
// decided in place, under its shard's lock, without building a request
// or the key's name; a new key, or one the store evicted, takes the
// general way, through its ledger. Sliding logs and staggered fixed
// windows, whose states are found by the whole name, always do.
//
// # Bounds
//
// Memory is bounded by [Config.MaxBytes]: three eighths of it are kept for
// the ledgers below, the rest for states. States that are back to their
// full allowance are dropped by a sweeper, and, under pressure, evicted;
// when none is, the store evicts, from a random sample, the state whose
// eviction costs least: the one with the most allowance left, or the one
// over its limit that will be back under it soonest. A full store keeps
// deciding: it fails a request, with [sluice.ErrStoreFull], only when the
// request's own states need more than MaxBytes. An insert that no
// eviction makes room for (a limit's first states in a shard) goes
// ahead: the store may run over MaxBytes by a small chunk of slots per
// limit and shard until the sweeper compacts its tables.
//
// # Forgetting, and whom it costs
//
// Eviction never hands an actor back what it had spent, and never charges
// one rule for another's actors. A state evicted before it is back to
// empty is remembered in a ledger of its Prefix (its rule, its limiter):
// by a fingerprint of its key and a compact form of the state itself, one
// word for GCRA against its 40-byte slot, so that the store remembers
// about six times as many actors as it holds. An actor that returns is
// charged what it had spent, exactly (a GCRA tat rounded up by less than
// a 4-millionth of its burst's length, a millisecond for an hour), and
// its decisions are not estimates. Only
// when a ledger is full does it fold entries, those that lapse first, into
// cells that its rule's actors share, each holding the most spent of what
// fell into it (see the algorithm package's Summarize): a key the ledger
// no longer holds is charged from its cells, at least as spent as it was
// evicted, and a fresh key that shares its cells with more spent ones is
// charged as they are ([sluice.Decision] Estimated) until they lapse, a
// period at most for a window. So no take is admitted that the algorithm,
// remembering every actor, would deny; every algorithm keeps its stated
// bound; and the cost of forgetting falls on the flooded rule alone, once
// its flood exceeds what it remembers (docs/accuracy.md measures both:
// at the default MaxBytes, a flood of distinct keys of one rule must
// exceed about 14 million keys in one window before 1% of that rule's
// fresh actors are refused, and no fresh actor of another rule ever is).
//
// The ledgers of a shard share its part of their budget: each grows by
// doubling to what the budget leaves, and when it leaves nothing, one
// takes room from another more than twice its size by halving it, so
// that a rule that has little to remember keeps its share while another
// floods.
//
// # Time
//
// Requests carry their time (Request.Now), or take it from
// [Config.Clock]. Expiry follows the newest time the store has seen, so a
// store driven by explicit times, such as a replay of an access log,
// behaves on that timeline as a live store does on the clock.
//
// The default clock is read at [Config.Resolution], 1 ms: while the store
// is busy, a goroutine publishes a reading every millisecond, and a
// request whose limits all span ten milliseconds or more (a burst that
// takes that long to refill, a window that long) takes the latest one,
// which spares it a clock read, a third of the cost of a decision on a
// virtual machine. Limits hold exactly on the published readings, which
// trail the true time by at most a millisecond plus the goroutine's
// scheduling delay: measured on the true clock, a window can see the
// refill of that lag more or less. Finer limits read the clock for every
// request.
//
// # Leases
//
// A Store is a sluice.LeaseStore. Leases are kept apart from the rate
// states, within an eighth of MaxBytes on top of theirs; a live lease is
// never evicted, and a store whose leases' share is spent refuses new
// ones (sluice.LeaseDecision.Full). See docs/concurrency.md.
package memory
