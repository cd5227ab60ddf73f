package rules

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
)

// combine applies the static rules (Unlimited, Deny), shadow mode and
// quota mode to the statuses sts, and returns the overall answer.
func combine(sts []Status, now time.Time) bool {
	allowed := true
	quotas, quotaDenied := 0, 0
	for i := range sts {
		st := &sts[i]
		ru := st.Rule
		if ru == nil {
			continue
		}
		if st.Guard != guard.Pass {
			allowed = allowed && st.Allowed
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
			allowed = false
		}
	}
	return allowed && (quotas == 0 || quotaDenied < quotas)
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
	for k := range reqs {
		d, err := rule(k).decideOne(ctx, &reqs[k])
		if err != nil {
			return nil, storeError(rule(k), err)
		}
		ds = append(ds, d)
	}
	return ds, nil
}

// decideOne asks ru's store to decide req: through ru's Bound when the
// store bound the rule and req is what a Bound decides (a take or a
// peek of the rule's own limits, nothing safe to forget), which spares
// it checking the limits again and hashing the prefix; else through
// Decide. req is the caller's, in its slice: a Request is large to copy.
func (ru *Rule) decideOne(ctx context.Context, req *sluice.Request) (sluice.Decision, error) {
	if ru.bound != nil && req.Op <= sluice.OpPeek && !req.SafeToForget && req.Prefix == ru.prefix &&
		len(req.Limits) == len(ru.Limits) && &req.Limits[0] == &ru.Limits[0] {
		return ru.bound.Decide(ctx, req.Key, req.Op, req.Cost, req.Now)
	}
	return ru.store.Decide(ctx, *req)
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
// their statuses' decisions (in sts) to what is left after it: the store
// requests reqs, of the descriptors idx.
func (e *Engine) refund(ctx context.Context, sts []Status, reqs []sluice.Request, idx []int) {
	var back []sluice.Request
	var at []int
	for k, i := range idx {
		st := &sts[i]
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
	if _, err := e.decide(context.WithoutCancel(ctx), back, at, sts, nil); err != nil {
		e.log.WarnContext(ctx, "refund of a denied request failed: its allowed descriptors stay counted", "rule", sts[at[0]].Rule.ID, "err", err)
		return
	}
	// The statuses say what is left now, after the refunds: what the
	// take left plus its cost, as the store's answers to refunds differ
	// (a peek after it on the memory store, nothing on Redis).
	// ResetAfter stays that of the take, which errs late, never early.
	for k, i := range at {
		d := &sts[i].Decision
		d.Remaining = min(max(d.Remaining, 0)+back[k].Cost, d.Limit.MaxBurst())
	}
}
