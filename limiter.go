package sluice

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"sync/atomic"
	"time"
)

// MaxActorLen is the longest actor key a Limiter passes to its store as it
// is; longer ones (and those starting with '#') are replaced by '#' and the
// base64 of their SHA-256, so a key of megabytes costs 44 bytes of store.
const MaxActorLen = 128

// maxNameLen bounds Config.Namespace and Config.Action.
const maxNameLen = 128

// Config configures a Limiter. The zero value of each field but Limits
// means its default.
type Config struct {
	// Limits is the policy: a request is allowed only if every limit
	// allows it, and then counts against all of them. At least one.
	Limits []Limit
	// Action names what is limited ("login", "invite"). It is part of
	// every key, so limiters of different actions never share state.
	// Default "default".
	Action string
	// Namespace prefixes every key, to share a store with other
	// applications. Default "sluice".
	Namespace string
	// Clock returns the time of each request. Default nil: the store's
	// clock (for Redis, the server's, so skewed hosts agree).
	Clock func() time.Time
	// SafeToForget marks the limiter's states as ones whose loss is the
	// safe direction (see Request.SafeToForget): a flag that lets an actor
	// through, a count that leads to a ban. Default false.
	SafeToForget bool
}

// A Limiter limits how often each actor may perform one action: each
// actor (an IP address, a user name, an API key) is allowed what the
// policy allows, with its state in the Limiter's Store, shared by every
// process using that store.
//
// The zero value is not usable; create Limiters with New. A Limiter is
// safe for concurrent use.
type Limiter struct {
	store        Store
	bound        Bound    // store's binding of prefix and limits, if store is a Binder
	admitter     Admitter // bound, if it is an Admitter
	limits       []Limit
	prefix       string
	clock        func() time.Time
	safeToForget bool
}

// New returns a Limiter that applies c to actors, keeping state in store.
// It validates every limit now, so later calls fail only on bad calls or
// store errors.
func New(store Store, c Config) (*Limiter, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: nil store", ErrInvalidRequest)
	}
	if c.Action == "" {
		c.Action = "default"
	}
	if c.Namespace == "" {
		c.Namespace = "sluice"
	}
	if len(c.Action) > maxNameLen || len(c.Namespace) > maxNameLen {
		return nil, fmt.Errorf("%w: namespace and action must be at most %d bytes", ErrInvalidRequest, maxNameLen)
	}
	r := Request{Limits: c.Limits, Op: OpReset}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	l := &Limiter{
		store:        store,
		limits:       append([]Limit(nil), c.Limits...),
		prefix:       c.Namespace + ":" + c.Action + ":",
		clock:        c.Clock,
		safeToForget: c.SafeToForget,
	}
	if b, ok := store.(Binder); ok && !c.SafeToForget { // a Bound's requests carry no SafeToForget
		bound, err := b.Bind(store, l.prefix, l.limits)
		if err != nil {
			return nil, err
		}
		l.bound = bound
		l.admitter, _ = bound.(Admitter)
	}
	return l, nil
}

// Limits returns a copy of the limiter's policy.
func (l *Limiter) Limits() []Limit { return append([]Limit(nil), l.limits...) }

// Allow is shorthand for AllowN(ctx, actor, 1).
func (l *Limiter) Allow(ctx context.Context, actor string) (Decision, error) {
	// Not through AllowN: small enough to inline, Allow spares its caller
	// a copy of the Decision on the hottest path.
	return l.do(ctx, OpTake, actor, 1, time.Time{})
}

// Admit reports whether actor may perform the action once now, and if so
// counts it, as Allow does: Allow's Decision without its details, for a
// caller that needs a yes or no alone (as x/time/rate's Allow answers).
// On a store whose Bound is an Admitter (the memory store), it spares the
// work of the details: on a hot key, most of a decision. A denial is
// false with a nil error; the error is Allow's.
func (l *Limiter) Admit(ctx context.Context, actor string) (bool, error) {
	if l.admitter != nil {
		return l.admitter.Admit(ctx, actorKey(actor), 1, l.now())
	}
	d, err := l.do(ctx, OpTake, actor, 1, time.Time{})
	return d.Allowed, err
}

// AllowN reports whether actor may perform the action n times now, and if
// so counts them. A denial is a Decision with Allowed false; the error is
// non-nil only when the store failed or the request is invalid: n < 1, or
// n larger than a limit's MaxBurst (ErrCostExceedsBurst: such a request
// could never be allowed, so it is refused without asking the store).
func (l *Limiter) AllowN(ctx context.Context, actor string, n int) (Decision, error) {
	return l.do(ctx, OpTake, actor, n, time.Time{})
}

// Peek reports whether actor may perform the action once now, without
// counting it (a check without a take). Its Remaining is what a take would
// leave.
func (l *Limiter) Peek(ctx context.Context, actor string) (Decision, error) {
	return l.do(ctx, OpPeek, actor, 1, time.Time{})
}

