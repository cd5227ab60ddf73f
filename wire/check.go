package wire

// MaxBatch is the most checks the service takes in one batch (a
// BatchRequest): a client sends larger sets in several.
const MaxBatch = 100

// CheckRequest is the body of POST /v1/check: a named rule and a key, or
// a domain and descriptors.
type CheckRequest struct {
	// Rule names the rule to apply. Required unless Domain is given.
	Rule string `json:"rule,omitempty"`
	// Key identifies the actor: an IP address, a user name, an API key.
	// Required with Rule; any string (long keys are hashed before they
	// are stored).
	Key string `json:"key,omitempty"`
	// Domain names a descriptor domain of the configuration (Envoy's
	// format), instead of Rule and Key.
	Domain string `json:"domain,omitempty"`
	// Descriptors are the descriptors to decide under Domain, together:
	// at least one.
	Descriptors []Descriptor `json:"descriptors,omitempty"`
	// Cost is how many units the request takes. Default (0 or absent) 1.
	Cost int `json:"cost,omitempty"`
	// Peek asks whether the request would be allowed, taking nothing.
	// Default false.
	Peek bool `json:"peek,omitempty"`
}

// Descriptor is a descriptor of a CheckRequest or ResetRequest, in the
// JSON form of Envoy's: {"entries":[{"key":"path","value":"/login"}]}.
type Descriptor struct {
	// Entries are the key/value pairs, outermost first; at least one.
	Entries []Entry `json:"entries"`
}

// Entry is one key/value pair of a Descriptor.
type Entry struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// BatchRequest is the body of POST /v1/check for a batch: up to
// MaxBatch checks, decided in order, each on its own.
type BatchRequest struct {
	Checks []CheckRequest `json:"checks"`
}

// BatchResponse is the answer to a batch of checks, {"checks":[...]}:
// one result per check, in order. A check the client got wrong (an unknown rule, a cost above
// the burst) has only its Error set; the others are answered as usual.
type BatchResponse struct {
	Results []CheckResponse `json:"results"`
}

// ResetRequest is the body of POST /v1/reset.
type ResetRequest struct {
	// Rule names the rule whose state to forget. Required unless Domain
	// is given.
	Rule string `json:"rule,omitempty"`
	// Key identifies the actor to forget. Required with Rule.
	Key string `json:"key,omitempty"`
	// Domain and Descriptors name descriptor states to forget instead:
	// the states of the rules the descriptors match.
	Domain      string       `json:"domain,omitempty"`
	Descriptors []Descriptor `json:"descriptors,omitempty"`
}

// CheckResponse is the answer to a check: a sluice.Decision in JSON,
// describing the rule's binding limit (for descriptors, the binding
// limit of the descriptor closest to its limit).
type CheckResponse struct {
	// Allowed reports whether the request may proceed; for a check that
	// is not a peek, that its cost was taken.
	Allowed bool `json:"allowed"`
	// Rule is the rule applied: a named rule, or the ID of the binding
	// descriptor's rule ("domain.key_value.key"); empty when no
	// descriptor matched a rule.
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
	// Shadowed reports that a shadow (dry-run) rule would have denied the
	// request: it is allowed, and the other fields say what was counted.
	Shadowed bool `json:"shadowed,omitempty"`
	// Guard is set when the guard decided instead of the limits:
	// "allow-list" (allowed, nothing counted, no limit fields),
	// "deny-list" (refused, no retry_after) or "banned" (refused until
	// the ban ends: retry_after and reset_after give its remaining time).
	// Absent when the limits decided.
	Guard string `json:"guard,omitempty"`
	// Statuses has one status per descriptor, for a check of descriptors.
	Statuses []DescriptorStatus `json:"statuses,omitempty"`
	// Error is set, alone, on a check of a batch that the client got
	// wrong.
	Error string `json:"error,omitempty"`
}

// DescriptorStatus is the answer for one descriptor of a check.
type DescriptorStatus struct {
	// Allowed is this descriptor's verdict (always true for a shadow
	// rule, and for a descriptor that matches no rule).
	Allowed bool `json:"allowed"`
	// Rule is the ID of the rule that applied; empty for none.
	Rule string `json:"rule"`
	// Limit, Policy, Remaining, ResetAfter and RetryAfter describe the
	// rule's binding limit, as in CheckResponse; zero without a rule.
	Limit      int     `json:"limit"`
	Policy     string  `json:"policy,omitempty"`
	Remaining  int     `json:"remaining"`
	ResetAfter float64 `json:"reset_after"`
	RetryAfter float64 `json:"retry_after"`
	// Shadowed reports that a shadow rule would have denied.
	Shadowed bool `json:"shadowed,omitempty"`
	// Unlimited reports a rule that allows everything.
	Unlimited bool `json:"unlimited,omitempty"`
	// Replaced names the rule that matched but was replaced by another
	// descriptor's (Envoy's replaces).
	Replaced string `json:"replaced,omitempty"`
	// Guard is set when the guard decided instead of the limits, as in
	// CheckResponse.
	Guard string `json:"guard,omitempty"`
}
