package rules

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
)

// DefaultMaxDescriptors is the default bound on the descriptors of one
// request: Envoy sends a handful, a batch of checks a few dozen.
const DefaultMaxDescriptors = 256

// ErrUnknownDomain means a request names no domain or rule of the
// configuration. It wraps sluice.ErrInvalidRequest. Envoy's service
// answers such requests OK with no limits; the HTTP API refuses them.
var ErrUnknownDomain = fmt.Errorf("%w: unknown domain", sluice.ErrInvalidRequest)

// ErrTooManyDescriptors means a request has more descriptors than the
// engine's bound. It wraps sluice.ErrInvalidRequest.
var ErrTooManyDescriptors = fmt.Errorf("%w: too many descriptors", sluice.ErrInvalidRequest)

// Config configures an Engine. The zero value of each field but Store
// means its default.
type Config struct {
	// Store keeps the state of every rule. Required.
	Store sluice.Store
	// StoreFor returns the store of the rule with the given ID, for
	// rules with a failure policy of their own. Default nil (and a nil
	// answer): Store.
	StoreFor func(rule *Rule) sluice.Store
	// Rules are the named rules, as config.Parse returns them.
	Rules []config.Rule
	// Domains are the descriptor trees, as config.Parse returns them.
	// At least one rule or domain; names unique among both.
	Domains []config.Domain
	// Namespace prefixes every key the engine stores, to share a store
	// with other applications. Default "sluice".
	Namespace string
	// Clock returns the time of each request. Default nil: the store's
	// own clock.
	Clock func() time.Time
	// MaxDescriptors bounds the descriptors of one request. Default
	// DefaultMaxDescriptors.
	MaxDescriptors int
	// Logger receives failed refunds. Default slog.Default().
	Logger *slog.Logger
	// Guard, when set, judges the actor of each descriptor of a named
	// rule before its limits, and is told of the takes they deny (see
	// Guard). Default nil: the limits alone decide.
	Guard Guard
}

// An Engine decides requests against the rules of a configuration: for
// each descriptor of a request it finds the rule that applies and asks
// the store, then combines the answers as Envoy's rate limit service
// does. Every API of sluice serve (Envoy's gRPC, the HTTP JSON API,
// forward-auth) asks one Engine, so they all decide alike.
//
// Create Engines with New; the zero value is not usable. An Engine is
// immutable and safe for concurrent use; a configuration reload builds a
// new one, and the states (kept in the store, keyed by domain, entries and
// limit) carry over to it.
type Engine struct {
	domains map[string]*domain
	rules   map[string]*Rule
	ids     []string
	store   sluice.Store
	batch   batcher // the store's, when it can batch
	own     bool    // some rules have a store of their own
	clock   func() time.Time
	max     int
	log     *slog.Logger
	guard   Guard
}

