package client

import (
	"errors"
	"fmt"

	"github.com/sluicehq/sluice"
)

// Sentinel errors, beside those of package sluice that the service's
// answers map to (sluice.ErrInvalidRequest for a request it refuses).
// Test with errors.Is.
var (
	// ErrUnavailable means the service did not decide: it could not be
	// reached, did not answer before the deadline, or answered that its
	// store failed (503). It wraps sluice.ErrStore, so code written for
	// an in-process store treats it as a store failure; the client's
	// FailurePolicy says which Decision comes with it.
	ErrUnavailable = fmt.Errorf("%w: sluice serve did not decide", sluice.ErrStore)
	// ErrUnauthorized means the admin API refused the client's token.
	ErrUnauthorized = errors.New("client: admin token refused")
	// ErrNotFound means the admin API has no such ban or jail (404).
	ErrNotFound = errors.New("client: not found")
	// ErrUnsupported means the operation needs an API the client was
	// not configured with: Reset needs Config.URL (Envoy's gRPC API has
	// no reset), the ban operations Config.AdminURL.
	ErrUnsupported = errors.New("client: operation not available with this configuration")
)
