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
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
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
}

// Leases answers the lease calls on a configuration's concurrency rules.
// Safe for concurrent use.
type Leases struct {
	rules map[string]*rule
	names string // for errors: the rules' names, sorted
	m     *Metrics
}

type rule struct {
	cfg config.ConcurrencyRule
	c   *sluice.Concurrency
}

// New returns the Leases of c.
func New(c Config) (*Leases, error) {
	if c.Store == nil && len(c.Rules) > 0 {
		return nil, fmt.Errorf("leaseapi: %w: the store cannot hold leases", sluice.ErrInvalidRequest)
	}
	l := &Leases{rules: map[string]*rule{}, m: c.Metrics}
	var names []string
	for _, r := range c.Rules {
		con, err := sluice.NewConcurrency(c.Store, sluice.ConcurrencyConfig{
			Limit: r.Limit, TTL: r.TTL, Action: r.Name, Namespace: c.Namespace, Shares: r.Shares,
		})
		if err != nil {
			return nil, fmt.Errorf("leaseapi: rule %q: %w", r.Name, err)
		}
		l.rules[r.Name] = &rule{cfg: r, c: con}
		names = append(names, r.Name)
	}
	sort.Strings(names)
	l.names = strings.Join(names, ", ")
	return l, nil
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

// Acquire grants a lease of req.Rule for req.Key if a place is free, or
// frees within req.Wait (bounded by the rule's MaxWait), and hands it to
// the caller by ID.
func (l *Leases) Acquire(ctx context.Context, req AcquireRequest) (Result, error) {
	r, err := l.rule(req.Rule)
	if err != nil {
		return Result{}, err
	}
	var lease *sluice.Lease
	if wait := min(req.Wait, r.cfg.MaxWait); wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, wait)
		lease, err = r.c.Wait(wctx, req.Key, req.Class)
		cancel()
	} else {
		lease, err = r.c.Acquire(ctx, req.Key, req.Class)
	}
	if err != nil {
		return Result{}, err
	}
	res := Result{OK: lease.Allowed, Rule: req.Rule, InUse: lease.InUse, Limit: lease.Limit, RetryAfter: lease.RetryAfter}
	if lease.Allowed {
		res.ID, res.Expires = lease.Detach(), lease.Expires
	}
	l.m.acquired(req.Rule, req.Key, req.Class, res)
	return res, nil
}

// Release ends the lease id of rule and key.
func (l *Leases) Release(ctx context.Context, rule, key, id string) (Result, error) {
	r, err := l.rule(rule)
	if err != nil {
		return Result{}, err
	}
	d, err := r.c.ReleaseID(ctx, key, id)
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
	d, err := r.c.ExtendID(ctx, key, id)
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
