package sluice

import (
	"context"
	"fmt"
	"time"
)

// A Store keeps limiter state and decides requests against it atomically.
//
// Decide applies one Request to the state of Request.Key under every limit
// of Request.Limits, as a single atomic step: concurrent requests for the
// same key, from any number of goroutines or processes sharing the store,
// behave as if they ran one after another. For OpTake, the cost is
// consumed under every limit or under none (a policy is all-or-nothing).
// For OpRefund, OpReset and OpInsert, the Decision is what an OpPeek
// would get just after: of Cost for a refund, of 1 for a reset or an
// insert.
//
// The state of each limit is identified by the key and by the limit's
// [Limit.StateID], so a policy can change a limit's Rate or Burst without
// losing its counters, and two policies that share a limit on the same
// key share its state.
//
// A request over its limit is a Decision with Allowed false, not an
// error; Decide returns an error wrapping ErrStore only when the store
// could not decide. Implementations must be safe for concurrent use and
// must pass the conformance suite in package store/storetest.
type Store interface {
	Decide(ctx context.Context, r Request) (Decision, error)
}

// A Binder is a Store that can prepare for the requests of one prefix and
// policy, sparing each request the work that depends only on them: New
// binds every Limiter whose store is a Binder, and sends its takes, peeks
// and resets through the Bound; the rules engine (server/rules) binds
// each rule alike, for its takes and peeks. The memory store is a Binder.
type Binder interface {
	Store
	// Bind returns the Bound of prefix and limits for the store as its
	// caller holds it, as, or the error of Request.Validate for a request
	// with those limits. limits must not change afterwards. The Bound is
	// nil, and the caller uses as.Decide, unless as is the Binder itself:
	// a type that embeds a Binder to wrap its Decide (to inject faults,
	// count, log) inherits Bind, and a Bound would bypass the wrapper.
	Bind(as Store, prefix string, limits []Limit) (Bound, error)
}

// A Batcher is a Store that can decide many requests in one call, as
// store/redis does in one round trip per server: each request is decided
// on its own, atomically, as Decide would decide it, in the order of the
// slice, and ds[i], errs[i] answer rs[i]. A layer over a store (a
// failure policy, metrics) is a Batcher too when the store under it is,
// so that a batch reaches the store whole; see DecideBatch.
type Batcher interface {
	Store
	DecideBatch(ctx context.Context, rs []Request) (ds []Decision, errs []error)
}

// DecideBatch decides rs in one call of s when s is a Batcher, and with
// one Decide each otherwise: ds[i], errs[i] answer rs[i].
func DecideBatch(ctx context.Context, s Store, rs []Request) ([]Decision, []error) {
	if b, ok := s.(Batcher); ok {
		return b.DecideBatch(ctx, rs)
	}
	ds, errs := make([]Decision, len(rs)), make([]error, len(rs))
	for i, r := range rs {
		ds[i], errs[i] = s.Decide(ctx, r)
	}
	return ds, errs
}

// A Bound decides the requests of one prefix and policy: Decide(ctx, key,
// op, cost, now) decides as the Binder's Decide would decide
// Request{Prefix: prefix, Key: key, Limits: limits, Op: op, Cost: cost,
// Now: now}, with the same state, answers and errors. (Its zero At leaves
// a refund invalid: refunds go through Store.Decide.)
type Bound interface {
	Decide(ctx context.Context, key string, op Op, cost int, now time.Time) (Decision, error)
}

// An Admitter is a Bound that can also answer a take with whether it was
// allowed alone: Admit(ctx, key, cost, now) decides, with the same state
// and errors, as Decide(ctx, key, OpTake, cost, now), and returns its
// Decision's Allowed, sparing the work of the Decision's other fields.
// Limiter.Admit uses it. The memory store's Bound is an Admitter.
type Admitter interface {
	Bound
	Admit(ctx context.Context, key string, cost int, now time.Time) (bool, error)
}

// Op is what a Request asks of a store.
type Op uint8

const (
	// OpTake consumes Cost if every limit allows it, and nothing otherwise.
	OpTake Op = iota
	// OpPeek reports whether Cost would be allowed now, consuming nothing.
	OpPeek
	// OpRefund gives back Cost that an allowed OpTake consumed at time At
	// (its Decision.Time). What has since expired is not given back, and
	// a refund never leaves a limit with more than its full allowance.
	OpRefund
	// OpReset forgets the key's state under every limit of the request:
	// the actor starts afresh.
	OpReset
	// OpInsert counts Cost under every limit whether or not it fits: a
	// penalty (a failed login that costs 5) or, with a negative Cost, a
	// reward that gives units back now. A penalty may take a limit past
	// empty, but never further than the actor then waits for the limit's
	// time to refill from empty (Period for the windows, MaxBurst
	// intervals for GCRA); a reward gives back at most -Cost of the units
	// still counted, the oldest first, and never more than the full
	// allowance. Each limit's state changes atomically; the Decision is
	// what a peek of 1 gets just after, so a caller learns whether the
	// actor may still act.
	OpInsert

	numOps // keep last
)

var opNames = [numOps]string{"take", "peek", "refund", "reset", "insert"}

