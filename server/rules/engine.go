package rules

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/guard"
)

// DefaultMaxDescriptors is the default bound on the descriptors of one
// request: Envoy sends a handful, a batch of checks a few dozen.
const DefaultMaxDescriptors = 256

// maxNamespace bounds Config.Namespace, as sluice.Config.Namespace is.
const maxNamespace = 128

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
	// StoreFor returns the store of a rule, already wrapped as the rule
	// wants it (sluice serve wraps each named rule's and each domain's
	// store with its failure policy and its metrics), once, when New
	// builds the rule. Rules of one domain must get one store, so that
	// their descriptors are decided in one batch. Default nil (and a nil
	// answer): Store.
	StoreFor func(rule *Rule) sluice.Store
	// Rules are the named rules, as config.Parse returns them.
	Rules []config.NamedRule
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
	// rule before its limits, and counts the takes they deny as
	// failures in the jails of the rule (see the package documentation).
	// Default nil: the limits alone decide.
	Guard *guard.Guard
	// OnGuard, when set, is told of each verdict of the Guard other than
	// Pass, with the rule it was about: for metrics. It must be fast.
	// Default nil.
	OnGuard func(rule *Rule, action guard.Action)
	// Tracer, when set, traces each Check in a span "sluice.check" (the
	// store calls under it join it through the context). Default nil:
	// no spans, at the cost of one nil check.
	Tracer trace.Tracer
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
	domains  map[string]*domain
	rules    map[string]*Rule
	ids      []string
	storeFor func(*Rule) sluice.Store
	clock    func() time.Time
	max      int
	log      *slog.Logger
	guard    *guard.Guard
	onGuard  func(*Rule, guard.Action)
	tracer   trace.Tracer // nil: no spans
	ns       string       // the namespace: outcome markers live under it
	// overrides are the rules of each domain's limit overrides.
	overrides map[*domain]*overrides
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
	if len(ns) > maxNamespace {
		return nil, fmt.Errorf("rules: %w: namespace of %d bytes, at most %d", sluice.ErrInvalidRequest, len(ns), maxNamespace)
	}
	e := &Engine{
		domains: make(map[string]*domain, len(c.Rules)+len(c.Domains)),
		rules:   make(map[string]*Rule),
		clock:   c.Clock,
		max:     c.MaxDescriptors,
		log:     c.Logger,
		guard:   c.Guard,
		onGuard: c.OnGuard,
		tracer:  c.Tracer,
		ns:      ns,
	}
	e.storeFor = func(ru *Rule) sluice.Store {
		if c.StoreFor != nil {
			if s := c.StoreFor(ru); s != nil {
				return s
			}
		}
		return c.Store
	}
	if e.max <= 0 {
		e.max = DefaultMaxDescriptors
	}
	if e.log == nil {
		e.log = slog.Default()
	}
	if err := e.addNamed(c.Rules, ns); err != nil {
		return nil, err
	}
	if err := e.addDomains(c.Domains, ns); err != nil {
		return nil, err
	}
	for id := range e.rules {
		e.ids = append(e.ids, id)
	}
	sort.Strings(e.ids)
	for _, ru := range e.rules {
		ru.store = e.storeFor(ru)
	}
	e.overrides = make(map[*domain]*overrides, len(e.domains))
	for _, d := range e.domains {
		e.overrides[d] = e.newOverrides(d)
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

// IsNamed reports whether name is a named rule (not a domain).
func (e *Engine) IsNamed(name string) bool {
	d := e.domains[name]
	return d != nil && d.named != nil
}

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
	// hits_addend). Default 0: 1. An insert's may be negative: a reward.
	Cost int
	// Op is sluice.OpTake (the default), OpPeek (take nothing), OpReset
	// (forget the states of the descriptors' rules) or OpInsert (count
	// Cost whether or not it fits; the statuses say whether the actors
	// may still act).
	Op sluice.Op
	// Client is the address of the client the request is about, when
	// the API knows it (forward-auth): the Guard judges it beside the
	// key of each descriptor of a named rule. Default none: the key,
	// when it is an address, is the client's.
	Client netip.Addr
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
	// guard.Pass (the zero value) when the limits decided. Otherwise
	// nothing was asked of the store: guard.Exempt is allowed with
	// Remaining -1, guard.Refuse denied without a RetryAfter,
	// guard.Banned denied until the ban ends. Shadow mode does not apply
	// to the guard.
	Guard guard.Action
}

