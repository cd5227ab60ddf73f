package rules

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
)

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
	var res Result
	err := e.CheckInto(ctx, r, &res)
	return res, err
}

// CheckInto is Check answering in res, whose Statuses it reuses when
// their capacity suffices: a caller that checks request after request (a
// replay, a worker) allocates nothing per check, and neither does one
// that gives it statuses on its stack, for the engine keeps nothing of
// res:
//
//	var sts [1]rules.Status
//	res := rules.Result{Statuses: sts[:0]}
//	err := eng.CheckInto(ctx, req, &res)
//
// On an error res is the zero Result.
func (e *Engine) CheckInto(ctx context.Context, r Request, res *Result) error {
	if e.tracer != nil {
		return e.traced(ctx, r, res)
	}
	return e.check(ctx, &r, res)
}

// traced is Check in a span of its own, "sluice.check", which the store
// calls under it join.
func (e *Engine) traced(ctx context.Context, r Request, res *Result) error {
	ctx, span := e.tracer.Start(ctx, "sluice.check", trace.WithAttributes(
		attribute.String("sluice.domain", strings.Clone(r.Domain)), // a copy: r stays on the caller's stack
		attribute.Int("sluice.descriptors", len(r.Descriptors)),
		attribute.String("sluice.op", r.Op.String())))
	defer span.End()
	if err := e.check(ctx, &r, res); err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return err
	}
	span.SetAttributes(attribute.Bool("sluice.allowed", res.Allowed))
	return nil
}

// check is Check. The statuses live in res.Statuses alone, passed on as
// a slice of their own: a caller's Result and its statuses, on its stack,
// stay there (nothing stores res, or a struct that holds the statuses,
// anywhere but in res).
func (e *Engine) check(ctx context.Context, r *Request, res *Result) error {
	d, err := e.domainOf(r)
	if err != nil {
		*res = Result{}
		return err
	}
	if n := len(r.Descriptors); cap(res.Statuses) < n {
		res.Statuses = make([]Status, n)
	} else {
		res.Statuses = res.Statuses[:n] // a self-assignment: res does not escape
		clear(res.Statuses)
	}
	sts := res.Statuses
	// The store requests and decisions of a request of a few
	// descriptors (the common case: one, for a named rule or
	// forward-auth) stay on the stack.
	var reqBuf [2]sluice.Request
	var idxBuf [2]int
	var dsBuf [2]sluice.Decision
	q := query{d: d, now: e.now()}
	reqs, idx, err := e.plan(&q, r, sts, reqBuf[:0], idxBuf[:0])
	if err == nil {
		var ds []sluice.Decision
		if ds, err = e.decide(ctx, reqs, idx, sts, dsBuf[:0]); err == nil {
			apply(r, sts, idx, ds)
		}
	}
	if err != nil {
		*res = Result{}
		return err
	}
	res.Allowed = r.Op == sluice.OpReset || combine(sts, q.now)
	if !res.Allowed && r.Op == sluice.OpTake {
		e.refund(ctx, sts, reqs, idx)
		e.strike(ctx, &q, r, sts)
	}
	return nil
}

