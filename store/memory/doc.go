// Package memory is the embedded store of sluice: limiter state in the
// memory of one process, for a service that runs on one machine or that
// wants a local limiter in front of a shared one.
//
// # Model
//
// A [Store] applies the algorithms of package algorithm to states kept in
// hash tables, sharded by a hash of the key so that concurrent requests
// for different actors rarely wait on the same lock. A decision on a key
// the store holds allocates nothing. A GCRA state with a key of up to 39
// bytes (Prefix+Key) takes a 48-byte slot that holds the key too, so a
// lookup need not fetch the key from elsewhere, and about 71 bytes in
// all, measured over a million 24-byte keys; a longer key's bytes are
// kept apart, and cost a map lookup more per decision.
//
// # Bounds
//
// Memory is bounded by [Config.MaxBytes]. States that are back to their
// full allowance are dropped by a sweeper, and, under pressure, evicted;
// an actor that is over its limit is never evicted, since forgetting it
// would give it a fresh allowance. When no state may be evicted, Decide
// fails with an error wrapping [sluice.ErrStoreFull], and the Limiter's
// caller applies its failure policy.
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
package memory