// Verdict returns the status's decision as the client sees it: a shadow
// rule's denial is an admission.
func (st Status) Verdict() sluice.Decision {
	d := st.Decision
	if st.Allowed && !d.Allowed {
		d.Allowed, d.RetryAfter = true, 0
	}
	return d
}

// addNamed adds the named rules rs, keyed under namespace ns.
func (e *Engine) addNamed(rs []config.NamedRule, ns string) error {
	for _, r := range rs {
		if e.domains[r.Name] != nil {
			return fmt.Errorf("rules: %w: %q defined twice", sluice.ErrInvalidRequest, r.Name)
		}
		// The prefix of sluice.Limiter with Action r.Name: a named
		// rule shares its states with Limiters of the same namespace.
		ru := newRule(r.Name, r.Name, "", ns+":"+r.Name+":", config.RateLimit{Limits: r.Limits}, r.Shadow, false)
		if err := (&sluice.Request{Limits: r.Limits, Op: sluice.OpReset}).Validate(); err != nil {
			return fmt.Errorf("rules: rule %q: %w", r.Name, err)
		}
		e.domains[r.Name] = &domain{name: r.Name, named: ru}
		e.rules[ru.ID] = ru
	}
	return nil
}

// addDomains adds the descriptor domains ds, keyed under namespace ns.
func (e *Engine) addDomains(ds []config.Domain, ns string) error {
	for _, cd := range ds {
		if e.domains[cd.Name] != nil {
			return fmt.Errorf("rules: %w: %q defined twice", sluice.ErrInvalidRequest, cd.Name)
		}
		// '@' starts no rule name, so no named rule's keys can collide
		// with a domain's.
		d := &domain{name: cd.Name, prefix: ns + ":@" + string(appendEscaped(nil, cd.Name, ":")) + ":"}
		found := make(map[string]*Rule)
		d.build(&d.root, cd.Name, cd.Descriptors, found)
		for id, ru := range found {
			if e.rules[id] != nil {
				return fmt.Errorf("rules: %w: rule %q defined twice", sluice.ErrInvalidRequest, id)
			}
			if !ru.Unlimited && !ru.Deny {
				if err := (&sluice.Request{Limits: ru.Limits, Op: sluice.OpReset}).Validate(); err != nil {
					return fmt.Errorf("rules: %s: %w", id, err)
				}
			}
			e.rules[id] = ru
		}
		e.domains[cd.Name] = d
	}
	return nil
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
	if e.tracer != nil {
		return e.traced(ctx, r)
	}
	return e.check(ctx, r)
}

// traced is Check in a span of its own, "sluice.check", which the store
// calls under it join.
func (e *Engine) traced(ctx context.Context, r Request) (Result, error) {
	ctx, span := e.tracer.Start(ctx, "sluice.check", trace.WithAttributes(
		attribute.String("sluice.domain", r.Domain), attribute.Int("sluice.descriptors", len(r.Descriptors)),
		attribute.String("sluice.op", r.Op.String())))
	defer span.End()
	res, err := e.check(ctx, r)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return res, err
	}
	span.SetAttributes(attribute.Bool("sluice.allowed", res.Allowed))
	return res, nil
}

// check is Check.
func (e *Engine) check(ctx context.Context, r Request) (Result, error) {
	d, err := e.domain(r)
	if err != nil {
		return Result{}, err
	}
	// The store requests and decisions of a request of a few
	// descriptors (the common case: one, for a named rule or
	// forward-auth) stay on the stack.
	var reqBuf [2]sluice.Request
	var idxBuf [2]int
	var dsBuf [2]sluice.Decision
	q := query{r: r, d: d, now: e.now()}
	q.res = Result{Allowed: true, Statuses: make([]Status, len(r.Descriptors))}
	reqs, idx, err := e.plan(&q, reqBuf[:0], idxBuf[:0])
	if err != nil {
		return Result{}, err
	}
	ds, err := e.decide(ctx, reqs, idx, q.res.Statuses, dsBuf[:0])
	if err != nil {
		return Result{}, err
	}
	q.apply(idx, ds)
	if r.Op == sluice.OpReset {
		return q.res, nil
	}
	combine(&q.res, q.now)
	if !q.res.Allowed && r.Op == sluice.OpTake {
		e.refund(ctx, &q, reqs, idx)
		e.strike(ctx, &q)
	}
	return q.res, nil
}

