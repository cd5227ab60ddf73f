package adaptive_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/adaptive"
)

// ExampleAIMD finds the concurrency of a backend that answers in 20 ms
// up to 40 requests at once and in 250 ms beyond, in simulated time:
// each round, the limit's worth of requests runs at once and reports its
// latency. The limit climbs by one a round while latency stays under
// Timeout, and is cut by a tenth, once a round, when it goes over: it
// saws just under and over 40. In a program, give the limit to
// sluice.ConcurrencyConfig.Adaptive, which observes every lease.
func ExampleAIMD() {
	lim, err := adaptive.NewAIMD(adaptive.AIMDConfig{Initial: 10, Timeout: 100 * time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	latency := func(inflight int) time.Duration {
		if inflight <= 40 {
			return 20 * time.Millisecond
		}
		return 250 * time.Millisecond
	}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	lo, hi := 1000, 0
	for round := range 200 {
		n := lim.Limit()
		rtt := latency(n)
		now = now.Add(rtt)
		for range n {
			lim.Observe(now, rtt, n, false)
		}
		if round == 30 {
			fmt.Println("after 30 rounds:", lim.Limit())
		}
		if round >= 100 {
			lo, hi = min(lo, lim.Limit()), max(hi, lim.Limit())
		}
	}
	fmt.Printf("rounds 100 to 200: between %d and %d\n", lo, hi)
	// Output:
	// after 30 rounds: 39
	// rounds 100 to 200: between 37 and 41
}
