package httpapi

import (
	"math"
	"time"

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
		ResetAfter: Seconds(d.ResetAfter),
		RetryAfter: Seconds(d.RetryAfter),
	}
}

// Seconds returns d in seconds, as the API writes waits: rounded up to
// the millisecond, since a client that waits less than the true wait
// would be denied again.
func Seconds(d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return math.Ceil(float64(d)/float64(time.Millisecond)) / 1000
}
