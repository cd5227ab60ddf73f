package rules

import (
	"context"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
)

// A Guard is abuse policy above the limits of named rules: allow and deny
// lists, and the bans of jails (package guard). An Engine with a Guard
// asks it about the actor of each descriptor of a named rule (its key)
// before the rule's limits, and tells it of each take the limits deny,
// so that every API that asks the Engine applies the same guard. sluice
// serve's guard section is one (see package server).
//
// Implementations must be safe for concurrent use. A Guard that cannot
// tell (its store failed) answers Pass and lets the limits decide.
type Guard interface {
	// Judge tells what becomes of actor under the named rule before its
	// limits are asked.
	Judge(ctx context.Context, rule *Rule, actor string) Verdict
	// Denied tells the guard that the limits of rule denied a take of
	// actor: a failure for the jails that count the rule's denials.
	Denied(ctx context.Context, rule *Rule, actor string)
}

// A Verdict is a Guard's answer about an actor.
type Verdict struct {
	// Action is what becomes of the request. The zero value is Pass.
	Action Action
	// Left is, for Ban, how long the ban still lasts.
	Left time.Duration
}

// Action is what a Guard does with a request.
type Action uint8

const (
	// Pass lets the rule's limits decide.
	Pass Action = iota
	// Exempt allows the request without asking or counting anything: the
	// actor is on the allow list.
	Exempt
	// Refuse denies the request with no time to retry after: the actor
	// is on the deny list.
	Refuse
	// Ban denies the request until the actor's ban ends (Verdict.Left).
	Ban
)

var actionNames = [...]string{Pass: "pass", Exempt: "allow-list", Refuse: "deny-list", Ban: "banned"}

// String returns how the APIs name the action: "pass", "allow-list",
// "deny-list" or "banned".
func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "Action(" + strconv.Itoa(int(a)) + ")"
}

// guardStatus is the status of a descriptor of rule whose actor the guard
// did not Pass.
func guardStatus(ru *Rule, v Verdict, now time.Time) Status {
	st := Status{Rule: ru, Guard: v.Action}
	switch v.Action {
	case Exempt:
		st.Decision = sluice.Decision{Allowed: true, Remaining: -1, Time: now}
		st.Allowed = true
	case Ban:
		left := max(v.Left, time.Nanosecond)
		st.Decision = sluice.Decision{Limit: ru.Limits[0], ResetAfter: left, RetryAfter: left, Time: now}
	default:
		st.Decision = sluice.Decision{Limit: ru.Limits[0], Time: now}
	}
	return st
}

// strike tells the guard of each descriptor of a named rule whose take
// its limits denied.
func (e *Engine) strike(ctx context.Context, r Request, res Result) {
	for i, st := range res.Statuses {
		if st.Rule != nil && st.Guard == Pass && st.Err == nil && !st.Decision.Allowed && !st.Shadowed &&
			!r.Descriptors[i].NoHits && len(r.Descriptors[i].Entries) == 1 {
			e.guard.Denied(ctx, st.Rule, r.Descriptors[i].Entries[0].Value)
		}
	}
}