func (o Op) String() string {
	if o < numOps {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", o)
}

// A Request asks a Store to decide one operation on one key.
type Request struct {
	// Prefix and Key together, Prefix+Key, name the state: Prefix is the
	// limiter's namespace and action ("sluice:login:"), Key the actor,
	// bounded in length by the Limiter. They come apart so that a store
	// can look the state up without building the string. Any bytes.
	Prefix, Key string
	// Limits is the policy: every limit must allow a take. At least one.
	Limits []Limit
	// Op is the operation; the zero value is OpTake.
	Op Op
	// Cost is the number of units to take, peek at or refund; at least 1.
	// For an insert, a non-zero number between -MaxBurst and MaxBurst of
	// every limit: negative gives units back.
	Cost int
	// Now is the time of the request. The zero value means the store's
	// own clock (for a shared store, the server's clock, so that
	// application servers with skewed clocks agree).
	Now time.Time
	// At is, for OpRefund, the Decision.Time of the take being refunded.
	At time.Time
	// SafeToForget marks a state whose loss is the safe direction: one
	// that grants something (a known-good address, a notice already
	// sent), or that escalates a penalty (a jail's count of failures,
	// whose loss delays a ban while the actor's limits still hold). A
	// store that must forget states to stay within its memory, and
	// charges a key it no longer holds conservatively from what it forgot
	// of other keys (store/memory), never does so for such a state: it
	// recalls the key's own state if it remembers it apart (by a 40-bit
	// fingerprint), else treats the key as fresh and marks the Decision
	// Forgotten, for a summary shared with other keys must not grant a
	// privilege or ban an innocent. Default false.
	SafeToForget bool

	// limitsChecked is set by a Limiter, whose Limits were validated by
	// New and cannot change since: Validate then skips re-checking them on
	// every decision. Requests built elsewhere never have it set.
	limitsChecked bool
}

// Validate checks what every store requires of a request: a known op, at
// least one valid limit, no two limits sharing a StateID, for takes,
// peeks and refunds a cost of at least 1 and at most every limit's
// MaxBurst, and for inserts a cost of at most MaxBurst either way, not 0.
// Stores call it before touching state.
func (r *Request) Validate() error {
	if r.limitsChecked && r.Op == OpTake && r.Cost == 1 && r.Now.IsZero() {
		return nil // a Limiter's Allow: every MaxBurst is at least 1
	}
	if r.Op >= numOps {
		return fmt.Errorf("%w: unknown op %d", ErrInvalidRequest, r.Op)
	}
	if len(r.Limits) == 0 {
		return fmt.Errorf("%w: no limits", ErrInvalidRequest)
	}
	for i, l := range r.Limits {
		if !r.limitsChecked {
			if err := l.Validate(); err != nil {
				return err
			}
			for _, prev := range r.Limits[:i] {
				if prev.stateFields() == l.stateFields() { // StateID's fields: not its hash, on every request
					return fmt.Errorf("%w: limits %v and %v share their state (same algorithm and period)", ErrInvalidRequest, prev, l)
				}
			}
		}
		if r.Op != OpReset && (r.Cost > l.MaxBurst() || r.Op == OpInsert && -r.Cost > l.MaxBurst()) {
			return fmt.Errorf("%w: cost %d, limit %v", ErrCostExceedsBurst, r.Cost, l)
		}
	}
	switch {
	case r.Op == OpInsert && r.Cost == 0:
		return fmt.Errorf("%w: an insert of cost 0", ErrInvalidRequest)
	case r.Op != OpReset && r.Op != OpInsert && r.Cost < 1:
		return fmt.Errorf("%w: cost %d must be at least 1", ErrInvalidRequest, r.Cost)
	}
	if r.Op == OpRefund && r.At.IsZero() {
		return fmt.Errorf("%w: refund without the time of its take", ErrInvalidRequest)
	}
	if err := checkTime(r.Now); err != nil {
		return err
	}
	return checkTime(r.At)
}

func checkTime(t time.Time) error {
	if t.IsZero() {
		return nil
	}
	if sec := t.Unix(); sec < 0 || sec >= maxTime.Unix() || (sec == 0 && t.Nanosecond() == 0) {
		return fmt.Errorf("%w: time %v is outside %d–%d", ErrInvalidRequest, t, minTime.Year(), maxTime.Year())
	}
	return nil
}

// The times a request may carry: stores work in Unix nanoseconds, where
// 0 marks empty state and int64 ends in 2262.
var (
	minTime = time.Unix(0, 1)
	maxTime = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
)

// StateID identifies the state a limit keeps for a key: the same for
// limits that differ only in Rate or Burst (so changing them keeps the
// counters), different when the algorithm, period, bucket count or
// staggering differ (their states do not mean the same thing). It is a
// 64-bit FNV-1a hash of those fields, stable across versions and
// processes, so shared stores may put it in their key names.
func (l Limit) StateID() uint64 {
	h := uint64(14695981039346656037)
	for _, v := range l.stateFields() {
		for range 8 {
			h ^= v & 0xff
			h *= 1099511628211
			v >>= 8
		}
	}
	return h
}

// stateFields are what StateID hashes: the algorithm, the period, the
// bucket count of a sliding window and the staggering of a fixed one.
func (l Limit) stateFields() [4]uint64 {
	var buckets int
	if l.Algorithm == SlidingWindow || l.Algorithm == ApproxSlidingWindow {
		buckets = l.BucketCount()
	}
	staggered := l.Staggered && l.Algorithm == FixedWindow
	return [4]uint64{uint64(l.Algorithm), uint64(l.Period), uint64(buckets), b2u(staggered)}
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
