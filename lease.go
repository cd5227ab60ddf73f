package sluice

import (
	"context"
	"fmt"
	"time"
)

// A LeaseStore keeps, per key, a table of leases — grants of "one of at
// most N in flight" — shared by every process using the store. It is an
// optional capability of a Store, found by type assertion; store/memory,
// store/redis and store/memcached implement it.
//
// Each call is one atomic step on the key's table: concurrent calls for
// the same key, from any number of goroutines or processes, behave as if
// they ran one after another. Leases whose expiry has passed (by the
// store's clock, or LeaseRequest.Now) no longer count and are dropped by
// the next call on the key, so a holder that crashes or hangs gives its
// capacity back when its lease expires.
//
// A table full of live leases is a LeaseDecision with Allowed false, not
// an error; the error wraps ErrStore only when the store could not
// decide, and ErrInvalidRequest for a malformed request.
// Implementations must pass store/storetest.RunLeases.
type LeaseStore interface {
	// Acquire grants the lease r.ID, expiring r.TTL from now, if fewer
	// than r.Ceiling live leases (r.Limit when Ceiling is 0) are held on
	// the key. Acquiring an ID that is already live renews it, whatever
	// the count: a retried acquire never takes a second place.
	Acquire(ctx context.Context, r LeaseRequest) (LeaseDecision, error)
	// Release ends the lease r.ID. Allowed reports whether it was still
	// live; releasing a lease that expired or was released is harmless.
	Release(ctx context.Context, r LeaseRequest) (LeaseDecision, error)
	// Extend moves the expiry of the live lease r.ID to r.TTL from now.
	// Allowed false means the lease had expired or been released: it is
	// not revived, since its place may have been granted to another.
	Extend(ctx context.Context, r LeaseRequest) (LeaseDecision, error)
}

// Bounds of a LeaseRequest, so that a hostile caller cannot make a store
// hold an unbounded table per key or leases that never expire.
const (
	// MaxLeases is the largest LeaseRequest.Limit.
	MaxLeases = 1 << 16
	// MaxLeaseTTL is the longest LeaseRequest.TTL.
	MaxLeaseTTL = 24 * time.Hour
	// MinLeaseTTL is the shortest LeaseRequest.TTL (the Redis store works
	// in microseconds).
	MinLeaseTTL = time.Millisecond
	// MaxLeaseIDLen is the longest LeaseRequest.ID.
	MaxLeaseIDLen = 64
)

// A LeaseRequest asks a LeaseStore to acquire, release or extend one lease
// on one key.
type LeaseRequest struct {
	// Prefix and Key name the table, as in Request: Prefix+Key, any
	// bytes, bounded in length by the caller (Concurrency hashes long
	// keys as Limiter does).
	Prefix, Key string
	// ID names the lease: 1 to MaxLeaseIDLen bytes, unique among the
	// holders of the key, and the holder's proof that the lease is
	// its own: Release and Extend end or renew only the lease of this
	// ID in Prefix+Key's table, and no other. Concurrency draws 128
	// bits from crypto/rand, in 22 characters of base64url, so that no
	// ID can be guessed from another.
	ID string
	// Limit is the capacity of the key: at most Limit leases live, 1 to
	// MaxLeases. Release and Extend use it only to report.
	Limit int
	// Ceiling, for Acquire, admits the request only while fewer than
	// Ceiling leases are live: the share of Limit its priority class may
	// use (see Class). 0 means Limit; at most Limit.
	Ceiling int
	// TTL is how long the lease lives from now (Acquire, Extend): from
	// MinLeaseTTL to MaxLeaseTTL. Release ignores it.
	TTL time.Duration
	// Now is the time of the request; zero means the store's clock (for
	// a shared store, the server's, so skewed hosts agree on expiries).
	Now time.Time
}

// Validate checks what every LeaseStore requires of a request. op is
// "acquire", "release" or "extend": a release needs no TTL.
func (r *LeaseRequest) Validate(op string) error {
	if len(r.ID) == 0 || len(r.ID) > MaxLeaseIDLen {
		return fmt.Errorf("%w: lease id of %d bytes, want 1 to %d", ErrInvalidRequest, len(r.ID), MaxLeaseIDLen)
	}
	ttl := r.TTL
	if op == "release" {
		ttl = MinLeaseTTL // any TTL will do
	}
	if !ValidLease(r.Limit, r.Ceiling, ttl) {
		return leaseError(r.Limit, r.Ceiling, ttl)
	}
	return checkTime(r.Now)
}

// ValidLease reports whether a lease's limit, ceiling and TTL pass
// Validate, for a LeaseRefs store, whose calls take them without a
// LeaseRequest. Each range is one unsigned comparison, so that it
// inlines: 1 ≤ limit ≤ MaxLeases, 0 ≤ ceiling ≤ limit, and MinLeaseTTL ≤
// ttl ≤ MaxLeaseTTL.
func ValidLease(limit, ceiling int, ttl time.Duration) bool {
	return uint(limit-1) < MaxLeases && uint(ceiling) <= uint(limit) && uint64(ttl-MinLeaseTTL) <= uint64(MaxLeaseTTL-MinLeaseTTL)
}

// leaseError is Validate's error for a lease that is not ValidLease.
func leaseError(limit, ceiling int, ttl time.Duration) error {
	switch {
	case limit < 1 || limit > MaxLeases:
		return fmt.Errorf("%w: lease limit %d, want 1 to %d", ErrInvalidRequest, limit, MaxLeases)
	case ceiling < 0 || ceiling > limit:
		return fmt.Errorf("%w: lease ceiling %d, want 0 to the limit %d", ErrInvalidRequest, ceiling, limit)
	}
	return fmt.Errorf("%w: lease ttl %v, want %v to %v", ErrInvalidRequest, ttl, MinLeaseTTL, MaxLeaseTTL)
}