// domain checks what Check requires of r as a whole, and returns its
// domain.
func (e *Engine) domain(r Request) (*domain, error) {
	d := e.domains[r.Domain]
	switch {
	case d == nil:
		return nil, fmt.Errorf("%w %q", ErrUnknownDomain, r.Domain)
	case len(r.Descriptors) == 0:
		return nil, fmt.Errorf("rules: %w: no descriptors", sluice.ErrInvalidRequest)
	case len(r.Descriptors) > e.max:
		return nil, fmt.Errorf("%w: %d, at most %d", ErrTooManyDescriptors, len(r.Descriptors), e.max)
	case r.Cost < 0 && r.Op != sluice.OpInsert:
		return nil, fmt.Errorf("rules: %w: cost %d must be at least 1 (0 means 1)", sluice.ErrInvalidRequest, r.Cost)
	case r.Op == sluice.OpRefund || r.Op > sluice.OpInsert:
		return nil, fmt.Errorf("rules: %w: op %v (want take, peek, reset or insert)", sluice.ErrInvalidRequest, r.Op)
	}
	for i, desc := range r.Descriptors {
		switch {
		case len(desc.Entries) == 0 && !desc.named:
			return nil, fmt.Errorf("rules: %w: descriptor %d has no entries", sluice.ErrInvalidRequest, i)
		case desc.Cost < 0 && r.Op != sluice.OpInsert:
			return nil, fmt.Errorf("rules: %w: descriptor %d: cost %d must be at least 1 (0 means 1)", sluice.ErrInvalidRequest, i, desc.Cost)
		}
	}
	return d, nil
}

func (e *Engine) now() time.Time {
	if e.clock != nil {
		return e.clock()
	}
	return time.Time{}
}

// A query is a request on its way through Check: its domain and its
// statuses. The store requests its descriptors make go beside it, as
// reqs[k] for the descriptor idx[k] (under the rule of its status), so
// that they may stay on the stack.
type query struct {
	r   Request
	d   *domain
	now time.Time
	res Result
}

// plan matches every descriptor of q to its rule, applies the guard and
// Envoy's replaces, and appends the store requests to make to reqs and
// their descriptors to idx.
func (e *Engine) plan(q *query, reqs []sluice.Request, idx []int) ([]sluice.Request, []int, error) {
	var buf [256]byte
	var replaced map[string]bool
	for i, desc := range q.r.Descriptors {
		st := &q.res.Statuses[i]
		st.Decision.Allowed, st.Allowed = true, true
		ru, key := q.rule(i, buf[:0])
		if desc.Override != nil {
			var err error
			if ru, key, err = e.override(q.d, desc); err != nil {
				return nil, nil, fmt.Errorf("rules: descriptor %d: %w", i, err)
			}
		}
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
		if ru.Unlimited || ru.Deny || e.judge(q, i, st) {
			continue
		}
		if req, ok := e.request(q, i, ru, key, st); ok {
			reqs, idx = append(reqs, req), append(idx, i)
		}
	}
	reqs, idx = q.replace(replaced, reqs, idx)
	return reqs, idx, nil
}

// rule returns the rule of descriptor i of q, and for a descriptor of a
// domain its state key appended to buf; nil when no rule applies.
func (q *query) rule(i int, buf []byte) (*Rule, []byte) {
	desc := &q.r.Descriptors[i]
	if q.d.named == nil {
		return q.d.match(desc.Entries, buf)
	}
	if _, ok := desc.key(); !ok {
		return nil, buf
	}
	return q.d.named, buf
}

// judge asks the guard about the actor of descriptor i of a named rule,
// and reports whether its verdict decided the status st.
func (e *Engine) judge(q *query, i int, st *Status) bool {
	if q.d.named == nil || e.guard == nil || q.r.Op == sluice.OpReset {
		return false
	}
	a, ok := q.r.Descriptors[i].actor(q.r.Client)
	if !ok {
		return false
	}
	v := e.guard.Check(a)
	if v.Action == guard.Pass {
		return false
	}
	if e.onGuard != nil {
		e.onGuard(st.Rule, v.Action)
	}
	*st = guardStatus(st.Rule, v, q.now)
	return true
}