// domainOf checks what Check requires of r as a whole, and returns its
// domain.
func (e *Engine) domainOf(r *Request) (*domain, error) {
	d := e.domain(r.Domain)
	switch {
	case d == nil:
		return nil, fmt.Errorf("%w %q", ErrUnknownDomain, strings.Clone(r.Domain)) // a copy: r stays on the caller's stack
	case len(r.Descriptors) == 0:
		return nil, fmt.Errorf("rules: %w: no descriptors", sluice.ErrInvalidRequest)
	case len(r.Descriptors) > e.max:
		return nil, fmt.Errorf("%w: %d, at most %d", ErrTooManyDescriptors, len(r.Descriptors), e.max)
	case r.Cost < 0 && r.Op != sluice.OpInsert:
		return nil, fmt.Errorf("rules: %w: cost %d must be at least 1 (0 means 1)", sluice.ErrInvalidRequest, r.Cost)
	case r.Op == sluice.OpRefund || r.Op > sluice.OpInsert:
		return nil, fmt.Errorf("rules: %w: op %v (want take, peek, reset or insert)", sluice.ErrInvalidRequest, r.Op)
	}
	for i := range r.Descriptors {
		desc := &r.Descriptors[i] // not a copy: a descriptor is large
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
// time. The request goes beside it, and so do its statuses (sts[i] for
// descriptor i) and the store requests its descriptors make, as reqs[k]
// for the descriptor idx[k] (under the rule of its status), so that they
// may stay on the stack: nothing of the request is kept (see plain), and
// its descriptors and statuses may be the caller's. The statuses are
// never put in a struct beside a pointer or a time that is stored: escape
// analysis does not tell fields apart, and would send them to the heap.
type query struct {
	d   *domain
	now time.Time
}

// plan matches every descriptor of q to its rule, sets its status in
// sts, applies the guard and Envoy's replaces, and appends the store
// requests to make to reqs and their descriptors to idx.
func (e *Engine) plan(q *query, r *Request, sts []Status, reqs []sluice.Request, idx []int) ([]sluice.Request, []int, error) {
	var buf [256]byte
	var replaced map[string]bool
	for i := range r.Descriptors {
		desc := &r.Descriptors[i] // not a copy: a descriptor is large
		st := &sts[i]
		st.Decision.Allowed, st.Allowed = true, true
		ru, key := q.rule(desc, buf[:0])
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
		if ru.Unlimited || ru.Deny || e.judge(q.d, q.now, r, i, st) {
			continue
		}
		reqs = append(reqs, sluice.Request{}) // built in place: a Request is large to copy
		if request(q.d, q.now, r, i, ru, key, st, &reqs[len(reqs)-1]) {
			idx = append(idx, i)
		} else {
			reqs = reqs[:len(reqs)-1]
		}
	}
	reqs, idx = replace(sts, replaced, reqs, idx)
	return reqs, idx, nil
}

// rule returns the rule of desc, a descriptor of q, and for a descriptor
// of a domain its state key appended to buf; nil when no rule applies.
func (q *query) rule(desc *Descriptor, buf []byte) (*Rule, []byte) {
	if q.d.named == nil {
		return q.d.match(desc.Entries, buf)
	}
	if _, ok := desc.key(); !ok {
		return nil, buf
	}
	return q.d.named, buf
}

// judge asks the guard about the actor of descriptor i of a request of d
// at now, when d is a named rule, and reports whether its verdict
// decided the status st.
func (e *Engine) judge(d *domain, now time.Time, r *Request, i int, st *Status) bool {
	if d.named == nil || e.guard == nil || r.Op == sluice.OpReset {
		return false
	}
	a, ok := r.Descriptors[i].actor(r.Client)
	if !ok {
		return false
	}
	v := e.guard.Check(a)
	if v.Action == guard.Pass {
		return false
	}
	if e.onGuard != nil {
		k, _ := r.Descriptors[i].key()
		e.onGuard(st.Rule, stateKeyOf(k), v)
	}
	*st = guardStatus(st.Rule, v, now)
	return true
}

// request builds in req, a zero Request, the store request at now of
// descriptor i, of domain d, under rule ru, whose state key is key, or
// reports false when its cost is more than the rule allows (the status
// says so).
func request(d *domain, now time.Time, r *Request, i int, ru *Rule, key []byte, st *Status, req *sluice.Request) bool {
	desc := &r.Descriptors[i]
	var sk string
	if k, ok := desc.key(); ok && d.named != nil && desc.Override == nil {
		sk = stateKeyOf(k) // spare a copy
	} else {
		sk = stateKey(key)
	}
	// Field by field: a composite literal would be built aside and copied.
	req.Prefix, req.Key, req.Limits, req.Op, req.Cost, req.Now = ru.prefix, sk, ru.Limits, r.Op, max(r.Cost, 1), now
	if r.Op == sluice.OpInsert && r.Cost < 0 {
		req.Cost = r.Cost
	}
	if desc.Cost != 0 {
		req.Cost = desc.Cost
	}
	if desc.NoHits && r.Op != sluice.OpReset {
		req.Op, req.Cost = sluice.OpPeek, 1
	}
	if req.Op != sluice.OpReset && max(req.Cost, -req.Cost) > ru.maxCost {
		st.Err = fmt.Errorf("rules: %w: cost %d, rule %s allows at most %d at once", sluice.ErrCostExceedsBurst, req.Cost, ru.ID, ru.maxCost)
		st.Decision = sluice.Decision{Limit: ru.Limits[0], Time: now}
		st.Allowed = false
		return false
	}
	return true
}

// replace drops the store requests of the rules another descriptor's
// rule replaces (by name), and marks their statuses in sts replaced. It
// returns the store requests kept, of reqs for the descriptors idx.
func replace(sts []Status, replaced map[string]bool, reqs []sluice.Request, idx []int) ([]sluice.Request, []int) {
	if replaced == nil {
		return reqs, idx
	}
	gone := func(ru *Rule) bool { return ru != nil && ru.Name != "" && replaced[ru.Name] }
	kept := 0
	for k, i := range idx {
		if !gone(sts[i].Rule) {
			reqs[kept], idx[kept] = reqs[k], i
			kept++
		}
	}
	reqs, idx = reqs[:kept], idx[:kept]
	for i := range sts {
		if st := &sts[i]; gone(st.Rule) {
			*st = Status{Replaced: st.Rule, Decision: sluice.Decision{Allowed: true}, Allowed: true}
		}
	}
	return reqs, idx
}

// apply sets the statuses in sts of the store's decisions ds, of the
// descriptors idx. A descriptor of zero hits was asked a peek of 1,
// which tells what is left: one more than it would leave, or nothing;
// zero hits are never over the limit.
func apply(r *Request, sts []Status, idx []int, ds []sluice.Decision) {
	for k, i := range idx {
		st := &sts[i]
		st.Decision = ds[k]
		d := &st.Decision
		if r.Descriptors[i].NoHits && r.Op != sluice.OpReset {
			if d.Allowed {
				d.Remaining++
			} else {
				d.Remaining = 0
			}
			d.Allowed, d.RetryAfter = true, 0
		}
		st.Allowed = d.Allowed
	}
}
