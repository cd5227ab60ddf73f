// Package memcached is a [sluice.Store] that keeps limiter state in
// memcached, on one server or spread over a fleet: the design of the
// seeds (Willison's ratelimitcache, php-ratelimiter) — counters per
// window, created and bumped atomically, read back together — done in one
// round trip per decision with memcached's meta protocol, and with exactly
// the decisions of package algorithm.
//
// It needs memcached 1.6 or later (meta commands). No Go memcached client
// speaks the meta protocol, so the package carries a small one of its own.
//
//	store, err := memcached.New(memcached.Config{Addrs: []string{"10.0.0.1:11211", "10.0.0.2:11211"}})
//	lim, err := sluice.New(store, sluice.Config{Limits: []sluice.Limit{sluice.PerMinute(100)}})
//
// # Counter algorithms: fixed and sliding windows
//
// A FixedWindow, SlidingWindow or ApproxSlidingWindow limit keeps, per
// actor, one memcached counter per window or sub-window ("bucket"), named
// by its number, and a head item holding a generation and the newest
// bucket a take was counted in. A take is one pipeline, one round trip:
//
//	ms head ME          create the head if missing (a fresh actor)
//	mg head v c         read it
//	ma bucket N J D v   create-or-increment the current bucket by the cost
//	mg bucket           mark it used in the LRU (ma does not)
//	mg older buckets v  a sliding window's G older buckets
//
// The store then rebuilds the state the reference keeps, with the current
// bucket as it was before the increment, and decides with package
// algorithm: the decision (Allowed, Remaining, ResetAfter, RetryAfter) is
// the reference's. A peek is the same pipeline without the writes. A
// denied take costs a second round trip, to take its increments back; an
// actor denied again before its RetryAfter has passed is asked with a
// peek first, so a flood of denied requests costs one round trip each and
// writes nothing.
//
// The head makes the reference's two subtleties exact. A take whose clock
// is behind the newest bucket seen counts in that newest bucket, as the
// reference does: the head names it, and the store aims again (a second
// round trip, only then). A reset gives the head a new random generation,
// which is part of every bucket's key, so counters from before the reset
// are never read again and simply expire.
//
// # What is atomic for counters
//
// Each increment is atomic: the count it returns includes every take
// before it and none after. A take is admitted only if the count after
// its own increment fits, so a counter limit never admits more than the
// reference would; 64 goroutines in each of 4 processes on one key admit
// exactly the limit (see TestAtomicAcrossProcesses).
//
// What is not atomic, precisely:
//
//   - A denied take was counted before the store knew it was denied. Its
//     increments are then taken back (ma MD), and the store waits for that
//     before it answers, so no request that starts after the answer sees
//     them. Meanwhile a concurrent take sees up to Cost more and may
//     be denied where a sequential run would admit it: under-admission,
//     never over-admission. With takes of cost 1 under one limit and no
//     refunds this cannot happen (a take is denied only when the count was
//     already at the limit).
//   - A policy of several limits is decided all-or-nothing the same way:
//     every counter limit is incremented in the same round trip; if any
//     limit denies, all the increments are taken back.
//   - If a round trip fails (timeout, dead server) or the process dies
//     between an increment and its rollback, the count stays up until its
//     bucket leaves the window: under-admission, never over-admission.
//   - When a take opens a newer bucket, the head is updated afterwards by
//     compare-and-set, queued on the connection without waiting: it goes
//     out in the same write as the connection's next batch, or alone within
//     half a millisecond. A caller running alone reuses the same
//     connection, so its next request reaches the server after the update;
//     a concurrent request on another connection in the half millisecond
//     between, whose clock is behind across a bucket boundary, may count in
//     the older bucket.
//   - A sliding window's older buckets are read in the same pipeline, not
//     under one lock with the increment. They change afterwards only by
//     refunds and rollbacks (which lower them) or by takes from clocks that
//     are behind, which the previous point covers.
//
// # GCRA and sliding log: compare-and-set
//
// A GCRA or SlidingLog limit keeps its state encoded by
// algorithm.AppendState in one item. A take reads it with its CAS token
// (mg v c), decides with package algorithm and, if allowed, writes the new
// state only if no one wrote since (ms C, or ME for a new item): one round
// trip when denied, two when allowed. The process remembers the last state
// it read or wrote for each actor (a bounded table) with its CAS token, so
// a take usually decides on it and writes straight away, in one round
// trip: a write that succeeds proves the state was the one remembered; if
// it loses, or the remembered state denies, the store reads as above. A write that loses the race starts
// the request again after a short random backoff, at most MaxRetries
// times; then the request fails with ErrContention, which wraps
// sluice.ErrStore, so the failure policy decides. Within one process, the
// requests of one actor are serialised by a striped lock, so goroutines
// never lose races to each other: only other processes make a request
// retry. In a policy mixing both kinds, counters are incremented in the
// first round trip and states written in the second; if one state write
// loses, the writes that won are refunded, the increments taken back, and
// the request starts again.
//
// # Peek, reset, refund and reservations
//
// A peek reads only: one round trip. A reset is one round trip: counter
// heads get a new generation, states are deleted. A refund (and so
// Reservation.Refund) reads the head and buckets, computes what the
// reference's Refund would change and applies it as decrements (memcached
// stops them at zero), and refunds states by compare-and-set: two or
// three round trips. Refunds of counters are not atomic with concurrent
// takes, but they only lower counts the reference would also lower. A
// refund answers what a peek of its cost would get on the states it
// leaves, and a reset what a peek of 1 gets on fresh ones, as
// sluice.Store asks, with no further round trip.
//
// # Time
//
// Times are Request.Now, or the local clock when it is zero: memcached
// offers no clock finer than a second. Every item expires once it can no
// longer matter (a bucket when it leaves the window, a state when it is
// empty again) plus ExpiryMargin, as a relative time to live (longer than
// 30 days, as a Unix time).
//
// # Keys
//
// The actor's name is Request.Prefix+Request.Key. A name of at most 160
// bytes of printable ASCII other than space, not starting with '#', is
// used as it is; any other is replaced by '#' and the base64url of its
// SHA-256. Keys are that name, '|', the limit's StateID in hex, and a
// suffix; no command with an invalid key is ever sent.
//
// # Fleet
//
// With several servers, actors are placed by ketama consistent hashing of
// their (encoded) names, compatible with libketama and the clients that
// follow it, so other programs agree on placement: adding a fifth server
// to four moves about a fifth of the actors (hashing modulo N would move
// four fifths). Every key of an actor lives on one server, so a decision
// is one round trip whatever the policy. A server that is down fails the
// decisions of its actors, and only theirs, with an error wrapping
// sluice.ErrStore. For a failure policy, wrap each server in package
// store/fallback with Config.WrapServer: each server then has a timeout
// and a circuit breaker of its own, and a dead server's actors are
// answered by the policy (fail open, fail closed, or limited locally)
// while the others are decided as usual:
//
//	store, err := memcached.New(memcached.Config{
//		Addrs: addrs,
//		WrapServer: func(addr string, server sluice.Store) sluice.Store {
//			fb, err := fallback.New(fallback.Config{Primary: server, Policy: sluice.FailLocal, Instances: 8})
//			if err != nil {
//				return nil // memcached.New then fails
//			}
//			return fb
//		},
//	})
//
// # Eviction
//
// memcached evicts the least recently used items when full, and a flood
// of fresh keys (a botnet of fresh addresses, or any cache traffic
// sharing the server) pushes counters out: the actor they belonged to
// gets a fresh allowance. The store reads every counter it increments so
// that memcached's LRU keeps busy ones (TestEvictionPressure shows a busy
// actor staying limited through a flood that evicts an idle one). Against
// the flood itself: give limiter state a memcached pool of its own, sized
// for the actors you expect (about 110 bytes per item, measured with
// short keys: per actor and limit, a fixed window keeps a head and one
// counter per live window, a sliding window a head and up to G+1
// counters, GCRA and sliding log one state),
// and consider running it with -M, so that when full it refuses new items
// (an error, for the failure policy) instead of evicting live counters.
//
// # Bad input
//
// A key holding something that is not a counter or a state is an error
// wrapping sluice.ErrCorruptState. A server that answers outside the
// protocol, or not at all within Timeout, is an error wrapping
// sluice.ErrStore, and its connection is closed; nothing panics.
//
// # Leases
//
// A Store is a sluice.LeaseStore: the lease table of one key is one item,
// read with its CAS token and written back by compare-and-set (or add),
// so each acquire, release or extend is atomic, in two round trips (more
// when another process wrote between). Expiries are on the clients'
// clocks. memcached may evict the item under memory pressure, forgetting
// live leases: give it room, or run it with -M. See docs/concurrency.md.
package memcached
