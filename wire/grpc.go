package wire

import (
	"math"
	"strconv"
	"time"
)

// RetryAfterKey is the gRPC response metadata (a header) in which sluice
// serve's Envoy rate limit API gives the wait of an OVER_LIMIT answer,
// on every denial: seconds, rounded up to the millisecond, as the JSON
// bodies' retry_after ("11.988"). Envoy's protobuf has no field for it;
// the Retry-After header field sluice serve asks Envoy to add (with
// -grpc-headers) is in whole seconds, and off by default, as in
// envoyproxy/ratelimit. Envoy ignores this key; sluice's clients read
// it, so that their denial cache knows how long a denial stands.
const RetryAfterKey = "sluice-retry-after"

// Seconds returns d in seconds, as the service writes waits: rounded up
// to the millisecond, since a client that waits less than the true wait
// would be denied again; 0 for no wait.
func Seconds(d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return math.Ceil(float64(d)/float64(time.Millisecond)) / 1000
}

// FormatSeconds writes d as Seconds does, for metadata and headers:
// "11.988", "12".
func FormatSeconds(d time.Duration) string {
	return strconv.FormatFloat(Seconds(d), 'f', -1, 64)
}

// ParseSeconds reads a wait written by FormatSeconds (or any
// non-negative decimal number of seconds); false for anything else.
func ParseSeconds(s string) (time.Duration, bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f >= 0) || f > float64(math.MaxInt64/int64(time.Second)) {
		return 0, false
	}
	return time.Duration(math.Round(f * float64(time.Second))), true
}
