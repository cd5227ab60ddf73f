package sluice_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/memory"
)

// A login limiter: 5 attempts a minute and 20 an hour per client address,
// kept in the in-process store. The clock is fixed so the output is the
// same on every run; leave Config.Clock nil to use the store's clock.
func Example() {
	store := memory.New(memory.Config{})
	defer store.Close()

	now := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	lim, err := sluice.New(store, sluice.Config{
		Action: "login",
		Limits: []sluice.Limit{sluice.PerMinute(5), sluice.PerHour(20)},
		Clock:  func() time.Time { return now },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	attempt := func() {
		d, err := lim.Allow(ctx, "203.0.113.7")
		if err != nil {
			fmt.Println("store failed:", err) // over the limit is not an error
			return
		}
		fmt.Printf("allowed=%v remaining=%d retry-after=%v (%v)\n", d.Allowed, d.Remaining, d.RetryAfter, d.Limit)
	}
	for range 6 {
		attempt()
	}
	now = now.Add(12 * time.Second) // 5/min refills one attempt every 12s
	attempt()
	// Output:
	// allowed=true remaining=4 retry-after=0s (5/min)
	// allowed=true remaining=3 retry-after=0s (5/min)
	// allowed=true remaining=2 retry-after=0s (5/min)
	// allowed=true remaining=1 retry-after=0s (5/min)
	// allowed=true remaining=0 retry-after=0s (5/min)
	// allowed=false remaining=0 retry-after=12s (5/min)
	// allowed=true remaining=0 retry-after=0s (5/min)
}

// Admit is Allow's answer alone, for a caller that needs a yes or no:
// here a webhook sender that drops what is over 2 a second per
// endpoint.
func ExampleLimiter_Admit() {
	store := memory.New(memory.Config{})
	defer store.Close()

	now := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	lim, err := sluice.New(store, sluice.Config{
		Action: "webhook",
		Limits: []sluice.Limit{sluice.PerSecond(2)},
		Clock:  func() time.Time { return now },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	for range 3 {
		ok, err := lim.Admit(ctx, "https://hooks.example.com/a")
		fmt.Println(ok, err)
	}
	now = now.Add(500 * time.Millisecond) // one more every half second
	fmt.Println(lim.Admit(ctx, "https://hooks.example.com/a"))
	// Output:
	// true <nil>
	// true <nil>
	// false <nil>
	// true <nil>
}

// Count failed sign-ins only: reserve an attempt before checking the
// password, so concurrent guesses cannot overrun the limit, and give it
// back when the password was right.
func ExampleLimiter_Reserve() {
	store := memory.New(memory.Config{})
	defer store.Close()

	now := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	lim, err := sluice.New(store, sluice.Config{
		Action: "login-failures",
		Limits: []sluice.Limit{sluice.PerHour(3)},
		Clock:  func() time.Time { return now },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	signIn := func(passwordOK bool) {
		r, err := lim.Reserve(ctx, "alice", 1)
		if err != nil {
			fmt.Println("store failed:", err)
			return
		}
		if !r.Allowed {
			fmt.Printf("locked out for %v\n", r.RetryAfter)
			return
		}
		if passwordOK {
			err = r.Refund(ctx) // a success does not count
		} else {
			err = r.Commit()
		}
		fmt.Printf("password ok=%v, error=%v\n", passwordOK, err)
	}
	for _, ok := range []bool{true, true, false, false, true, false, false} {
		signIn(ok)
	}
	// Output:
	// password ok=true, error=<nil>
	// password ok=true, error=<nil>
	// password ok=false, error=<nil>
	// password ok=false, error=<nil>
	// password ok=true, error=<nil>
	// password ok=false, error=<nil>
	// locked out for 20m0s
}
