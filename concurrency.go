package sluice

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultLeaseTTL is the lease TTL of a ConcurrencyConfig that leaves it
// zero.
const DefaultLeaseTTL = 30 * time.Second

// DefaultPoll is the Poll of a ConcurrencyConfig that leaves it zero.
const DefaultPoll = 10 * time.Millisecond

// ConcurrencyConfig configures a Concurrency. The zero value of each field
// but Limit means its default.
type ConcurrencyConfig struct {
	// Limit is how many leases may be in flight per key, across every
	// process sharing the store: 1 to MaxLeases.
	Limit int
	// TTL is how long a lease lives unless extended: a holder that
	// crashes or hangs gives its place back at most TTL after it last
	// acquired or extended. Default DefaultLeaseTTL (30 s).
	TTL time.Duration
	// Action and Namespace name the limiter's keys, as in Config.
	// Defaults "default" and "sluice".
	Action, Namespace string
	// Shares set the capacity each priority class may use. Default
	// Stripe's: sheddable below 50%, default below 80%, critical 100%.
	Shares Shares
	// Adaptive, if set, is a limit of this process found from latency
	// (package adaptive): on top of the store's Limit per key, this
	// process admits a request only while its own leases in flight, over
	// every key, are under Adaptive's limit, shared among the classes by
	// Shares. Default nil: only the store's limit applies.
	Adaptive AdaptiveLimit
	// Poll is how long a waiter at the head of its queue waits, when no
	// release by this process wakes it, before asking the store again (a
	// release by another process is seen then, or when the earliest
	// lease expires, if sooner). Default DefaultPoll (10 ms).
	Poll time.Duration
	// Clock times the leases for Adaptive. Default time.Now. The store's
	// own clock sets expiries.
	Clock func() time.Time
}

// An AdaptiveLimit is a limit on the requests a process has in flight that
// finds itself from what it observes: it grows while latency stays low and
// shrinks when latency rises or requests fail from overload. Package
// adaptive implements AIMD and a Vegas-style gradient. Implementations
// must be safe for concurrent use.
type AdaptiveLimit interface {
	// Limit returns the current limit, at least 1.
	Limit() int
	// Observe records one request that ended at now after rtt, with
	// inflight requests in flight when it started (itself included);
	// dropped reports that it failed from overload (a timeout, a
	// refusal downstream) rather than completed.
	Observe(now time.Time, rtt time.Duration, inflight int, dropped bool)
}

// A Concurrency limits how many requests per key are in flight at once,
// across every process sharing a LeaseStore: each request acquires a
// Lease, and releases it when done. A lease expires TTL after it was
// acquired or last extended, so a holder that crashes never leaks its
// place for longer.
//
// Requests carry a Class: under pressure, sheddable requests are refused
// first and a reserve is kept for critical ones (see Shares). With an
// AdaptiveLimit, this process also limits its own leases in flight to
// what latency shows it can take.
//
// Acquire fails fast; Wait queues, first in first out per key and class
// in this process, until a place is free or its context ends. Waiters of
// different processes are not ordered with each other.
//
// Create one with NewConcurrency; it is safe for concurrent use.
type Concurrency struct {
	store    LeaseStore
	refs     LeaseRefs // store, if it grants leases by ref
	limit    int
	ttl      time.Duration
	prefix   string
	shares   Shares
	ceilings [numClasses]int // of limit, by class
	adaptive AdaptiveLimit
	poll     time.Duration
	clock    func() time.Time
	inflight atomic.Int64 // this process's leases held, counted only with adaptive
	waiting  atomic.Int64 // waiters in queues

	mu     sync.Mutex
	queues map[queueKey]*waitQueue
}