// EffectiveCeiling returns r.Ceiling, or r.Limit when it is 0.
func (r *LeaseRequest) EffectiveCeiling() int {
	if r.Ceiling == 0 {
		return r.Limit
	}
	return r.Ceiling
}

// A LeaseDecision is a LeaseStore's answer.
type LeaseDecision struct {
	// Allowed reports, for Acquire, that the lease was granted (or
	// renewed); for Release, that it was live until now; for Extend,
	// that it was live and now expires at Expires.
	Allowed bool
	// InUse is the number of live leases on the key after the call.
	InUse int
	// Limit is the request's Limit.
	Limit int
	// Expires is when the lease expires, if Allowed (Acquire, Extend).
	Expires time.Time
	// RetryAfter, for a denied Acquire, is how long until the earliest
	// live lease expires: the longest a waiter needs to wait if no holder
	// releases. Zero otherwise.
	RetryAfter time.Duration
	// Full reports a denial because the store had no room for another
	// lease (store/memory at its cap), not because the key's table was at
	// its ceiling. A full store refuses rather than forget a live lease.
	Full bool
	// Time is when the store decided, by the clock it used.
	Time time.Time
}

// A LeaseRefs is a LeaseStore whose tables live in this process
// (store/memory): it can grant a lease with no ID and hand back a
// LeaseRef, through which the lease is released or extended without its
// key being found again. Concurrency uses it when its store has it, so
// that a lease costs no ID and no second lookup; the lease is named (and
// then found by ID, as any other) only when its holder asks for its ID.
// Each call is one atomic step on the key's table, as the LeaseStore's
// are, and the two kinds of lease share the table's places.
//
// Its calls take and return a few machine words each, not a
// LeaseRequest and a LeaseDecision, so that their arguments and results
// travel in registers: on a store of this process, copying those structs
// through the interface cost a sixth of an acquire and release.
type LeaseRefs interface {
	LeaseStore
	// AcquireRef grants a lease with no ID on prefix+key, as Acquire
	// does a LeaseRequest of those Prefix, Key, Limit, Ceiling and TTL
	// at the store's time, and returns its ref (whose Table is nil
	// unless it was granted) and the decision. A request that Validate
	// would refuse is refused.
	AcquireRef(prefix, key string, limit, ceiling int, ttl time.Duration) (LeaseRef, LeaseGrant)
	// ReleaseRef ends the lease of ref, as Release does its ID's, and
	// reports whether it was still live. A ref already released or whose
	// lease expired is harmless.
	ReleaseRef(ref LeaseRef) bool
	// ExtendRef moves the expiry of ref's live lease to ttl from now, as
	// Extend does, and returns the new expiry, or false if the lease was
	// not live.
	ExtendRef(ref LeaseRef, ttl time.Duration) (time.Time, bool)
	// NameRef gives ref's live lease the ID id, so that Release and
	// Extend by that ID find it, and reports whether it was live.
	NameRef(ref LeaseRef, id string) bool
}

// A LeaseRef is a LeaseRefs store's reference to one granted lease: the
// store's table (a pointer, so that a ref costs no allocation), the
// lease's place in it and the grant's generation, so that a ref to a
// place granted since to another holder refers to nothing. Only the store
// that made it reads its fields.
type LeaseRef struct {
	Table any
	Slot  int
	Gen   uint64
}

// A LeaseGrant is a LeaseRefs store's decision on an AcquireRef, in four
// fields of 24 bytes: few enough that the compiler keeps it in registers
// (a larger struct it copies through memory, which on store/memory cost
// a tenth of an acquire and release in store-forwarding stalls).
type LeaseGrant struct {
	// Now is when the store decided, in Unix ns. Until, in Unix ns, is
	// when the lease expires if it was granted, and otherwise when the
	// earliest live lease on the key does; 0 for none.
	Now, Until int64
	// InUse is the number of live leases on the key after the call.
	InUse int32
	// Outcome is whether the lease was granted, and if not, why.
	Outcome LeaseOutcome
}

// A LeaseOutcome is how an acquire ended.
type LeaseOutcome uint8

// The outcomes of an acquire; the zero value is a refusal.
const (
	// LeaseRefused: the key's table was at the request's ceiling, or
	// the request was invalid.
	LeaseRefused LeaseOutcome = iota
	// LeaseGranted: the lease was granted.
	LeaseGranted
	// LeaseFull: the store had no room for another lease
	// (LeaseDecision.Full).
	LeaseFull
)

// Allowed reports whether the lease was granted.
func (g LeaseGrant) Allowed() bool { return g.Outcome == LeaseGranted }

// Decision returns g as the LeaseDecision of a key of limit.
func (g LeaseGrant) Decision(limit int) LeaseDecision {
	d := LeaseDecision{Allowed: g.Allowed(), InUse: int(g.InUse), Limit: limit, Full: g.Outcome == LeaseFull, Time: time.Unix(0, g.Now)}
	switch {
	case d.Allowed && g.Until != 0:
		d.Expires = time.Unix(0, g.Until)
	case !d.Allowed && g.Until > g.Now:
		d.RetryAfter = time.Duration(g.Until - g.Now)
	}
	return d
}
