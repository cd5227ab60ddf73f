// Package fallback wraps any [sluice.Store] with what a shared store
// needs when its server is slow or gone: a timeout on every call, a
// circuit breaker, and a failure policy — fail open, fail closed, or
// decide on a local store (store/memory) with each limit divided among
// the fleet's instances, and replay the local takes into the primary
// when it answers again. A deny cache answers actors known to be over
// their limit without a round trip.
//
// It is generic over sluice.Store: store/redis and store/memcached use it
// alike.
//
//	primary, _ := redis.New(redis.Config{Addrs: []string{"10.0.0.5:6379"}})
//	store, _ := fallback.New(fallback.Config{
//		Primary:   primary,
//		Policy:    fallback.Local,
//		Instances: 8, // each process admits 1/8 of every limit alone
//		OnError:   func(err error) { log.Print(err) },
//	})
//	limiter, _ := sluice.New(store, sluice.Config{Limits: ...})
package fallback
