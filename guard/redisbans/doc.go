// Package redisbans keeps guard's ban registry in Redis, so that every
// process of a fleet lists the same bans, with reason, expiry and offence
// count, and any process can lift any of them.
//
// A [guard.Jail] enforces its bans from the sluice Store it was given
// (memory, Redis or memcached): every process sharing that store refuses
// a banned actor at once. What a Store cannot do is enumerate bans or
// keep their reasons; that is the [guard.Registry]'s job. The default,
// [guard.MemoryRegistry], only lists the bans its own process made. Give
// every process's jails a [Registry] on the same Redis (and Prefix)
// instead, and `Jail.Bans`, the firewall export and the admin API see
// the whole fleet's bans:
//
//	rdb := redis.NewClient(&redis.Options{Addr: "10.0.0.5:6379"})
//	bans, err := redisbans.New(redisbans.Config{Client: rdb})
//	...
//	jail, err := guard.NewJail(store, guard.JailConfig{Name: "login", Registry: bans})
//
// The registry may live on the Redis that holds the limiter state
// (store/redis) or on another one: a fleet whose limits live in memcached
// can keep its ban list in a small Redis. Without any shared registry,
// bans are still enforced fleet-wide through the store; only the list is
// per process.
//
// # Layout
//
// Two keys per registry, with one hash tag so that Redis Cluster keeps
// them on one slot: "{Prefix}:bans", a hash from jail and key to a JSON
// record ({"reason", "since", "until", "offences"}, times in Unix
// nanoseconds), and "{Prefix}:until", a sorted set of the same fields
// scored by the ban's end in Unix milliseconds. Put and List drop lapsed
// bans in batches; both keys expire with their last ban.
package redisbans
