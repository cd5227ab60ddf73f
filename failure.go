package sluice

import "fmt"

// A FailurePolicy says what is answered while a store fails to decide
// (an error wrapping ErrStore, or no answer in time): let requests
// through, refuse them, or decide on a store of this process. It is the
// one type of the choice in every layer: store/fallback's Config.Policy,
// the Failure of httplimit's, grpclimit's and the client's configs, and
// the service's failure section (failure.policy, failure.rules), whose
// strings ParseFailurePolicy reads.
//
// The zero value is FailOpen: an outage of the limiter's store must not
// become an outage of what it protects. A layer that cannot decide
// locally (httplimit, grpclimit, the client) refuses FailLocal when it
// is configured, and asks for a store/fallback Store instead.
type FailurePolicy uint8

const (
	// FailOpen lets requests through, unlimited, while the store fails:
	// availability over enforcement. The zero value.
	FailOpen FailurePolicy = iota
	// FailClosed refuses requests while the store fails: enforcement over
	// availability. How they are refused is the layer's: a denied
	// Decision (store/fallback, the client), 503 Service Unavailable
	// (httplimit, the service's APIs), UNAVAILABLE (grpclimit).
	FailClosed
	// FailLocal decides on a store of this process while the shared one
	// fails, each limit divided among the processes that share it, and
	// replays the local takes into the shared store when it answers
	// again (store/fallback; the service's default).
	FailLocal
)

// failureNames are the names of the policies, in the configuration and
// in String.
var failureNames = [...]string{FailOpen: "open", FailClosed: "closed", FailLocal: "local"}

// String returns the policy's name as the configuration spells it:
// "open", "closed" or "local".
func (p FailurePolicy) String() string {
	if int(p) < len(failureNames) {
		return failureNames[p]
	}
	return fmt.Sprintf("FailurePolicy(%d)", p)
}

// ParseFailurePolicy returns the policy named s: "open", "closed" or
// "local". Any other name is an error wrapping ErrInvalidRequest.
func ParseFailurePolicy(s string) (FailurePolicy, error) {
	for p, name := range failureNames {
		if s == name {
			return FailurePolicy(p), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown failure policy %q (want open, closed or local)", ErrInvalidRequest, s)
}

// Valid reports whether p is one of the policies.
func (p FailurePolicy) Valid() bool { return int(p) < len(failureNames) }

// CheckOpenClosed returns nil if p is FailOpen or FailClosed, and
// otherwise an error wrapping ErrInvalidRequest: the check of a layer
// with no store of its own to decide on (httplimit, grpclimit, the
// client), to which FailLocal means giving it a store/fallback Store of
// policy FailLocal as its store.
func (p FailurePolicy) CheckOpenClosed() error {
	switch p {
	case FailOpen, FailClosed:
		return nil
	case FailLocal:
		return fmt.Errorf("%w: failure policy local needs a store of this process: give a store/fallback Store of policy local as the store", ErrInvalidRequest)
	}
	return fmt.Errorf("%w: unknown failure policy %v", ErrInvalidRequest, p)
}