// request builds the store request of descriptor i under rule ru, whose
// state key is key, or reports false when its cost is more than the rule
// allows (the status says so).
func (e *Engine) request(q *query, i int, ru *Rule, key []byte, st *Status) (sluice.Request, bool) {
	desc := q.r.Descriptors[i]
	var sk string
	if k, ok := desc.key(); ok && q.d.named != nil && desc.Override == nil {
		sk = stateKeyOf(k) // spare a copy
	} else {
		sk = stateKey(key)
	}
	req := sluice.Request{Prefix: ru.prefix, Key: sk, Limits: ru.Limits, Op: q.r.Op, Cost: max(q.r.Cost, 1), Now: q.now}
	if q.r.Op == sluice.OpInsert && q.r.Cost < 0 {
		req.Cost = q.r.Cost
	}
	if desc.Cost != 0 {
		req.Cost = desc.Cost
	}
	if desc.NoHits && q.r.Op != sluice.OpReset {
		req.Op, req.Cost = sluice.OpPeek, 1
	}
	if req.Op != sluice.OpReset && max(req.Cost, -req.Cost) > ru.maxCost {
		st.Err = fmt.Errorf("rules: %w: cost %d, rule %s allows at most %d at once", sluice.ErrCostExceedsBurst, req.Cost, ru.ID, ru.maxCost)
		st.Decision = sluice.Decision{Limit: ru.Limits[0], Time: q.now}
		st.Allowed = false
		return req, false
	}
	return req, true
}

// replace drops the store requests of the rules another descriptor's
// rule replaces (by name), and marks their statuses replaced. It
// returns the store requests kept, of reqs for the descriptors idx.
func (q *query) replace(replaced map[string]bool, reqs []sluice.Request, idx []int) ([]sluice.Request, []int) {
	if replaced == nil {
		return reqs, idx
	}
	gone := func(ru *Rule) bool { return ru != nil && ru.Name != "" && replaced[ru.Name] }
	kept := 0
	for k, i := range idx {
		if !gone(q.res.Statuses[i].Rule) {
			reqs[kept], idx[kept] = reqs[k], i
			kept++
		}
	}
	reqs, idx = reqs[:kept], idx[:kept]
	for i := range q.res.Statuses {
		if st := &q.res.Statuses[i]; gone(st.Rule) {
			*st = Status{Replaced: st.Rule, Decision: sluice.Decision{Allowed: true}, Allowed: true}
		}
	}
	return reqs, idx
}

// apply sets the statuses of the store's decisions ds, of the
// descriptors idx. A descriptor of zero hits was asked a peek of 1,
// which tells what is left: one more than it would leave, or nothing;
// zero hits are never over the limit.
func (q *query) apply(idx []int, ds []sluice.Decision) {
	for k, i := range idx {
		d := ds[k]
		if q.r.Descriptors[i].NoHits && q.r.Op != sluice.OpReset {
			if d.Allowed {
				d.Remaining++
			} else {
				d.Remaining = 0
			}
			d.Allowed, d.RetryAfter = true, 0
		}
		q.res.Statuses[i].Decision = d
		q.res.Statuses[i].Allowed = d.Allowed
	}
}