// NewConcurrency returns a Concurrency applying c to keys, with its leases
// in store.
func NewConcurrency(store LeaseStore, c ConcurrencyConfig) (*Concurrency, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: nil lease store", ErrInvalidRequest)
	}
	c.Action, c.Namespace = cmp(c.Action, "default"), cmp(c.Namespace, "sluice")
	if len(c.Action) > maxNameLen || len(c.Namespace) > maxNameLen {
		return nil, fmt.Errorf("%w: namespace and action must be at most %d bytes", ErrInvalidRequest, maxNameLen)
	}
	if c.TTL == 0 {
		c.TTL = DefaultLeaseTTL
	}
	if c.Poll <= 0 {
		c.Poll = DefaultPoll
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	r := LeaseRequest{ID: "x", Limit: c.Limit, TTL: c.TTL}
	if err := r.Validate("acquire"); err != nil {
		return nil, err
	}
	shares, err := c.Shares.withDefaults()
	if err != nil {
		return nil, err
	}
	con := &Concurrency{
		store: store, limit: c.Limit, ttl: c.TTL, prefix: c.Namespace + ":" + c.Action + ":",
		shares: shares, adaptive: c.Adaptive, poll: c.Poll, clock: c.Clock,
		queues: make(map[queueKey]*waitQueue),
	}
	con.refs, _ = store.(LeaseRefs)
	for cl := range numClasses {
		con.ceilings[cl] = shares.Ceiling(cl, c.Limit)
	}
	return con, nil
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Limit returns the limit per key.
func (c *Concurrency) Limit() int { return c.limit }

// InFlight returns how many leases this process holds, over every key,
// when the Concurrency has an Adaptive limit, which needs that count.
// Without one the leases are not counted, since the count would cost
// every lease two atomic operations on one cache line shared by every
// core, and InFlight returns -1.
func (c *Concurrency) InFlight() int {
	if c.adaptive == nil {
		return -1
	}
	return int(c.inflight.Load())
}

// Acquire asks for a place for key now, for a request of class cl, and
// never waits. The Lease reports the decision: if Allowed, the caller
// holds a place until it calls Release (or the lease expires); if not,
// RetryAfter is the longest a caller would wait for a holder's lease to
// expire. While Wait callers of this process queue for the same key and
// class, Acquire is refused without asking the store, rather than
// overtake them. The error is non-nil only when the store failed (or for
// an unknown class).
func (c *Concurrency) Acquire(ctx context.Context, key string, cl Class) (*Lease, error) {
	l := new(Lease)
	err := c.acquireInto(ctx, key, cl, l)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Do runs f holding a place for key, if one is free now, and releases
// it when f returns (or panics): Acquire and Release in one call, without
// a Lease, so that on a store of this process (store/memory) it
// allocates nothing. It returns Acquire's decision, and f runs only if
// Allowed; the error is the store's, from the acquire or the release.
// Work that may outlive the lease TTL, or that must tell the adaptive
// limit it failed from overload, uses Acquire.
func (c *Concurrency) Do(ctx context.Context, key string, cl Class, f func()) (d LeaseDecision, err error) {
	if c.refs == nil || c.adaptive != nil {
		return c.doLease(ctx, key, cl, f)
	}
	// The path of most Do calls: a store of this process, no adaptive
	// limit, hence no Lease to fill and no count of leases in flight.
	if cl >= numClasses {
		return d, errClass(cl)
	}
	key = actorKey(key)
	if c.queued(key, cl) {
		return LeaseDecision{Limit: c.limit, Time: c.clock()}, nil
	}
	ref, g := c.refs.AcquireRef(c.prefix, key, c.limit, c.ceilings[cl], c.ttl)
	if !g.Allowed() {
		return g.Decision(c.limit), nil
	}
	defer c.releaseRef(ref, key)
	f()
	// g.Decision, written in place: it is not inlined, and copying its
	// result cost a tenth of the call.
	return LeaseDecision{Allowed: true, InUse: int(g.InUse), Limit: c.limit, Expires: time.Unix(0, g.Until), Time: time.Unix(0, g.Now)}, nil
}

// doLease is Do through a Lease.
func (c *Concurrency) doLease(ctx context.Context, key string, cl Class, f func()) (d LeaseDecision, err error) {
	var l Lease
	if err = c.acquireInto(ctx, key, cl, &l); err != nil || !l.Allowed {
		return l.LeaseDecision, err
	}
	defer func() {
		// l is Do's alone: no need to mark it done.
		if rerr := c.release(ctx, &l); err == nil {
			err = rerr
		}
	}()
	f()
	return l.LeaseDecision, nil
}

// errClass is the error of an unknown class.
func errClass(cl Class) error {
	return fmt.Errorf("%w: unknown class %d", ErrInvalidRequest, cl)
}

// acquireInto is Acquire into l.
func (c *Concurrency) acquireInto(ctx context.Context, key string, cl Class, l *Lease) error {
	if cl >= numClasses {
		return errClass(cl)
	}
	key = actorKey(key)
	if c.queued(key, cl) {
		*l = Lease{LeaseDecision: LeaseDecision{Limit: c.limit, Time: c.clock()}, Class: cl, c: c, key: key}
		l.done.Store(true)
		return nil
	}
	return c.acquire(ctx, key, cl, l)
}

// acquire is Acquire for a bounded key, in or out of turn, into l.
func (c *Concurrency) acquire(ctx context.Context, key string, cl Class, l *Lease) error {
	l.Class, l.c, l.key = cl, c, key
	if c.adaptive != nil && c.shedLocally(cl, l) {
		return nil
	}
	if c.refs != nil {
		ref, g := c.refs.AcquireRef(c.prefix, key, c.limit, c.ceilings[cl], c.ttl)
		l.LeaseDecision, l.ref = g.Decision(c.limit), ref
	} else {
		r := LeaseRequest{Prefix: c.prefix, Key: key, ID: newLeaseID(), Limit: c.limit, Ceiling: c.ceilings[cl], TTL: c.ttl}
		d, err := c.store.Acquire(ctx, r)
		if err != nil {
			c.uncount()
			return err
		}
		l.LeaseDecision, l.id = d, r.ID
	}
	if !l.Allowed {
		c.uncount()
		l.done.Store(true)
		l.id = ""
		return nil
	}
	if c.adaptive != nil {
		l.start, l.started = c.clock(), int(c.inflight.Load())
	}
	return nil
}

// uncount takes a lease off this process's count in flight, which is
// kept only for an adaptive limit.
func (c *Concurrency) uncount() {
	if c.adaptive != nil {
		c.inflight.Add(-1)
	}
}

// shedLocally, for a Concurrency with an adaptive limit, counts a request
// against this process's leases in flight and returns false, or, when
// the adaptive limit refuses its class, undoes the count, makes l the
// refusal and returns true.
func (c *Concurrency) shedLocally(cl Class, l *Lease) bool {
	n := c.inflight.Add(1)
	limit := c.adaptive.Limit()
	if n <= int64(c.shares.Ceiling(cl, limit)) {
		return false
	}
	c.inflight.Add(-1)
	l.LeaseDecision = LeaseDecision{InUse: int(n - 1), Limit: limit, Time: c.clock()}
	l.Adaptive = true
	l.done.Store(true)
	return true
}

// A Lease is a place among the requests in flight for one key, acquired
// from a Concurrency. Release it when the work is done; Extend it while
// long work runs. A Lease that was denied has nothing to release. Safe
// for concurrent use.
type Lease struct {
	LeaseDecision
	// Class is the class the lease was asked for.
	Class Class
	// Adaptive reports a denial by this process's adaptive limit rather
	// than by the store (LeaseDecision.Limit is then the adaptive limit
	// and InUse this process's leases in flight).
	Adaptive bool

	c       *Concurrency
	key, id string
	ref     LeaseRef // from a LeaseRefs store; id is then drawn on demand
	idMu    sync.Mutex
	start   time.Time
	started int // this process's leases in flight when it was acquired
	dropped atomic.Bool
	done    atomic.Bool
}

// ID returns the lease's ID in its store: "" for a denial, or for a
// lease of a LeaseRefs store (store/memory) that was released or expired
// before its first ID was asked for (such a lease is given an ID only
// when asked, so that it costs none otherwise).
func (l *Lease) ID() string {
	l.idMu.Lock()
	defer l.idMu.Unlock()
	if l.id == "" && l.ref.Table != nil && !l.done.Load() {
		if id := newLeaseID(); l.c.refs.NameRef(l.ref, id) {
			l.id = id
		}
	}
	return l.id
}

// Drop marks the work as failed from overload (a timeout, a refusal
// downstream), so that Release tells the adaptive limit to back off.
func (l *Lease) Drop() { l.dropped.Store(true) }

// Release gives the place back. Releasing a denied lease, or one already
// released, does nothing and returns nil; a lease that expired before
// its release is not an error either (its place was already free). On a
// store error the lease stays held until it expires.
func (l *Lease) Release(ctx context.Context) error {
	if !l.done.CompareAndSwap(false, true) {
		return nil
	}
	return l.c.release(ctx, l)
}

// release gives l's place back, once.
func (c *Concurrency) release(ctx context.Context, l *Lease) error {
	if c.adaptive != nil {
		c.inflight.Add(-1)
		now := c.clock()
		c.adaptive.Observe(now, now.Sub(l.start), l.started, l.dropped.Load())
	}
	if l.ref.Table != nil {
		c.releaseRef(l.ref, l.key)
		return nil
	}
	_, err := c.store.Release(ctx, LeaseRequest{Prefix: c.prefix, Key: l.key, ID: l.id, Limit: c.limit})
	c.wake(l.key)
	return err
}

// releaseRef gives the place of ref, on key, back.
func (c *Concurrency) releaseRef(ref LeaseRef, key string) {
	c.refs.ReleaseRef(ref)
	c.wake(key)
}

// Extend renews the lease for another TTL from now (Expires keeps the
// expiry of the acquisition), and reports whether it was still held: false means it expired (or was released) and its
// place may be another's, so the work should stop. A denied lease reports
// false.
func (l *Lease) Extend(ctx context.Context) (bool, error) {
	if !l.Allowed || l.done.Load() {
		return false, nil
	}
	if l.ref.Table != nil {
		_, ok := l.c.refs.ExtendRef(l.ref, l.c.ttl)
		return ok, nil
	}
	d, err := l.c.store.Extend(ctx, LeaseRequest{Prefix: l.c.prefix, Key: l.key, ID: l.id, Limit: l.c.limit, TTL: l.c.ttl})
	return d.Allowed, err
}

// leaseIDBytes is the randomness of a lease ID, and leaseIDLen its
// length in base64url.
const (
	leaseIDBytes = 16
	leaseIDLen   = 22
)

// newLeaseID draws a lease ID: 16 bytes (128 bits) from crypto/rand,
// in base64url (22 characters, printable: they travel in JSON). An ID is
// the only credential a holder shows to release or extend its lease
// (through the service, any client may call Release with any ID), so
// none may be guessed from another: holding one lease reveals nothing of
// its neighbours, and finding a live lease of a key by trial costs about
// 2¹²⁸ / live leases of the key attempts. The store binds an ID to its
// table, one per rule and key: the ID of one key's lease releases
// nothing of another's.
//
// Drawn rather than derived: an HMAC of the grant under a secret of the
// process could be checked without the store, but a lease acquired
// through one replica of the service is released through any other, so
// the secret would have to be shared by the fleet (one more secret to
// configure and rotate), and the store must be asked anyway. crypto/rand
// (the kernel's vDSO getrandom) costs about 80 ns more per ID than the
// counter it replaced, 115 ns in all: on a shared store a tiny share of
// the round trip it precedes, and on store/memory an ID is drawn only
// when a holder asks for one (Lease.ID, Detach).
func newLeaseID() string {
	var b [leaseIDBytes]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics rather than return an error)
	var s [leaseIDLen]byte
	base64.RawURLEncoding.Encode(s[:], b[:])
	return string(s[:])
}

// KeepAlive extends the lease every half TTL, until stop is called or ctx
// ends, for work that may outlive one TTL (a stream, an upload): a holder
// that is alive keeps its place, and one that crashes loses it within a
// TTL. An extension that finds the lease lost (or fails) ends the
// keep-alive; the work goes on, its place perhaps another's. A denied
// lease has nothing to keep alive.
func (l *Lease) KeepAlive(ctx context.Context) (stop func()) {
	if !l.Allowed || l.done.Load() {
		return func() {}
	}
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	mu.Lock()
	defer mu.Unlock()
	t = time.AfterFunc(l.c.ttl/2, func() {
		ok, err := l.Extend(ctx)
		mu.Lock()
		defer mu.Unlock()
		if ok && err == nil && !stopped && ctx.Err() == nil {
			t.Reset(l.c.ttl / 2)
		}
	})
	return func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
		t.Stop()
	}
}