// PeekN is Peek for a cost of n.
func (l *Limiter) PeekN(ctx context.Context, actor string, n int) (Decision, error) {
	return l.do(ctx, OpPeek, actor, n, time.Time{})
}

// Insert counts n for actor under every limit whether or not it fits, and
// reports whether actor may still act (what Peek gets just after): a
// penalty when n > 0 (a failed login that counts 5), a reward when n < 0
// (units given back now, the oldest still counted first). See OpInsert
// for the bounds: a penalty never makes actor wait longer than the
// limit's time to refill from empty, and a reward never gives more than
// was spent. n must be non-zero and at most every limit's MaxBurst either
// way.
//
// The four operations side by side: Peek checks without counting; Insert
// counts without checking; Allow and AllowN check and count if allowed;
// Reserve checks and counts, and lets the count be taken back.
func (l *Limiter) Insert(ctx context.Context, actor string, n int) (Decision, error) {
	return l.do(ctx, OpInsert, actor, n, time.Time{})
}

// Reset forgets actor's state under every limit: after a successful login,
// its failures no longer count.
func (l *Limiter) Reset(ctx context.Context, actor string) error {
	_, err := l.do(ctx, OpReset, actor, 0, time.Time{})
	return err
}

// Reserve takes n for actor as AllowN does and returns a Reservation, for
// callers that learn only after the work whether it should count: a login
// handler reserves one attempt, then commits it if the password was wrong
// and refunds it if it was right. The take is atomic, so concurrent
// attempts cannot overrun the limit while the work is in progress.
func (l *Limiter) Reserve(ctx context.Context, actor string, n int) (*Reservation, error) {
	d, err := l.do(ctx, OpTake, actor, n, time.Time{})
	if err != nil {
		return nil, err
	}
	r := &Reservation{Decision: d, lim: l, actor: actor, cost: n}
	if !d.Allowed {
		r.done.Store(true) // nothing was taken: nothing to commit or refund
	}
	return r, nil
}

// Resume returns the Reservation of a take of n that actor was allowed at
// at (its Decision.Time), made elsewhere: a service that reserved in one
// call and learns the outcome in another, maybe in another process.
// Its Commit and Refund act as the original's would; it does not know
// whether the original was settled already, so its caller must settle
// each take once.
func (l *Limiter) Resume(actor string, n int, at time.Time) *Reservation {
	return &Reservation{Decision: Decision{Allowed: true, Limit: l.limits[0], Time: at}, lim: l, actor: actor, cost: n}
}

func (l *Limiter) do(ctx context.Context, op Op, actor string, n int, at time.Time) (Decision, error) {
	if l.bound != nil && op != OpRefund {
		return l.bound.Decide(ctx, actorKey(actor), op, n, l.now())
	}
	return l.store.Decide(ctx, Request{Prefix: l.prefix, Key: actorKey(actor), Limits: l.limits, Op: op, Cost: n, Now: l.now(), At: at, SafeToForget: l.safeToForget, limitsChecked: true})
}

// now returns the time of a request: zero, for the store's clock, unless
// Config.Clock is set.
func (l *Limiter) now() time.Time {
	if l.clock == nil {
		return time.Time{}
	}
	return l.clock()
}

// actorKey bounds an actor key: keys longer than MaxActorLen, and keys
// that start with '#' (so that no plain key can equal a hashed one), are
// replaced by '#' and the unpadded base64url of their SHA-256.
func actorKey(actor string) string {
	if len(actor) <= MaxActorLen && (actor == "" || actor[0] != '#') {
		return actor
	}
	return hashedKey(actor)
}

// hashedKey is actorKey's replacement of a long key.
func hashedKey(actor string) string {
	sum := sha256.Sum256([]byte(actor))
	return "#" + base64.RawURLEncoding.EncodeToString(sum[:])
}

// A Reservation is a take that its caller may still refund. Commit or
// Refund it once; a Reservation that was denied has nothing to commit or
// refund, and both return nil. Safe for concurrent use.
type Reservation struct {
	Decision
	lim   *Limiter
	actor string
	cost  int
	done  atomic.Bool
}

// Commit keeps the take: the work counted. It does not touch the store.
func (r *Reservation) Commit() error {
	if !r.Allowed {
		return nil
	}
	if !r.done.CompareAndSwap(false, true) {
		return ErrReservationDone
	}
	return nil
}

// Refund gives the take back atomically: the work did not count. What has
// expired since the take is not given back twice.
func (r *Reservation) Refund(ctx context.Context) error {
	if !r.Allowed {
		return nil
	}
	if !r.done.CompareAndSwap(false, true) {
		return ErrReservationDone
	}
	_, err := r.lim.do(ctx, OpRefund, r.actor, r.cost, r.Time)
	if err != nil {
		r.done.Store(false) // let the caller retry
	}
	return err
}
