package wire

import "time"

// InsertRequest is the body of POST /v1/insert: count Cost whether or not
// it fits (a penalty), or give -Cost back (a reward).
type InsertRequest struct {
	// Rule and Key, or Domain and Descriptors, as in CheckRequest.
	Rule        string       `json:"rule,omitempty"`
	Key         string       `json:"key,omitempty"`
	Domain      string       `json:"domain,omitempty"`
	Descriptors []Descriptor `json:"descriptors,omitempty"`
	// Cost is the number of units: non-zero, at most the rule's burst
	// either way; negative gives units back.
	Cost int `json:"cost"`
}

// OutcomeRequest is the body of POST /v1/reserve, /v1/commit, /v1/refund
// and /v1/report: a named rule, the actor's key, the cost, and the
// client's request id, which makes a retried call count once.
type OutcomeRequest struct {
	Rule string `json:"rule"`
	Key  string `json:"key"`
	// Cost is the number of units. Default (0 or absent) 1.
	Cost int `json:"cost,omitempty"`
	// ID is the client's request id, 1 to 128 bytes: unique per
	// reservation or report. A commit or refund repeats its
	// reservation's rule, key, cost and id.
	ID string `json:"id"`
	// Outcome is, for /v1/report, "failure" (counted whether or not it
	// fits, and told to the rule's jail) or "success" (counted nothing).
	Outcome string `json:"outcome,omitempty"`
}

// OutcomeResponse is the answer to an outcome call: the rule's answer,
// as CheckResponse gives it, and what became of the call.
type OutcomeResponse struct {
	CheckResponse
	// Duplicate reports that the id was seen before: nothing was counted
	// again.
	Duplicate bool `json:"duplicate,omitempty"`
	// Expires is, for a reservation that took its cost, when it stops
	// waiting for its commit or refund (RFC 3339): after that it stays
	// counted. Absent when nothing was taken.
	Expires *time.Time `json:"expires,omitempty"`
}