// New builds an Engine for c, validating every rule now.
func New(c Config) (*Engine, error) {
	if c.Store == nil {
		return nil, fmt.Errorf("rules: %w: nil store", sluice.ErrInvalidRequest)
	}
	if len(c.Rules)+len(c.Domains) == 0 {
		return nil, fmt.Errorf("rules: %w: no rules", sluice.ErrInvalidRequest)
	}
	ns := c.Namespace
	if ns == "" {
		ns = "sluice"
	}
	e := &Engine{
		domains: make(map[string]*domain, len(c.Rules)+len(c.Domains)),
		rules:   make(map[string]*Rule),
		store:   c.Store,
		clock:   c.Clock,
		max:     c.MaxDescriptors,
		log:     c.Logger,
		guard:   c.Guard,
	}
	if e.max <= 0 {
		e.max = DefaultMaxDescriptors
	}
	if e.log == nil {
		e.log = slog.Default()
	}
	for _, r := range c.Rules {
		if e.domains[r.Name] != nil {
			return nil, fmt.Errorf("rules: %w: %q defined twice", sluice.ErrInvalidRequest, r.Name)
		}
		// The prefix of sluice.Limiter with Action r.Name: a named
		// rule shares its states with Limiters of the same namespace.
		ru := newRule(r.Name, r.Name, "", ns+":"+r.Name+":", config.RateLimit{Limits: r.Limits}, r.Shadow, false)
		if err := (&sluice.Request{Limits: r.Limits, Op: sluice.OpReset}).Validate(); err != nil {
			return nil, fmt.Errorf("rules: rule %q: %w", r.Name, err)
		}
		e.domains[r.Name] = &domain{name: r.Name, named: ru}
		e.rules[ru.ID] = ru
	}
	for _, cd := range c.Domains {
		if e.domains[cd.Name] != nil {
			return nil, fmt.Errorf("rules: %w: %q defined twice", sluice.ErrInvalidRequest, cd.Name)
		}
		// '@' starts no rule name, so no named rule's keys can collide
		// with a domain's.
		d := &domain{name: cd.Name, prefix: ns + ":@" + string(appendEscaped(nil, cd.Name, ":")) + ":"}
		found := make(map[string]*Rule)
		d.build(&d.root, cd.Name, cd.Descriptors, found)
		for id, ru := range found {
			if e.rules[id] != nil {
				return nil, fmt.Errorf("rules: %w: rule %q defined twice", sluice.ErrInvalidRequest, id)
			}
			if !ru.Unlimited && !ru.Deny {
				if err := (&sluice.Request{Limits: ru.Limits, Op: sluice.OpReset}).Validate(); err != nil {
					return nil, fmt.Errorf("rules: %s: %w", id, err)
				}
			}
			e.rules[id] = ru
		}
		e.domains[cd.Name] = d
	}
	for id := range e.rules {
		e.ids = append(e.ids, id)
	}
	sort.Strings(e.ids)
	e.batch, _ = c.Store.(batcher)
	for _, ru := range e.rules {
		ru.store = c.Store
		if c.StoreFor != nil {
			if s := c.StoreFor(ru); s != nil {
				ru.store, e.own = s, true
			}
		}
	}
	return e, nil
}

// Rules returns every rule of the engine, sorted by ID.
func (e *Engine) Rules() []*Rule {
	out := make([]*Rule, len(e.ids))
	for i, id := range e.ids {
		out[i] = e.rules[id]
	}
	return out
}

// Rule returns the rule with the given ID (a named rule's name, or a
// descriptor node's full key), or nil.
func (e *Engine) Rule(id string) *Rule { return e.rules[id] }

// HasDomain reports whether name is a domain or a named rule.
func (e *Engine) HasDomain(name string) bool { return e.domains[name] != nil }

