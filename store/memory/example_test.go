package memory_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/memory"
)

func Example() {
	store := memory.New(memory.Config{})
	defer store.Close()

	start := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	lim, err := sluice.New(store, sluice.Config{
		Limits: []sluice.Limit{sluice.PerMinute(3)},
		Action: "login",
		Clock:  func() time.Time { return start }, // a fixed time, for the example's output
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 4 {
		d, err := lim.Allow(context.Background(), "203.0.113.7")
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("allowed %v, remaining %d, retry after %v\n", d.Allowed, d.Remaining, d.RetryAfter)
	}
	fmt.Println("states held:", store.Len())
	// Output:
	// allowed true, remaining 2, retry after 0s
	// allowed true, remaining 1, retry after 0s
	// allowed true, remaining 0, retry after 0s
	// allowed false, remaining 0, retry after 20s
	// states held: 1
}
