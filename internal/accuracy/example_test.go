package accuracy_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/accuracy"
)

// The fixed window's known flaw: Rate just before a window boundary and
// Rate just after it, twice the limit within one minute.
func Example() {
	ctx := context.Background()
	for _, l := range []sluice.Limit{
		{Rate: 100, Period: time.Minute, Algorithm: sluice.FixedWindow},
		{Rate: 100, Period: time.Minute, Algorithm: sluice.SlidingLog},
	} {
		store, release, err := accuracy.Direct()
		if err != nil {
			fmt.Println(err)
			return
		}
		r, err := accuracy.Measure(ctx, store, l, accuracy.BoundaryBurst(l, "actor"))
		release()
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: admitted %d/%d, at most %d in a minute (bound %d), %v\n",
			accuracy.Label(l), r.Admitted, r.Requests, r.MaxInWindow, r.Bound, r.Check())
	}
	// Output:
	// fixed: admitted 201/201, at most 200 in a minute (bound 200), <nil>
	// log: admitted 101/201, at most 100 in a minute (bound 100), <nil>
}
