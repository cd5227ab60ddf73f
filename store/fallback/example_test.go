package fallback_test

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/fallback"
)

// down is a primary store whose server is gone.
type down struct{}

func (down) Decide(context.Context, sluice.Request) (sluice.Decision, error) {
	return sluice.Decision{}, fmt.Errorf("%w: dial tcp 10.0.0.5:6379: connection refused", sluice.ErrStore)
}

// While the primary is down, each of 4 instances limits alone to a
// quarter of the policy, and counts what it allowed to replay later.
func Example() {
	store, _ := fallback.New(fallback.Config{
		Primary:   down{},
		Policy:    sluice.FailLocal,
		Instances: 4,
		OnError:   func(err error) { fmt.Println("store error:", err) },
	})
	defer store.Close()
	lim, _ := sluice.New(store, sluice.Config{Limits: []sluice.Limit{sluice.PerMinute(20)}, Action: "login"})
	allowed := 0
	for range 10 {
		if d, err := lim.Allow(context.Background(), "203.0.113.7"); err == nil && d.Allowed {
			allowed++
		}
	}
	fmt.Println("allowed", allowed, "of 10; breaker open:", store.Open())
	// Output:
	// store error: sluice: store failed: dial tcp 10.0.0.5:6379: connection refused
	// store error: sluice: store failed: dial tcp 10.0.0.5:6379: connection refused
	// store error: sluice: store failed: dial tcp 10.0.0.5:6379: connection refused
	// store error: sluice: store failed: dial tcp 10.0.0.5:6379: connection refused
	// store error: sluice: store failed: dial tcp 10.0.0.5:6379: connection refused
	// allowed 5 of 10; breaker open: true
}
