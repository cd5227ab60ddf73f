package server

import (
	"math"
	"time"

	"github.com/sluicehq/sluice"
)

// CheckRequest is the body of POST /v1/check.
type CheckRequest struct {
	// Rule names the rule to apply. Required.
	Rule string `json:"rule"`
	// Key identifies the actor: an IP address, a user name, an API key.
	// Required; any string (long keys are hashed before they are stored).
	Key string `json:"key"`
	// Cost is how many units the request takes. Default (0 or absent) 1.
	Cost int `json:"cost,omitempty"`
	// Peek asks whether the request would be allowed, taking nothing.
	// Default false.
	Peek bool `json:"peek,omitempty"`
}

// ResetRequest is the body of POST /v1/reset.
type ResetRequest struct {
	// Rule names the rule whose state to forget. Required.
	Rule string `json:"rule"`
	// Key identifies the actor to forget. Required.
	Key string `json:"key"`
}

// CheckResponse is the answer to a check: a [sluice.Decision] in JSON,
// describing the rule's binding limit.
type CheckResponse struct {
	// Allowed reports whether the request may proceed; for a check that
	// is not a peek, that its cost was taken.
	Allowed bool `json:"allowed"`
	// Rule is the rule applied.
	Rule string `json:"rule"`
	// Limit is the binding limit's rate: units per period.
	Limit int `json:"limit"`
	// Policy is the binding limit as sluice.ParseLimit reads it, such as
	// "5/min" or "100/s burst 200".
	Policy string `json:"policy"`
	// Remaining is how many more units the rule would allow now.
	Remaining int `json:"remaining"`
	// ResetAfter is how many seconds until the binding limit's state is
	// empty again, if no more requests arrive.
	ResetAfter float64 `json:"reset_after"`
	// RetryAfter is 0 when allowed; otherwise how many seconds until a
	// request of the same cost would be allowed.
	RetryAfter float64 `json:"retry_after"`
}

// ErrorResponse is the body of every error answer.
type ErrorResponse struct {
	// Error says what was wrong, for a human.
	Error string `json:"error"`
}

// newCheckResponse renders d for rule.
func newCheckResponse(rule string, d sluice.Decision) CheckResponse {
	return CheckResponse{
		Allowed:    d.Allowed,
		Rule:       rule,
		Limit:      d.Limit.Rate,
		Policy:     d.Limit.String(),
		Remaining:  max(d.Remaining, 0),
		ResetAfter: seconds(d.ResetAfter),
		RetryAfter: seconds(d.RetryAfter),
	}
}

// seconds returns d in seconds, rounded up to the millisecond: a client
// that waits less than the true wait would be denied again.
func seconds(d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return math.Ceil(float64(d)/float64(time.Millisecond)) / 1000
}
