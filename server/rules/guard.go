package rules

import (
	"context"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
)

// guardStatus is the status of a descriptor of rule ru whose actor the
// guard did not pass.
func guardStatus(ru *Rule, v guard.Verdict, now time.Time) Status {
	st := Status{Rule: ru, Guard: v.Action}
	switch v.Action {
	case guard.Exempt:
		st.Decision = sluice.Decision{Allowed: true, Remaining: -1, Time: now}
		st.Allowed = true
	case guard.Banned:
		st.Decision = sluice.Decision{Limit: ru.Limits[0], ResetAfter: v.Left, RetryAfter: v.Left, Time: now}
	default:
		st.Decision = sluice.Decision{Limit: ru.Limits[0], Time: now}
	}
	return st
}

// strike tells the jails of its rule of each take of a named rule's
// descriptor that its limits denied (not the guard, not a shadow rule,
// not a peek of zero hits); the guard does not count a denial a store at
// its cap estimated, for that actor may have spent nothing.
func (e *Engine) strike(ctx context.Context, q *query, r *Request, sts []Status) {
	if q.d.named == nil || e.guard == nil || !e.guard.Counts(q.d.named.Name) {
		return
	}
	for i := range sts {
		st := &sts[i]
		if st.Rule == nil || st.Guard != guard.Pass || st.Err != nil || st.Decision.Allowed || st.Shadowed || r.Descriptors[i].NoHits {
			continue
		}
		a, ok := r.Descriptors[i].actor(r.Client)
		if !ok {
			continue
		}
		if _, err := e.guard.Strike(ctx, st.Rule.Name, a, st.Decision); err != nil {
			e.log.WarnContext(ctx, "jail not told of a denial", "rule", st.Rule.Name, "err", err)
		}
	}
}