// Detach hands the lease over to a holder elsewhere (a client of the
// service, another process) and returns its ID: this process stops
// counting it among its leases in flight, and its Release and Extend do
// nothing after; the lease lives on in the store until ReleaseID or its
// expiry. A denied lease returns "".
func (l *Lease) Detach() string {
	id := l.ID()
	if id == "" || !l.done.CompareAndSwap(false, true) {
		return ""
	}
	l.c.uncount()
	return id
}

// ReleaseID ends the lease id on key, for a holder that kept only its ID
// (see Lease.Detach); Allowed reports whether it was live. It wakes this
// process's waiters for key.
func (c *Concurrency) ReleaseID(ctx context.Context, key, id string) (LeaseDecision, error) {
	key = actorKey(key)
	d, err := c.store.Release(ctx, LeaseRequest{Prefix: c.prefix, Key: key, ID: id, Limit: c.limit})
	if err == nil && d.Allowed {
		c.wake(key)
	}
	return d, err
}

// ExtendID renews the lease id on key for another TTL, for a holder that
// kept only its ID; Allowed false means it had expired or been released.
func (c *Concurrency) ExtendID(ctx context.Context, key, id string) (LeaseDecision, error) {
	return c.store.Extend(ctx, LeaseRequest{Prefix: c.prefix, Key: actorKey(key), ID: id, Limit: c.limit, TTL: c.ttl})
}

// TTL returns the lease TTL.
func (c *Concurrency) TTL() time.Duration { return c.ttl }
