package httpapi

import (
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/wire"
)

// NewCheckResponse renders decision d of rule as the API answers it.
func NewCheckResponse(rule string, d sluice.Decision) wire.CheckResponse {
	return wire.CheckResponse{
		Allowed:    d.Allowed,
		Rule:       rule,
		Limit:      d.Limit.Rate,
		Policy:     d.Limit.String(),
		Remaining:  max(d.Remaining, 0),
		ResetAfter: wire.Seconds(d.ResetAfter),
		RetryAfter: wire.Seconds(d.RetryAfter),
	}
}
