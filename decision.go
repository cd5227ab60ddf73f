package sluice

import "time"

// A Decision is a store's answer to a request: whether it is allowed, and
// what a client needs to know to behave (the fields of the IETF RateLimit
// header and Retry-After).
//
// For a policy of several limits, the Decision describes the limit that
// binds: when denied, the denying limit with the longest RetryAfter; when
// allowed, the limit with the fewest Remaining.
type Decision struct {
	// Allowed reports whether the request may proceed. For a take, it also
	// means its cost was consumed; a denied take consumes nothing.
	Allowed bool
	// Estimated reports that the store decided from a conservative
	// estimate of the key's state rather than from the state itself: a
	// store at its memory cap that forgot the key (store/memory) and can
	// no longer tell it apart charged it as the most spent of the
	// forgotten keys of its rule that share its summary. An estimated
	// denial may be of an actor that spent nothing: the service's jails
	// do not count it as a failure. Only a denial of a key the store does
	// not hold can be estimated.
	Estimated bool
	// Forgotten reports that the store may have forgotten the key's
	// state, and, the request being SafeToForget, decided as if the key
	// were fresh: a store at its memory cap (store/memory) held no state
	// of it, and what it still remembers of its rule's evicted keys,
	// shared by several, may hold some of it. A jail whose count of
	// failures was forgotten says so in its metrics.
	Forgotten bool
	// Limit is the limit this decision describes.
	Limit Limit
	// Remaining is how many more units of cost the limit would admit right
	// now, after this request.
	Remaining int
	// ResetAfter is how long until the limit's state is back to empty (full
	// allowance), if no more requests arrive.
	ResetAfter time.Duration
	// RetryAfter is zero when Allowed. Otherwise it is how long until a
	// request of the same cost would be allowed, if no other requests
	// arrive; it is never rounded down to a wait after which the request
	// would still be denied.
	RetryAfter time.Duration
	// Time is when the store decided, by the clock it used: the request's
	// Now, or the store's own clock. A Reservation refunds at this time.
	Time time.Time
}

// Binds reports whether d, rather than other, should describe a decision
// over several limits: a denial beats an admission, a longer RetryAfter
// beats a shorter one, and among admissions fewer Remaining wins.
func (d Decision) Binds(other Decision) bool {
	if d.Allowed != other.Allowed {
		return !d.Allowed
	}
	if !d.Allowed {
		return d.RetryAfter > other.RetryAfter
	}
	return d.Remaining < other.Remaining
}
