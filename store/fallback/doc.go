// Package fallback wraps any [sluice.Store] with what a shared store
// needs when its server is slow or gone: a timeout on every call, a
// circuit breaker, and a failure policy — fail open, fail closed, or
// decide on a local store (store/memory) with each limit divided among
// the fleet's instances, and replay the local takes into the primary
// when it answers again. A deny cache answers actors known to be over
// their limit without a round trip.
//
// # The journal
//
// Under policy FailLocal, what was decided locally must reach the primary
// once it answers, or the fleet's shared state would be wrong after every
// outage. The Store journals it, in order, bounded by [Config.MaxReplay],
// and replays it at the original times from the primary's first answer:
//
//   - a take allowed locally is replayed, so the primary counts it;
//   - a refund of such a take while it still waits in the journal
//     cancels it: the primary never counts it;
//   - a refund of a take the primary counted (before the failure, or
//     replayed) is refunded locally and journaled, and replayed with the
//     At of its take: the primary gives back what has not expired since;
//   - a reset (say, after a successful login) drops from the journal
//     what the actor did before it under the limits it resets, and is
//     replayed itself, so the primary also forgets what it counted before
//     the failure.
//
// A refund or a reset whose actor's operations are in the replay batch
// on its way to the primary waits for that round trip, so that it
// follows them. A take that reaches the primary after it recovers but
// before the replay of a journaled reset of the same actor is forgotten
// by that reset: a window of one replay round trip per 256 journaled
// operations. [Stats] counts what was replayed, what failed and what
// MaxReplay dropped.
//
// It is generic over sluice.Store: store/redis and store/memcached use it
// alike.
//
//	primary, _ := redis.New(redis.Config{Addrs: []string{"10.0.0.5:6379"}})
//	store, _ := fallback.New(fallback.Config{
//		Primary:   primary,
//		Policy:    sluice.FailLocal,
//		Instances: 8, // each process admits 1/8 of every limit alone
//		OnError:   func(err error) { log.Print(err) },
//	})
//	limiter, _ := sluice.New(store, sluice.Config{Limits: ...})
package fallback
