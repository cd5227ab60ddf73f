package wire

import "time"

// AcquireRequest is the body of POST /v1/acquire: a lease of a
// concurrency rule for a key, as sluicepb.AcquireRequest over gRPC.
type AcquireRequest struct {
	Rule string `json:"rule"`
	Key  string `json:"key"`
	// Class is "critical", "default" (or absent) or "sheddable".
	Class string `json:"class,omitempty"`
	// Wait is how long to wait for a place, in seconds; at most the
	// rule's max_wait. Default 0: answer at once.
	Wait float64 `json:"wait,omitempty"`
}

// LeaseRef is the body of POST /v1/release and /v1/extend: the lease ID
// an acquire answered, with the rule and key it was granted for (an ID
// is a lease only in its rule and key), as sluicepb.LeaseRef over gRPC.
type LeaseRef struct {
	Rule string `json:"rule"`
	Key  string `json:"key"`
	ID   string `json:"id"`
}

// LeaseResponse answers the three lease calls, with status 200 whether
// the lease was granted or not.
type LeaseResponse struct {
	// OK: acquire granted; release found the lease live; extend renewed
	// it.
	OK   bool   `json:"ok"`
	Rule string `json:"rule"`
	// ID is the lease's ID, when an acquire granted it or an extend
	// renewed it: 128 random bits, the holder's proof for release and
	// extend.
	ID    string `json:"id,omitempty"`
	InUse int    `json:"in_use"`
	Limit int    `json:"limit"`
	// Expires is when the lease expires (RFC 3339), when granted or
	// renewed.
	Expires *time.Time `json:"expires,omitempty"`
	// RetryAfter, for a refused acquire, is how long in seconds until the
	// earliest holder's lease expires, or the key's ban ends.
	RetryAfter float64 `json:"retry_after"`
	// Guard is, when the guard decided an acquire instead of the rule,
	// "allow-list" (a lease that counts nothing), "deny-list" or
	// "banned".
	Guard string `json:"guard,omitempty"`
}
