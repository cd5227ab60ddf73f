/*
Package sluice limits how often each actor may perform an action: how many
sign-in attempts an IP address may make per minute, how many API calls a key
may make per second, how many accounts one address may create per day. The
state lives in a [Store] — in the process, or in Redis or memcached so that
every process of a fleet shares it — and each decision is one atomic step
of that store.

A [Limiter] is the usual way in:

	store := memory.New(memory.Config{})
	lim, err := sluice.New(store, sluice.Config{
		Action: "login",
		Limits: []sluice.Limit{sluice.PerMinute(5), sluice.PerHour(20)},
	})
	...
	d, err := lim.Allow(ctx, clientIP)
	if err != nil {
		// the store failed: apply your failure policy (fail open or closed)
	}
	if !d.Allowed {
		// over the limit: answer 429 with Retry-After d.RetryAfter
	}

This package holds the types every layer of sluice speaks. The algorithms
are pure functions in package algorithm; the stores are in store/memory,
store/redis and store/memcached; HTTP middleware is in httplimit; the
standalone service (sluice serve) is in server and cmd/sluice.

# Limits

A [Limit] allows Rate events per Period, counted by an [Algorithm]:

  - [GCRA], the default: a token bucket of Burst tokens (Rate when Burst is
    zero) refilling one token every Period/Rate, kept as one timestamp.
    Over any span d it admits at most Burst + d·Rate/Period.
  - [FixedWindow]: a counter per window of length Period. Simple and cheap,
    but it admits up to 2×Rate across a window boundary.
  - [SlidingWindow]: Buckets sub-window counters, the oldest counted in
    full: never more than Rate in any window of length Period.
  - [ApproxSlidingWindow]: the same counters, the oldest weighted by how
    much of it is still inside the window, as Cloudflare and HAProxy do.
  - [SlidingLog]: the time of every admitted event; exact, with state
    proportional to Rate (at most [MaxLogRate]).

Build limits with [PerSecond], [PerMinute], [PerHour], [PerDay], [Every],
a literal, or [ParseLimit], which reads the form used in configuration
files and on the command line and that [Limit.String] writes:

	100/min              100 per minute (GCRA, burst 100)
	10/s burst 20        10 per second, up to 20 at once
	30 per 5m            30 per five minutes
	1000/h sliding       strict sliding window counter, 10 buckets
	1000/h approx buckets 60
	10/min fixed staggered

[Limit.Validate] reports why a limit cannot be applied; [Limit.MaxBurst]
is the largest cost one request may have; [Limit.StateID] names the state a
limit keeps, the same across changes of Rate or Burst, so a policy can be
retuned without forgetting who is over it.

# Policies

A [Config] gives a Limiter a policy of one or more limits ("5 a minute and
20 an hour"). A request is allowed only if every limit allows it, and then
counts against all of them; a denied request counts against none. The
store decides this all-or-nothing in one step, so concurrent requests can
never slip between the limits.

# Decisions

Every question gets a [Decision]: Allowed, the binding Limit, Remaining,
ResetAfter and RetryAfter — what a client needs for the IETF RateLimit
header fields and Retry-After. For a policy, the decision describes the
limit that binds ([Decision.Binds]): when denied, the one with the longest
wait; when allowed, the one with the fewest units left. RetryAfter is never
rounded down to a wait after which the request would still be denied.

Being over the limit is a Decision with Allowed false, never an error.

# Limiter

The four operations side by side:

	check             Peek, PeekN    may the actor act? counts nothing
	insert            Insert         counts n whether or not it fits (a
	                                 penalty), or gives n back (n < 0, a
	                                 reward); answers whether the actor
	                                 may still act
	check-and-insert  Allow, AllowN  counts n only if the policy allows it,
	                                 under every limit or none
	                  Reserve        the same, with the count taken back
	                                 later if the work went well
	                  Admit          Allow's answer alone, a bool: on
	                                 the memory store, a third cheaper
	                                 on a hot key
	peek              Peek, PeekN    (the check above: what a take would
	                                 get, and the Remaining it would leave)

[Limiter.Reset] forgets an actor (after a successful sign-in, the failed
attempts before it stop counting). A penalty never makes an actor wait
longer than the limit's time to refill from empty, and a reward never
gives back more than was spent (see [OpInsert]). A Limiter is safe for
concurrent use and holds no state of its own: create one per action and
share it.

# Reservations

Some requests should count only if they turn out badly: a failed password,
an invalid coupon. [Limiter.Reserve] takes the cost atomically before the
work, so that concurrent attempts cannot overrun the limit while it runs,
and returns a [Reservation]: [Reservation.Commit] keeps the take,
[Reservation.Refund] gives it back. What expired in the meantime is not
given back twice.

# Stores

A [Store] has one method, Decide, which applies a [Request] — an [Op]
([OpTake], [OpPeek], [OpRefund], [OpReset] or [OpInsert]) of a cost on one key under a
policy — atomically, and returns the Decision. [Request.Validate] holds
what every store requires of a request. Every store reproduces the
algorithms of package algorithm exactly and passes the conformance suite in
store/storetest; a store of your own can run that suite too.

# Keys

A Limiter stores each actor under Namespace:Action:actor, so limiters of
different actions never share state and applications can share a store.
Actor keys are any bytes. Keys longer than [MaxActorLen] bytes, and keys
that start with '#', are replaced by '#' and the base64 of their SHA-256,
so a key of megabytes costs 44 bytes of store and no plain key can collide
with a hashed one.

# Time and clocks

Algorithms never read a clock: time is a parameter ([Request.Now]). By
default a Limiter leaves Now zero and the store uses its own clock — for
Redis, the server's, so that application servers with skewed clocks agree.
[Config.Clock] sets the time of every request instead, which is how tests
drive a limiter through hours of traffic in microseconds. A clock that
steps backwards never admits more than the later time would have.

# Concurrency

A [Concurrency] limits how many requests per key are in flight at once,
rather than how many per period: each request acquires a [Lease] from a
[LeaseStore] (store/memory, store/redis and store/memcached are ones) and
releases it when done; a lease expires after its TTL, so a holder that
crashes never leaks its place for longer. Requests carry a [Class], and
under pressure sheddable ones are refused first while a reserve is kept
for critical ones ([Shares]); an [AdaptiveLimit] (package adaptive) limits
each process further by what its latency shows it can take. See
docs/concurrency.md.

# Errors

Errors wrap the sentinels of this package; test them with [errors.Is]:
[ErrInvalidLimit] for a limit that cannot be applied, [ErrInvalidRequest]
for a malformed request, [ErrCostExceedsBurst] for a cost no wait could
ever allow, [ErrStore] when the store failed to decide (with
[ErrStoreFull] and [ErrCorruptState] as special cases), and
[ErrReservationDone] for a Reservation committed or refunded twice. When
the store fails, the caller chooses whether to fail open or closed.
*/
package sluice