// combine applies the static rules (Unlimited, Deny), shadow mode and
// quota mode, and sets the overall answer.
func combine(res *Result, now time.Time) {
	quotas, quotaDenied := 0, 0
	for i := range res.Statuses {
		st := &res.Statuses[i]
		ru := st.Rule
		if ru == nil {
			continue
		}
		if st.Guard != guard.Pass {
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

// decide asks the store of the rule of each request (that of
// statuses[idx[k]] for reqs[k]): in one call when they share a store
// that can batch (the descriptors of one domain share their store), else
// one call each, appended to ds.
func (e *Engine) decide(ctx context.Context, reqs []sluice.Request, idx []int, statuses []Status, ds []sluice.Decision) ([]sluice.Decision, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	rule := func(k int) *Rule { return statuses[idx[k]].Rule }
	store := rule(0).store
	if len(reqs) > 1 && !slices.ContainsFunc(idx, func(i int) bool { return statuses[i].Rule.store != store }) {
		ds, errs := sluice.DecideBatch(ctx, store, slices.Clone(reqs)) // a copy: reqs may be on the stack
		for k, err := range errs {
			if err != nil {
				return nil, storeError(rule(k), err)
			}
		}
		return ds, nil
	}
	for k, req := range reqs {
		d, err := rule(k).store.Decide(ctx, req)
		if err != nil {
			return nil, storeError(rule(k), err)
		}
		ds = append(ds, d)
	}
	return ds, nil
}

// storeError is the error of ru's store: a failure of the store,
// whatever it returned.
func storeError(ru *Rule, err error) error {
	if errors.Is(err, sluice.ErrStore) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("rules: %s: %w", ru.ID, err)
	}
	return fmt.Errorf("rules: %s: %w: %w", ru.ID, sluice.ErrStore, err)
}

// refund gives back the takes of a query denied as a whole, and sets
// their statuses' decisions to what is left after it: the store
// requests reqs, of the descriptors idx.
func (e *Engine) refund(ctx context.Context, q *query, reqs []sluice.Request, idx []int) {
	var back []sluice.Request
	var at []int
	for k, i := range idx {
		st := q.res.Statuses[i]
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
	if _, err := e.decide(context.WithoutCancel(ctx), back, at, q.res.Statuses, nil); err != nil {
		e.log.WarnContext(ctx, "refund of a denied request failed: its allowed descriptors stay counted", "rule", q.res.Statuses[at[0]].Rule.ID, "err", err)
		return
	}
	// The statuses say what is left now, after the refunds: what the
	// take left plus its cost, as the store's answers to refunds differ
	// (a peek after it on the memory store, nothing on Redis).
	// ResetAfter stays that of the take, which errs late, never early.
	for k, i := range at {
		d := &q.res.Statuses[i].Decision
		d.Remaining = min(max(d.Remaining, 0)+back[k].Cost, d.Limit.MaxBurst())
	}
}

// override returns the rule of a descriptor whose limit the client set
// (Envoy's limit override): no shadow, no name, the descriptor's entries
// taken literally as the state key. The rule of each limit is built
// once, as long as the domain keeps no more than maxOverrides of them.
func (e *Engine) override(d *domain, desc Descriptor) (*Rule, []byte, error) {
	o := e.overrides[d]
	key := entriesKey(desc.entries(), make([]byte, 0, 64))
	if ru := (*o.rules.Load())[*desc.Override]; ru != nil {
		return ru, key, nil
	}
	l := *desc.Override
	if err := l.Validate(); err != nil {
		return nil, nil, err
	}
	return o.add(l), key, nil
}

// maxOverrides bounds the override rules a domain keeps: Envoy sends
// the few limits of its routes, while the limits of the /json API are
// the client's, unbounded. Overrides past the bound build a rule per
// request.
const maxOverrides = 64

// overrides are the rules of a domain's limit overrides, by limit.
type overrides struct {
	id, domain, prefix string
	store              sluice.Store
	mu                 sync.Mutex // serializes adds
	rules              atomic.Pointer[map[sluice.Limit]*Rule]
}

// newOverrides returns the override rules of d, none yet, and asks
// StoreFor their store now: every override of a domain shares one.
func (e *Engine) newOverrides(d *domain) *overrides {
	o := &overrides{id: d.name + ".override", domain: d.name, prefix: d.prefix}
	if d.named != nil {
		o.prefix = d.named.prefix
	}
	// One ID for every override of the domain: IDs label metrics, and
	// the entries are the client's, unbounded.
	o.store = e.storeFor(o.rule(sluice.Limit{}))
	o.rules.Store(&map[sluice.Limit]*Rule{})
	return o
}

// rule builds the rule of limit l.
func (o *overrides) rule(l sluice.Limit) *Rule {
	ru := newRule(o.id, "", o.domain, o.prefix, config.RateLimit{Limits: []sluice.Limit{l}}, false, false)
	ru.store = o.store
	return ru
}

// add returns the rule of l, kept for the requests to come if there is
// room.
func (o *overrides) add(l sluice.Limit) *Rule {
	o.mu.Lock()
	defer o.mu.Unlock()
	old := *o.rules.Load()
	if ru := old[l]; ru != nil {
		return ru
	}
	ru := o.rule(l)
	if len(old) < maxOverrides {
		m := make(map[sluice.Limit]*Rule, len(old)+1)
		maps.Copy(m, old)
		m[l] = ru
		o.rules.Store(&m)
	}
	return ru
}
