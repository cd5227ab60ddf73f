package sluice

import (
	"errors"
	"fmt"
)

// Sentinel errors. Errors returned by this module wrap one of them (test
// with errors.Is); store errors wrap ErrStore. A request that is over its
// limit is not an error: it is a Decision with Allowed false.
var (
	// ErrInvalidLimit means a Limit cannot be applied: see Limit.Validate.
	ErrInvalidLimit = errors.New("sluice: invalid limit")
	// ErrInvalidRequest means a request is malformed: no limits, an
	// unknown operation, or a cost below 1.
	ErrInvalidRequest = errors.New("sluice: invalid request")
	// ErrCostExceedsBurst means a request's cost is larger than a limit's
	// MaxBurst, so it could never be allowed, whatever the wait.
	ErrCostExceedsBurst = errors.New("sluice: cost exceeds the limit's burst")
	// ErrStore means the store failed to decide: a network error, a
	// timeout, a corrupt value. The caller's failure policy applies.
	ErrStore = errors.New("sluice: store failed")
	// ErrStoreFull means a bounded store cannot hold what one request
	// needs: for the memory store, a request whose states alone are
	// larger than its cap (a full memory store evicts, and keeps
	// deciding). It wraps ErrStore.
	ErrStoreFull = fmt.Errorf("%w: no room for the request", ErrStore)
	// ErrCorruptState means a stored state could not be decoded: written
	// by something else, truncated, or inconsistent. It wraps ErrStore.
	ErrCorruptState = fmt.Errorf("%w: corrupt state", ErrStore)
	// ErrReservationDone means a Reservation was already committed or
	// refunded.
	ErrReservationDone = errors.New("sluice: reservation already committed or refunded")
)