// Names returns the names of the domains and named rules, sorted.
func (e *Engine) Names() []string {
	out := make([]string, 0, len(e.domains))
	for n := range e.domains {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// A Request asks about descriptors of one domain (or named rule).
type Request struct {
	// Domain names a domain of the configuration, or a named rule (whose
	// descriptors are built with [Key]).
	Domain string
	// Descriptors are decided together; at least one, at most the
	// engine's MaxDescriptors.
	Descriptors []Descriptor
	// Cost is how many units each descriptor takes (Envoy's
	// hits_addend). Default 0: 1.
	Cost int
	// Op is sluice.OpTake (the default), OpPeek (take nothing) or
	// OpReset (forget the states of the descriptors' rules).
	Op sluice.Op
	// SkipGuard keeps the engine's Guard out of this request: the caller
	// applied it on what it knows of the actor (forward-auth judges the
	// client's address, not the key). Default false.
	SkipGuard bool
}

// A Result is the answer to a Request.
type Result struct {
	// Allowed is the overall answer: false when a descriptor whose rule
	// is enforced (not shadow) is over its limit, or when the request
	// matched quota rules and every one of them is over its limit.
	Allowed bool
	// Statuses holds one status per descriptor, in request order.
	Statuses []Status
}

// A Status is the answer for one descriptor.
type Status struct {
	// Rule is the rule that applied; nil when the descriptor matched
	// none (it is allowed and counts nothing), and for replaced rules.
	Rule *Rule
	// Replaced is the rule matched but replaced by another descriptor's
	// rule (Envoy's replaces); it was not applied, and Rule is nil.
	Replaced *Rule
	// Decision is the rule's decision. For a descriptor without a rule
	// it is the zero Decision with Allowed true; for an Unlimited rule,
	// Allowed with Remaining -1; for a Deny rule, a denial.
	Decision sluice.Decision
	// Allowed is this descriptor's verdict: Decision.Allowed, except that
	// a shadow rule is always allowed.
	Allowed bool
	// Shadowed reports that a shadow rule would have denied.
	Shadowed bool
	// Err is set when the descriptor asked too much of its rule: a cost
	// above the rule's MaxCost (sluice.ErrCostExceedsBurst). The
	// descriptor is then denied without asking the store.
	Err error
	// Guard is what the engine's Guard did with the descriptor's actor:
	// Pass (the zero value) when the limits decided. Otherwise nothing
	// was asked of the store: Exempt is allowed with Remaining -1,
	// Refuse denied without a RetryAfter, Ban denied until the ban ends.
	// Shadow mode does not apply to the guard.
	Guard Action
}

// batcher is the optional capability of a store to decide many requests
// in one round trip (store/redis).
type batcher interface {
	DecideBatch(ctx context.Context, rs []sluice.Request) ([]sluice.Decision, []error)
}

// Check decides r. It returns an error wrapping sluice.ErrInvalidRequest
// for a malformed request (ErrUnknownDomain, ErrTooManyDescriptors, a
// descriptor without entries, a negative cost, OpRefund), and one wrapping
// sluice.ErrStore when the store failed; over the limit is a Result.
//
// A take that is denied as a whole takes nothing: the descriptors that
// were allowed are refunded (best effort: a concurrent request may see
// them taken meanwhile), so one limit's denial does not spend another's
// allowance.
func (e *Engine) Check(ctx context.Context, r Request) (Result, error) {
	d := e.domains[r.Domain]
	switch {
	case d == nil:
		return Result{}, fmt.Errorf("%w %q", ErrUnknownDomain, r.Domain)
	case len(r.Descriptors) == 0:
		return Result{}, fmt.Errorf("rules: %w: no descriptors", sluice.ErrInvalidRequest)
	case len(r.Descriptors) > e.max:
		return Result{}, fmt.Errorf("%w: %d, at most %d", ErrTooManyDescriptors, len(r.Descriptors), e.max)
	case r.Cost < 0:
		return Result{}, fmt.Errorf("rules: %w: cost %d must not be negative", sluice.ErrInvalidRequest, r.Cost)
	case r.Op != sluice.OpTake && r.Op != sluice.OpPeek && r.Op != sluice.OpReset:
		return Result{}, fmt.Errorf("rules: %w: op %v (want take, peek or reset)", sluice.ErrInvalidRequest, r.Op)
	}
	cost := max(r.Cost, 1)
	res := Result{Allowed: true, Statuses: make([]Status, len(r.Descriptors))}
	var now time.Time
	if e.clock != nil {
		now = e.clock()
	}

	// Match every descriptor first: replaces applies across them.
	var buf [256]byte
	reqs := make([]sluice.Request, 0, len(r.Descriptors))
	idx := make([]int, 0, len(r.Descriptors)) // the status of each request
	var replaced map[string]bool
	for i, desc := range r.Descriptors {
		if len(desc.Entries) == 0 {
			return Result{}, fmt.Errorf("rules: %w: descriptor %d has no entries", sluice.ErrInvalidRequest, i)
		}
		if desc.Cost < 0 {
			return Result{}, fmt.Errorf("rules: %w: descriptor %d: cost %d must not be negative", sluice.ErrInvalidRequest, i, desc.Cost)
		}
		ru, key := d.match(desc.Entries, buf[:0])
		if desc.Override != nil {
			var err error
			if ru, key, err = e.override(d, desc); err != nil {
				return Result{}, fmt.Errorf("rules: descriptor %d: %w", i, err)
			}
		}
		st := &res.Statuses[i]
		st.Decision.Allowed, st.Allowed = true, true
		if ru == nil {
			continue
		}
		st.Rule = ru
		for _, name := range ru.Replaces {
			if replaced == nil {
				replaced = make(map[string]bool)
			}
			replaced[name] = true
		}
		if ru.Unlimited || ru.Deny {
			continue
		}
		if d.named != nil && e.guard != nil && !r.SkipGuard && r.Op != sluice.OpReset && len(desc.Entries) == 1 {
			if v := e.guard.Judge(ctx, ru, desc.Entries[0].Value); v.Action != Pass {
				*st = guardStatus(ru, v, now)
				continue
			}
		}
		req := sluice.Request{Prefix: ru.prefix, Key: stateKey(key), Limits: ru.Limits, Op: r.Op, Cost: cost, Now: now}
		if desc.Cost > 0 {
			req.Cost = desc.Cost
		}
		if desc.NoHits && r.Op != sluice.OpReset {
			req.Op, req.Cost = sluice.OpPeek, 1
		}
		if req.Op != sluice.OpReset && req.Cost > ru.maxCost {
			st.Err = fmt.Errorf("rules: %w: cost %d, rule %s allows at most %d at once", sluice.ErrCostExceedsBurst, req.Cost, ru.ID, ru.maxCost)
			st.Decision = sluice.Decision{Limit: ru.Limits[0], Time: now}
			st.Allowed = false
			continue
		}
		reqs = append(reqs, req)
		idx = append(idx, i)
	}
	if replaced != nil {
		kept := 0
		for k, i := range idx {
			if ru := res.Statuses[i].Rule; ru.Name != "" && replaced[ru.Name] {
				continue
			}
			reqs[kept], idx[kept] = reqs[k], idx[k]
			kept++
		}
		reqs, idx = reqs[:kept], idx[:kept]
		for i := range res.Statuses {
			st := &res.Statuses[i]
			if st.Rule != nil && st.Rule.Name != "" && replaced[st.Rule.Name] {
				*st = Status{Replaced: st.Rule, Decision: sluice.Decision{Allowed: true}, Allowed: true}
			}
		}
	}

	ds, err := e.decide(ctx, reqs, idx, res.Statuses)
	if err != nil {
		return Result{}, err
	}
	for k, i := range idx {
		d := ds[k]
		if r.Descriptors[i].NoHits && r.Op != sluice.OpReset {
			// A peek of 1 tells what is left: one more than it would
			// leave, or nothing; zero hits are never over the limit.
			if d.Allowed {
				d.Remaining++
			} else {
				d.Remaining = 0
			}
			d.Allowed, d.RetryAfter = true, 0
		}
		res.Statuses[i].Decision = d
		res.Statuses[i].Allowed = d.Allowed
	}
	if r.Op == sluice.OpReset {
		return res, nil
	}
	e.combine(&res, now)
	if !res.Allowed && r.Op == sluice.OpTake {
		e.refund(ctx, res, reqs, idx)
		if d.named != nil && e.guard != nil && !r.SkipGuard {
			e.strike(ctx, r, res)
		}
	}
	return res, nil
}

// combine applies the static rules (Unlimited, Deny), shadow mode and
// quota mode, and sets the overall answer.
func (e *Engine) combine(res *Result, now time.Time) {
	quotas, quotaDenied := 0, 0
	for i := range res.Statuses {
		st := &res.Statuses[i]
		ru := st.Rule
		if ru == nil {
			continue
		}
		if st.Guard != Pass {
			res.Allowed = res.Allowed && st.Allowed
			continue
		}
		switch {
		case ru.Unlimited:
			st.Decision = sluice.Decision{Allowed: true, Remaining: -1, Time: now}
			st.Allowed = true
		case ru.Deny:
			st.Decision = denyDecision(ru.Limits[0], now)
			st.Allowed = false
		}
		if !st.Allowed && ru.Shadow {
			st.Allowed, st.Shadowed = true, true
		}
		switch {
		case ru.Quota && !ru.Unlimited:
			quotas++
			if !st.Allowed {
				quotaDenied++
			}
		case !st.Allowed:
			res.Allowed = false
		}
	}
	if quotas > 0 && quotaDenied == quotas {
		res.Allowed = false
	}
}

// denyDecision is the decision of a Deny rule: never allowed; its reset
// and retry are the end of the current window of l's period.
func denyDecision(l sluice.Limit, now time.Time) sluice.Decision {
	t := now
	if t.IsZero() {
		t = time.Now()
	}
	left := l.Period - time.Duration(t.UnixNano()%int64(l.Period))
	return sluice.Decision{Limit: l, ResetAfter: left, RetryAfter: left, Time: now}
}

// decide asks the store of each request's rule (statuses[idx[k]].Rule
// for reqs[k]) about reqs, in one round trip when they share a store
// that can batch.
func (e *Engine) decide(ctx context.Context, reqs []sluice.Request, idx []int, statuses []Status) ([]sluice.Decision, error) {
	ds := make([]sluice.Decision, len(reqs))
	if len(reqs) == 0 {
		return ds, nil
	}
	if e.batch != nil && len(reqs) > 1 && !e.own {
		got, errs := e.batch.DecideBatch(ctx, reqs)
		for i, err := range errs {
			if err != nil {
				return nil, e.storeError(reqs[i], err)
			}
		}
		return got, nil
	}
	for k, req := range reqs {
		d, err := statuses[idx[k]].Rule.store.Decide(ctx, req)
		if err != nil {
			return nil, e.storeError(req, err)
		}
		ds[k] = d
	}
	return ds, nil
}

func (e *Engine) storeError(req sluice.Request, err error) error {
	if errors.Is(err, sluice.ErrStore) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("rules: %s: %w", strings.TrimSuffix(req.Prefix, ":"), err)
	}
	// Anything else from a store is its failure too.
	return fmt.Errorf("rules: %s: %w: %w", strings.TrimSuffix(req.Prefix, ":"), sluice.ErrStore, err)
}

// refund gives back the takes of a request denied as a whole, and sets
// their statuses' decisions to what is left after it.
func (e *Engine) refund(ctx context.Context, res Result, reqs []sluice.Request, idx []int) {
	var back []sluice.Request
	var at []int
	for k, i := range idx {
		st := res.Statuses[i]
		if reqs[k].Op != sluice.OpTake || !st.Decision.Allowed {
			continue
		}
		r := reqs[k]
		r.Op, r.At = sluice.OpRefund, st.Decision.Time
		back, at = append(back, r), append(at, i)
	}
	if len(back) == 0 {
		return
	}
	if _, err := e.decide(context.WithoutCancel(ctx), back, at, res.Statuses); err != nil {
		e.log.WarnContext(ctx, "refund of a denied request failed: its allowed descriptors stay counted", "err", err)
		return
	}
	// The statuses say what is left now, after the refunds: what the
	// take left plus its cost, as the store's answers to refunds differ
	// (a peek after it on the memory store, nothing on Redis).
	// ResetAfter stays that of the take, which errs late, never early.
	for k, i := range at {
		d := &res.Statuses[i].Decision
		d.Remaining = min(max(d.Remaining, 0)+back[k].Cost, d.Limit.MaxBurst())
	}
}

// override builds the rule of a descriptor whose limit the client set
// (Envoy's limit override): no shadow, no name, the descriptor's entries
// taken literally as the state key.
func (e *Engine) override(d *domain, desc Descriptor) (*Rule, []byte, error) {
	l := *desc.Override
	if err := l.Validate(); err != nil {
		return nil, nil, err
	}
	prefix := d.prefix
	if d.named != nil {
		prefix = d.named.prefix
	}
	// One ID for every override of the domain: IDs label metrics, and
	// the entries are the client's, unbounded.
	ru := newRule(d.name+".override", "", d.name, prefix, config.RateLimit{Limits: []sluice.Limit{l}}, false, false)
	ru.store = e.store
	return ru, entriesKey(desc.Entries, nil), nil
}
