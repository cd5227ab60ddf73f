// Package leaseapi serves the concurrency rules of sluice serve: clients
// acquire a lease of "one of at most N in flight" per key, release it
// when their work is done and extend it while the work runs, over the
// HTTP JSON API (POST /v1/acquire, /v1/release, /v1/extend) and the gRPC
// service sluice.v1.Leases. Leases live in the service's store, so every
// replica of the service, and every library user of the same store and
// namespace, shares them; a client that crashes gives its place back when
// its lease expires.
//
// The service keeps no state per lease that it needs: a lease is named by
// its rule, key and ID, which the client sends back. For its metrics it
// tracks the leases it granted (a bounded table per rule), to count those
// in flight and those that expired before their holder released them.
package leaseapi

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/guard"
)

// Config configures Leases.
type Config struct {
	// Store holds the leases. Required.
	Store sluice.LeaseStore
	// Rules are the concurrency rules.
	Rules []config.ConcurrencyRule
	// Namespace prefixes every key, as for the rate rules. Default
	// "sluice".
	Namespace string
	// Metrics, when set, counts grants, refusals, releases and expiries.
	Metrics *Metrics
	// Guard, when set, judges the key of each acquire before its rule,
	// as it judges every door of the service (see guard.Guard): a key it
	// exempts gets a lease that counts nothing, a denied or banned one
	// none. Releases and extends are not judged: giving a place back is
	// always welcome. Default nil: the rules alone decide.
	Guard *guard.Guard
	// Policy returns the failure policy of a rule, by name, for when
	// Store fails or times out: sluice.FailClosed answers the error (503,
	// Unavailable), FailOpen grants a lease that counts nothing, FailLocal
	// decides in Local, this process's own store. Default nil: FailClosed.
	Policy func(rule string) sluice.FailurePolicy
	// Timeout bounds each call to Store; one that takes longer has
	// failed. Default 0: none.
	Timeout time.Duration
	// Local holds the leases of the rules that fail local, while Store
	// fails. Required when a rule's policy is FailLocal.
	Local sluice.LeaseStore
}

// Leases answers the lease calls on a configuration's concurrency rules.
// Safe for concurrent use.
type Leases struct {
	rules   map[string]*rule
	names   string // for errors: the rules' names, sorted
	m       *Metrics
	guard   *guard.Guard
	timeout time.Duration
}

type rule struct {
	cfg    config.ConcurrencyRule
	c      *sluice.Concurrency
	policy sluice.FailurePolicy
	local  *sluice.Concurrency // over Config.Local, for FailLocal
}

// The prefixes of the IDs of leases that Store does not hold: granted by
// the Local store, or free (granted to an exempt key, or while Store
// failed open), which count nothing and need no release. Store's own IDs
// never hold '~' (see sluice.LeaseRequest.ID).
const (
	localID = "local~"
	freeID  = "free~"
)

// New returns the Leases of c.
func New(c Config) (*Leases, error) {
	if c.Store == nil && len(c.Rules) > 0 {
		return nil, fmt.Errorf("leaseapi: %w: the store cannot hold leases", sluice.ErrInvalidRequest)
	}
	l := &Leases{rules: map[string]*rule{}, m: c.Metrics, guard: c.Guard, timeout: c.Timeout}
	var names []string
	for _, r := range c.Rules {
		ru, err := newRule(c, r)
		if err != nil {
			return nil, fmt.Errorf("leaseapi: rule %q: %w", r.Name, err)
		}
		l.rules[r.Name] = ru
		names = append(names, r.Name)
	}
	sort.Strings(names)
	l.names = strings.Join(names, ", ")
	return l, nil
}

// newRule builds the concurrency rule r of c, over Store and, if it
// fails local, Local.
func newRule(c Config, r config.ConcurrencyRule) (*rule, error) {
	cc := sluice.ConcurrencyConfig{Limit: r.Limit, TTL: r.TTL, Action: r.Name, Namespace: c.Namespace, Shares: r.Shares}
	con, err := sluice.NewConcurrency(c.Store, cc)
	if err != nil {
		return nil, err
	}
	ru := &rule{cfg: r, c: con, policy: sluice.FailClosed}
	if c.Policy != nil {
		ru.policy = c.Policy(r.Name)
	}
	if ru.policy == sluice.FailLocal {
		if c.Local == nil {
			return nil, fmt.Errorf("%w: it fails local, and there is no local store", sluice.ErrInvalidRequest)
		}
		if ru.local, err = sluice.NewConcurrency(c.Local, cc); err != nil {
			return nil, err
		}
	}
	return ru, nil
}

// ErrUnknownRule means a call named no concurrency rule of the
// configuration.
var ErrUnknownRule = errors.New("unknown concurrency rule")

// An AcquireRequest asks for a lease.
type AcquireRequest struct {
	Rule, Key string
	Class     sluice.Class
	// Wait is how long to wait for a place, at most the rule's MaxWait.
	Wait time.Duration
}

// A Result answers a call.
type Result struct {
	// OK: Acquire granted; Release found the lease live; Extend renewed
	// it.
	OK         bool
	Rule, ID   string
	InUse      int
	Limit      int
	Expires    time.Time
	RetryAfter time.Duration
	// Guard is, for an acquire the guard decided, what it did:
	// guard.Exempt (a free lease), guard.Refuse or guard.Banned (none,
	// with the ban's time left as RetryAfter). guard.Pass otherwise.
	Guard guard.Action
}

