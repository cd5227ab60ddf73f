package httplimit

import (
	"context"
	"net/http"

	"github.com/sluicehq/sluice"
)

// An Outcome is what the middleware decided for a request. Handlers read
// it with OutcomeOf; the Deny handler reads it to answer.
type Outcome struct {
	// Policy names the limit the Decision describes: the rule's Name, or
	// for a rule of several limits, its name and the limit's period
	// ("api-1h").
	Policy string
	// Decision is the binding decision: the denying one when Denied,
	// otherwise that of the Enforce rule with the fewest remaining.
	Decision sluice.Decision
	// Denied reports that an Enforce rule denied the request.
	Denied bool
	// Shadowed reports that a Shadow rule denied the request: it goes
	// through, and the handler should skip its side effects.
	Shadowed bool
	// DryRun reports that a DryRun rule would have denied the request.
	DryRun bool
	// StoreFailed reports that the store failed and the middleware fails
	// closed: the request is refused with 503.
	StoreFailed bool
}

type outcomeKey struct{}

type exemptKey struct{}

// reqState is the one allocation the middleware makes per request: the
// request's context, carrying the Outcome, and the storage of the header
// values it writes.
type reqState struct {
	context.Context
	out  Outcome
	vals [5]string
	arr  [128]byte
}

// Value returns the Outcome for its key and defers to the parent context
// for every other key, so cancellation and values pass through.
func (s *reqState) Value(key any) any {
	if key == (outcomeKey{}) {
		return &s.out
	}
	return s.Context.Value(key)
}

// OutcomeOf returns the middleware's Outcome for r, and false if no
// Middleware decided r.
func OutcomeOf(r *http.Request) (Outcome, bool) {
	return FromContext(r.Context())
}

// FromContext returns the Outcome carried by ctx, as OutcomeOf does.
func FromContext(ctx context.Context) (Outcome, bool) {
	if o, ok := ctx.Value(outcomeKey{}).(*Outcome); ok {
		return *o, true
	}
	return Outcome{}, false
}

// Shadowed reports whether a Shadow rule denied r: the handler should
// answer as usual but skip what the request would cause (send nothing,
// store nothing), so that a spammer does not learn it was caught.
func Shadowed(r *http.Request) bool {
	o, _ := OutcomeOf(r)
	return o.Shadowed
}

// Exempt returns r marked so that every Middleware lets it through
// uncounted: for requests an allow list admits (see package guard).
func Exempt(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), exemptKey{}, true))
}

func exempt(ctx context.Context) bool {
	v, _ := ctx.Value(exemptKey{}).(bool)
	return v
}
