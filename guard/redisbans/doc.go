// Package redisbans keeps guard's ban registry in Redis, so that every
// process of a fleet enforces every ban, whoever made it, lists the same
// bans with reason, expiry and offence count, and can lift any of them;
// and so that a process started later, or again, enforces every ban in
// force from its first request.
//
// A [guard.Jail] enforces its bans from its Registry's [guard.BanSet], a
// set in the process's memory: a lookup costs no round trip and cannot
// fail, and no eviction of rate states can lift a ban. A [Registry] keeps
// that set a replica of the bans in Redis: give every process's jails a
// Registry on the same Redis and Prefix, usually the Redis store's own
// client:
//
//	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"10.0.0.5:6379"}})
//	...
//	store, err := redis.New(redis.Config{Client: client})
//	bans, err := redisbans.New(ctx, redisbans.Config{Client: client})
//	defer bans.Close()
//	jail, err := guard.NewJail(store, guard.JailConfig{Name: "login", Registry: bans})
//
// A fleet whose limits live in memcached keeps its bans there with
// package guard/memcachedbans, or in a small Redis with this one.
//
// # Layout
//
// Five keys per registry, with one hash tag so that Redis Cluster keeps
// them on one slot, and scripts can change them together:
//
//   - "{Prefix}:bans", a hash from jail and key (the jail's length, a
//     colon, the jail, the key: any bytes) to a JSON record ({"reason",
//     "since", "until", "offences"}, times in Unix nanoseconds);
//   - "{Prefix}:lifts", a hash of the same fields to the end, in Unix
//     milliseconds, of a ban that was lifted: the mark keeps processes
//     that still hold the ban from writing it back;
//   - "{Prefix}:until", a sorted set of the fields of both hashes scored
//     by their end in Unix milliseconds, to drop lapsed bans and marks,
//     in batches, as Put and List go;
//   - "{Prefix}:version", the number of the last change;
//   - "{Prefix}:log", the change log: a stream, trimmed to about
//     Config.LogLength entries, of entries {v: version, d: field, …, p:
//     field, r: record}, one per Put or Delete, appended by the script
//     that makes the change.
//
// # Eviction
//
// No key of the registry has a TTL: Redis' volatile-* eviction policies
// never take them, and noeviction keeps them all. Under an allkeys-*
// policy, Redis may evict any of them, each whole: the processes keep
// enforcing every ban from memory; a replica that finds the hash gone
// (it checks every Config.CheckEvery) or the versions broken reloads and
// writes back every ban it holds; a lost sorted set leaves lapsed records
// in the hash (never listed nor loaded, as they have lapsed) until they
// are lifted or the key is deleted. Give the registry a Redis, or a
// policy, that does not evict it.
package redisbans