func (l *Leases) rule(name string) (*rule, error) {
	r := l.rules[name]
	if r == nil {
		if l.names == "" {
			return nil, fmt.Errorf("%w %q: the configuration has none", ErrUnknownRule, name)
		}
		return nil, fmt.Errorf("%w %q (want one of %s)", ErrUnknownRule, name, l.names)
	}
	return r, nil
}

// Acquire grants a lease of req.Rule for req.Key if the guard lets the
// key through and a place is free, or frees within req.Wait (bounded by
// the rule's MaxWait), and hands it to the caller by ID.
func (l *Leases) Acquire(ctx context.Context, req AcquireRequest) (Result, error) {
	r, err := l.rule(req.Rule)
	if err != nil {
		return Result{}, err
	}
	res, decided := l.judge(r, req)
	if !decided {
		if res, err = l.acquire(ctx, r, req); err != nil {
			return Result{}, err
		}
	}
	l.m.acquired(req.Rule, req.Key, req.Class, res)
	return res, nil
}

// judge asks the guard about req's key, and reports whether its verdict
// decided the acquire.
func (l *Leases) judge(r *rule, req AcquireRequest) (Result, bool) {
	if l.guard == nil {
		return Result{}, false
	}
	v := l.guard.Check(guard.NewActor(netip.Addr{}, req.Key))
	res := Result{Rule: req.Rule, Limit: r.cfg.Limit, Guard: v.Action}
	switch v.Action {
	case guard.Pass:
		return res, false
	case guard.Exempt:
		res.OK, res.ID = true, freeID+rand.Text()
	case guard.Banned:
		res.RetryAfter = v.Left
	}
	return res, true
}

// acquire asks the store of r for req's lease, and if it fails, does as
// r's failure policy says.
func (l *Leases) acquire(ctx context.Context, r *rule, req AcquireRequest) (Result, error) {
	lease, err := l.wait(ctx, r.c, r, req)
	prefix := ""
	switch {
	case err == nil || !failed(ctx, err):
	case r.policy == sluice.FailOpen:
		return Result{OK: true, Rule: req.Rule, ID: freeID + rand.Text(), Limit: r.cfg.Limit}, nil
	case r.policy == sluice.FailLocal:
		lease, err = l.wait(ctx, r.local, r, req)
		prefix = localID
	}
	if err != nil {
		return Result{}, err
	}
	res := Result{OK: lease.Allowed, Rule: req.Rule, InUse: lease.InUse, Limit: lease.Limit, RetryAfter: lease.RetryAfter}
	if lease.Allowed {
		res.ID, res.Expires = prefix+lease.Detach(), lease.Expires
	}
	return res, nil
}

// wait acquires req's lease of rule r from c: at once, or waiting for a
// place for as long as req asks, within r's MaxWait, and the timeout.
func (l *Leases) wait(ctx context.Context, c *sluice.Concurrency, r *rule, req AcquireRequest) (*sluice.Lease, error) {
	wait := min(req.Wait, r.cfg.MaxWait)
	if wait <= 0 {
		ctx, cancel := l.bound(ctx)
		defer cancel()
		return c.Acquire(ctx, req.Key, req.Class)
	}
	wctx, cancel := context.WithTimeout(ctx, wait+l.timeout)
	defer cancel()
	return c.Wait(wctx, req.Key, req.Class)
}

// bound returns ctx bounded by the store's timeout, if any.
func (l *Leases) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if l.timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, l.timeout)
}

// failed reports whether err, of a call under ctx, is the store's
// failure (or its timeout), not the caller's giving up.
func failed(ctx context.Context, err error) bool {
	return ctx.Err() == nil && (errors.Is(err, sluice.ErrStore) || errors.Is(err, context.DeadlineExceeded))
}

// Release ends the lease id of rule and key.
func (l *Leases) Release(ctx context.Context, rule, key, id string) (Result, error) {
	r, err := l.rule(rule)
	if err != nil {
		return Result{}, err
	}
	c, held, free := r.holder(id)
	if free {
		return Result{OK: true, Rule: rule, Limit: r.cfg.Limit}, nil
	}
	ctx, cancel := l.bound(ctx)
	defer cancel()
	d, err := c.ReleaseID(ctx, key, held)
	if err != nil {
		return Result{}, err
	}
	l.m.released(rule, key, id, d.Allowed)
	return Result{OK: d.Allowed, Rule: rule, InUse: d.InUse, Limit: d.Limit}, nil
}

// Extend renews the lease id of rule and key for another TTL.
func (l *Leases) Extend(ctx context.Context, rule, key, id string) (Result, error) {
	r, err := l.rule(rule)
	if err != nil {
		return Result{}, err
	}
	c, held, free := r.holder(id)
	if free {
		return Result{OK: true, Rule: rule, ID: id, Limit: r.cfg.Limit}, nil
	}
	ctx, cancel := l.bound(ctx)
	defer cancel()
	d, err := c.ExtendID(ctx, key, held)
	if err != nil {
		return Result{}, err
	}
	l.m.extended(rule, key, id, d)
	res := Result{OK: d.Allowed, Rule: rule, InUse: d.InUse, Limit: d.Limit, Expires: d.Expires}
	if d.Allowed {
		res.ID = id
	}
	return res, nil
}

// holder returns who holds the lease id of r: the concurrency of the
// store or of the local store, and the ID there; free when none does
// (the lease counts nothing).
func (r *rule) holder(id string) (c *sluice.Concurrency, held string, free bool) {
	switch {
	case strings.HasPrefix(id, freeID):
		return nil, id, true
	case strings.HasPrefix(id, localID) && r.local != nil:
		return r.local, id[len(localID):], false
	}
	return r.c, id, false
}
